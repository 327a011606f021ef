#!/usr/bin/env bash
# Guards the one-binary-many-ISAs design (docs/architecture.md): objects compiled with AVX2 or
# AVX-512 flags must not define weak (linker-shareable) symbols outside their own ISA namespace.
# Such a symbol (an inline function or template instantiation from a shared header) could be the
# copy the linker keeps for every caller, and crash baseline code on a CPU without that ISA.
set -euo pipefail
# $1: the build's CMakeFiles folder; every layer library keeps its ISA objects in
# <target>.dir/isa_kernels/.
objects_dir="$1"
shopt -s nullglob
objects=("$objects_dir"/*/isa_kernels/*.avx2.cc.o "$objects_dir"/*/isa_kernels/*.avx512.cc.o
  "$objects_dir"/*/isa_kernels/*.amx.cc.o "$objects_dir"/*/isa_kernels/*.amx_emulated_avx512.cc.o)
[ ${#objects[@]} -gt 0 ] || { echo "isa_symbol_check: no ISA objects under $objects_dir/*/isa_kernels"; exit 1; }
bad=0
for object in "${objects[@]}"; do
  leaked=$(nm -C --defined-only "$object" | grep -E ' [WVu] ' | grep -v 'DW.ref.__gxx_personality_v0' |
    grep -v -E 'lathe::(avx2|avx512|avx512_emulated_tiles)::' || true)
  if [ -n "$leaked" ]; then
    echo "$(basename "$object") defines shareable symbols outside its ISA namespace:"
    echo "$leaked" | sed 's/^/    /'
    bad=1
  fi
done
# AMX tile instructions only in the AMX objects (*.amx.cc.o, AVX-512 compilations): every other
# object may run on a CPU without AMX, or in a process without the tile-data permission.
for object in "$objects_dir"/*/isa_kernels/*.o; do
  case "$object" in *.amx.cc.o) continue ;; esac
  if objdump -d --no-show-raw-insn "$object" | grep -q -E '\s(ldtilecfg|tileloadd|tdpbf16ps|tilestored|tilezero)\b'; then
    echo "$(basename "$object") contains AMX tile instructions outside an AMX object"
    bad=1
  fi
done
amx_objects=("$objects_dir"/*/isa_kernels/*.amx.cc.o)
[ ${#amx_objects[@]} -gt 0 ] || { echo "isa_symbol_check: no AMX objects (*.amx.cc.o)"; exit 1; }
[ $bad -eq 0 ] && echo "isa_symbol_check: ${#objects[@]} ISA objects clean; tile instructions only in the ${#amx_objects[@]} AMX objects"
exit $bad
