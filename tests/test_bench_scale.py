"""Smoke test of bench/bench_scale.py (the scale benchmark) at 500 chunks: it drives the
real hooks end to end and prints every row of its target table. Numbers are not checked
(no wall-clock assertions); that every file ingested, every deleted file and the deleted KB left
nothing behind is (the script's exit status)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("numpy")

ROOT = Path(__file__).resolve().parent.parent
ROWS = ("plugin RSS", "first query after a restart", "longest loop stall during it", "keyword top-10 p95",
        "hybrid retrieve, engine-added p95", "ingest: plugin's share of wall", "delete one file", "delete the KB")


def test_bench_scale_prints_every_target_row_and_leaves_nothing_behind(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_scale.py"), "--sizes", "300,500", "--state-dir",
         str(tmp_path), "--queries", "6", "--delete-files", "2", "--sample-files", "2",
         "--embed-latency-ms", "0", "--call-latency-ms", "0"],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    table = proc.stdout[proc.stdout.index("| row | target | 300 | 500 |"):]
    for row in ROWS:
        assert f"| {row}" in table or f"|   {row}" in table, row
    assert "left 0 vectors / 0 keys" in table
    assert "growth (each size over the one before):" in table
