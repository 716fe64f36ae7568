"""Shared fixtures."""

from __future__ import annotations

import difflib
import itertools
from pathlib import Path

import pytest
from helpers import write_fasta
from oracle import cli_args, oracle_run

from hspz.cli import main

Records = list[tuple[str, bytes]]


def _describe(got: dict[str, bytes], expected: dict[str, bytes]) -> str:
    """A unified diff per differing file, hspZ (got) against the oracle (expected)."""
    parts = []
    for name in sorted(set(got) | set(expected)):
        a = expected.get(name, b"").decode().splitlines(keepends=True)
        b = got.get(name, b"").decode().splitlines(keepends=True)
        if a != b:
            parts.append("".join(difflib.unified_diff(a, b, f"oracle/{name}", f"hspZ/{name}")))
    return "\n".join(parts)


class EngineCase:
    """Runs one input pair through `hspZ run` and through the oracle, under tmp_path."""

    def __init__(self, tmp_path: Path):
        self.tmp_path = tmp_path
        self.counter = itertools.count(1)

    def outputs(self, ref: Records, qry: Records, **options):
        """(hspZ files, oracle files) as {file name: bytes}."""
        case = self.tmp_path / f"case{next(self.counter)}"
        case.mkdir()
        # 70 bases a line and a description, so line joining and names are exercised too
        write_fasta(case / "ref.fa", ref, width=70, description="some description")
        write_fasta(case / "qry.fa", qry, width=70, description="some description")
        out = case / "out"
        argv = ["run", "-r", str(case / "ref.fa"), "-q", str(case / "qry.fa"), "-o", str(out)]
        assert main(argv + cli_args(**options)) == 0
        got = {p.name: p.read_bytes() for p in sorted(out.glob("*.segments"))}
        return got, oracle_run(case / "ref.fa", case / "qry.fa", **options)

    def __call__(self, ref: Records, qry: Records, **options) -> dict[str, bytes]:
        """The segments files, after asserting hspZ and the oracle agree byte for byte."""
        got, expected = self.outputs(ref, qry, **options)
        assert got == expected, _describe(got, expected)
        return got


@pytest.fixture
def engine(tmp_path: Path) -> EngineCase:
    """``engine(ref_records, query_records, **oracle_options)`` -> agreed segments files."""
    return EngineCase(tmp_path)


# ---- the refusal catalogues' directories (tests/catalogues; run per command by
# tests/test_refusals_<command>.py)


@pytest.fixture
def case_dir(tmp_path: Path) -> Path:
    """A valid reference and query for a bad-input case to spoil (`catalogues.inputs`)."""
    from catalogues import inputs

    return inputs.make_case_dir(tmp_path)


@pytest.fixture(scope="session")
def frozen_files(tmp_path_factory) -> Path:
    """The multibin pair's manifest, plans and results, made once (`catalogues.frozen`);
    each case copies what it spoils."""
    from catalogues import frozen as catalogue

    return catalogue.build(tmp_path_factory.mktemp("frozen"))


@pytest.fixture(scope="session")
def outputs_dir(tmp_path_factory) -> Path:
    """The output catalogue's case directory, made once (`catalogues.outputs`); every case
    checks that it leaves it unchanged."""
    from catalogues import outputs

    return outputs.build(tmp_path_factory.mktemp("refusals"))


@pytest.fixture
def flag_inputs(tmp_path: Path) -> Path:
    """The pair and a few broken inputs for the bad-flag cases (`catalogues.flags`)."""
    from catalogues import flags

    return flags.build(tmp_path)


@pytest.fixture(scope="session")
def multibin_run(tmp_path_factory):
    """A CPU run of the multibin pair (tests/multibin.py) with its manifest, made once:
    (folder, reference, query, manifest); the segments files are in `folder / "out"`."""
    from multibin import FLAGS, write_pair

    from hspz.formats.frozen import read_manifest

    d = tmp_path_factory.mktemp("plots")
    ref, qry = write_pair(d)
    assert (
        main(
            [
                "run",
                "-r",
                str(ref),
                "-q",
                str(qry),
                "-o",
                str(d / "out"),
                *FLAGS,
                "--backend",
                "cpu",
                "--dump-manifest",
                str(d / "manifest.txt"),
            ]
        )
        == 0
    )
    return d, ref, qry, read_manifest(d / "manifest.txt")
