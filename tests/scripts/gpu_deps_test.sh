#!/usr/bin/env bash
# scripts/gpu-deps.sh unpack on a package made here: with dpkg-deb, and with ar and tar alone (a GPU machine
# may have no dpkg); the CMake arguments it prints; its refusals.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
script=$root/scripts/gpu-deps.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "gpu_deps_test: $*" >&2; exit 1; }

# A package holding one header, as the -dev packages do (gzip: the fallback then needs no xz).
mkdir -p "$tmp/pkg/DEBIAN" "$tmp/pkg/usr/include/probe"
printf 'Package: probe-dev\nVersion: 1.0\nArchitecture: all\nMaintainer: test <test@example.invalid>\nDescription: probe\n' \
  > "$tmp/pkg/DEBIAN/control"
echo '#define PROBE 1' > "$tmp/pkg/usr/include/probe/probe.h"
mkdir -p "$tmp/debs"
dpkg-deb -Zgzip --build --root-owner-group "$tmp/pkg" "$tmp/debs/probe-dev_1.0_all.deb" > /dev/null

expected="-DCMAKE_PREFIX_PATH=$tmp/with-dpkg/usr -DCMAKE_IGNORE_PREFIX_PATH=/usr;/usr/local -DPIPEWRIGHT_FMT_HEADER_ONLY=ON"
got=$(PIPEWRIGHT_GPU_DEPS=$tmp/debs bash "$script" unpack "$tmp/with-dpkg" 2> "$tmp/err")
[ "$got" = "$expected" ] || fail "unpack printed '$got', expected '$expected'"
[ "$(cat "$tmp/err")" = "gpu-deps: 1 packages unpacked into $tmp/with-dpkg" ] || fail "unpack said '$(cat "$tmp/err")'"
grep -q "PROBE 1" "$tmp/with-dpkg/usr/include/probe/probe.h" || fail "dpkg-deb left no header"

# Without dpkg-deb: a PATH of the few tools the fallback uses.
mkdir -p "$tmp/bin"
for tool in bash ar tar xz zstd gzip mkdir mktemp rm; do
  if command -v "$tool" > /dev/null; then ln -s "$(command -v "$tool")" "$tmp/bin/$tool"; fi
done
PATH=$tmp/bin PIPEWRIGHT_GPU_DEPS=$tmp/debs bash "$script" unpack "$tmp/without-dpkg" > /dev/null 2>&1 ||
  fail "unpack without dpkg-deb failed"
grep -q "PROBE 1" "$tmp/without-dpkg/usr/include/probe/probe.h" || fail "ar and tar left no header"

# Refusals: no packages (exit 1), a missing prefix or an unknown command (exit 2, usage).
mkdir -p "$tmp/empty"
if PIPEWRIGHT_GPU_DEPS=$tmp/empty bash "$script" unpack "$tmp/x" 2> "$tmp/err"; then fail "unpack of no packages passed"; fi
[ "$(cat "$tmp/err")" = "gpu-deps: error: no .deb in $tmp/empty (run scripts/gpu-deps.sh download here)" ] ||
  fail "no packages said '$(cat "$tmp/err")'"
set +e
bash "$script" unpack 2> "$tmp/err"; status=$?
set -e
if [ "$status" -ne 2 ] || [ "$(cat "$tmp/err")" != "gpu-deps: error: unpack needs a PREFIX folder" ]; then
  fail "unpack without a prefix: exit $status, '$(cat "$tmp/err")'"
fi
set +e
bash "$script" frobnicate 2> "$tmp/err"; status=$?
set -e
if [ "$status" -ne 2 ] || [ "$(cat "$tmp/err")" != "usage: scripts/gpu-deps.sh download | unpack PREFIX | rehearse [DIR]" ]; then
  fail "an unknown command: exit $status, '$(cat "$tmp/err")'"
fi
echo "gpu_deps_test: 1 passed, 0 failed"
