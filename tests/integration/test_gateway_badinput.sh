#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Bad input never hurts anyone else: while a producer and a consumer move
# 300 verified messages, other connections send garbage, truncated frames,
# oversized lengths, the wrong token, no token, and dribble a header
# (slowloris).  Each gets a clear ERROR or a close; the good pair finishes
# with nothing lost, and the gateway is still healthy.
. "$top_srcdir/tests/integration/lib.sh"
scimp="$bindir/scimq-scimp"
n=300
need bash bash # /dev/tcp

printf 'sesame-%s\n' "$$" > "$workdir/token"
chmod 600 "$workdir/token"
printf 'wrong\n' > "$workdir/wrong"
chmod 600 "$workdir/wrong"
export SCIMQ_TOKEN_FILE="$workdir/token"
SCIMQ_PROTO_MAX_PAYLOAD=4MiB start_gateway --token-file "$workdir/token" \
    --set gateway_hello_timeout_ms=1500
"$bindir/scimqctl" queue create good --guaranteed > /dev/null || fail "create"

# The good pair, running through everything below.
"$bindir/scimq-send" --queue good --streams 2 --synthetic --size 64KiB \
    --count "$n" --rate 100 --close > "$workdir/send.json" 2> "$workdir/send.err" &
send_pid=$!
track "$send_pid"
"$bindir/scimq-recv" --queue good --verify --until-eos --expect "$n" \
    > "$workdir/recv.json" 2> "$workdir/recv.err" &
recv_pid=$!
track "$recv_pid"

# raw FILE SECONDS: sends FILE on a fresh connection, waits for the
# gateway to answer and close (at most SECONDS); the reply goes to
# $workdir/reply.bin.  Fails if the gateway keeps the connection open.
raw() {
    bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 3
             cat "$2" >&3 2>/dev/null
             timeout "$3" cat <&3 > "$4"' raw "$GW_PORT" "$1" "$2" \
        "$workdir/reply.bin" || fail "connection for $1 not closed in $2 s"
}

# reply_error: the error name of the ERROR frame the gateway sent.
reply_error() {
    "$scimp" dump "$workdir/reply.bin" | sed -n 's/.*ERROR.*code=\([A-Z_0-9]*\).*/\1/p' | head -1
}

printf 'GET / HTTP/1.1\r\nHost: gateway\r\n\r\n' > "$workdir/garbage"
raw "$workdir/garbage" 5
expect_eq "garbage" SCIMQ_EPROTO_MAGIC "$(reply_error)"

"$scimp" gen --count 1 --size 8MiB -o "$workdir/big" 2> /dev/null
raw "$workdir/big" 5
expect_eq "payload over the 4 MiB limit" SCIMQ_EPROTO_TOOBIG "$(reply_error)"

"$scimp" gen --count 1 --size 64KiB -o "$workdir/put" 2> /dev/null
# A frame that stops halfway (the sender keeps the connection open).
head -c 100 "$workdir/put" > "$workdir/truncated"
raw "$workdir/truncated" 5
expect_eq "truncated frame" SCIMQ_ETIMEDOUT "$(reply_error)"

"$scimp" gen --count 0 --only AUTH -o "$workdir/auth-only" 2> /dev/null
raw "$workdir/auth-only" 5
expect_eq "AUTH before HELLO" SCIMQ_ESTATE "$(reply_error)"

"$scimp" gen --count 0 --only HELLO -o "$workdir/hello" 2> /dev/null
cat "$workdir/hello" "$workdir/put" > "$workdir/unauth-put"
raw "$workdir/unauth-put" 5
expect_eq "PUT without AUTH" SCIMQ_EAUTH "$(reply_error)"

# Slowloris: the first 20 bytes of a header, then silence.
head -c 20 "$workdir/put" > "$workdir/slow"
t0=$(date +%s)
raw "$workdir/slow" 10
expect_eq "slow header" SCIMQ_ETIMEDOUT "$(reply_error)"
[ $(($(date +%s) - t0)) -le 6 ] || fail "slow client held for too long"

# Wrong and missing tokens.
if SCIMQ_TOKEN_FILE="$workdir/wrong" "$bindir/scimqctl" ping > "$workdir/ctl.json" 2>/dev/null; then
    fail "wrong token accepted"
fi
expect_eq "wrong token" SCIMQ_EAUTH "$(json_get "$workdir/ctl.json" .error)"
if env -u SCIMQ_TOKEN_FILE "$bindir/scimqctl" ping > "$workdir/ctl.json" 2>/dev/null; then
    fail "missing token accepted"
fi
expect_eq "no token" SCIMQ_EAUTH "$(json_get "$workdir/ctl.json" .error)"

i=0
while kill -0 "$send_pid" 2>/dev/null || kill -0 "$recv_pid" 2>/dev/null; do
    i=$((i + 1))
    [ "$i" -gt $((600 * mult)) ] && fail "the good pair did not finish"
    sleep 0.1
done
wait "$send_pid" || { cat "$workdir/send.err" >&2; fail "good producer failed"; }
wait "$recv_pid" || { cat "$workdir/recv.err" >&2; fail "good consumer failed"; }
expect_eq "good pair: verified" "$n" "$(json_get "$workdir/recv.json" .verified)"
expect_eq "good pair: lost" 0 "$(json_get "$workdir/recv.json" .lost)"
expect_eq "good pair: duplicates" 0 "$(json_get "$workdir/recv.json" .duplicates)"
kill -0 "$GW_PID" || fail "gateway died"
errors=$(gw_stat .totals.protocol_errors)
[ "$errors" -ge 2 ] || fail "protocol errors not counted ($errors)"
ok "gateway healthy, $errors protocol errors counted"
stop_gateway
echo "$checks checks passed"
