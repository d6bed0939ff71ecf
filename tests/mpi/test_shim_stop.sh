#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Stop on signal in the library: shim_loop, a program that never calls
# scimq_mpi_init (the preloaded PMPI shim starts the runtime, which
# installs the SIGUSR1 handler of SCIMQ_MPI_STOP_SIGNALS), consumes a
# queue while a producer is still sending.  SIGUSR1 to mpirun (which
# forwards it to the ranks, as the job scripts do before the walltime):
# every rank acknowledges the message in hand, scimq_mpi_next() returns
# SCIMQ_ESTOPPED, the program finalizes and exits 0, and nothing is left
# in flight: what the job processed is exactly what the gateway counts as
# acknowledged, and the rest is still queued.
. "$top_srcdir/tests/mpi/lib.sh"
sent=2000

start_gateway
"$bindir/scimqctl" queue create stop --guaranteed --ack-timeout 60 \
    > /dev/null || fail "queue create"
bounded 120 "$bindir/scimq-send" --queue stop --synthetic --size 1KiB:16KiB \
    --count "$sent" --rate 200 > "$workdir/send.json" 2> "$workdir/send.err" &
sender=$!
track "$sender"

export SCIMQ_QUEUE=stop SCIMQ_LOG_LEVEL=mpi=info
env "$san_env" LD_PRELOAD="$shim_preload" "$MPIEXEC" -n "$np" --oversubscribe \
    "$exdir/shim_loop" > "$workdir/job.out" 2> "$workdir/job.err" &
job=$!
track "$job"
unset SCIMQ_QUEUE SCIMQ_LOG_LEVEL
q='.queues[] | select(.name=="stop")'
i=0
while [ "$(gw_stat "$q | .counters.acked")" -lt 100 ]; do
    i=$((i + 1))
    [ "$i" -gt $((600 * mult)) ] && { cat "$workdir/job.err" >&2; fail "the job processed nothing"; }
    sleep 0.1
done
kill -USR1 "$job"
st=0
i=0
while kill -0 "$job" 2>/dev/null; do
    i=$((i + 1))
    [ "$i" -gt $((600 * mult)) ] && { cat "$workdir/job.err" >&2; fail "the job did not stop on SIGUSR1"; }
    sleep 0.1
done
wait "$job" || st=$?
[ "$st" -eq 0 ] || { cat "$workdir/job.err" >&2; fail "the job exited with status $st"; }
ok "shim_loop stopped on SIGUSR1 with exit status 0"
expect_eq "ranks that stopped" "$np" \
    "$(grep -c 'stop requested after' "$workdir/job.err")"
wait "$sender" || fail "scimq-send failed"
expect_eq "sent" "$sent" "$(json_get "$workdir/send.json" .messages)"
line=$(grep '^total: ' "$workdir/job.out" || true)
[ -n "$line" ] || { cat "$workdir/job.out" >&2; fail "no totals printed"; }
processed=$(echo "$line" | awk '{print $2}')
[ "$processed" -lt "$sent" ] || fail "the job processed all $sent messages: no stop mid-stream"
expect_eq "in flight after the stop" 0 "$(gw_stat "$q | .in_flight")"
expect_eq "acknowledged = processed" "$processed" \
    "$(gw_stat "$q | .counters.acked")"
expect_eq "still queued" $((sent - processed)) "$(gw_stat "$q | .ready")"
stop_gateway
echo "$checks checks passed"
