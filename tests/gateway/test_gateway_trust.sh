#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Who may use a gateway:
# 1. a token by default: listening beyond loopback without a token is
#    refused (exit 2) unless --insecure; --init-token creates a private
#    token file (mode 600), never over an existing one, and clients that
#    prove it get through while one without it is refused.
. "$top_srcdir/tests/integration/lib.sh"

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

echo "$checks checks passed"
