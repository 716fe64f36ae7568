"""benchmarks/run.py runs every arm on a small simulated workload and writes one agreeing table."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_runner_times_every_arm_and_the_hspz_backends_agree(tmp_path):
    cmd = [sys.executable, str(ROOT / "benchmarks" / "run.py"), "tiny", "--repeat", "1",
           "--no-gpu", "--threads", "2", "--workdir", str(tmp_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ")]
    names = [r.split("|")[1].strip() for r in rows[1:]]
    assert names[:2] == ["hspZ cpu -t 1", "hspZ cpu -t 2"]
    if shutil.which("lastz"):
        assert names[2:] == ["lastz --nogapped", "lastz x2 query pieces"]
    hits = {r.split("|")[6].strip() for r in rows[1:3]}
    assert len(hits) == 1 and int(hits.pop()) > 0  # both hspZ arms counted the same hits
