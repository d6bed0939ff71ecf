# SPDX-License-Identifier: BSD-3-Clause
"""bench/plot on known trials: one PNG and one SVG per bench and unit, the
cases on the axis, the ratio of the medians measured / reference above
each case, and a line without a required field refused."""

import json
import os
import re
import subprocess

PLOT = os.path.join(os.environ.get("SCIMQ_TEST_SRCDIR", "."), "bench",
                    "plot")


def trials(bench, case, series, ref, values, unit="MiB/s"):
    return [{"bench": bench, "case": case, "trial": t + 1, "value": v,
             "unit": unit, "reference": ref, "series": series}
            for t, v in enumerate(values)]


def run(tmp_path, lines):
    src = tmp_path / "trials.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in lines))
    out = tmp_path / "plots"
    return subprocess.run([PLOT, "-o", str(out), str(src)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=120, check=False), out


def test_box_plots_with_reference_and_ratio(tmp_path):
    lines = (trials("demo", "16MiB K=4", "new", False, [140, 150, 160, 155,
                                                          145])
             + trials("demo", "16MiB K=4", "iperf3", True, [90, 100, 110])
             + trials("demo", "1MiB K=1", "new", False, [50, 60, 70])
             + trials("demo", "1MiB K=1", "iperf3", True, [200, 200, 200])
             + trials("demo", "16MiB K=4", "new", False, [0.5, 0.7],
                      unit="CPU s/GiB"))
    p, out = run(tmp_path, lines)
    assert p.returncode == 0, p.stderr.decode()
    made = sorted(os.listdir(out))
    assert made == ["demo-CPU-s-GiB.png", "demo-CPU-s-GiB.svg",
                    "demo-MiB-s.png", "demo-MiB-s.svg"]
    with open(out / "demo-MiB-s.png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    svg = (out / "demo-MiB-s.svg").read_text()
    # Medians 150 / 100 and 60 / 200, above their cases.
    assert "1.50x" in svg and "0.30x" in svg
    assert "16MiB K=4" in svg and "1MiB K=1" in svg
    assert "iperf3" in svg and "new" in svg
    # No reference in that unit: no ratio.
    assert re.search(r"\d\.\d\dx<", svg)
    assert not re.search(r"\d\.\d\dx<",
                         (out / "demo-CPU-s-GiB.svg").read_text())


def test_line_without_a_field_is_refused(tmp_path):
    bad = trials("demo", "c", "s", False, [1.0])
    del bad[0]["unit"]
    p, out = run(tmp_path, bad)
    assert p.returncode != 0
    assert b"no unit" in p.stderr
    assert not out.exists() or not os.listdir(out)
