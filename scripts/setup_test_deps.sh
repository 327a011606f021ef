#!/usr/bin/env bash
# Test-only dependencies (as root): Debian's PyTorch for the PyTorch oracle tests, and the pinned
# pip packages of tests/python/requirements.txt (tokenizers, tensorboard, numpy). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(python3-torch python3-numpy python3-pip zsh)  # zsh: the completion test's zsh half
missing=()
for package in "${packages[@]}"; do
  dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if ! python3 -m pip install --quiet --disable-pip-version-check -r tests/python/requirements.txt 2>/tmp/lathe-pip.log; then
  # Debian's own python3 refuses system-wide pip installs without this flag (PEP 668).
  python3 -m pip install --quiet --disable-pip-version-check --break-system-packages -r tests/python/requirements.txt
fi
