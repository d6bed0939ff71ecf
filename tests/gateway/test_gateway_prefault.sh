#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The default start: the payload pool (here 1 GiB) is pre-faulted by a
# thread while the gateway already serves clients.  Clients are served
# while it runs (one huge page per madvise call, so the mmap lock is never
# held long), it ends with every byte faulted in, and stopping the gateway
# in the middle of it is prompt.  The other tests run with
# SCIMQ_GATEWAY_PREFAULT=false (Makefile.am says why).
. "$top_srcdir/tests/integration/lib.sh"
unset SCIMQ_GATEWAY_PREFAULT
pool=1073741824

start_gateway --memory-limit 1GiB
# A client is served at once: declare, put, get back.
"$bindir/scimqctl" queue create q --guaranteed > /dev/null || fail "create"
state=$(gw_stat .memory.prefault)
case $state in
running | done) ok "pre-faulting started ($state)" ;;
*) fail "memory.prefault is '$state', expected running or done" ;;
esac
bounded 60 "$bindir/scimq-send" --queue q --synthetic --size 1MiB --count 20 \
    > "$workdir/send.json" || fail "send"
bounded 60 "$bindir/scimq-recv" --queue q --count 20 --verify \
    > "$workdir/recv.json" || fail "recv"
expect_eq "messages received and verified" 20 \
    "$(json_get "$workdir/recv.json" .messages)"
wait_until 120 "pre-faulting never finished" \
    sh -c "[ \"\$(\"$bindir/scimqctl\" stats | jq -r .memory.prefault)\" = done ]"
expect_eq "every byte of the pool pre-faulted" "$pool" \
    "$(gw_stat .memory.prefaulted)"
stop_gateway

# Stopped while it pre-faults (a 4 GiB pool takes seconds to fault in):
# SIGINT ends the gateway (the thread stops between two huge pages), with
# its summary.
start_gateway --memory-limit 4GiB
expect_eq "4 GiB pool: pre-faulting when the signal comes" running \
    "$(gw_stat .memory.prefault)"
kill -INT "$GW_PID"
i=0
while kill -0 "$GW_PID" 2> /dev/null; do
    i=$((i + 1))
    [ "$i" -le $((100 * mult)) ] || fail "SIGINT while pre-faulting: still running after 10 s"
    sleep 0.1
done
wait "$GW_PID" && rc=0 || rc=$?
expect_eq "SIGINT while pre-faulting: exit status" 0 "$rc"
expect_eq "SIGINT while pre-faulting: summary" scimq-gateway \
    "$(json_get "$workdir/gateway.out" .tool)"
echo "$checks checks passed"
