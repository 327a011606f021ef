#!/usr/bin/env bash
# Runs a Python script with the first interpreter that has torch and numpy: `python3` (e.g. a pip
# install of torch) or Debian's /usr/bin/python3 (apt-get install python3-torch python3-numpy,
# which scripts/test.sh installs: PyPI's default torch wheel is several GB). Exits 77 (ctest:
# skipped) when neither has them.
for python in python3 /usr/bin/python3; do
  if command -v "$python" >/dev/null 2>&1 && "$python" -c "import torch, numpy" >/dev/null 2>&1; then
    exec "$python" "$@"
  fi
done
echo "skipped: no python3 with torch and numpy (apt-get install python3-torch python3-numpy)"
exit 77
