#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Replays the committed fuzz corpus through the decoder driver (any compiler).
set -eu
corpus="$top_srcdir/tests/fuzz/corpus"
count=$(ls "$corpus" | wc -l)
if [ "$count" -lt 10 ]; then
    echo "corpus has only $count inputs" >&2
    exit 1
fi
out=$("$top_builddir/tests/fuzz/replay_decoder" "$corpus")
echo "$out"
# Every file must have been replayed (the driver aborts on a failed oracle).
[ "$out" = "replayed $count inputs" ]
