#!/usr/bin/env bash
# Runs a Python script with the first interpreter that has torch and transformers (`python3`, e.g.
# a pip install, or Debian's /usr/bin/python3). Exits 77 (ctest: skipped) when neither has them:
# CI does not install transformers (too heavy), developer machines may.
for python in python3 /usr/bin/python3; do
  if command -v "$python" >/dev/null 2>&1 && "$python" -c "import torch, transformers" >/dev/null 2>&1; then
    exec "$python" "$@"
  fi
done
echo "skipped: no python3 with torch and transformers"
exit 77
