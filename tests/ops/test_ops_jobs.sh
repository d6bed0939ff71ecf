#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Per-MPI-job figures (REPORT, opcode 40): a real mpirun job of 2 ranks
# (scimq-mpi-recv, one agent) consumes a known stream while its agent
# reports every 200 ms (SCIMQ_MPI_REPORT_MS).  While it runs STATS shows
# the job; after it, its final report: 2 ranks whose acknowledged counts
# add up to the stream, the libfabric provider in use, the pool; /metrics
# says the same in Prometheus series, and the live page (headless
# Chromium) shows the job and a row per rank.  A raw peer's REPORT of the
# test vector of doc/scimp.md is accepted in silence, and each malformed
# one gets an ERROR (SCIMQ_EPROTO_ARGS) while the connection, the job's
# figures and the gateway carry on.
. "$top_srcdir/tests/mpi/lib.sh"
. "$top_srcdir/tests/ops/lib.sh"
need chromium chromium
need python3 python3
count=${SCIMQ_TEST_OPS_JOBS_COUNT:-240}
job=ops-jobs-1
recv="$top_builddir/src/mpi/scimq-mpi-recv"

start_http_gateway --set gateway_http_cache_ms=0
fill_queue ops.jobs "$count"

# jq over STATS for our job
job_stat() {
    "$bindir/scimqctl" stats | jq -r --arg j "$job" \
        ".mpi_jobs[] | select(.job == \$j) | $1"
}

# --- While it runs: a report that is not final --------------------------------
# 50 ms per message on 2 ranks: about 6 s of work, 30 reports, so a poll
# every few hundred ms on a loaded machine still sees one.
np=2
export SCIMQ_MPI_REPORT_MS=200 SCIMQ_MPI_JOB_ID=$job SCIMQ_MPI_PROVIDER=shm
mpi_run 300 "$workdir/job.json" "$workdir/job.err" "$recv" \
    --queue ops.jobs --verify --expect "$count" --process-ms 50 &
job_pid=$!
unset SCIMQ_MPI_REPORT_MS SCIMQ_MPI_JOB_ID SCIMQ_MPI_PROVIDER
track "$job_pid"
wait_until 120 "no report from the running job" \
    sh -c "\"$bindir/scimqctl\" stats | jq -e --arg j $job \
        '.mpi_jobs[] | select(.job == \$j and .final == false and .acked > 0)' \
        > /dev/null"
ok "a report while the job runs (acked so far: $(job_stat .acked))"
expect_eq "running: ranks" 2 "$(job_stat .ranks)"
wait "$job_pid" || { tail -20 "$workdir/job.err" >&2; fail "the job failed"; }
expect_eq "job: verified" "$count" "$(json_get "$workdir/job.json" .verified)"
expect_eq "job: lost" 0 "$(json_get "$workdir/job.json" .lost)"

# --- After it: the final report ------------------------------------------------
wait_until 30 "no final report" sh -c "[ \"\$(\"$bindir/scimqctl\" stats | \
    jq -r --arg j $job '.mpi_jobs[] | select(.job == \$j) | .final')\" = true ]"
ok "the final report is kept after the job"
expect_eq "STATS: ranks" 2 "$(job_stat .ranks)"
expect_eq "STATS: agents" 1 "$(job_stat .agents)"
expect_eq "STATS: acked" "$count" "$(job_stat .acked)"
expect_eq "STATS: per-rank entries" 2 "$(job_stat '.agents_detail[0].ranks_detail | length')"
expect_eq "STATS: per-rank acked sum" "$count" \
    "$(job_stat '[.agents_detail[0].ranks_detail[].acked] | add')"
expect_eq "STATS: per-rank delivered sum" "$count" \
    "$(job_stat '[.agents_detail[0].ranks_detail[].delivered] | add')"
# Each rank's count is what the job itself says it processed.
for r in 0 1; do
    expect_eq "STATS: rank $r acked = its messages" \
        "$(json_get "$workdir/job.json" ".per_rank[$r].messages")" \
        "$(job_stat ".agents_detail[0].ranks_detail[] | select(.rank == $r) | .acked")"
done
expect_eq "STATS: provider" shm "$(job_stat '.agents_detail[0].provider')"
expect_eq "STATS: service times" "$count" "$(job_stat .service_us.count)"
[ "$(job_stat .service_us.p50_below)" -ge 1024 ] ||
    fail "median service time under 1 ms with 10 ms of work per message"
ok "service times: median below $(job_stat .service_us.p50_below) us, max $(job_stat .service_us.max) us"
pool=$(job_stat .pool_total)
[ "$pool" -gt 0 ] || fail "no pool size"
expect_eq "STATS: pool in use at the end" 0 "$(job_stat .pool_used)"
ok "pool of $pool bytes reported"

# --- /metrics ----------------------------------------------------------------
curl -sS -o "$workdir/metrics.txt" "$HTTP_URL/metrics" || fail "GET /metrics"
m() { grep -F "$1" "$workdir/metrics.txt" | awk '{print $NF}'; }
lbl="job=\"$job\",agent=\"0\""
expect_eq "metrics: agent info" 1 \
    "$(m "scimq_mpi_agent_info{$lbl,provider=\"shm\",final=\"true\"}")"
expect_eq "metrics: ranks" 2 "$(m "scimq_mpi_agent_ranks{$lbl}")"
expect_eq "metrics: per-rank acked sum" "$count" \
    "$(( $(m "scimq_mpi_rank_acked_total{$lbl,rank=\"0\"}") + \
         $(m "scimq_mpi_rank_acked_total{$lbl,rank=\"1\"}") ))"
expect_eq "metrics: service count" "$count" "$(m "scimq_mpi_service_seconds_count{$lbl}")"
expect_eq "metrics: service +Inf bucket" "$count" \
    "$(m "scimq_mpi_service_seconds_bucket{$lbl,le=\"+Inf\"}")"
expect_eq "metrics: pool" "$pool" "$(m "scimq_mpi_pool_bytes{$lbl}")"

# --- The live page ---------------------------------------------------------------
browse "$workdir/dom.html" --dump-dom
python3 - "$workdir/dom.html" "$job" > "$workdir/dom.rows" << 'PY'
import re, sys
dom, job = open(sys.argv[1]).read(), sys.argv[2]
def field(row, name):
    m = re.search(r'data-field="%s"(?: data-value="([^"]*)")?>([^<]*)<' % name, row)
    return (m.group(1) if m.group(1) is not None else m.group(2)) if m else ""
agents = re.findall(r'<tr data-job="%s" data-agent="0">(.*?)</tr>' % re.escape(job), dom, re.S)
ranks = re.findall(r'<tr data-job="%s" data-agent="0" data-rank="\d+">(.*?)</tr>' % re.escape(job), dom, re.S)
a = agents[0] if agents else ""
print(len(agents), field(a, "ranks"), field(a, "provider"), field(a, "acked"),
      field(a, "state"), len(ranks), sum(int(field(r, "acked") or 0) for r in ranks))
PY
read -r p_agents p_ranks p_provider p_acked p_state p_rankrows p_ranksum < "$workdir/dom.rows"
expect_eq "page: agent rows" 1 "$p_agents"
expect_eq "page: ranks" 2 "$p_ranks"
expect_eq "page: provider" shm "$p_provider"
expect_eq "page: acked" "$count" "$p_acked"
expect_eq "page: state" ended "$p_state"
expect_eq "page: rank rows" 2 "$p_rankrows"
expect_eq "page: per-rank acked sum" "$count" "$p_ranksum"

# --- A raw peer's REPORTs --------------------------------------------------------
bounded 60 python3 "$top_srcdir/tests/ops/report_peer.py" 127.0.0.1 "$GW_PORT" \
    > "$workdir/peer.json" 2> "$workdir/peer.err" ||
    { cat "$workdir/peer.err" >&2; fail "report_peer"; }
cat "$workdir/peer.json"
expect_eq "raw peer: the vector answered by nothing" true "$(json_get "$workdir/peer.json" .vector_quiet)"
expect_eq "raw peer: ERRORs" 7 "$(json_get "$workdir/peer.json" '.errors | length')"
expect_eq "raw peer: all SCIMQ_EPROTO_ARGS" 7 \
    "$(json_get "$workdir/peer.json" '[.errors[] | select(.[0] == -4013)] | length')"
expect_eq "raw peer: each named its rule" 7 \
    "$(json_get "$workdir/peer.json" '[.errors[] | select(.[1] | length > 10)] | length')"
expect_eq "raw peer: PONG after each" 8 "$(json_get "$workdir/peer.json" .pongs)"
json_get "$workdir/peer.json" '.errors[] | .[1]' | grep -q 'SCIMQ_REPORT_MAX_RANKS' ||
    fail "the 300-rank report's ERROR does not name the bound"
ok "the ERRORs say why ($(json_get "$workdir/peer.json" '.errors[2][1]'))"
# The vector's job is kept beside ours, ours unchanged; the gateway lives.
vjob() { "$bindir/scimqctl" stats | jq -r '.mpi_jobs[] | select(.job == "4242") | '"$1"; }
expect_eq "vector job: ranks" 2 "$(vjob .ranks)"
expect_eq "vector job: provider" shm "$(vjob '.providers[0]')"
expect_eq "vector job: acked" 7 "$(vjob .acked)"
expect_eq "vector job: median below" 1024 "$(vjob .service_us.p50_below)"
expect_eq "our job unchanged" "$count" "$(job_stat .acked)"
stop_gateway
echo "$checks checks passed"
