"""The catalogue of bad flag values: every bad flag value, knob or input is one `hspZ: ...`
line on stderr, exit status 2, and nothing written (docs/commands.md, "The rules every flag
follows").  `RUN_CASES` are `run`'s, `OTHER_CASES` the other commands' (the first word of
their argv); `tests/test_refusals_<command>.py` runs each command's cases."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest
from multibin import write_pair

from hspz.cli import main


def build(tmp_path: Path) -> Path:
    """`tmp_path` with the pair and a few broken inputs (the `flag_inputs` fixture)."""
    ref, qry = write_pair(tmp_path)
    (tmp_path / "empty.fa").write_bytes(b"")
    (tmp_path / "noname.fa").write_bytes(b">\nACGTACGTACGTACGTACGTACGT\n")
    full = gzip.compress(qry.read_bytes())
    (tmp_path / "truncated.fa.gz").write_bytes(full[: len(full) // 2])
    (tmp_path / "corrupt.2bit").write_bytes(b"\x43\x27\x41\x1a" + b"\x00" * 4 + b"\xff" * 40)
    (tmp_path / "a_file").write_text("not a directory\n")
    (tmp_path / "a_dir").mkdir()
    return tmp_path


RUN = ["run", "-r", "{d}/ref.fa", "-q", "{d}/qry.fa", "-o", "{d}/out", "--backend", "cpu"]

RUN_CASES = [
    (["-C", "0"], {}, r"--wga-chunk-size: '0' must be at least 1"),
    (["--seed", "1101"], {}, r"--seed: '1101' has 3 care positions"),
    (["--gpus", "0"], {}, r"--gpus: 0 must be at least 1"),
    (["--backend", "tpu"], {}, r"--backend: 'tpu' must be one of"),
    (["-S", "sideways"], {}, r"--strand: 'sideways' must be one of"),
    (["-m", "-5"], {}, r"--max-hits: '-5' is not a size"),
    (["-B", "0", "--kegalign-bins"], {}, r"-B 0 .* cannot be combined with --kegalign-bins"),
    (["--frobnicate"], {}, r"unrecognized arguments: --frobnicate"),
    ([], {"HSPZ_UNIT_PARTITION": "2"}, r"HSPZ_UNIT_PARTITION=2 is not one of"),
    ([], {"HSPZ_REF_BUCKETS": "maybe"}, r"HSPZ_REF_BUCKETS=maybe is not one of"),
    (["-r", "{d}/missing.fa"], {}, r"cannot read .*missing\.fa"),
    (["-r", "{d}/a_dir"], {}, r"cannot read .*a_dir"),
    (["-o", "{d}/a_file/sub"], {}, r"--output: .*a_file is not a directory"),
    (["-q", "{d}/empty.fa"], {}, r"empty\.fa: empty file"),
    (["-q", "{d}/truncated.fa.gz"], {}, r"truncated\.fa\.gz: truncated gzip"),
    (["-r", "{d}/corrupt.2bit"], {}, r"corrupt\.2bit: .*2bit"),
    (["-q", "{d}/noname.fa"], {}, r"noname\.fa: line 1: FASTA header has an empty name"),
    # both sides are read at once; a bad reference is still the one reported
    (["-r", "{d}/corrupt.2bit", "-q", "{d}/empty.fa"], {}, r"corrupt\.2bit: .*2bit"),
    # --backend auto (where CuPy imports, CUDA starts on a thread while reading; here, without
    # CuPy, the CPU is chosen): bad input is still one line
    (["--backend", "auto", "-q", "{d}/empty.fa"], {}, r"empty\.fa: empty file"),
    (["--dump-manifest", "{d}/a_dir"], {}, r"--dump-manifest: .*a_dir is a directory"),
    (["-Z", "{d}/a_dir"], {}, r"--tarball: .*a_dir is a directory"),
    (["--from-manifest", "{d}/missing.txt"], {}, r"cannot read .*missing\.txt"),
    (["--from-manifest", "{d}/ref.fa"], {}, r"ref\.fa: not an hspZ manifest"),
]


OTHER_CASES = [
    (
        ["hits-estimate", "-r", "{d}/ref.fa", "-q", "{d}/qry.fa", "--stride", "0"],
        r"--stride: 0 must be at least 1",
    ),
    (
        ["hits-estimate", "-r", "{d}/ref.fa", "-q", "{d}/qry.fa", "-I", "0"],
        r"--lastz-interval-size: '0' must be at least 1",
    ),
    (
        ["plan", "-r", "{d}/ref.fa", "-q", "{d}/qry.fa", "-o", "{d}/a_dir"],
        r"--output: .*a_dir is a directory",
    ),
    (["plan", "-r", "{d}/ref.fa", "-o", "{d}/plan.txt"], r"--query is required"),
    (
        ["work", "--plan", "{d}/missing.txt", "--worker", "0", "-o", "{d}/r"],
        r"cannot read .*missing\.txt",
    ),
    (
        ["work", "--plan", "{d}/ref.fa", "--worker", "x", "-o", "{d}/r"],
        r"--worker: 'x' is not an integer",
    ),
    (
        ["merge", "--plan", "{d}/ref.fa", "-o", "{d}/out", "{d}/qry.fa"],
        r"ref\.fa: not an hspZ plan file",
    ),
]


def run_params() -> list:
    """`run`'s cases, as pytest parameters (extra, env, message) named by their flags."""
    return [pytest.param(*c, id=str(c[0] or c[1])) for c in RUN_CASES]


def other_params(command: str) -> list:
    """`command`'s cases, as pytest parameters (argv, message)."""
    return [
        pytest.param(argv, message, id=f"{command}{k}")
        for k, (argv, message) in enumerate(c for c in OTHER_CASES if c[0][0] == command)
    ]


def check_run(inputs: Path, capfd, monkeypatch, extra: list[str], env: dict, message: str) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    before = sorted(p.name for p in inputs.iterdir())
    argv = [a.format(d=inputs) for a in RUN + extra]
    assert main(argv) == 2
    out, err = capfd.readouterr()
    assert out == ""
    assert len(err.splitlines()) == 1 and err.startswith("hspZ: "), err
    assert re.search(message, err), err
    assert sorted(p.name for p in inputs.iterdir()) == before


def check_other(inputs: Path, capfd, argv: list[str], message: str) -> None:
    before = sorted(p.name for p in inputs.iterdir())
    assert main([a.format(d=inputs) for a in argv]) == 2
    out, err = capfd.readouterr()
    assert len(err.splitlines()) == 1 and re.search(message, err), err
    assert sorted(p.name for p in inputs.iterdir()) == before


def unwritable_output_is_one_line_exit_1(inputs: Path, capfd, gpus: str) -> None:
    """A write that fails while the run publishes its files (here a folder sits where one of
    its segments files goes) is one line naming OUT, exit status 1, and OUT keeps exactly what
    was there: the publish fails before its journal, so nothing has moved."""
    argv = [a.format(d=inputs) for a in RUN] + ["--gpus", gpus, "-B", "4000"]
    assert main(argv) == 0
    out = inputs / "out"
    name = sorted(p.name for p in out.iterdir())[0]
    for p in out.iterdir():
        p.unlink()
    (out / name).mkdir()
    (out / name / "mine").write_text("kept\n")
    capfd.readouterr()
    assert main(argv) == 1
    err = [
        line
        for line in capfd.readouterr().err.splitlines()
        if not line.startswith(("schedule:", "progress:", "note:", "#"))
    ]
    assert err == [f"hspZ: cannot write the output in {out}: {name} is a directory"], err
    assert [p.name for p in out.iterdir()] == [name]
    assert [p.name for p in (out / name).iterdir()] == ["mine"]
