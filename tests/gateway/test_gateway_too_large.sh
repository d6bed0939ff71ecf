#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A message larger than its consumer takes: the consumer states its limit
# (LIMIT), the gateway never sends it a larger message, and one larger than
# every consumer goes to the dead-letter queue, counted, instead of going
# round forever (it used to be refused, requeued and resent ten times a
# second without end).  A larger-than-memory PUT is refused at once.
. "$top_srcdir/tests/integration/lib.sh"

head -c 1024 /dev/urandom > "$workdir/small.dat"
head -c 2097152 /dev/urandom > "$workdir/big.dat"

start_gateway --memory-limit 8MiB
"$bindir/scimqctl" queue create dlq --guaranteed > /dev/null || fail "create dlq"
"$bindir/scimqctl" queue create q --guaranteed --dead-letter dlq \
    > /dev/null || fail "create q"
bounded 60 "$bindir/scimq-send" --queue q "$workdir/small.dat" \
    "$workdir/big.dat" "$workdir/small.dat" --close > "$workdir/send.json" ||
    fail "send"
expect_eq "confirmed" 3 "$(json_get "$workdir/send.json" .messages)"
bounded 60 "$bindir/scimq-recv" --queue q --max-message 1MiB --until-eos \
    > "$workdir/recv.json" || fail "consumer failed"
expect_eq "session version (LIMIT needs 2 or later)" 4 "$(json_get "$workdir/recv.json" .session_version)"
expect_eq "delivered" 2 "$(json_get "$workdir/recv.json" .messages)"
expect_eq "bytes" 2048 "$(json_get "$workdir/recv.json" .bytes)"
expect_eq "end of stream" true "$(json_get "$workdir/recv.json" .eos)"
expect_eq "too large" 1 "$(gw_stat '.queues[] | select(.name == "q") | .counters.too_large')"
expect_eq "redelivered" 0 "$(gw_stat '.queues[] | select(.name == "q") | .counters.redelivered')"
expect_eq "in the dead-letter queue" 1 "$(gw_stat '.queues[] | select(.name == "dlq") | .ready')"
expect_eq "its bytes" 2097152 "$(gw_stat '.queues[] | select(.name == "dlq") | .bytes')"

# Larger than the whole payload memory: refused, the connection stays.
head -c $((9 * 1048576)) /dev/zero > "$workdir/huge.dat"
"$bindir/scimqctl" queue create h --guaranteed > /dev/null || fail "create h"
if bounded 60 "$bindir/scimq-send" --queue h "$workdir/huge.dat" \
    > "$workdir/send2.json" 2> /dev/null; then
    fail "a 9 MiB message was accepted by an 8 MiB gateway"
fi
expect_eq "over the memory limit" SCIMQ_EMSGSIZE "$(json_get "$workdir/send2.json" .error)"
stop_gateway
echo "$checks checks passed"
