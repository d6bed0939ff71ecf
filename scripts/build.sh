#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# scripts/build.sh FLAVOUR: configures and builds one flavour out of tree in
# build/FLAVOUR.  Flavours: default (-Werror), asan (ASan + UBSan, gcc),
# tsan (ThreadSanitizer, gcc), fuzz (clang + libFuzzer + ASan + UBSan).
# Reconfigures only when needed.
# default and asan ask for every optional part (MPI, libfabric, FFTW,
# Fortran) by name: what scripts/debian-packages installs must be found, so
# a missing package stops configure instead of silently dropping tests.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
flavour=${1:-default}
jobs=$(nproc 2>/dev/null || echo 2)

all="--with-mpi --with-ofi --with-fftw --with-nfqueue --enable-fortran"
case "$flavour" in
default) flags="--enable-werror $all" ;;
asan) flags="--enable-werror --enable-asan --enable-ubsan --enable-debug $all" ;;
tsan) flags="--enable-werror --enable-tsan $all" ;;
fuzz) flags="--enable-werror --enable-fuzzers --enable-asan --enable-ubsan CC=clang" ;;
*) echo "build: unknown flavour '$flavour'" >&2; exit 2 ;;
esac

dir="$top/build/$flavour"
mkdir -p "$dir"
cd "$dir"
# The flags of the last configure are kept beside config.status: a tree
# configured with other flags (an older build.sh) is configured again.
if [ ! -f config.status ] || [ "$top/configure" -nt config.status ] ||
    [ "$(cat .build-flags 2>/dev/null)" != "$flags" ]; then
    rm -f .build-flags
    # shellcheck disable=SC2086
    "$top/configure" -q $flags
    echo "$flags" > .build-flags
fi
make -j"$jobs" > make.log 2>&1 || { tail -40 make.log >&2; exit 1; }
echo "build: $flavour ready in $dir"
