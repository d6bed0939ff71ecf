#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A journal on a full disk (a 3 MiB tmpfs): PUTs into a sync queue are
# confirmed while the journal has room and refused (ERROR ENOSPC, no
# PUT_OK) once it has none; after a SIGKILL and a restart on the same
# journal every confirmed message is delivered, verified.  Refused ones
# may be gone (they were never confirmed).
. "$top_srcdir/tests/integration/lib.sh"
journal="$workdir/journal"
small_disk "$journal" 3M "mounts a small tmpfs for a full journal device"

start_gateway --journal-dir "$journal" --durability sync --disk-limit 1GiB
"$bindir/scimqctl" queue create full --guaranteed > /dev/null || fail "create"
: > "$workdir/confirmed"
refused=0
i=0
while [ "$i" -lt 12 ]; do
    if bounded 60 "$bindir/scimq-send" --queue full --synthetic \
        --size 512KiB --count 1 --first-seq "$i" > "$workdir/send.json" \
        2> "$workdir/send.err"; then
        echo "$i" >> "$workdir/confirmed"
    else
        grep -q ENOSPC "$workdir/send.err" "$workdir/send.json" ||
            { cat "$workdir/send.err" >&2; fail "message $i refused, but not for ENOSPC"; }
        refused=$((refused + 1))
    fi
    i=$((i + 1))
done
confirmed=$(wc -l < "$workdir/confirmed")
[ "$confirmed" -ge 2 ] || fail "only $confirmed messages confirmed before the disk was full"
[ "$refused" -ge 2 ] || fail "only $refused messages refused on a full disk"
ok "$confirmed confirmed, $refused refused (ENOSPC)"
[ "$(gw_stat .journal.append_errors)" -ge "$refused" ] ||
    fail "$(gw_stat .journal.append_errors) append errors counted for $refused refusals"
ok "append errors counted"
kill -KILL "$GW_PID"
wait "$GW_PID" 2> /dev/null || true

start_gateway --journal-dir "$journal" --durability sync --disk-limit 1GiB
got=$(gw_stat .journal.recovered.messages)
[ "$got" -ge "$confirmed" ] || fail "recovered $got of $confirmed confirmed messages"
ok "recovered $got messages ($confirmed confirmed)"
"$bindir/scimqctl" queue close full > /dev/null || fail "close"
bounded 120 "$bindir/scimq-recv" --queue full --verify --until-eos \
    --seq-log "$workdir/seqs" > "$workdir/recv.json" || fail "consumer"
expect_eq "corrupt" 0 "$(json_get "$workdir/recv.json" .corrupt)"
missing=0
for s in $(cat "$workdir/confirmed"); do
    grep -qx "$s" "$workdir/seqs" || missing=$((missing + 1))
done
expect_eq "confirmed messages lost" 0 "$missing"
stop_gateway
unmount_small_disk
echo "$checks checks passed"
