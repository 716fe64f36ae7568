"""What a run guarantees about OUT (emit.py's invariant, outdir.py's lock and journal).

Fault tests: a run is SIGKILLed (by the `HSPZ_FAULT` test hook, or from outside at a random
moment) while it works, once everything is staged, once the journal is written, between two
renames of the publish, after the last one; with 1 and 2 workers (tests/multibin.py's pair at
-B 4000: 5 reference bins).  OUT held an earlier result of another layout (more files, so the
publish must also remove some).  Once the next command has taken OUT's lock, OUT holds exactly
the earlier result or exactly the new one, whose digest is the one that run prints; nothing of
the killed run is left in OUT; a rerun writes the bytes of a clean run.

Concurrency tests: a run or merge stopped while it holds OUT (`HSPZ_FAULT=unit:1:stop`); a
second one into the same OUT is refused at once naming the holder, or with --wait runs after
it, and OUT then holds the second one's result.

(Worker processes of a killed parent and shared memory are another module's: these tests
neither count processes nor look at /dev/shm.)
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from multibin import FLAGS, write_pair

from hspz.cli import main

EARLIER = [a if a != "4000" else "2000" for a in FLAGS]  # a finer layout: more files


def segments(out: Path) -> dict[str, bytes]:
    """The segments files in OUT (what its digest covers)."""
    return {p.name: p.read_bytes() for p in sorted(out.glob("*.segments"))}


def digest(files: dict[str, bytes]) -> str:
    """`cat *.segments | LC_ALL=C sort | sha256sum`, first 16 hex digits."""
    lines = sorted(line for data in files.values() for line in data.split(b"\n") if line)
    return hashlib.sha256(b"".join(line + b"\n" for line in lines)).hexdigest()[:16]


def printed_digest(stdout: str) -> str:
    return re.search(r"^digest: ([0-9a-f]{16})$", stdout, re.M).group(1)


def in_process(args) -> tuple[int, str]:
    """`hspZ args` in this process: (exit status, stdout)."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        status = main([str(a) for a in args])
    return status, buf.getvalue()


class Spawned:
    """`hspZ args` in a subprocess, its stdout and stderr in files (a killed parent's worker
    processes keep its pipes open), tagged in its environment so that `reap` can end the worker
    processes a killed parent leaves (making them die with it is workers.py's business)."""

    def __init__(self, args, fault: str | None = None, folder: Path | None = None, **kw):
        import tempfile
        import uuid

        self.tag = uuid.uuid4().hex
        env = {k: v for k, v in os.environ.items() if not k.startswith("HSPZ_")}
        env["HSPZ_TEST_TAG"] = self.tag
        if fault:
            env["HSPZ_FAULT"] = fault
        self.out = tempfile.TemporaryFile("w+", dir=folder)
        self.err = kw.pop("stderr", None) or tempfile.TemporaryFile("w+", dir=folder)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "hspz", *map(str, args)],
            env=env,
            stdout=self.out,
            stderr=self.err,
            text=True,
            **kw,
        )
        self.pid = self.proc.pid

    def wait(self, timeout: float = 300) -> tuple[int, str, str]:
        """(exit status, stdout, stderr) once the process has ended; leftover workers reaped."""
        try:
            status = self.proc.wait(timeout)
        finally:
            self.reap()
        texts = []
        for f in (self.out, self.err):
            if hasattr(f, "seek"):
                f.seek(0)
                texts.append(f.read())
            else:
                texts.append("")
        return status, texts[0], texts[1]

    def reap(self) -> None:
        entry = f"HSPZ_TEST_TAG={self.tag}".encode()
        for proc in Path("/proc").iterdir():
            try:
                if proc.name.isdigit() and entry in (proc / "environ").read_bytes().split(b"\0"):
                    os.kill(int(proc.name), signal.SIGKILL)
            except OSError:  # gone, or not ours to read
                pass


def wait_stopped(proc: Spawned, timeout: float = 120) -> None:
    """Until `proc` has stopped itself (SIGSTOP) or ended."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            state = "gone"
        if state in ("T", "t"):
            return
        assert proc.proc.poll() is None, proc.wait()
        time.sleep(0.02)
    raise AssertionError("the process never stopped")


def take_lock(out: Path) -> None:
    """What every run or merge does first: take OUT's lock (completing an interrupted
    publish and removing dead stages), here without running anything."""
    from hspz.run.outdir import OutLock

    with OutLock(out):
        pass


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return write_pair(tmp_path_factory.mktemp("pair"))


@pytest.fixture(scope="module")
def runs(pair, tmp_path_factory):
    """Clean in-process runs: the earlier result (EARLIER), the new one (FLAGS, with
    --dump-raw), and -Z archives of both: files, printed digests, bytes."""
    d = tmp_path_factory.mktemp("clean")
    ref, qry = pair
    got = {}
    for key, flags in (("earlier", EARLIER), ("new", FLAGS)):
        status, out = in_process(
            [
                "run",
                "-r",
                ref,
                "-q",
                qry,
                *flags,
                "--backend",
                "cpu",
                "-o",
                d / key,
                "--dump-raw",
                d / f"{key}.raw",
            ]
        )
        assert status == 0
        status, _ = in_process(
            ["run", "-r", ref, "-q", qry, *flags, "--backend", "cpu", "-o", d / f"{key}-z", "-Z"]
        )
        assert status == 0
        got[key] = dict(
            dir=d / key,
            files=segments(d / key),
            digest=printed_digest(out),
            raw=(d / f"{key}.raw").read_bytes(),
            tar=(d / f"{key}-z" / "segments.tar.gz").read_bytes(),
        )
        assert digest(got[key]["files"]) == got[key]["digest"]
    assert got["earlier"]["digest"] != got["new"]["digest"]
    assert set(got["earlier"]["files"]) - set(got["new"]["files"])  # the publish removes some
    return got


def run_args(pair, out: Path, flags=FLAGS, *extra) -> list:
    ref, qry = pair
    return ["run", "-r", ref, "-q", qry, *flags, "--backend", "cpu", "-o", out, *extra]


def assert_whole(out: Path, result: dict, note: str = "") -> None:
    """OUT holds exactly `result`'s segments files and nothing of hspZ's besides."""
    files = segments(out)
    assert files == result["files"], note
    assert digest(files) == result["digest"], note
    assert sorted(os.listdir(out)) == sorted(result["files"]), note


# (HSPZ_FAULT, what OUT holds once the next command has its lock)
POINTS = [
    ("unit:3", "earlier"),
    ("staged", "earlier"),
    ("journal", "new"),
    ("publish:1", "new"),
    ("publish:17", "new"),
    ("published", "new"),
    ("done", "new"),
]


@pytest.mark.parametrize("gpus", ["1", "2"])
@pytest.mark.parametrize("fault, survivor", POINTS, ids=[p[0] for p in POINTS])
def test_a_run_killed_at_any_point_leaves_the_earlier_or_the_new_result_whole(
    pair, runs, tmp_path, fault, survivor, gpus
):
    out, raw = tmp_path / "out", tmp_path / "raw.txt"
    shutil.copytree(runs["earlier"]["dir"], out)
    status, _, err = Spawned(
        run_args(pair, out, FLAGS, "--gpus", gpus, "--dump-raw", raw), fault
    ).wait()
    assert status == -signal.SIGKILL, err
    if survivor == "earlier":  # killed before its journal existed: OUT is untouched
        assert not (out / ".hspz-journal").exists()
        assert segments(out) == runs["earlier"]["files"]
    take_lock(out)
    assert_whole(out, runs[survivor])
    if survivor == "new":
        assert raw.read_bytes() == runs["new"]["raw"]  # published with the segments
    else:
        assert not raw.exists()
    status, stdout = in_process(run_args(pair, out))  # one worker: the same bytes, sooner
    assert status == 0 and printed_digest(stdout) == runs["new"]["digest"]
    assert_whole(out, runs["new"])


@pytest.mark.parametrize(
    "fault, survivor", [("staged", "earlier"), ("journal", "new"), ("done", "new")]
)
@pytest.mark.parametrize("where", ["in OUT", "elsewhere"])
def test_a_killed_archive_run_leaves_the_earlier_or_the_new_archive_whole(
    pair, runs, tmp_path, fault, survivor, where
):
    out = tmp_path / "out"
    tar = out / "segments.tar.gz" if where == "in OUT" else tmp_path / "z" / "a.tar.gz"
    tar.parent.mkdir(parents=True)
    tar.write_bytes(runs["earlier"]["tar"])
    status, _, err = Spawned(
        run_args(pair, out, FLAGS, "-Z", *([] if where == "in OUT" else [tar])), fault
    ).wait()
    assert status == -signal.SIGKILL, err
    take_lock(out)
    assert tar.read_bytes() == runs[survivor]["tar"]
    assert sorted(os.listdir(out)) == (["segments.tar.gz"] if where == "in OUT" else [])
    assert [p.name for p in tar.parent.iterdir() if not p.name.startswith(".")] == [tar.name]


def test_the_next_run_completes_an_interrupted_publish_and_says_so(pair, runs, tmp_path, capfd):
    out = tmp_path / "out"
    shutil.copytree(runs["earlier"]["dir"], out)
    proc = Spawned(run_args(pair, out), "publish:5")
    assert proc.wait()[0] == -signal.SIGKILL and (out / ".hspz-journal").exists()
    capfd.readouterr()
    status, stdout = in_process(run_args(pair, out, EARLIER))
    err = capfd.readouterr().err
    done = [line for line in err.splitlines() if line.startswith("output: completed")]
    assert len(done) == 1, err
    assert re.fullmatch(
        rf"output: completed the publish that an interrupted run \(pid "
        rf"{proc.pid} on \S+\) left in {re.escape(str(out))}: "
        rf"{len(runs['new']['files'])} file\(s\) moved in, "
        rf"\d+ removed, digest {runs['new']['digest']}",
        done[0],
    )
    assert status == 0 and printed_digest(stdout) == runs["earlier"]["digest"]
    assert_whole(out, runs["earlier"])


def test_a_roll_forward_killed_half_way_is_completed_by_the_next_command(pair, runs, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(runs["earlier"]["dir"], out)
    assert Spawned(run_args(pair, out), "publish:3").wait()[0] == -signal.SIGKILL
    code = "import sys\nfrom hspz.run.outdir import OutLock\nwith OutLock(sys.argv[1]):\n    pass\n"
    env = {**os.environ, "HSPZ_FAULT": "publish:4"}
    repair = subprocess.run([sys.executable, "-c", code, str(out)], env=env)
    assert repair.returncode == -signal.SIGKILL and (out / ".hspz-journal").exists()
    take_lock(out)
    assert_whole(out, runs["new"])


def test_a_run_killed_from_outside_at_a_random_moment_leaves_one_whole_result(pair, runs, tmp_path):
    rng = random.Random()
    for attempt in range(3):
        gpus, delay = str(1 + attempt % 2), rng.uniform(0.3, 4.0)
        note = f"killed after {delay:.2f} s with --gpus {gpus}"
        out = tmp_path / f"out{attempt}"
        shutil.copytree(runs["earlier"]["dir"], out)
        proc = Spawned(run_args(pair, out, FLAGS, "--gpus", gpus))
        time.sleep(delay)
        proc.proc.kill()
        proc.wait()
        take_lock(out)
        survivor = "new" if segments(out) == runs["new"]["files"] else "earlier"
        assert_whole(out, runs[survivor], note)
        assert in_process(run_args(pair, out))[0] == 0, note
        assert_whole(out, runs["new"], note)


def test_a_stage_folder_another_process_named_by_our_pid_is_left_alone(pair, runs, tmp_path):
    """Stage folders were named by the PID alone, so a run in another PID namespace (a
    container) with the same PID wrote into this run's stage and removed it."""
    from hspz.run.outdir import STAGE_PREFIX

    out = tmp_path / "out"
    theirs = out / f"{STAGE_PREFIX}{os.getpid()}" / "theirs.segments"  # unmarked: not ours
    theirs.parent.mkdir(parents=True)
    theirs.write_text("not this run's\n")
    assert in_process(run_args(pair, out))[0] == 0
    assert theirs.read_text() == "not this run's\n"
    assert segments(out) == runs["new"]["files"]


def test_a_dump_raw_that_fails_while_publishing_leaves_the_earlier_result(pair, runs, tmp_path):
    """A write of the --dump-raw file that fails (here the file-size limit, as a full disk
    would) fails the run before anything is published; it used to be written after the
    segments files were already in place."""
    out, raw = tmp_path / "out", tmp_path / "raw.txt"
    shutil.copytree(runs["earlier"]["dir"], out)
    limit = 1 << 20  # above every segments file, below the raw dump
    assert max(map(len, runs["new"]["files"].values())) < limit < len(runs["new"]["raw"])

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    status, _, err = Spawned(
        run_args(pair, out, FLAGS, "--dump-raw", raw), folder=out.parent, preexec_fn=small_files
    ).wait()
    lines = [line for line in err.splitlines() if line.startswith("hspZ: ")]
    assert status == 1, err
    assert lines == [f"hspZ: --dump-raw: cannot write {raw}: File too large"], err
    assert_whole(out, runs["earlier"])
    assert not raw.exists() and os.listdir(tmp_path) == ["out"]


def test_a_failed_run_removes_the_out_it_created(pair, tmp_path, capfd):
    ref, _ = pair
    out = tmp_path / "new" / "deeper"
    status = main(["run", "-r", str(ref), "-q", str(tmp_path / "missing.fa"), "-o", str(out)])
    assert status == 2 and "cannot read" in capfd.readouterr().err
    assert not (tmp_path / "new").exists()


def test_an_unreadable_journal_is_one_line_and_is_kept(pair, runs, tmp_path, capfd):
    out = tmp_path / "out"
    shutil.copytree(runs["earlier"]["dir"], out)
    (out / ".hspz-journal").write_text("{not json\n")
    capfd.readouterr()
    assert main([str(a) for a in run_args(pair, out)]) == 1
    err = capfd.readouterr().err
    assert re.fullmatch(
        r"hspZ: .*/\.hspz-journal: an interrupted publish's journal cannot be "
        r"read \(.*\); OUT may hold a mixture of two results: remove the "
        r"journal and rerun\n",
        err,
    ), err
    assert segments(out) == runs["earlier"]["files"] and (out / ".hspz-journal").exists()


# ---------------------------------------------------------------------------------------------
# One run or merge at a time
# ---------------------------------------------------------------------------------------------


def holder_line(pid: int, out: Path, command: str) -> str:
    return (
        rf"^hspZ: --output: {re.escape(str(out))} is in use by pid {pid} on \S+ since "
        rf"[0-9-]+ [0-9:]+ UTC \(hspZ {command} .*\); wait for it to finish, or pass "
        rf"--wait$"
    )


def test_a_second_run_into_a_held_out_is_refused_at_once_naming_the_holder(
    pair, runs, tmp_path, capfd
):
    out = tmp_path / "out"
    first = Spawned(run_args(pair, out, EARLIER), "unit:1:stop")
    try:
        wait_stopped(first)
        capfd.readouterr()
        t = time.monotonic()
        status = main([str(a) for a in run_args(pair, out)])
        err = capfd.readouterr().err
        assert status == 2 and time.monotonic() - t < 5
        assert re.fullmatch(holder_line(first.pid, out, "run") + "\n", err), err
    finally:
        first.proc.send_signal(signal.SIGCONT)
    status, stdout, err = first.wait()
    assert status == 0, err
    assert printed_digest(stdout) == runs["earlier"]["digest"]
    assert_whole(out, runs["earlier"])


def test_with_wait_two_runs_into_one_out_succeed_in_turn(pair, runs, tmp_path):
    out = tmp_path / "out"
    first = Spawned(run_args(pair, out, EARLIER), "unit:1:stop")
    try:
        wait_stopped(first)
        second = Spawned(
            run_args(pair, out, FLAGS, "--wait", "--gpus", "2"), stderr=subprocess.PIPE
        )
        line = second.proc.stderr.readline()
        assert line.startswith(f"output: waiting for {out}, in use by pid {first.pid} "), line
    finally:
        first.proc.send_signal(signal.SIGCONT)
    (s1, out1, err1), (s2, out2, _) = first.wait(), second.wait()
    assert s1 == 0 and s2 == 0, err1
    assert printed_digest(out1) == runs["earlier"]["digest"]
    assert printed_digest(out2) == runs["new"]["digest"]
    assert_whole(out, runs["new"])


@pytest.fixture(scope="module")
def plans(pair, tmp_path_factory):
    """A plan file and its two workers' results for each layout (hspZ plan, hspZ work)."""
    d = tmp_path_factory.mktemp("plans")
    ref, qry = pair
    got = {}
    for key, flags in (("earlier", EARLIER), ("new", FLAGS)):
        plan = d / f"{key}.plan"
        assert (
            in_process(
                [
                    "plan",
                    "-r",
                    ref,
                    "-q",
                    qry,
                    *flags,
                    "--backend",
                    "cpu",
                    "--gpus",
                    "2",
                    "-o",
                    plan,
                ]
            )[0]
            == 0
        )
        results = [d / f"{key}.w{k}" for k in range(2)]
        for k, path in enumerate(results):
            assert (
                in_process(["work", "--plan", plan, "--worker", k, "--backend", "cpu", "-o", path])[
                    0
                ]
                == 0
            )
        got[key] = ["merge", "--plan", plan, *results]
    return got


def test_two_merges_into_one_out_take_turns(runs, plans, tmp_path, capfd):
    out = tmp_path / "out"
    first = Spawned([*plans["earlier"], "-o", out], "unit:1:stop")
    try:
        wait_stopped(first)
        capfd.readouterr()
        assert main([str(a) for a in plans["new"]] + ["-o", str(out)]) == 2
        err = capfd.readouterr().err
        assert re.fullmatch(holder_line(first.pid, out, "merge") + "\n", err), err
        second = Spawned([*plans["new"], "-o", out, "--wait"], stderr=subprocess.PIPE)
        line = second.proc.stderr.readline()
        assert line.startswith(f"output: waiting for {out}, in use by pid {first.pid} "), line
    finally:
        first.proc.send_signal(signal.SIGCONT)
    (s1, out1, err1), (s2, out2, _) = first.wait(), second.wait()
    assert s1 == 0 and s2 == 0, err1
    assert printed_digest(out1) == runs["earlier"]["digest"]
    assert printed_digest(out2) == runs["new"]["digest"]
    assert_whole(out, runs["new"])


def test_a_waiter_woken_by_a_removed_lock_file_takes_the_current_one(tmp_path):
    """A holder removes the lock file before it lets go, so a waiter that wakes holding the
    removed file's lock must try again: two holders at once would each see a free OUT."""
    import threading

    from hspz.run.outdir import OutLock

    out = tmp_path / "out"
    spans: dict[str, tuple[float, float]] = {}

    def hold(name: str, seconds: float) -> None:
        with OutLock(out, wait=True):
            start = time.monotonic()
            time.sleep(seconds)
            spans[name] = (start, time.monotonic())

    first = OutLock(out).__enter__()
    waiter = threading.Thread(target=hold, args=("waiter", 0.5))
    waiter.start()
    time.sleep(0.3)  # the waiter is blocked on the first holder's file
    first.__exit__(None, None, None)
    hold("newcomer", 0.5)  # the file is gone: it makes a new one
    waiter.join()
    (a0, a1), (b0, b1) = sorted(spans.values())
    assert a1 <= b0, spans
    assert not (out / ".hspz.lock").exists()


# `hspZ work` under a SIGTERM sent from inside zipfile's member writer (np.savez), where a real
# `kill -TERM` landed once in about 100 tries: zipfile, interrupted there, cannot close, and its
# ValueError had replaced the Terminated (exit 1 with a traceback).
TERM_IN_ZIP = """
import os, signal, sys, zipfile
from hspz.cli import entry
opened = zipfile._ZipWriteFile.__init__
def init(self, *args, **kwargs):
    os.kill(os.getpid(), signal.SIGTERM)  # handled at the next bytecode, inside __init__
    return opened(self, *args, **kwargs)
zipfile._ZipWriteFile.__init__ = init
sys.argv[0] = "hspZ"
entry()
"""


def test_a_sigterm_inside_the_results_writer_is_one_line_and_exit_143(plans, tmp_path):
    plan = plans["new"][2]
    result = tmp_path / "w0.result"
    done = subprocess.run(
        [sys.executable, "-c", TERM_IN_ZIP, "work", "--plan", str(plan), "--worker", "0"]
        + ["--backend", "cpu", "-o", str(result)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 143, done.stderr
    assert done.stderr.splitlines()[-1:] == ["hspZ: terminated (SIGTERM)"], done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
    assert not result.exists()
