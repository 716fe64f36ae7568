"""The one driver (issue 26): `hspz.run.driver.drive` names the stages in order, every run goes
through it (one query, a query list's N jobs, the library's `drive_given`), nothing else runs the
execute stage, and cli.py only parses and builds the request."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from helpers import random_dna, write_fasta

import hspz
from hspz.core.options import Options
from hspz.engine import cpu
from hspz.planning.inputs import read_inputs
from hspz.run.driver import drive_given

PACKAGE = Path(hspz.__file__).parent
STAGES = [
    "read",
    "freeze",
    "count_only",
    "schedule",
    "workers",
    "ready",
    "execution",
    "report",
    "publish",
]


def _function(path: Path, name: str) -> ast.FunctionDef:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)


def test_the_drivers_body_calls_the_stages_in_order():
    body = _function(PACKAGE / "run" / "driver.py", "drive")
    calls = [
        (n.lineno, n.col_offset, n.func.attr)
        for n in ast.walk(body)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and isinstance(n.func.value, ast.Name)
        and n.func.value.id == "work"
    ]
    assert [name for *_, name in sorted(calls)] == STAGES
    assert any(
        isinstance(n, ast.Call) and getattr(n.func, "id", "") == "execute" for n in ast.walk(body)
    )


def test_only_the_driver_runs_the_execute_stage():
    """`execute.run` and the copies in commands/run and commands/query_list are gone: no other
    module imports `execute` (merge replays through `Emitters`, not the workers)."""
    users = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "hspz.run.execute":
                if "execute" in [a.name for a in node.names]:
                    users.append(path.relative_to(PACKAGE).as_posix())
            if (
                isinstance(node, ast.Attribute)
                and node.attr == "run"
                and getattr(node.value, "id", "") == "execute"
            ):
                users.append(f"{path.name}: execute.run")
    assert users == ["run/driver.py"]


def test_cli_takes_no_lock_and_starts_no_backend():
    text = (PACKAGE / "cli.py").read_text(encoding="utf-8")
    for orchestration in (
        "OutLock",
        "backends.warm",
        "run_command",
        "query_list_command",
        ".join()",
    ):
        assert orchestration not in text


def test_the_library_run_and_hspz_run_write_the_same_bytes(tmp_path: Path):
    """`drive_given` (compare, benchmark) and `hspZ run` are one driver: same segments files,
    same digest."""
    rng = np.random.default_rng(11)
    ref = random_dna(rng, 12000)
    qry = ref[1000:7000].copy()
    qry[::40] = ord("C")
    write_fasta(tmp_path / "ref.fa", [("r1", ref)])
    write_fasta(tmp_path / "qry.fa", [("q1", qry)])
    options = Options(backend="cpu")
    summary = drive_given(
        options,
        read_inputs(options, str(tmp_path / "ref.fa"), str(tmp_path / "qry.fa")),
        tmp_path / "lib",
        cpu.BACKEND,
    )
    bin_dir = Path(sys.executable).parent
    done = subprocess.run(
        [
            str(bin_dir / "hspZ"),
            "run",
            "-r",
            "ref.fa",
            "-q",
            "qry.fa",
            "-o",
            "cli",
            "--backend",
            "cpu",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"digest: {summary.digest}\n"
    assert summary.hsps > 0
    lib = {p.name: p.read_bytes() for p in (tmp_path / "lib").iterdir()}
    cli = {
        p.name: p.read_bytes() for p in (tmp_path / "cli").iterdir() if not p.name.startswith(".")
    }
    assert lib == cli
