#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The live page under a real browser (Debian's chromium, headless): it is
# loaded from the gateway's --http during a run, runs its script (which
# polls /api/stats) and the rendered DOM must show the queue with the
# numbers of a known stream (messages ready and put, bytes; then, once a
# consumer has verified them, acknowledged and none ready), the
# consumer's streams with their TCP state, and the memory limit.  The page
# must load nothing from elsewhere (no src/href to anywhere; the server's
# Content-Security-Policy says 'none' by default), and a screenshot is
# taken (SCIMQ_OPS_SCREENSHOT=FILE keeps it, as doc/ops-page.png was).
. "$top_srcdir/tests/integration/lib.sh"
. "$top_srcdir/tests/ops/lib.sh"
need chromium chromium
count=${SCIMQ_TEST_OPS_COUNT:-123}
size=4096
q=ops.page

start_http_gateway --memory-limit 64MiB --set gateway_http_cache_ms=200

# dom_value FILE QUEUE FIELD: the data-value of a queue row's cell.
dom_value() {
    python3 - "$1" "$2" "$3" << 'EOF'
import re, sys
dom, queue, field = open(sys.argv[1]).read(), sys.argv[2], sys.argv[3]
row = re.search(r'<tr data-queue="%s">(.*?)</tr>' % re.escape(queue), dom, re.S)
cell = row and re.search(r'data-field="%s" data-value="([^"]*)"' % field, row.group(1))
print(cell.group(1) if cell else "")
EOF
}

# --- The page as served ------------------------------------------------------
curl -sS -D "$workdir/page.h" -o "$workdir/page.html" "$HTTP_URL/" || fail "GET /"
grep -qi "^content-security-policy: default-src 'none'" "$workdir/page.h" ||
    fail "no Content-Security-Policy on /"
ok "served with Content-Security-Policy default-src 'none'"
if grep -Eo '(src|href)="[^"]*"' "$workdir/page.html" | grep -q .; then
    fail "the page refers to another resource: $(grep -Eo '(src|href)="[^"]*"' "$workdir/page.html")"
fi
ok "the page loads nothing else ($(wc -c < "$workdir/page.html") bytes, one file)"

# --- A known stream, no consumer yet ------------------------------------------
"$bindir/scimqctl" queue create "$q" --guaranteed > /dev/null || fail "queue create"
"$bindir/scimqctl" queue create ops.idle --guaranteed > /dev/null || fail "queue create"
bounded 120 "$bindir/scimq-send" --queue "$q" --synthetic --size "$size" \
    --count "$count" > "$workdir/send.json" 2> "$workdir/send.err" || {
    cat "$workdir/send.err" >&2
    fail "scimq-send"
}
expect_eq "sent" "$count" "$(json_get "$workdir/send.json" .messages)"
# A consumer of another queue stays connected: its two streams are on the page.
"$bindir/scimq-recv" --queue ops.idle --streams 2 --until-eos \
    > "$workdir/idle.json" 2> "$workdir/idle.err" &
idle_pid=$!
track "$idle_pid"
wait_until 30 "the idle consumer did not connect" \
    stat_ge '[.connections_detail[] | select(.stream == 1)] | length' 1
session=$("$bindir/scimqctl" stats | jq -r \
    '[.connections_detail[] | select(.stream == 1)][0].session')

browse "$workdir/dom1.html" --dump-dom
grep -q 'id="status" class="live"' "$workdir/dom1.html" ||
    fail "the page never got a snapshot: $(grep -o 'id="status"[^<]*' "$workdir/dom1.html")"
ok "the page polled /api/stats (status live)"
grep -q "<tr data-queue=\"$q\">" "$workdir/dom1.html" || fail "no row for $q"
ok "a row for $q"
expect_eq "page: ready" "$count" "$(dom_value "$workdir/dom1.html" "$q" ready)"
expect_eq "page: put" "$count" "$(dom_value "$workdir/dom1.html" "$q" put)"
expect_eq "page: bytes" $((count * size)) "$(dom_value "$workdir/dom1.html" "$q" bytes)"
expect_eq "page: in flight" 0 "$(dom_value "$workdir/dom1.html" "$q" in_flight)"
expect_eq "page: acked" 0 "$(dom_value "$workdir/dom1.html" "$q" acked)"
expect_eq "page: ops.idle consumers" 1 "$(dom_value "$workdir/dom1.html" ops.idle consumers)"
grep -q '/ 64.0 MiB' "$workdir/dom1.html" || fail "memory limit (64.0 MiB) not shown"
ok "memory against its 64.0 MiB limit"
# The idle consumer's streams, by the peers STATS names, with TCP state.
for peer in $("$bindir/scimqctl" stats | jq -r --arg s "$session" \
    '.connections_detail[] | select(.session == $s) | .peer'); do
    row=$(python3 - "$workdir/dom1.html" "$peer" << 'EOF'
import re, sys
dom, peer = open(sys.argv[1]).read(), sys.argv[2]
row = re.search(r'<tr data-peer="%s">(.*?)</tr>' % re.escape(peer), dom, re.S)
print(row.group(1) if row else "")
EOF
)
    [ -n "$row" ] || fail "stream $peer of the consumer is not on the page"
    echo "$row" | grep -q 'data-field="state">established<' ||
        fail "stream $peer: no TCP state on the page"
    echo "$row" | grep -Eq 'data-field="rtt_us" data-value="[1-9][0-9]*"' ||
        fail "stream $peer: no RTT on the page"
    echo "$row" | grep -Eq 'data-field="cwnd" data-value="[1-9][0-9]*"' ||
        fail "stream $peer: no congestion window on the page"
    streams=$((${streams:-0} + 1))
done
[ "${streams:-0}" -ge 2 ] || fail "the consumer's 2 streams are not on the page (${streams:-0})"
ok "the consumer's streams with TCP state, RTT and cwnd ($streams rows)"

# --- Consumed and verified ----------------------------------------------------
bounded 120 "$bindir/scimq-recv" --queue "$q" --streams 2 --verify --count "$count" \
    > "$workdir/recv.json" 2> "$workdir/recv.err" || {
    cat "$workdir/recv.err" >&2
    fail "scimq-recv"
}
expect_eq "verified" "$count" "$(json_get "$workdir/recv.json" .verified)"
wait_until 30 "STATS: acked" stat_eq ".queues[] | select(.name == \"$q\") | .counters.acked" "$count"
browse "$workdir/dom2.html" --dump-dom
expect_eq "page: acked" "$count" "$(dom_value "$workdir/dom2.html" "$q" acked)"
expect_eq "page: ready after" 0 "$(dom_value "$workdir/dom2.html" "$q" ready)"
expect_eq "page: delivered" "$count" "$(dom_value "$workdir/dom2.html" "$q" delivered)"

browse "$workdir/browse.out" --hide-scrollbars --window-size=1400,1100 \
    --screenshot="$workdir/page.png"
expect_eq "screenshot is a PNG" "89504e47" "$(od -An -tx1 -N4 "$workdir/page.png" | tr -d ' \n')"
[ "$(wc -c < "$workdir/page.png")" -gt 20000 ] || fail "screenshot too small to show anything"
ok "screenshot $(wc -c < "$workdir/page.png") bytes"
if [ -n "${SCIMQ_OPS_SCREENSHOT:-}" ]; then
    cp "$workdir/page.png" "$SCIMQ_OPS_SCREENSHOT"
fi

"$bindir/scimqctl" queue close ops.idle > /dev/null || fail "queue close"
wait_until 60 "the idle consumer did not end" sh -c "! kill -0 $idle_pid 2>/dev/null"
stop_gateway
echo "$checks checks passed"
