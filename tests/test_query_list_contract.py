"""The batch contract (docs/guarantees.md, "One consistent OUT per batch"): a batch's OUT is a
complete batch (queries.tsv, every row matching its folder or archive, no job entry it does not
list) or visibly incomplete (no queries.tsv), and a list entry is the file the OS opens.

Kill tests: a batch `run --query-list` or `merge` into an OUT holding an older, larger batch
(three jobs, in folder form) is SIGKILLed, or sent SIGTERM (as a SLURM time limit does), at
each publish step (`hspz/core/faults.py`); OUT, as it is left, satisfies the contract, and so does
it once the next command has taken its lock; a rerun then leaves exactly the new batch.  Tiny
inputs keep each run near a second.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
from pathlib import Path

import pytest
from catalogues.trust import CPU, Q1, Q2, REF
from test_publish import Spawned, take_lock, wait_stopped

from hspz.cli import main
from hspz.planning import joblist as bt

Q3 = Q1.replace(b">b", b">d")


def job_entries(out: Path) -> dict[str, object]:
    """{job entry name: its files' bytes (a folder) or bytes (an archive)}, dot names left out."""
    found = {}
    for p in sorted(out.iterdir()):
        if p.name.startswith(".") or p.name == bt.QUERIES_TSV:
            continue
        found[p.name] = (
            {f.name: f.read_bytes() for f in sorted(p.iterdir()) if not f.name.startswith(".")}
            if p.is_dir()
            else p.read_bytes()
        )
    return found


def state(out: Path) -> tuple[str | None, dict]:
    tsv = out / bt.QUERIES_TSV
    return (tsv.read_text() if tsv.exists() else None), job_entries(out)


def assert_contract(out: Path, *batches: tuple[str, dict]) -> str | None:
    """OUT is one of `batches` (queries.tsv, entries) exactly, or has no queries.tsv; which."""
    tsv, entries = state(out)
    if tsv is None:
        return None
    for k, (want_tsv, want_entries) in enumerate(batches):
        if tsv == want_tsv:
            assert entries == want_entries, f"queries.tsv of batch {k} beside other entries"
            return str(k)
    raise AssertionError(f"a queries.tsv of no batch: {tsv}")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Inputs, the older batch (three jobs, folders) and the new (two jobs) as clean runs, and
    the new batch's plan file and results."""
    d = tmp_path_factory.mktemp("contract")
    for name, text in (("tr.fa", REF), ("tq1.fa", Q1), ("tq2.fa", Q2), ("tq3.fa", Q3)):
        (d / name).write_bytes(text)
    (d / "old.txt").write_text("tq1.fa\ntq2.fa\ntq3.fa\n")
    (d / "new.txt").write_text("tq2.fa\ntq1.fa\n")
    for name in ("old", "new"):
        assert (
            main(
                [
                    "run",
                    "-r",
                    str(d / "tr.fa"),
                    "--query-list",
                    str(d / f"{name}.txt"),
                    "-o",
                    str(d / f"clean-{name}"),
                    *CPU,
                ]
            )
            == 0
        )
        assert (
            main(
                [
                    "run",
                    "-r",
                    str(d / "tr.fa"),
                    "--query-list",
                    str(d / f"{name}.txt"),
                    "-o",
                    str(d / f"clean-{name}-Z"),
                    "-Z",
                    *CPU,
                ]
            )
            == 0
        )
    assert (
        main(
            [
                "plan",
                "-r",
                str(d / "tr.fa"),
                "--query-list",
                str(d / "new.txt"),
                "-o",
                str(d / "new.plan"),
                *CPU,
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "work",
                "--plan",
                str(d / "new.plan"),
                "--worker",
                "0",
                "-o",
                str(d / "w0.result"),
                *CPU,
            ]
        )
        == 0
    )
    return d


def older(data: Path, out: Path) -> Path:
    shutil.copytree(data / "clean-old", out)
    return out


def run_new(data: Path, out: Path, *extra: str) -> list[str]:
    return [
        "run",
        "-r",
        str(data / "tr.fa"),
        "--query-list",
        str(data / "new.txt"),
        "-o",
        str(out),
        *CPU,
        *extra,
    ]


def merge_new(data: Path, out: Path) -> list[str]:
    return ["merge", "--plan", str(data / "new.plan"), "-o", str(out), str(data / "w0.result")]


# (HSPZ_FAULT, signal): every publish step of a batch (the retiring of the older queries.tsv is
# a publish of its own: the first journal/published/done; each job's publish comes next, in
# `run`; `merge` publishes every job under the second journal, publish:3 between two moves)
KILLS = [
    (p, signal.SIGKILL)
    for p in (
        "unit",
        "staged",
        "journal",
        "journal:2",
        "publish",
        "published",
        "published:2",
        "done",
        "done:2",
        "batch-retired",
        "batch-swept",
        "journal:4",
        "publish:3",
        "done:4",
    )
] + [(p, signal.SIGTERM) for p in ("unit", "journal:2", "publish", "batch-retired", "batch-swept")]


@pytest.mark.parametrize("command", ["run", "merge"])
@pytest.mark.parametrize("fault, sig", KILLS, ids=[f"{p}-{s.name}" for p, s in KILLS])
def test_a_batch_killed_at_any_publish_step_leaves_one_consistent_out(
    data, tmp_path, command, fault, sig
):
    out = older(data, tmp_path / "out")
    old, new = state(data / "clean-old"), state(data / "clean-new")
    argv = run_new(data, out) if command == "run" else merge_new(data, out)
    if command == "merge" and fault in ("journal:4", "done:4"):
        # merge publishes every job under one journal (the 2nd): it never reaches these points
        assert Spawned(argv, fault, tmp_path).wait()[0] == 0
        assert state(out) == new
        return
    if sig == signal.SIGKILL:
        status = Spawned(argv, fault, tmp_path).wait()[0]
        assert status == -9, status  # killed at the fault point: the point was reached
    else:
        proc = Spawned(argv, f"{fault}:stop" if ":" in fault else f"{fault}:1:stop", tmp_path)
        wait_stopped(proc)
        if proc.proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            os.kill(proc.pid, signal.SIGCONT)
        status = proc.wait()[0]
        assert status in (143, 0), status
    assert_contract(out, old, new)
    take_lock(out)  # the next command's first step: roll forward what a journal promised
    assert_contract(out, old, new)
    assert main(run_new(data, out) if command == "run" else merge_new(data, out)) == 0
    assert state(out) == new
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]


def test_a_smaller_rerun_removes_the_older_batchs_other_jobs(data, tmp_path):
    out = older(data, tmp_path / "out")
    assert main(run_new(data, out)) == 0
    assert state(out) == state(data / "clean-new")


@pytest.mark.parametrize("first, then", [("", "-Z"), ("-Z", "")])
def test_a_batch_in_the_other_form_leaves_one_form(data, tmp_path, first, then):
    out = tmp_path / "out"
    shutil.copytree(data / ("clean-old-Z" if first else "clean-old"), out)
    assert main(run_new(data, out, *([then] if then else []))) == 0
    assert state(out) == state(data / ("clean-new-Z" if then else "clean-new"))


def test_a_merge_into_an_older_batch_leaves_the_new_batch_alone(data, tmp_path):
    out = older(data, tmp_path / "out")
    assert main(merge_new(data, out)) == 0
    assert state(out) == state(data / "clean-new")


def test_a_job_entry_no_batch_wrote_is_refused_and_kept(data, tmp_path, capfd):
    out = older(data, tmp_path / "out")
    (out / "000009").mkdir()
    (out / "000009" / "mine.txt").write_text("a user's folder named like a job\n")
    assert main(run_new(data, out)) == 2
    assert "000009" in capfd.readouterr().err
    assert (out / "000009" / "mine.txt").exists()
    tsv, entries = state(out)
    assert tsv == state(data / "clean-old")[0]
    assert entries.pop("000009") == {"mine.txt": b"a user's folder named like a job\n"}
    assert entries == state(data / "clean-old")[1]


def test_a_folder_named_like_a_stage_but_not_made_by_hspz_is_kept(data, tmp_path):
    out = tmp_path / "out"
    mine = out / ".hspz-stage-mine"
    mine.mkdir(parents=True)
    (mine / "keep.txt").write_text("mine\n")
    assert main(run_new(data, out)) == 0
    assert (mine / "keep.txt").read_text() == "mine\n"


def test_a_list_entry_is_the_file_the_os_opens_through_a_symlinked_folder(data, tmp_path):
    """`../q.fa` in a list reached through link -> real/sub is real/q.fa (what `cat` in that
    folder reads), not q.fa beside link."""
    (tmp_path / "real" / "sub").mkdir(parents=True)
    (tmp_path / "real" / "q.fa").write_bytes(Q2)
    (tmp_path / "q.fa").write_bytes(Q1)
    (tmp_path / "real" / "sub" / "list.txt").write_text("../q.fa\n")
    (tmp_path / "link").symlink_to(tmp_path / "real" / "sub")
    out = tmp_path / "out"
    assert (
        main(
            [
                "run",
                "-r",
                str(data / "tr.fa"),
                "--query-list",
                str(tmp_path / "link" / "list.txt"),
                "-o",
                str(out),
                *CPU,
            ]
        )
        == 0
    )
    row = (out / bt.QUERIES_TSV).read_text().splitlines()[1].split("\t")
    assert hashlib.sha256(Path(row[1]).read_bytes()).hexdigest() == row[3]
    assert row[3] == hashlib.sha256(Q2).hexdigest()
    alone = tmp_path / "alone"
    assert (
        main(
            [
                "run",
                "-r",
                str(data / "tr.fa"),
                "-q",
                str(tmp_path / "real" / "q.fa"),
                "-o",
                str(alone),
                *CPU,
            ]
        )
        == 0
    )
    assert job_entries(out)["000001"] == job_entries(alone)


def test_a_batch_killed_with_a_relative_out_is_rolled_forward(data, tmp_path, monkeypatch):
    """The retiring journal names OUT-relative paths however OUT was given (`-o out`)."""
    older(data, tmp_path / "out")
    argv = run_new(data, Path("out"))
    assert Spawned(argv, "published", tmp_path, cwd=tmp_path).wait()[0] == -9
    monkeypatch.chdir(tmp_path)
    take_lock(Path("out"))
    assert state(tmp_path / "out")[0] is None  # the older queries.tsv is retired
    assert main(argv) == 0
    assert state(tmp_path / "out") == state(data / "clean-new")


@pytest.mark.parametrize("form", ["", "-Z"])
def test_job_entries_whose_queries_tsv_a_workflow_deleted_are_still_hspzs(data, tmp_path, form):
    """Snakemake deletes a rule's outputs (queries.tsv) before it reruns the rule: job folders
    holding only hspZ's segments files, and archives with hspZ's gzip header, are still known
    as hspZ's, replaced and removed as such."""
    out = tmp_path / "out"
    shutil.copytree(data / ("clean-old-Z" if form else "clean-old"), out)
    (out / bt.QUERIES_TSV).unlink()
    assert main(run_new(data, out, *([form] if form else []))) == 0
    assert state(out) == state(data / ("clean-new-Z" if form else "clean-new"))


@pytest.mark.parametrize("command", ["run", "merge"])
def test_a_users_file_in_an_older_jobs_folder_is_refused_and_kept(data, tmp_path, capfd, command):
    """The older batch's 000003/ is stale for the new batch and removed with all it holds: a
    file of the user's in it is refused before any work, never removed (found by the
    adversarial pass: it went with the folder)."""
    out = older(data, tmp_path / "out")
    (out / "000003" / "notes.txt").write_text("a user's notes\n")
    before = state(out)
    assert main(run_new(data, out) if command == "run" else merge_new(data, out)) == 2
    assert "000003/notes.txt" in capfd.readouterr().err
    assert state(out) == before


def test_a_query_list_read_from_a_pipe_is_read_once(data, tmp_path):
    """The list is read once per command: the paths checked against the outputs are the paths
    run, and a list given as a pipe (`<(...)`) is not found empty the second time (found by
    the adversarial pass: 'lists no queries')."""
    fifo = tmp_path / "list.fifo"
    os.mkfifo(fifo)
    import threading

    def feed() -> None:  # the list once, then an empty pipe for a second reader
        with open(fifo, "w") as fh:
            fh.write(f"{data / 'tq2.fa'}\n{data / 'tq1.fa'}\n")
        with open(fifo, "w"):
            pass

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    out = tmp_path / "out"
    code = main(["run", "-r", str(data / "tr.fa"), "--query-list", str(fifo), "-o", str(out), *CPU])
    os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))  # let the feeder's second open end
    feeder.join(10)
    assert code == 0
    assert job_entries(out) == job_entries(data / "clean-new")


def test_a_users_file_in_a_job_folder_the_new_batch_keeps_is_kept(data, tmp_path):
    """000001/ is a job of the new batch too: it is published into, never removed, so a file
    of the user's in it stays and the batch runs (as the workflow's results/<job>/ allows)."""
    out = older(data, tmp_path / "out")
    (out / "000001" / "notes.txt").write_text("a user's notes\n")
    assert main(run_new(data, out)) == 0
    assert (out / "000001" / "notes.txt").read_text() == "a user's notes\n"
    assert (out / bt.QUERIES_TSV).read_text() == (data / "clean-new" / bt.QUERIES_TSV).read_text()
