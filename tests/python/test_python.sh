#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# Runs the Python binding's pytest suite against the build tree: the
# package's sources and the freshly built extension are put together in a
# scratch site directory (nothing is written into the source tree, which
# make distcheck keeps read-only), then pytest runs tests/python.  The
# tests start and stop their own gateways and tools (conftest.py).

. "$top_srcdir/tests/integration/lib.sh"

: "${PYTHON:?run through make check (configure finds the interpreter)}"
ext="$top_builddir/python/.libs/_scimq_ffi.so"
[ -f "$ext" ] || fail "$ext not built"
"$PYTHON" -c 'import pytest, numpy' ||
    fail "$PYTHON cannot import pytest and numpy: install the Debian packages python3-pytest python3-numpy"

site="$workdir/site"
mkdir -p "$site/scimq"
for f in "$top_srcdir"/python/scimq/*.py; do
    ln -s "$f" "$site/scimq/"
done
ln -s "$ext" "$site/scimq/_scimq_ffi.so"

# A sanitized extension needs its runtime loaded first, and CPython's own
# allocations at exit are not leaks of ours.
asan=$(ldd "$ext" | awk '/libasan/ { print $3 }')
if [ -n "$asan" ]; then
    LD_PRELOAD="$asan${LD_PRELOAD:+ $LD_PRELOAD}"
    ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
    export LD_PRELOAD ASAN_OPTIONS
fi

PYTHONPATH="$site" PYTHONDONTWRITEBYTECODE=1 \
    SCIMQ_TEST_BINDIR="$top_builddir/src" SCIMQ_TEST_WORKDIR="$workdir" \
    SCIMQ_TEST_SRCDIR="$top_srcdir" \
    bounded 900 "$PYTHON" -m pytest -p no:cacheprovider -v \
    --rootdir="$workdir" "$top_srcdir/tests/python" || fail "pytest failed"
ok "pytest passed"
