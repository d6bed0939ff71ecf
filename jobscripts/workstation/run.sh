#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# SciMQ on one machine: a gateway on loopback, a synthetic producer, an MPI
# consumer (mpirun), and a stats summary.  No batch system.  See
# jobscripts/README.md.
#
#   SCIMQ_BUILDDIR=$PWD jobscripts/workstation/run.sh [--np N] [--count N]
#       [--size SIZE] [--queue Q] [--no-producer]
#
# Plug your own program in with SCIMQ_APP="./app args"; the default is the
# verifying consumer (scimq-mpi-recv --verify --expect COUNT).  Ctrl-C or
# SIGTERM is forwarded to mpirun; the gateway is stopped on exit.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
. "${SCIMQ_JOBSCRIPTS:-$here/..}/common.sh"

np=${SCIMQ_NP:-2} count=${SCIMQ_COUNT:-1000} size=${SCIMQ_SIZE:-64KiB}
producer=yes
: "${SCIMQ_QUEUE:=workstation}"
while [ $# -gt 0 ]; do
    case $1 in
    --np) np=$2; shift 2 ;;
    --count) count=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --queue) SCIMQ_QUEUE=$2; shift 2 ;;
    --no-producer) producer=no; shift ;;
    -h | --help) sed -n '2,12p' "$0"; exit 0 ;;
    *) scimq_die "unknown argument $1" ;;
    esac
done
export SCIMQ_QUEUE
: "${SCIMQ_MPI_PROVIDER:=shm}"
export SCIMQ_MPI_PROVIDER

scimq_locate_tools
scimq_job_dir
SCIMQ_GATEWAY_LISTEN=${SCIMQ_GATEWAY_LISTEN:-127.0.0.1:0}
scimq_gateway_start
echo "scimq-url: $SCIMQ_URL"

"$SCIMQ_CTL" queue create "$SCIMQ_QUEUE" --guaranteed \
    --ack-timeout "${SCIMQ_ACK_TIMEOUT:-120}" > /dev/null ||
    scimq_die "queue create $SCIMQ_QUEUE"

PRODUCER_PID=
if [ "$producer" = yes ]; then
    "$SCIMQ_SEND" --queue "$SCIMQ_QUEUE" --synthetic --size "$size" \
        --count "$count" --close \
        > "$SCIMQ_JOB_DIR/producer.out" 2> "$SCIMQ_JOB_DIR/producer.err" &
    PRODUCER_PID=$!
    : "${SCIMQ_EXPECT:=$count}"
    export SCIMQ_EXPECT
fi

rc=0
# shellcheck disable=SC2046
scimq_run_mpi ${SCIMQ_LAUNCHER:-mpirun -n $np --oversubscribe} $(scimq_app) || rc=$?

if [ -n "$PRODUCER_PID" ]; then
    wait "$PRODUCER_PID" || scimq_log "producer status $?"
    echo "scimq-producer: $(tail -n 1 "$SCIMQ_JOB_DIR/producer.out")"
fi
scimq_stats_summary "$SCIMQ_QUEUE" || true
exit "$rc"
