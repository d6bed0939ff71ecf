#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# TLS on the data port (--tls-cert/--tls-key, clients scimqs://): a round
# trip of verified messages on two streams, with the token still required
# inside; refused: a gateway certificate from another CA, a name the
# certificate does not carry, a plain client, a client without the token;
# with --tls-ca, clients without a certificate of that CA.  The admin
# socket stays plain (administration works unchanged).
. "$top_srcdir/tests/integration/lib.sh"
need openssl openssl
pki="$workdir/pki"
mkdir "$pki"
# ca: signs the gateway's and a client's certificate; other: a stranger.
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
for k in ca gw client other; do key "$pki/$k.key" || fail "openssl genpkey"; done
openssl req -x509 -new -key "$pki/ca.key" -out "$pki/ca.pem" -days 2 \
    -subj /CN=scimq-test-ca 2>/dev/null || fail "CA"
openssl req -x509 -new -key "$pki/other.key" -out "$pki/other.pem" -days 2 \
    -subj /CN=other-ca 2>/dev/null || fail "other CA"
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' > "$pki/gw.ext"
openssl req -new -key "$pki/gw.key" -subj /CN=localhost 2>/dev/null |
    openssl x509 -req -CA "$pki/ca.pem" -CAkey "$pki/ca.key" -CAcreateserial \
        -days 2 -extfile "$pki/gw.ext" -out "$pki/gw.pem" 2>/dev/null || fail "gw cert"
openssl req -new -key "$pki/client.key" -subj /CN=producer 2>/dev/null |
    openssl x509 -req -CA "$pki/ca.pem" -CAkey "$pki/ca.key" -CAcreateserial \
        -days 2 -out "$pki/client.pem" 2>/dev/null || fail "client cert"
openssl req -x509 -new -key "$pki/other.key" -subj /CN=intruder -days 2 \
    -out "$pki/intruder.pem" 2>/dev/null || fail "intruder cert"
ok "test PKI made"

"$gwbin" --init-token "$workdir/token" > /dev/null 2>&1 || fail "token"
export SCIMQ_TOKEN_FILE="$workdir/token" SCIMQ_TLS_CA="$pki/ca.pem"

# Flags that do not go together.
if "$gwbin" --tls-cert "$pki/gw.pem" --memory-limit 16MiB > /dev/null 2>&1; then
    fail "a certificate without its key was taken"
fi
ok "--tls-cert without --tls-key is refused"
if "$gwbin" --tls-cert "$pki/gw.pem" --tls-key "$pki/other.key" \
    --memory-limit 16MiB > /dev/null 2> "$workdir/mismatch.err"; then
    fail "a key that does not match the certificate was taken"
fi
grep -q "TLS:" "$workdir/mismatch.err" || fail "no TLS message: $(cat "$workdir/mismatch.err")"
ok "a key of another certificate is refused"

# Every address: the name check below connects through 127.0.0.2.
start_gateway --listen 0.0.0.0:0 --token-file "$workdir/token" \
    --tls-cert "$pki/gw.pem" --tls-key "$pki/gw.key" \
    --memory-limit 128MiB --set gateway_prefault=false
grep -q "tls on" "$workdir/gateway.err" || fail "start line: $(head -1 "$workdir/gateway.err")"
ok "start line says tls on"
tls="scimqs://127.0.0.1:$GW_PORT"
export SCIMQ_URL="$tls"
"$bindir/scimqctl" queue create t --guaranteed > /dev/null || fail "create over TLS"
bounded 120 "$bindir/scimq-recv" --queue t --streams 2 --verify --until-eos \
    > "$workdir/recv.json" 2> "$workdir/recv.err" &
rpid=$!
track "$rpid"
bounded 120 "$bindir/scimq-send" --queue t --streams 2 --synthetic \
    --size 0:4MiB --count 200 --close > "$workdir/send.json" 2> "$workdir/send.err" ||
    { cat "$workdir/send.err" >&2; fail "send over TLS"; }
wait "$rpid" || { cat "$workdir/recv.err" >&2; fail "recv over TLS"; }
expect_eq "TLS round trip: received" 200 "$(json_get "$workdir/recv.json" .messages)"
expect_eq "TLS round trip: verified" 200 "$(json_get "$workdir/recv.json" .verified)"
expect_eq "TLS round trip: corrupt" 0 "$(json_get "$workdir/recv.json" .corrupt)"
expect_eq "TLS round trip: bytes" "$(json_get "$workdir/send.json" .bytes)" \
    "$(json_get "$workdir/recv.json" .bytes)"
# Administration: the admin socket, plain, as before.
expect_eq "delete through the admin socket" true "$("$bindir/scimqctl" queue delete t | jq .ok)"

# Refusals.
refused() { # WHAT EXPECTED_ERROR VAR=VALUE: scimqctl ping must fail so
    what=$1 want=$2
    if env "$3" "$bindir/scimqctl" ping > "$workdir/r.json" 2> "$workdir/r.err"; then
        fail "$what: got in"
    fi
    expect_eq "$what" "$want" "$(json_get "$workdir/r.json" .error)"
}
refused "a gateway certificate of another CA" SCIMQ_EACCES SCIMQ_TLS_CA="$pki/other.pem"
grep -q "certificate" "$workdir/r.err" || fail "no certificate message: $(cat "$workdir/r.err")"
ok "the client says the certificate is why"
refused "a name the certificate lacks (127.0.0.2)" SCIMQ_EACCES \
    SCIMQ_URL="scimqs://127.0.0.2:$GW_PORT"
refused "TLS without the token" SCIMQ_EAUTH SCIMQ_TOKEN_FILE=
if SCIMQ_URL="scimq://127.0.0.1:$GW_PORT" bounded 30 "$bindir/scimqctl" ping \
    > /dev/null 2>&1; then
    fail "a plain client got in"
fi
ok "a plain client is refused"
"$bindir/scimqctl" ping > /dev/null || fail "ping after the refusals"
ok "a good client still gets in"
stop_gateway

# Client certificates (--tls-ca).
start_gateway --token-file "$workdir/token" --tls-cert "$pki/gw.pem" \
    --tls-key "$pki/gw.key" --tls-ca "$pki/ca.pem" --memory-limit 32MiB \
    --set gateway_prefault=false
export SCIMQ_URL="scimqs://127.0.0.1:$GW_PORT"
grep -q "client certificates" "$workdir/gateway.err" || fail "start line lacks client certificates"
if bounded 30 "$bindir/scimqctl" ping > /dev/null 2>&1; then
    fail "a client without a certificate got in"
fi
ok "without a client certificate: refused"
if SCIMQ_TLS_CERT="$pki/intruder.pem" SCIMQ_TLS_KEY="$pki/other.key" \
    bounded 30 "$bindir/scimqctl" ping > /dev/null 2>&1; then
    fail "a client certificate of another CA got in"
fi
ok "a client certificate of another CA: refused"
export SCIMQ_TLS_CERT="$pki/client.pem" SCIMQ_TLS_KEY="$pki/client.key"
"$bindir/scimqctl" queue create c > /dev/null || fail "create with a client certificate"
bounded 60 "$bindir/scimq-send" --queue c --synthetic --size 1KiB:1MiB \
    --count 30 --close > /dev/null || fail "send with a client certificate"
bounded 60 "$bindir/scimq-recv" --queue c --verify --until-eos > "$workdir/crecv.json" ||
    fail "recv with a client certificate"
expect_eq "with a client certificate: verified" 30 "$(json_get "$workdir/crecv.json" .verified)"
stop_gateway
echo "$checks checks passed"
