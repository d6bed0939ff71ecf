#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Session versions side by side: this gateway with peers that speak the
# older versions, and this library with a gateway that does.
#  - a raw-frame peer (scimp_old_peer) speaking version 1, then 2, as a
#    client built before version 3 does (one PUT_OK per PUT, one ACK per
#    delivery): every message confirmed, delivered, acknowledged, the
#    payload CRCs equal on both sides, and no frame of a newer opcode;
#  - the library with proto_max_version=1, =2 and =3 (it then speaks as the
#    releases of those versions did): counts and checksums, no loss;
#  - the library of this build against a gateway that chooses at most
#    version 2 (proto_max_version=2): the same.
. "$top_srcdir/tests/integration/lib.sh"

peer="$top_builddir/tests/client/scimp_old_peer"
n=500

start_gateway
"$bindir/scimqctl" queue create old --guaranteed > /dev/null ||
    fail "create old"
for v in 1 2; do
    bounded 120 "$peer" put 127.0.0.1 "$GW_PORT" old "$v" "$n" 1024 \
        > "$workdir/put.$v.json" || fail "v$v put: $(cat "$workdir/put.$v.json")"
    bounded 120 "$peer" get 127.0.0.1 "$GW_PORT" old "$v" "$n" \
        > "$workdir/get.$v.json" || fail "v$v get: $(cat "$workdir/get.$v.json")"
    expect_eq "v$v peer: session version" "$v" "$(json_get "$workdir/put.$v.json" .version)"
    expect_eq "v$v peer: PUT_OK frames" "$n" "$(json_get "$workdir/put.$v.json" .put_ok)"
    expect_eq "v$v peer: delivered" "$n" "$(json_get "$workdir/get.$v.json" .delivered)"
    expect_eq "v$v peer: payload CRC as sent" \
        "$(json_get "$workdir/put.$v.json" .crc)" \
        "$(json_get "$workdir/get.$v.json" .crc)"
    expect_eq "v$v peer: frames of newer opcodes" 0 \
        "$(( $(json_get "$workdir/put.$v.json" .newer_opcodes) + \
             $(json_get "$workdir/get.$v.json" .newer_opcodes) ))"
done
wait_until 30 "old peers: not all $((2 * n)) acknowledged" \
    stat_eq '.queues[] | select(.name == "old") | .counters.acked' $((2 * n))
ok "old peers: $((2 * n)) acknowledged"

# send_recv LABEL VERSION_CAP(for both tools, empty: none) EXPECTED_VERSION
send_recv() {
    q="lib$2x$3"
    "$bindir/scimqctl" queue create "$q" --guaranteed > /dev/null ||
        fail "create $q"
    bounded 120 env ${2:+SCIMQ_PROTO_MAX_VERSION=$2} "$bindir/scimq-send" --queue "$q" \
        --synthetic --size 64B:4KiB --count "$n" --close \
        > "$workdir/send.$q.json" 2> "$workdir/send.$q.err" ||
        fail "$1: send failed"
    bounded 120 env ${2:+SCIMQ_PROTO_MAX_VERSION=$2} "$bindir/scimq-recv" \
        --queue "$q" --verify --until-eos > "$workdir/recv.$q.json" \
        2> "$workdir/recv.$q.err" || fail "$1: receive failed"
    expect_eq "$1: session version" "$3" "$(json_get "$workdir/recv.$q.json" .session_version)"
    expect_eq "$1: sent" "$n" "$(json_get "$workdir/send.$q.json" .messages)"
    expect_eq "$1: delivered" "$n" "$(json_get "$workdir/recv.$q.json" .messages)"
    expect_eq "$1: verified" "$n" "$(json_get "$workdir/recv.$q.json" .verified)"
    expect_eq "$1: corrupt" 0 "$(json_get "$workdir/recv.$q.json" .corrupt)"
    expect_eq "$1: lost" 0 "$(json_get "$workdir/recv.$q.json" .lost)"
    expect_eq "$1: duplicates" 0 "$(json_get "$workdir/recv.$q.json" .duplicates)"
    wait_until 30 "$1: not all $n acknowledged" \
        stat_eq ".queues[] | select(.name == \"$q\") | .counters.acked" "$n"
    ok "$1: $n acknowledged"
}
send_recv "library capped at version 1" 1 1
send_recv "library capped at version 2" 2 2
send_recv "library capped at version 3" 3 3
send_recv "library at its own version" "" 4
stop_gateway

start_gateway --set proto_max_version=2
send_recv "this library, gateway choosing at most 2" "" 2
stop_gateway
