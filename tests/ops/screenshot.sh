#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# How doc/ops-page.png is made (not a test): a gateway with --http, a
# camera-like producer (1 MiB frames at 60/s over 4 streams into piv.in,
# fanned out to piv.frames and piv.store), a consumer of piv.frames that
# keeps up and a slower one of piv.store whose backlog grows; the live page
# is left open SECONDS (90) of real time, then photographed.
#   top_srcdir=. top_builddir=build/default sh tests/ops/screenshot.sh doc/ops-page.png
. "$top_srcdir/tests/integration/lib.sh"
. "$top_srcdir/tests/ops/lib.sh"
need chromium chromium
need python3 python3
out=${1:?usage: screenshot.sh OUT.png [SECONDS]}
seconds=${2:-90}

start_http_gateway --memory-limit 512MiB --set gateway_http_cache_ms=500
for q in piv.in piv.frames piv.store; do
    "$bindir/scimqctl" queue create "$q" --guaranteed > /dev/null || fail "create $q"
done
"$bindir/scimqctl" queue bind piv.in piv.frames > /dev/null || fail bind
"$bindir/scimqctl" queue bind piv.in piv.store > /dev/null || fail bind
"$bindir/scimq-recv" --queue piv.frames --streams 2 --verify --until-eos \
    > /dev/null 2>&1 &
track $!
"$bindir/scimq-recv" --queue piv.store --streams 1 --verify --until-eos \
    --process-ms 25 > /dev/null 2>&1 &
track $!
"$bindir/scimq-recv" --queue piv.in --streams 1 --verify --until-eos \
    > /dev/null 2>&1 &
track $!
"$bindir/scimq-send" --queue piv.in --streams 4 --synthetic --size 1MiB \
    --rate 60 --count $((60 * (seconds + 30))) > /dev/null 2>&1 &
track $!
bounded $((seconds + 60)) python3 "$top_srcdir/tests/ops/screenshot.py" \
    "$HTTP_URL/" "$seconds" "$out" "$workdir/chromium" || fail "screenshot"
ok "$out"
