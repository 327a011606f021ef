# The layers of lathe: each folder of src/lathe/ is one static library `lathe_<folder>`, linked only
# along the arrows below (a folder may use the folders it names and, through them, theirs).
# tests/layering_check.py reads these lines and fails on any #include that runs against them, so a
# new back-edge breaks the build's tests, not just the picture in docs/architecture.md.
#
#   lathe_layer(NAME [DEPENDS LAYER...])   one line per layer, lowest first
lathe_layer(core)
lathe_layer(device DEPENDS core)
lathe_layer(ops DEPENDS core device)
lathe_layer(io DEPENDS core)
lathe_layer(telemetry DEPENDS io)
lathe_layer(text DEPENDS io)
lathe_layer(bench DEPENDS ops telemetry)
lathe_layer(tune DEPENDS bench)
lathe_layer(autograd DEPENDS ops)
lathe_layer(models DEPENDS autograd io)
lathe_layer(data DEPENDS text io)
lathe_layer(dist DEPENDS core device)
lathe_layer(infer DEPENDS models)
lathe_layer(train DEPENDS models data telemetry dist bench)
lathe_layer(launch DEPENDS telemetry)
