#!/usr/bin/env bash
# `cmake --install` into a temporary prefix, then what a user of the installed lathe does: run the
# binary, read its manual page and completions, build examples/consumer with find_package(lathe)
# and again with pkg-config, and run both (each calls rms_norm against its float64 reference).
# Also: configuring for a non-x86-64 host fails with one clear line.
# Usage: install_consumer_test.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
build="$1"
source="$2"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { echo "ok: $*"; }

prefix="$work/prefix"
if cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1; then ok "cmake --install"; else fail "cmake --install"; cat "$work/install.log"; fi
for file in bin/lathe share/man/man1/lathe.1 share/bash-completion/completions/lathe share/zsh/site-functions/_lathe \
            include/lathe/ops/rms_norm/rms_norm.h include/lathe/core/version.h lib/liblathe_core.a \
            lib/liblathe_train.a lib/cmake/lathe/lathe-config.cmake lib/cmake/lathe/lathe-config-version.cmake \
            lib/cmake/lathe/lathe-targets.cmake lib/pkgconfig/lathe.pc; do
  found=$(find "$prefix" -path "*/${file#*/}" -print -quit)  # lib/ may be lib/x86_64-linux-gnu/
  [ -n "$found" ] && ok "installed $file" || fail "not installed: $file"
done
[ -z "$(find "$prefix/include" -name '*.cc' -print -quit)" ] && ok "no sources among the headers" || fail ".cc files installed"
version=$("$prefix/bin/lathe" --version) && ok "installed lathe --version: $version" || fail "installed lathe --version"
cmp -s "$prefix/share/man/man1/lathe.1" <("$build/lathe" man) && ok "installed man page = lathe man" || fail "installed man page differs from lathe man"

# find_package(lathe) + lathe::lathe.
if cmake -S "$source/examples/consumer" -B "$work/consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release \
     -DCMAKE_PREFIX_PATH="$prefix" >"$work/consumer.log" 2>&1 &&
   cmake --build "$work/consumer" >>"$work/consumer.log" 2>&1; then
  ok "examples/consumer configures and builds against the installed package"
  output=$("$work/consumer/lathe_consumer") && ok "consumer runs: $output" || fail "consumer: $output"
  [[ "$output" == "$version"* ]] && ok "consumer linked the installed version" || fail "consumer version '$output' vs '$version'"
else
  fail "examples/consumer does not build"; cat "$work/consumer.log"
fi

# pkg-config.
if command -v pkg-config >/dev/null; then
  pc_dir=$(dirname "$(find "$prefix" -name lathe.pc -print -quit)")
  flags=$(PKG_CONFIG_PATH="$pc_dir" pkg-config --cflags --libs lathe)
  # shellcheck disable=SC2086
  if c++ -O1 "$source/examples/consumer/main.cc" $flags -o "$work/pc_consumer" >"$work/pc.log" 2>&1; then
    output=$("$work/pc_consumer") && ok "pkg-config consumer runs: $output" || fail "pkg-config consumer: $output"
  else
    fail "pkg-config build: c++ main.cc $flags"; cat "$work/pc.log"
  fi
else
  echo "skipped: pkg-config not installed"
fi

# A non-x86-64 host: one line that says so, before any compiler is looked for.
cmake -S "$source" -B "$work/arm" -DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR=aarch64 >"$work/arm.log" 2>&1
status=$?
if [ "$status" -ne 0 ] && grep -q "^ *lathe needs an x86-64 host; this one is 'aarch64' (its kernels are x86 SIMD code)$" "$work/arm.log"; then
  ok "non-x86-64 host: one-line CMake error"
else
  fail "non-x86-64 host (exit $status)"; cat "$work/arm.log"
fi

[ "$failures" -eq 0 ] && echo "all passed" || echo "$failures failure(s)"
[ "$failures" -eq 0 ]
