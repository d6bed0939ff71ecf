#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The PIV example end to end: a gateway, queues piv.frames and piv.results,
# piv-results waiting for the fields, piv-process on 4 ranks consuming the
# frames, and piv-camera sending 20 image pairs of 1024x1024 uint16 pixels
# (4 MiB per message) of particles in a Lamb-Oseen vortex, then closing the
# frames queue.  The camera frames the run with a header (image size,
# interrogation window 64 px: not piv-process's default of 32) and an end
# of series, control messages that every rank must see once: each rank
# then works with the header's window.  Every frame must come back once,
# with an RMS displacement error below 0.1 px away from the border, and
# the ranks must end cleanly at end of stream.
. "$top_srcdir/tests/mpi/lib.sh"
frames=${SCIMQ_TEST_PIV_FRAMES:-20}
size=${SCIMQ_TEST_PIV_SIZE:-1024x1024}
pivdir="$top_builddir/examples/piv"
for p in piv-camera piv-process piv-results; do
    [ -x "$pivdir/$p" ] || fail "$pivdir/$p not built"
done
# A message is two W x H uint16 images and a small meta block.
export SCIMQ_MPI_MAX_MESSAGE=8MiB

start_gateway --memory-limit 1GiB
for q in piv.frames piv.results; do
    "$bindir/scimqctl" queue create "$q" --guaranteed --ack-timeout 60 \
        > /dev/null || fail "queue create $q"
done

bounded 180 "$pivdir/piv-results" --queue piv.results --frames "$frames" \
    --timeout 60 --verbose \
    > "$workdir/results.json" 2> "$workdir/results.err" &
RES_PID=$!
track "$RES_PID"

SCIMQ_QUEUE=piv.frames bounded 180 env "$san_env" "$MPIEXEC" -n "$np" \
    --oversubscribe "$pivdir/piv-process" --results-queue piv.results \
    > "$workdir/process.json" 2> "$workdir/process.err" &
PROC_PID=$!
track "$PROC_PID"

bounded 120 "$pivdir/piv-camera" --queue piv.frames --frames "$frames" \
    --size "$size" --seed 7 --window 64 --overlap 50 --close \
    > "$workdir/camera.json" 2> "$workdir/camera.err" ||
    { cat "$workdir/camera.err" >&2; fail "piv-camera"; }
expect_eq "camera: frames sent" "$frames" \
    "$(json_get "$workdir/camera.json" .frames)"
expect_eq "camera: run header and end sent" 2 \
    "$(json_get "$workdir/camera.json" .control)"

wait "$PROC_PID" ||
    { cat "$workdir/process.json" "$workdir/process.err" >&2;
      fail "piv-process"; }
ok "piv-process ended at end of stream"
expect_eq "process: frames" "$frames" \
    "$(json_get "$workdir/process.json" .frames)"
expect_eq "process: errors" 0 "$(json_get "$workdir/process.json" .errors)"
expect_eq "process: run headers, one per rank" "$np" \
    "$(json_get "$workdir/process.json" .run_headers)"
expect_eq "process: run ends, one per rank" "$np" \
    "$(json_get "$workdir/process.json" .run_ends)"
expect_eq "process: pairs in the run, as its end says" "$frames" \
    "$(json_get "$workdir/process.json" .run_frames)"
expect_eq "process: the header's window" 64 \
    "$(json_get "$workdir/process.json" .window)"
expect_eq "process: the header's step (50 % overlap)" 32 \
    "$(json_get "$workdir/process.json" .step)"

res_rc=0
wait "$RES_PID" || res_rc=$?
cat "$workdir/results.json"
[ -s "$workdir/results.json" ] ||
    { cat "$workdir/results.err" >&2; fail "piv-results printed nothing"; }
expect_eq "results: frames" "$frames" \
    "$(json_get "$workdir/results.json" .frames)"
expect_eq "results: missing" 0 "$(json_get "$workdir/results.json" .missing)"
expect_eq "results: duplicates" 0 \
    "$(json_get "$workdir/results.json" .duplicates)"
rms=$(json_get "$workdir/results.json" .rms_px.max)
awk -v r="$rms" 'BEGIN { exit !(r < 0.1) }' ||
    { cat "$workdir/results.err" >&2; fail "RMS error $rms px >= 0.1 px"; }
ok "worst RMS error $rms px < 0.1 px"
expect_eq "results: exit status" 0 "$res_rc"
expect_eq "results queue drained" 0 \
    "$(gw_stat '.queues[] | select(.name=="piv.results") | .ready')"

stop_gateway
echo "$checks checks passed"
