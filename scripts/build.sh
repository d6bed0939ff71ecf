#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# scripts/build.sh FLAVOUR: configures and builds one flavour out of tree in
# build/FLAVOUR.  Flavours: default (-Werror), asan (ASan + UBSan, gcc),
# fuzz (clang + libFuzzer + ASan + UBSan).  Reconfigures only when needed.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
flavour=${1:-default}
jobs=$(nproc 2>/dev/null || echo 2)

case "$flavour" in
default) flags="--enable-werror" ;;
asan) flags="--enable-werror --enable-asan --enable-ubsan --enable-debug" ;;
fuzz) flags="--enable-werror --enable-fuzzers --enable-asan --enable-ubsan CC=clang" ;;
*) echo "build: unknown flavour '$flavour'" >&2; exit 2 ;;
esac

dir="$top/build/$flavour"
mkdir -p "$dir"
cd "$dir"
if [ ! -f config.status ] || [ "$top/configure" -nt config.status ]; then
    # shellcheck disable=SC2086
    "$top/configure" -q $flags
fi
make -j"$jobs" > make.log 2>&1 || { tail -40 make.log >&2; exit 1; }
echo "build: $flavour ready in $dir"
