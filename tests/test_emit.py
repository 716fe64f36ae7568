"""The emitter: ordinal replay whatever the arrival order, refusals of duplicate, out-of-plan and
missing units, and byte-reproducible `-Z` archives."""

from __future__ import annotations

import gzip
import io
import itertools
import tarfile

import numpy as np
import pytest

from hspz.core.errors import RunError
from hspz.engine.contract import UnitResult
from hspz.io.packing import table_from
from hspz.planning.bins import Plan
from hspz.run.emit import Emitter
from hspz.stages.hsp import HSP_DTYPE

PLAN = Plan(((0,), (1, 2)), ((0,), (1,), (2,)))  # 2 reference bins x 3 query bins


def tables(side: str, b: int, strand: str):
    names = ["r0", "r1", "r2"] if side == "reference" else ["q0", "q1", "q2"]
    bins = PLAN.ref_bins if side == "reference" else PLAN.query_bins
    return table_from([names[i] for i in bins[b]], [500] * len(bins[b]), "", strand)


def result(ordinal: int, seed: int = 0) -> UnitResult:
    rng = np.random.default_rng(ordinal + 10 * seed)
    r, q = divmod(ordinal, 3)
    out = UnitResult(ordinal, r, q, seeds=ordinal + 1, hits=2 * ordinal, raw_hsps=ordinal, hsps=0)
    for n in (1, 2):
        for strand in ("plus", "minus"):
            k = int(rng.integers(0, 4)) if ordinal != 4 else 0  # unit 4 writes nothing
            h = np.zeros(k, HSP_DTYPE)
            h["ref_start"] = rng.integers(0, 400, k)
            h["query_start"] = rng.integers(0, 400, k)
            h["len"] = rng.integers(10, 90, k)
            h["score"] = rng.integers(3000, 9000, k)
            out.segments.append((n, strand, h))
            out.hsps += k
    return out


def emit(tmp_path, order, name="out", tarball=None) -> tuple[str, dict[str, bytes]]:
    out = tmp_path / name
    e = Emitter(PLAN.units, tables, out, tarball)
    for o in order:
        e.add(result(o))
    digest = e.finish()
    if tarball is not None:  # OUT held only the stage: it is gone again
        assert not out.exists()
        return digest, {}
    return digest, {p.name: p.read_bytes() for p in sorted(out.iterdir())}


def test_arrival_order_never_changes_the_files(tmp_path):
    base = emit(tmp_path, range(6), "a")
    for i, order in enumerate([[5, 4, 3, 2, 1, 0], [3, 0, 5, 1, 4, 2]]):
        assert emit(tmp_path, order, f"b{i}") == base


def test_files_follow_the_naming_and_minus_lists_are_reversed(tmp_path):
    _, files = emit(tmp_path, range(6))
    assert not any(".block1.r1." in n for n in files)  # unit 4 (r1, q1) is empty: no file
    r = result(0)
    n, strand, h = next(s for s in r.segments if s[1] == "minus" and len(s[2]) > 1)
    text = files[f"tmp{n}.block0.r0.minus.segments"].decode().splitlines()
    starts = [int(line.split("\t")[1]) - 1 for line in text]
    assert starts == h["ref_start"][::-1].tolist()


@pytest.mark.parametrize(
    "bad, message",
    [
        (lambda: result(6), "not in the plan"),
        (lambda: UnitResult(2, 1, 0), "arrived as R1 Q0"),
    ],
)
def test_out_of_plan_units_are_refused(tmp_path, bad, message):
    e = Emitter(PLAN.units, tables, tmp_path / "out")
    with pytest.raises(RunError, match=message):
        e.add(bad())


@pytest.mark.parametrize("first", [0, 3])  # already written, or still waiting in order
def test_a_duplicate_unit_is_refused(tmp_path, first):
    e = Emitter(PLAN.units, tables, tmp_path / "out")
    e.add(result(first))
    with pytest.raises(RunError, match=f"unit {first} arrived twice"):
        e.add(result(first, seed=1))


def test_a_missing_unit_fails_the_run_and_leaves_nothing(tmp_path):
    e = Emitter(PLAN.units, tables, tmp_path / "out")
    for o in (0, 1, 3, 4, 5):
        e.add(result(o))
    with pytest.raises(RunError, match="1 of 6 work unit.* never arrived .first missing: 2"):
        e.finish()
    e.abort()
    assert not (tmp_path / "out").exists()


def test_an_earlier_runs_segments_files_are_replaced_or_removed_and_others_kept(tmp_path):
    """OUT ends up holding exactly this run's segments files (so `cat *.segments | LC_ALL=C
    sort | sha256sum` gives the printed digest): an earlier run's file of the same name is
    replaced, one this run does not write (another layout's, a -D split) is removed, and files
    hspZ does not name that way are left alone."""
    import hashlib

    digest, files = emit(tmp_path, range(6), "fresh")
    out = tmp_path / "reused"
    out.mkdir()
    stale = [
        "tmp1.block0.r7.plus.segments",
        "tmp2.block1.r0.minus.split3.segments",
        "tmp1.block1.r1.plus.segments",
    ]  # the last: unit 4's, which writes nothing now
    kept = {
        "notes.txt": b"mine",
        "tmp1.block0.r0.plus.segments.bak": b"x",
        "mine.segments": b"y",
        next(iter(files)): b"an old version",
    }
    for name in stale:
        (out / name).write_bytes(b"r0\t1\t2\tq0\t1\t2\t+\t3000\n")
    for name, data in kept.items():
        (out / name).write_bytes(data)
    e = Emitter(PLAN.units, tables, out)
    for o in range(6):
        e.add(result(o))
    assert e.finish() == digest and e.removed == sorted(stale)
    got = {p.name: p.read_bytes() for p in sorted(out.iterdir())}
    mine = {k: v for k, v in kept.items() if k not in files}
    assert got == {**files, **mine}
    lines = sorted(
        line
        for name, data in got.items()
        if name in files
        for line in data.splitlines(keepends=True)
    )
    assert hashlib.sha256(b"".join(lines)).hexdigest()[:16] == digest


def test_sigterm_while_publishing_waits_for_the_last_rename(tmp_path, monkeypatch):
    """A SIGTERM that arrives between two renames is held until every file is in place (and
    the stage gone); only then does it stop the run.  OUT is never half-published."""
    import os
    import signal
    from pathlib import Path

    from hspz.core.errors import Terminated, on_sigterm
    from hspz.run import emit as emit_module
    from hspz.run.outdir import JOURNAL

    _, files = emit(tmp_path, range(6), "fresh")
    real = os.replace
    calls = []

    def replace(src, dst):
        if Path(dst).name == JOURNAL:  # written before the first file moves
            return real(src, dst)
        calls.append(dst)
        if len(calls) == 1:
            os.kill(os.getpid(), signal.SIGTERM)  # its handler runs before the next rename
        real(src, dst)

    before = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        e = Emitter(PLAN.units, tables, tmp_path / "out")
        for o in range(6):
            e.add(result(o))
        monkeypatch.setattr(emit_module.os, "replace", replace)
        with pytest.raises(Terminated):
            e.finish()
    finally:
        signal.signal(signal.SIGTERM, before)
    assert len(calls) == len(files) > 1
    assert {p.name: p.read_bytes() for p in sorted((tmp_path / "out").iterdir())} == files


def test_tarball_is_reproducible_and_holds_the_files_in_emission_order(tmp_path):
    digest, files = emit(tmp_path, range(6), "plain")
    blobs = []
    for i, order in enumerate([range(6), [5, 3, 1, 0, 2, 4]]):
        path = tmp_path / f"seg{i}.tar.gz"
        assert emit(tmp_path, order, f"z{i}", path) == (digest, {})
        blobs.append(path.read_bytes())
    assert blobs[0] == blobs[1]
    assert blobs[0][4:8] == b"\0\0\0\0"  # gzip header mtime 0
    with tarfile.open(fileobj=io.BytesIO(blobs[0]), mode="r:gz") as tar:
        members = tar.getmembers()
        assert [m.name for m in members] == emission_order(files)
        assert {(m.mode, m.mtime, m.uid, m.gid, m.uname, m.gname) for m in members} == {
            (0o644, 0, 0, 0, "", "")
        }
        assert {m.name: tar.extractfile(m).read() for m in members} == files
    assert gzip.decompress(blobs[0])  # a plain gzip stream


def emission_order(files: dict[str, bytes]) -> list[str]:
    """Units by ordinal, then interval, plus before minus."""

    def key(name: str):
        n, block, r, strand = name.split(".")[:4]
        return (int(r[1:]), int(block[5:]), int(n[3:]), strand != "plus")

    return sorted(files, key=key)


def test_every_arrival_permutation_of_a_small_plan_gives_one_digest(tmp_path):
    digests = {
        emit(tmp_path, order, f"p{i}")[0]
        for i, order in enumerate(itertools.islice(itertools.permutations(range(6)), 0, 720, 97))
    }
    assert len(digests) == 1


def test_a_unit_ahead_of_its_turn_is_staged_on_arrival_except_with_diagonal_splits(tmp_path):
    """Without -D a unit's files do not depend on the units before it, so they are formatted
    while those are still out; -D's split history runs in emission order, so it waits."""
    plain = Emitter(PLAN.units, tables, tmp_path / "plain")
    plain.add(result(3))
    assert sorted(p.name for p in plain.stage.iterdir()) and plain.written == []
    split = Emitter(PLAN.units, tables, tmp_path / "split", diagonal=True)
    split.add(result(3))
    assert not split.stage.exists()
    for e in (plain, split):
        for o in (0, 1, 2, 4, 5):
            e.add(result(o))
        e.finish()
    assert emit(tmp_path, range(6), "inorder")[1] == {
        p.name: p.read_bytes() for p in sorted((tmp_path / "plain").iterdir())
    }


def test_emitters_of_two_processes_with_one_pid_stage_in_different_folders(tmp_path, monkeypatch):
    """Processes in two PID namespaces (containers, hosts) can share a PID; a stage named by
    the PID made their files meet in one folder, so stages are named by a uuid4."""
    import os

    monkeypatch.setattr(os, "getpid", lambda: 4242)
    a = Emitter(PLAN.units, tables, tmp_path / "out")
    b = Emitter(PLAN.units, tables, tmp_path / "out")
    assert a.stage != b.stage and a.stage.parent == b.stage.parent == tmp_path / "out"
    assert "4242" not in a.stage.name
