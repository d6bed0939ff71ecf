#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Who may use a gateway:
# 1. a token by default: listening beyond loopback without a token is
#    refused (exit 2) unless --insecure; --init-token creates a private
#    token file (mode 600), never over an existing one, and clients that
#    prove it get through while one without it is refused.
# 2. administration only through the admin socket: its owner (scimqctl
#    finds it) may delete, bind, move; another user (nobody, by setpriv)
#    may not, nor anybody on the data port, token or not, loopback or not;
#    a group given access may; a stale socket is replaced, a live one not.
#    STATS stays on the data port.
# 3. a HELLO naming another live session's id, before AUTH: the stranger
#    gets no DELIVER, takes no stream slot (the real consumer's stream,
#    cut, reconnects while the stranger waits), and everything arrives,
#    verified, at the real consumer.
. "$top_srcdir/tests/integration/lib.sh"
peer="$top_builddir/tests/gateway/gw_peer"
need setpriv util-linux
as_nobody() {
    setpriv --reuid nobody --regid nogroup --clear-groups "$@"
}

# --- 1. A token by default ---------------------------------------------------
if "$gwbin" --listen 0.0.0.0:0 --memory-limit 16MiB \
    --set gateway_prefault=false > "$workdir/open.out" 2> "$workdir/open.err"; then
    fail "a gateway on 0.0.0.0 without a token started"
else
    rc=$?
fi
expect_eq "no token beyond loopback: exit code" 2 "$rc"
grep -q "refusing to listen on 0.0.0.0 without a token" "$workdir/open.err" ||
    fail "no clear message: $(cat "$workdir/open.err")"
grep -q -- "--init-token" "$workdir/open.err" || fail "the message does not say how"
ok "the refusal says why and how"
if "$gwbin" --listen '[::]:0' --memory-limit 16MiB \
    --set gateway_prefault=false > /dev/null 2>&1; then
    fail "a gateway on [::] without a token started"
fi
ok "[::] without a token is refused too"

# --insecure is an explicit choice; the same as the setting.
start_gateway --listen 0.0.0.0:0 --insecure --memory-limit 16MiB \
    --set gateway_prefault=false
"$bindir/scimqctl" ping > /dev/null || fail "ping an --insecure gateway"
ok "--insecure: started on 0.0.0.0 and answers"
grep -q "auth none" "$workdir/gateway.err" || fail "start line does not say auth none"
grep -q "without a token (--insecure)" "$workdir/gateway.err" ||
    fail "no warning for --insecure"
ok "--insecure is logged as a warning"
stop_gateway
SCIMQ_GATEWAY_INSECURE=true start_gateway --listen 0.0.0.0:0 \
    --memory-limit 16MiB --set gateway_prefault=false
"$bindir/scimqctl" ping > /dev/null || fail "ping with SCIMQ_GATEWAY_INSECURE"
ok "SCIMQ_GATEWAY_INSECURE=true does the same"
stop_gateway

# Loopback needs no token (one machine, one user's test setup).
start_gateway --memory-limit 16MiB --set gateway_prefault=false
"$bindir/scimqctl" ping > /dev/null || fail "ping on loopback"
ok "loopback without a token starts"
stop_gateway

# --init-token: a new random secret, mode 600, said where it is.
tok="$workdir/sub/token"
mkdir "$workdir/sub"
"$gwbin" --init-token "$tok" > "$workdir/init.json" 2> "$workdir/init.err" ||
    fail "--init-token failed: $(cat "$workdir/init.err")"
expect_eq "token file mode" 600 "$(stat -c %a "$tok")"
expect_eq "token length (64 hex digits and a newline)" 65 "$(stat -c %s "$tok")"
grep -Eq '^[0-9a-f]{64}$' "$tok" || fail "token is not 64 hex digits"
ok "the token is 64 hex digits"
expect_eq "says where" "$(realpath "$tok")" "$(json_get "$workdir/init.json" .token_file)"
grep -q "token written to $(realpath "$tok")" "$workdir/init.err" ||
    fail "no message naming the file"
ok "the message names the file"
cp "$tok" "$workdir/token.before"
if "$gwbin" --init-token "$tok" > /dev/null 2> "$workdir/init2.err"; then
    fail "--init-token overwrote an existing file"
fi
cmp -s "$tok" "$workdir/token.before" || fail "the existing token changed"
grep -q "not overwritten" "$workdir/init2.err" || fail "no message on refusal"
ok "an existing token file is never overwritten"
ln -s "$workdir/elsewhere" "$workdir/link"
if "$gwbin" --init-token "$workdir/link" > /dev/null 2>&1; then
    fail "--init-token followed a symlink"
fi
[ ! -e "$workdir/elsewhere" ] || fail "a file appeared behind the symlink"
ok "not through a symlink"
"$gwbin" --init-token "$workdir/t2" > /dev/null 2>&1 || fail "second token"
cmp -s "$tok" "$workdir/t2" && fail "two tokens are equal"
ok "two tokens differ"

# The token it made works: a gateway on every address with it, a verified
# pair that proves it, and a client without it refused.
start_gateway --listen 0.0.0.0:0 --token-file "$tok" --memory-limit 32MiB \
    --set gateway_prefault=false
export SCIMQ_TOKEN_FILE="$tok"
"$bindir/scimqctl" queue create t --guaranteed > /dev/null || fail "create"
bounded 60 "$bindir/scimq-send" --queue t --synthetic --size 1KiB:64KiB \
    --count 50 --close > "$workdir/send.json" || fail "send with the token"
bounded 60 "$bindir/scimq-recv" --queue t --verify --until-eos \
    > "$workdir/recv.json" || fail "recv with the token"
expect_eq "with the new token: received" 50 "$(json_get "$workdir/recv.json" .messages)"
expect_eq "with the new token: corrupt" 0 "$(json_get "$workdir/recv.json" .corrupt)"
if SCIMQ_TOKEN_FILE= "$bindir/scimqctl" ping > "$workdir/notok.json" 2>/dev/null; then
    fail "a client without the token got in"
fi
expect_eq "without the token" SCIMQ_EAUTH "$(json_get "$workdir/notok.json" .error)"
stop_gateway
unset SCIMQ_TOKEN_FILE

# --- 2. The admin socket ---------------------------------------------------
start_gateway --token-file "$tok" --memory-limit 32MiB --set gateway_prefault=false
export SCIMQ_TOKEN_FILE="$tok"
sock="/tmp/scimq-$(id -u)/gateway-$GW_PORT.sock"
[ -S "$sock" ] || fail "no admin socket at $sock"
grep -q "admin socket $sock" "$workdir/gateway.err" || fail "start line lacks the admin socket"
ok "admin socket at the default path, named in the start line"
expect_eq "admin socket mode" 600 "$(stat -c %a "$sock")"
expect_eq "admin socket owner" "$(id -u)" "$(stat -c %u "$sock")"
expect_eq "its directory's mode" 700 "$(stat -c %a "$(dirname "$sock")")"
ctl="$bindir/scimqctl"
for q in keep other; do
    $ctl queue create $q --guaranteed > /dev/null || fail "create $q"
done
bounded 60 "$bindir/scimq-send" --queue keep --synthetic --size 1KiB --count 5 \
    > /dev/null || fail "send to keep"
# The owner: scimqctl finds the socket from the URL's port.
expect_eq "owner: bind" true "$($ctl queue bind keep other | jq .ok)"
expect_eq "owner: unbind" true "$($ctl queue unbind keep other | jq .ok)"
expect_eq "owner: move" 5 "$($ctl queue move keep other | jq .moved)"
expect_eq "owner: move back" 5 "$($ctl queue move other keep | jq .moved)"
# The data port, with the right token, from loopback: refused.
bounded 30 "$peer" admin 127.0.0.1 "$GW_PORT" keep "$tok" > "$workdir/dport.json" ||
    fail "gw_peer admin"
expect_eq "data port, with the token: delete" SCIMQ_EPERM \
    "$(json_get "$workdir/dport.json" .answer)"
grep -q "admin socket" "$workdir/dport.json" || fail "the refusal does not say where to go"
ok "the refusal names the admin socket"
# Another user: cannot connect to the socket (nor find one of its own).
if as_nobody "$ctl" --admin-socket "$sock" queue delete keep \
    > "$workdir/nobody.json" 2> "$workdir/nobody.err"; then
    fail "nobody deleted a queue through the admin socket"
fi
expect_eq "nobody through the socket" SCIMQ_EACCES "$(json_get "$workdir/nobody.json" .error)"
if as_nobody env SCIMQ_URL="$GW_URL" "$ctl" queue delete keep \
    > /dev/null 2> "$workdir/nobody2.err"; then
    fail "nobody deleted a queue"
fi
grep -q "no admin socket" "$workdir/nobody2.err" || fail "nobody: $(cat "$workdir/nobody2.err")"
ok "nobody finds no admin socket of its own"
expect_eq "keep still holds its messages" 5 \
    "$(gw_stat '.queues[] | select(.name=="keep") | .ready')"
# STATS stays on the data port (lease extension reads ack timeouts there).
expect_eq "STATS on the data port" 60000 \
    "$(gw_stat '.queues[] | select(.name=="keep") | .ack_timeout_ms')"
expect_eq "owner: delete" 5 "$($ctl queue delete keep | jq .discarded)"
# The gateway dies: its socket stays behind, and a new one on the same port
# replaces it; one that a live gateway uses is not taken.
kill -KILL "$GW_PID"
wait "$GW_PID" 2>/dev/null || true
[ -S "$sock" ] || fail "expected a stale socket after SIGKILL"
port=$GW_PORT
start_gateway --listen "127.0.0.1:$port" --token-file "$tok" \
    --memory-limit 32MiB --set gateway_prefault=false
expect_eq "restarted on the same port" "$port" "$GW_PORT"
expect_eq "a stale socket is replaced" true "$($ctl queue create x > /dev/null && $ctl queue delete x | jq .ok)"
if "$gwbin" --listen 127.0.0.1:0 --admin-socket "$sock" --memory-limit 16MiB \
    --set gateway_prefault=false > /dev/null 2> "$workdir/second.err"; then
    fail "a second gateway took a live admin socket"
fi
grep -q "another gateway is using it" "$workdir/second.err" ||
    fail "second gateway: $(cat "$workdir/second.err")"
ok "a live admin socket is not taken"
stop_gateway
[ ! -e "$sock" ] || fail "the admin socket is left after a clean stop"
ok "a clean stop removes the admin socket"
unset SCIMQ_TOKEN_FILE

# No token, loopback: every local user is a loopback peer, and that proves
# nothing: nobody's delete on the data port is refused.
start_gateway --memory-limit 16MiB --set gateway_prefault=false
"$ctl" queue create open > /dev/null || fail "create open"
as_nobody "$peer" admin 127.0.0.1 "$GW_PORT" open > "$workdir/lo.json" ||
    fail "gw_peer admin as nobody"
expect_eq "nobody on loopback, no token: delete" SCIMQ_EPERM \
    "$(json_get "$workdir/lo.json" .answer)"
stop_gateway

# A group: the socket 660 and the group's; a member may administer (the
# directory must let it through: here one mode 711).
gdir=$(mktemp -d /tmp/scimq-trust-g.XXXXXX)
chmod 711 "$gdir"
start_gateway --memory-limit 16MiB --set gateway_prefault=false \
    --admin-socket "$gdir/admin.sock" --admin-group nogroup
expect_eq "group socket mode" 660 "$(stat -c %a "$gdir/admin.sock")"
expect_eq "group socket group" nogroup "$(stat -c %G "$gdir/admin.sock")"
"$ctl" queue create g > /dev/null || fail "create g"
expect_eq "a member of the group: delete" true \
    "$(as_nobody "$ctl" --admin-socket "$gdir/admin.sock" queue delete g | jq .ok)"
"$ctl" queue create g > /dev/null || fail "create g again"
if setpriv --reuid nobody --regid daemon --clear-groups "$ctl" \
    --admin-socket "$gdir/admin.sock" queue delete g > /dev/null 2>&1; then
    fail "a user outside the group deleted a queue"
fi
ok "outside the group: refused"
stop_gateway
rm -rf "$gdir"

# --- 3. A HELLO naming another session, before AUTH ---------------------------
start_gateway --token-file "$tok" --memory-limit 64MiB --set gateway_prefault=false \
    --set gateway_hello_timeout_ms=120000
export SCIMQ_TOKEN_FILE="$tok"
"$ctl" queue create hijack --guaranteed > /dev/null || fail "create hijack"
n=300
bounded 120 "$bindir/scimq-recv" --queue hijack --streams 2 --verify --until-eos \
    > "$workdir/hrecv.json" 2> "$workdir/hrecv.err" &
hrecv=$!
track "$hrecv"
consumer_sid() {
    gw_stat '[.connections_detail[] | select(.stream == 1) | .session] | first // empty'
}
has_sid() { [ -n "$(consumer_sid)" ]; }
wait_until 30 "the consumer's session" has_sid
sid=$(consumer_sid)
ok "the consumer's session id is in STATS: $sid"
# Strangers: one HELLO per stream of that session, held without AUTH; and
# one that asks for deliveries (GET) before authenticating.
for s in 0 1; do
    # Bounded by its own time (90 s); SIGTERM ends it with its report.
    "$peer" hijack 127.0.0.1 "$GW_PORT" "$sid" "$s" 2 - 90 \
        > "$workdir/hold.$s.json" &
    eval "hold_$s=\$!"
    track $!
done
bounded 60 "$peer" hijack 127.0.0.1 "$GW_PORT" "$sid" 0 2 hijack 10 \
    > "$workdir/getter.json" || fail "gw_peer hijack (GET)"
expect_eq "GET before AUTH: DELIVERs" 0 "$(json_get "$workdir/getter.json" .delivers)"
expect_eq "GET before AUTH: closed" true "$(json_get "$workdir/getter.json" .closed)"
expect_eq "GET before AUTH: error" SCIMQ_EAUTH "$(json_get "$workdir/getter.json" .error)"
session_streams() {
    gw_stat "[.connections_detail[] | select(.session == \"$sid\")] | length"
}
both_streams() { [ "$(session_streams)" -eq 2 ]; }
expect_eq "the session still has its two streams" 2 "$(session_streams)"
if [ "$(id -u)" -eq 0 ] && command -v ss > /dev/null 2>&1 &&
    ss -K dst 192.0.2.1 > /dev/null 2>&1; then
    # The consumer's stream 1 is cut while the strangers wait on it: its
    # reconnect must get the slot.
    # The only scimq-recv running is the consumer.
    cport=$(ss -tnp state established "( dport = :$GW_PORT )" 2>/dev/null |
        grep '"scimq-recv"' | awk '{print $3}' | sed 's/.*://' | head -1)
    [ -n "$cport" ] || fail "no consumer connection found"
    ss -K state established "( sport = :$cport and dport = :$GW_PORT )" > /dev/null 2>&1
    wait_until 30 "the consumer's stream back" both_streams
    ss -tn state established "( sport = :$cport and dport = :$GW_PORT )" 2>/dev/null |
        grep -q ":$cport" && fail "the cut connection is still there"
    kill -0 "$hold_0" && kill -0 "$hold_1" || fail "the strangers left early"
    ok "a cut stream of the consumer reconnected while the strangers wait"
else
    echo "# not root (or no ss -K): the cut and reconnect of a stream is not checked"
fi
bounded 120 "$bindir/scimq-send" --queue hijack --streams 2 --synthetic \
    --size 1KiB:128KiB --count $n --close > "$workdir/hsend.json" ||
    fail "producer"
wait "$hrecv" || { cat "$workdir/hrecv.err" >&2; fail "consumer"; }
expect_eq "the real consumer: received" $n "$(json_get "$workdir/hrecv.json" .messages)"
expect_eq "the real consumer: verified" $n "$(json_get "$workdir/hrecv.json" .verified)"
expect_eq "the real consumer: corrupt" 0 "$(json_get "$workdir/hrecv.json" .corrupt)"
for s in 0 1; do
    eval "kill -TERM \$hold_$s"
    eval "wait \$hold_$s" || true
    expect_eq "stranger on stream $s: WELCOME (a nonce, nothing else)" 1 \
        "$(json_get "$workdir/hold.$s.json" .welcomes)"
    expect_eq "stranger on stream $s: frames" 1 "$(json_get "$workdir/hold.$s.json" .frames)"
    expect_eq "stranger on stream $s: DELIVERs" 0 "$(json_get "$workdir/hold.$s.json" .delivers)"
done
stop_gateway
unset SCIMQ_TOKEN_FILE

echo "$checks checks passed"
