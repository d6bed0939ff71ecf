#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# jobscripts/ under a real local Slurm: brings up munged + slurmctld +
# slurmd on localhost in a temporary directory (../shared/PLATFORM.md,
# "A real Slurm on one machine"), submits the two sbatch scripts and
# checks their output; syntax-checks the PBS scripts and runs them and the
# workstation script through their workstation path.  A missing daemon or
# tool fails the test and names its Debian package; as non-root (slurmd
# and munged run here as root) it skips.  Every daemon is stopped by PID.

# The daemons live in /usr/sbin, which a user's PATH may lack.
PATH=$PATH:/usr/sbin
export PATH
. "$top_srcdir/tests/integration/lib.sh"
need_root "slurmd and munged run as root, and the node name may go into /etc/hosts"
need slurmctld slurmctld
need slurmd slurmd
need munged munge
for t in sbatch squeue scontrol sinfo scancel srun; do
    need "$t" slurm-client
done
need qsub slurm-wlm-torque
need mpirun openmpi-bin
need python3 python3
need hostname hostname
need getent libc-bin
# Sanitizer builds: Open MPI leaves memory behind at exit, which would turn
# every rank's exit status into a leak report (as in tests/mpi/lib.sh).
export ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"

js="$top_srcdir/jobscripts"
export SCIMQ_JOBSCRIPTS="$js" SCIMQ_BUILDDIR="$top_builddir"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp
export OMPI_MCA_btl_base_warn_component_unused=0
export SCIMQ_MPI_PROVIDER=shm SCIMQ_MPI_MAX_MESSAGE=1MiB
unset SCIMQ_URL SCIMQ_QUEUE SCIMQ_APP SCIMQ_LAUNCHER LD_PRELOAD 2> /dev/null || true
count=200
np=${SCIMQ_TEST_NP:-4}

# check_job WHAT OUT: the consumer's JSON line and the summary line.
check_job() {
    line=$(grep '"tool":"scimq-mpi-recv"' "$2" | tail -n 1 || true)
    [ -n "$line" ] || { cat "$2" >&2; fail "$1: no scimq-mpi-recv line"; }
    echo "$line" > "$workdir/line.json"
    expect_eq "$1: messages" "$count" "$(json_get "$workdir/line.json" .messages)"
    expect_eq "$1: lost" 0 "$(json_get "$workdir/line.json" .lost)"
    expect_eq "$1: corrupt" 0 "$(json_get "$workdir/line.json" .corrupt)"
    sum=$(grep '^scimq-summary: ' "$2" | tail -n 1 | sed 's/^scimq-summary: //')
    [ -n "$sum" ] || { cat "$2" >&2; fail "$1: no scimq-summary line"; }
    echo "$sum" > "$workdir/sum.json"
    expect_eq "$1: summary acked" "$count" "$(json_get "$workdir/sum.json" .acked)"
    expect_eq "$1: summary in_flight" 0 "$(json_get "$workdir/sum.json" .in_flight)"
    echo "  $line"
    echo "  scimq-summary: $sum"
}

# --- PBS: syntax, then the workstation path (no PBS environment) ----------
for f in "$js"/pbs/*.pbs "$js"/slurm/*.sbatch "$js"/common.sh "$js"/workstation/run.sh; do
    bash -n "$f" || fail "bash -n $f"
done
ok "bash -n: PBS, Slurm, workstation scripts"
grep -q '^#PBS -l walltime=' "$js/pbs/gateway-in-job.pbs" || fail "no #PBS walltime"
ok "PBS directives present"

mkdir -p "$workdir/ws"
SCIMQ_JOB_DIR="$workdir/ws" bounded 120 bash "$js/workstation/run.sh" \
    --np "$np" --count "$count" --size 64KiB > "$workdir/ws.out" 2> "$workdir/ws.err" ||
    { cat "$workdir/ws.out" "$workdir/ws.err" >&2; fail "workstation run.sh"; }
check_job "workstation" "$workdir/ws.out"

# PBS gateway-in-job outside PBS: mpirun, the job's own gateway on loopback.
SCIMQ_JOB_DIR="$workdir/pbs" SCIMQ_QUEUE=pbsq SCIMQ_GATEWAY_LISTEN=127.0.0.1:0 \
    SCIMQ_LAUNCHER="mpirun -n $np --oversubscribe" SCIMQ_EXPECT=$count \
    SCIMQ_PRODUCER="$bindir/scimq-send --queue pbsq --synthetic --size 64KiB --count $count --close" \
    bounded 120 bash "$js/pbs/gateway-in-job.pbs" > "$workdir/pbs.out" 2> "$workdir/pbs.err" ||
    { cat "$workdir/pbs.out" "$workdir/pbs.err" >&2; fail "pbs/gateway-in-job.pbs"; }
check_job "pbs gateway-in-job (workstation path)" "$workdir/pbs.out"

# --- a local Slurm --------------------------------------------------------
host=$(hostname)
if ! getent hosts "$host" > /dev/null 2>&1; then
    # Without it slurmd and job code wait ~40 s on DNS.  Append only if absent.
    grep -qw "$host" /etc/hosts 2> /dev/null || echo "127.0.0.1 $host" >> /etc/hosts ||
        fail "$host does not resolve and cannot be added to /etc/hosts"
fi
sd="$workdir/slurm"
mkdir -p "$sd/munge" "$sd/state" "$sd/spool" "$sd/log" "$sd/jobs"
chmod 0711 "$sd/munge"
dd if=/dev/urandom of="$sd/munge.key" bs=1024 count=1 2> /dev/null
chmod 0400 "$sd/munge.key"
sock="$sd/munge/munge.socket"
munged -S "$sock" --key-file="$sd/munge.key" --pid-file="$sd/munged.pid" \
    --log-file="$sd/log/munged.log" --seed-file="$sd/munge.seed" --force ||
    fail "munged did not start"
i=0
while [ ! -s "$sd/munged.pid" ]; do
    i=$((i + 1)); [ "$i" -gt $((100 * mult)) ] && fail "munged pid file"; sleep 0.1
done
track "$(cat "$sd/munged.pid")"

# Free ports for slurmctld and slurmd (no clash with a site Slurm).
ports=$(python3 -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1",0)) for x in s]
print(" ".join(str(x.getsockname()[1]) for x in s))')
set -- $ports
cat > "$sd/slurm.conf" <<EOC
ClusterName=scimqtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$1
SlurmdPort=$2
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock
StateSaveLocation=$sd/state
SlurmdSpoolDir=$sd/spool/%n
SlurmctldPidFile=$sd/slurmctld.pid
SlurmdPidFile=$sd/slurmd.pid
SlurmctldLogFile=$sd/log/slurmctld.log
SlurmdLogFile=$sd/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$sd/log/jobcomp.txt
JobAcctGatherType=jobacct_gather/none
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=300
NodeName=$host NodeAddr=127.0.0.1 CPUs=$np State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOC
export SLURM_CONF="$sd/slurm.conf"
slurmctld -f "$SLURM_CONF" -i > "$sd/log/slurmctld.stderr" 2>&1 ||
    { cat "$sd/log/slurmctld.stderr" "$sd/log/slurmctld.log" >&2; fail "slurmctld"; }
i=0
while [ ! -s "$sd/slurmctld.pid" ]; do
    i=$((i + 1)); [ "$i" -gt $((100 * mult)) ] && fail "slurmctld pid file"; sleep 0.1
done
track "$(cat "$sd/slurmctld.pid")"
slurmd -f "$SLURM_CONF" > "$sd/log/slurmd.stderr" 2>&1 ||
    { cat "$sd/log/slurmd.stderr" "$sd/log/slurmd.log" >&2; fail "slurmd"; }
i=0
while [ ! -s "$sd/slurmd.pid" ]; do
    i=$((i + 1)); [ "$i" -gt $((100 * mult)) ] && fail "slurmd pid file"; sleep 0.1
done
track "$(cat "$sd/slurmd.pid")"
i=0
until sinfo -h -o '%T' 2> /dev/null | grep -q 'idle'; do
    i=$((i + 1))
    [ "$i" -gt $((300 * mult)) ] && { sinfo >&2; cat "$sd/log/slurmctld.log" >&2; fail "node not idle"; }
    sleep 0.1
done
ok "local Slurm up (slurmctld :$1, slurmd :$2)"

# wait_job ID SECONDS: polls scontrol (no sacct without accounting) until
# the job has ended; sets JOB_STATE.
wait_job() {
    i=0
    while :; do
        JOB_STATE=$(scontrol show job "$1" 2> /dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
        case $JOB_STATE in
        COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | PREEMPTED) return 0 ;;
        esac
        i=$((i + 1))
        if [ "$i" -gt $(($2 * 10 * mult)) ]; then
            scancel "$1" 2> /dev/null || true
            scontrol show job "$1" >&2 || true
            fail "job $1 did not finish in $2 s (state $JOB_STATE)"
        fi
        sleep 0.1
    done
}

# submit WHAT SCRIPT [sbatch options]: sets JOB_OUT.
submit() {
    what=$1 script=$2
    shift 2
    JOB_OUT="$sd/jobs/$what.out"
    id=$(cd "$sd/jobs" && sbatch --parsable -o "$JOB_OUT" -n "$np" -t 5 "$@" "$script") ||
        fail "$what: sbatch"
    wait_job "$id" 120
    [ "$JOB_STATE" = COMPLETED ] || { cat "$JOB_OUT" >&2; fail "$what: job $id $JOB_STATE"; }
    ok "$what: job $id $JOB_STATE"
}

# Deployment 2: the job starts its own gateway (and here, a producer).
SCIMQ_LAUNCHER="mpirun -n $np --oversubscribe" SCIMQ_EXPECT=$count SCIMQ_QUEUE=injob \
    SCIMQ_PRODUCER="$bindir/scimq-send --queue injob --synthetic --size 64KiB --count $count --close" \
    submit gateway-in-job "$js/slurm/gateway-in-job.sbatch"
check_job "slurm gateway-in-job" "$JOB_OUT"
grep -q '^scimq-gateway-exit: .*"exit_code":0' "$JOB_OUT" ||
    { cat "$JOB_OUT" >&2; fail "gateway-in-job: gateway exit line"; }
ok "gateway-in-job: the job stopped its gateway (exit_code 0)"

# Deployment 1: a gateway "on the login node" (here, this test), port file.
start_gateway --memory-limit 256MiB
"$bindir/scimqctl" queue create onlogin --guaranteed --ack-timeout 60 > /dev/null ||
    fail "queue create"
bounded 60 "$bindir/scimq-send" --queue onlogin --synthetic --size 64KiB \
    --count "$count" --close > "$workdir/send.json" || fail "scimq-send"
unset SCIMQ_URL
SCIMQ_LAUNCHER="mpirun -n $np --oversubscribe" SCIMQ_EXPECT=$count SCIMQ_QUEUE=onlogin \
    SCIMQ_PORT_FILE="$workdir/gateway.port" \
    submit gateway-on-login "$js/slurm/gateway-on-login.sbatch"
check_job "slurm gateway-on-login" "$JOB_OUT"

# The default launcher inside Slurm: srun --mpi=pmix (no SCIMQ_LAUNCHER).
srun --mpi=list > "$workdir/srun-mpi.txt" 2>&1 || true
grep -q pmix "$workdir/srun-mpi.txt" ||
    { cat "$workdir/srun-mpi.txt" >&2
      fail "srun has no pmix plugin: install the Debian package slurm-wlm-basic-plugins"; }
"$bindir/scimqctl" --url "$GW_URL" queue create srunq --guaranteed > /dev/null ||
    fail "queue create srunq"
SCIMQ_URL=$GW_URL bounded 60 "$bindir/scimq-send" --queue srunq --synthetic \
    --size 64KiB --count "$count" --close > "$workdir/send3.json" || fail "scimq-send"
SCIMQ_EXPECT=$count SCIMQ_QUEUE=srunq SCIMQ_PORT_FILE="$workdir/gateway.port" \
    submit gateway-on-login-srun "$js/slurm/gateway-on-login.sbatch"
check_job "slurm gateway-on-login (srun --mpi=pmix)" "$JOB_OUT"

# The PBS script through qsub (slurm-wlm-torque's wrapper): #PBS
# directives read, environment exported with -V.
"$bindir/scimqctl" --url "$GW_URL" queue create pbsq --guaranteed > /dev/null ||
    fail "queue create pbsq"
SCIMQ_URL=$GW_URL bounded 60 "$bindir/scimq-send" --queue pbsq --synthetic \
    --size 64KiB --count "$count" --close > "$workdir/send2.json" || fail "scimq-send"
JOB_OUT="$sd/jobs/qsub.out"
id=$(cd "$sd/jobs" && SCIMQ_LAUNCHER="mpirun -n $np --oversubscribe" \
    SCIMQ_EXPECT=$count SCIMQ_QUEUE=pbsq SCIMQ_PORT_FILE="$workdir/gateway.port" \
    bounded 30 qsub -V -o "$JOB_OUT" -l nodes=1:ppn=$np "$js/pbs/gateway-on-login.pbs" |
    tail -n 1 | tr -dc '0-9') || fail "qsub"
[ -n "$id" ] || fail "qsub: no job id"
wait_job "$id" 120
[ "$JOB_STATE" = COMPLETED ] || { cat "$JOB_OUT" >&2; fail "qsub: job $id $JOB_STATE"; }
ok "qsub pbs/gateway-on-login.pbs: job $id $JOB_STATE"
check_job "qsub gateway-on-login" "$JOB_OUT"

# Slurm's walltime warning: SIGTERM to the batch shell reaches the launcher.
# A consumer that never ends (no producer closes the queue); scancel
# --batch --signal=TERM is what --signal=B:TERM@120 does before the limit.
SCIMQ_URL=$GW_URL "$bindir/scimqctl" queue create forever --guaranteed > /dev/null || fail "queue create forever"
JOB_OUT="$sd/jobs/sigterm.out"
id=$(cd "$sd/jobs" && SCIMQ_LAUNCHER="mpirun -n $np --oversubscribe" SCIMQ_QUEUE=forever \
    SCIMQ_PORT_FILE="$workdir/gateway.port" \
    sbatch --parsable -o "$JOB_OUT" -n "$np" -t 5 "$js/slurm/gateway-on-login.sbatch") ||
    fail "sigterm: sbatch"
i=0
until grep -q '^scimq-url: ' "$JOB_OUT" 2> /dev/null; do
    i=$((i + 1)); [ "$i" -gt $((300 * mult)) ] && fail "sigterm job did not start"; sleep 0.1
done
# The ranks are up once their agent consumes from the queue.
(SCIMQ_URL=$GW_URL && export SCIMQ_URL &&
    wait_until 60 "sigterm: the job's agent never consumed" \
        stat_ge '.queues[] | select(.name=="forever") | .consumers' 1) || exit 1
sleep 1
scancel --batch --signal=TERM "$id" || fail "scancel --signal"
wait_job "$id" 60
grep -q 'SIGTERM: forwarding to launcher' "$JOB_OUT" ||
    { cat "$JOB_OUT" >&2; fail "sigterm: not forwarded"; }
grep -q '^scimq-summary: ' "$JOB_OUT" || { cat "$JOB_OUT" >&2; fail "sigterm: no summary"; }
# The ranks stopped asking, acknowledged and finalized: a clean end.
grep -q '"stopped":true' "$JOB_OUT" || { cat "$JOB_OUT" >&2; fail "sigterm: ranks did not stop cleanly"; }
expect_eq "sigterm: job state" COMPLETED "$JOB_STATE"
expect_eq "sigterm: left in flight" 0 \
    "$(SCIMQ_URL=$GW_URL gw_stat '.queues[] | select(.name=="forever") | .in_flight')"
ok "sigterm: forwarded to the launcher, ranks stopped cleanly, summary printed"
grep '^scimq-job: \|^scimq-summary' "$JOB_OUT" | sed 's/^/  /'
stop_gateway

# Stop the daemons (cleanup SIGKILLs whatever is left) by PID.
for f in slurmd slurmctld munged; do
    kill -TERM "$(cat "$sd/$f.pid")" 2> /dev/null || true
done
echo "PASS: $checks checks"
