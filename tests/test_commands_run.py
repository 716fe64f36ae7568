"""What a newcomer hits first on `hspZ run` (issue 25 item 8): a wrong --reference beside
--index is refused before any engine runs when its names or lengths differ, and a run without
-o is an error, not a run into the current folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from helpers import random_dna, write_fasta

BIN = Path(sys.executable).parent


def hspz(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "hspZ"), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"},
    )


def pair(folder: Path) -> None:
    ref = random_dna(np.random.default_rng(3), 20000)
    write_fasta(folder / "ref.fa", [("c1", ref)])
    write_fasta(folder / "short.fa", [("c1", ref[:19000])])
    write_fasta(folder / "renamed.fa", [("c2", ref)])
    qry = ref[2000:9000].copy()
    qry[::50] = ord("A")
    write_fasta(folder / "q.fa", [("q", qry)])


def test_a_reference_unlike_the_index_is_refused_before_the_engine_runs(tmp_path: Path):
    pair(tmp_path)
    assert (
        hspz("index", "-r", "ref.fa", "--index", "ix", "--backend", "cpu", cwd=tmp_path).returncode
        == 0
    )
    for other, why in (
        ("short.fa", "'c1' (19000 bp) here, 'c1' (20000 bp) in the index"),
        ("renamed.fa", "'c2' (20000 bp) here, 'c1' (20000 bp) in the index"),
    ):
        done = hspz(
            "run",
            "--index",
            "ix",
            "-r",
            other,
            "-q",
            "q.fa",
            "-o",
            "out",
            "--backend",
            "cpu",
            "--time",
            cwd=tmp_path,
        )
        assert done.returncode == 2, done.stderr
        assert why in done.stderr.splitlines()[-1], done.stderr
        # no unit ran: neither progress nor a ledger row, nothing in OUT
        assert "progress:" not in done.stderr and "unit ledger:" not in done.stderr, done.stderr
        assert not (tmp_path / "out").exists()


def test_run_without_output_is_an_error(tmp_path: Path) -> None:
    pair(tmp_path)
    done = hspz("run", "-r", "ref.fa", "-q", "q.fa", "--backend", "cpu", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "hspZ: --output: give the folder the segments files go to "
        "(-o OUT); hspZ run never writes into the current folder "
        "unasked"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "q.fa",
        "ref.fa",
        "renamed.fa",
        "short.fa",
    ]
    assert (
        hspz("run", "-r", "ref.fa", "-q", "q.fa", "--backend", "cpu", "-u", cwd=tmp_path).returncode
        == 0
    )  # -u writes nothing: no -o needed
