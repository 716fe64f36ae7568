"""`hspZ merge` of a query list stages its jobs on threads (`hspz.run.replay`): every byte it
writes or prints (segments files, archives, queries.tsv, the --ledger rows and their order, the
counts and digests), the jobs it publishes before a failure and the failure's line are those of
the merge that stages one job after the other."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from multibin import FLAGS, records, write_records

from hspz.cli import main
from hspz.commands.merge import merge_command, results_bytes
from hspz.core.errors import RunError
from hspz.formats.planfile import read_plan
from hspz.run import emit
from hspz.run.execute import Emitters

CPU = ["--backend", "cpu"]


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A five-job batch of the multi-bin pair's reference (10 units a job), planned for three
    workers (so each job's units come from several results files), and its results."""
    d = tmp_path_factory.mktemp("merge_threads")
    write_records(d / "ref.fa", records(7)[0])
    names = []
    for k, seed in enumerate((7, 8, 9, 7, 10), 1):
        write_records(d / f"q{k}.fa", records(seed)[1])
        names.append(f"q{k}.fa")
    (d / "list.txt").write_text("\n".join(names) + "\n")
    plan = d / "plan.txt"
    argv = ["plan", "-r", str(d / "ref.fa"), "--query-list", str(d / "list.txt"), *FLAGS, *CPU]
    assert main([*argv, "--gpus", "3", "-o", str(plan)]) == 0
    results = []
    for k in range(read_plan(str(plan)).schedule.workers):
        results.append(str(d / f"w{k}.result"))
        work = ["work", "--plan", str(plan), "--worker", str(k), "-t", "1", "-o", results[-1]]
        assert main([*work, *CPU]) == 0
    return dict(dir=d, plan=str(plan), results=results[::-1])  # not in worker order


def tree(out: Path) -> dict[str, bytes]:
    """{path under OUT: bytes} of every file, hidden ones (a stage left behind) included."""
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def merged(
    batch: dict, tmp_path: Path, capsys: pytest.CaptureFixture, threads: int, *flags: str
) -> tuple:
    """(OUT's files, the ledger's bytes, stdout, stderr) of one merge into a fresh OUT."""
    out, ledger = tmp_path / f"out{threads}", tmp_path / f"ledger{threads}.tsv"
    tarball = "-Z" in flags
    status = merge_command(
        batch["plan"],
        str(out),
        str(out) if tarball else None,
        "-D" in flags,
        batch["results"],
        ledger=str(ledger),
        threads=threads,
    )
    assert status == 0
    captured = capsys.readouterr()
    shown = [s.replace(str(out), "OUT") for s in (captured.out, captured.err)]
    return tree(out), ledger.read_bytes(), *shown


@pytest.mark.parametrize("flags", [(), ("-D",), ("-Z",)], ids=["folders", "split", "archives"])
def test_a_merge_on_threads_writes_and_prints_the_bytes_of_one_thread(
    batch, tmp_path, capsys, flags
):
    one = merged(batch, tmp_path, capsys, 1, *flags)
    assert len(one[1].splitlines()) == 1 + 5 * 10
    assert "queries.tsv" in one[0]
    for threads in (2, 4):
        assert merged(batch, tmp_path, capsys, threads, *flags) == one


def test_the_cli_merge_matches_one_thread(batch, tmp_path, capsys):
    one = merged(batch, tmp_path, capsys, 1)
    out, ledger = tmp_path / "cli", tmp_path / "cli.tsv"
    argv = ["merge", "--plan", batch["plan"], "-o", str(out), "--ledger", str(ledger)]
    assert main([*argv, *batch["results"]]) == 0
    captured = capsys.readouterr()
    shown = [s.replace(str(out), "OUT") for s in (captured.out, captured.err)]
    assert (tree(out), ledger.read_bytes(), *shown) == one


# (job, ordinal) of the unit that fails, and the jobs published before it: the last results
# file read holds the last units of every job, and completes job 5 first, then 1, 2, 3 and 4
FAILS = [
    ((2, 3), []),
    ((3, 0), []),
    ((0, 4), ["000005"]),
    ((2, 4), ["000001", "000002", "000005"]),
    ((3, 4), ["000001", "000002", "000003", "000005"]),
]


@pytest.mark.parametrize("at, published", FAILS, ids=[f"{j}:{o}" for (j, o), _ in FAILS])
def test_a_failing_unit_leaves_the_jobs_and_the_line_of_one_thread(
    batch, tmp_path, capsys, monkeypatch, at, published
):
    """A unit whose staging fails (a full disk, say): the jobs published before it, OUT's
    other files and the error line are those of the one-thread merge, and no stage is left."""
    stage = emit.Emitter._stage

    def failing(self, result):
        if (result.job, result.ordinal) == at:
            raise RunError(f"cannot write the output in {self.outdir}: disk full")
        return stage(self, result)

    monkeypatch.setattr(emit.Emitter, "_stage", failing)
    got = []
    for threads in (1, 4):
        out = tmp_path / f"out{threads}"
        with pytest.raises(RunError) as caught:
            merge_command(batch["plan"], str(out), None, False, batch["results"], threads=threads)
        capsys.readouterr()
        got.append((tree(out), str(caught.value).replace(str(out), "OUT")))
    assert got[0] == got[1]
    files, line = got[0]
    assert line == f"cannot write the output in OUT/{at[0] + 1:06d}: disk full"
    assert sorted({Path(f).parts[0] for f in files} - {".hspz-retired"}) == published


def test_an_interrupt_while_jobs_stage_leaves_what_one_thread_leaves(
    batch, tmp_path, capsys, monkeypatch
):
    """Ctrl-C (or SIGTERM) on the calling thread as it publishes the third job: every job's
    staging stops before the stages are removed; OUT holds the two jobs published, no
    queries.tsv and no stage, as with one thread."""
    finish = Emitters.finish

    def interrupted(self, j):
        if len(self.jobs) - len(self.open) == 2:
            raise KeyboardInterrupt
        return finish(self, j)

    monkeypatch.setattr(Emitters, "finish", interrupted)
    got = []
    for threads in (1, 4):
        out = tmp_path / f"out{threads}"
        with pytest.raises(KeyboardInterrupt):
            merge_command(batch["plan"], str(out), None, False, batch["results"], threads=threads)
        capsys.readouterr()
        got.append(tree(out))
    assert got[0] == got[1]
    assert sorted({Path(f).parts[0] for f in got[0]}) == [".hspz-retired", "000001", "000005"]


@pytest.mark.parametrize("mark", [None, b"", b"hspZ made"], ids=["no-mark", "empty", "short"])
def test_a_stage_killed_while_it_was_made_is_swept_by_the_next_merge(batch, tmp_path, mark):
    """A SIGKILL between a stage folder's mkdir and its mark's last byte (`make_marked`; with
    jobs staging on threads the window is wide enough to hit by hand) leaves a stage folder
    holding no mark or part of one, and nothing else: the next merge removes it, in OUT and in
    a job folder, so OUT ends as an uninterrupted merge leaves it."""
    from hspz.core import durable

    clean = tmp_path / "clean"
    merge_command(batch["plan"], str(clean), None, False, batch["results"])
    out = tmp_path / "out"
    shutil.copytree(clean, out)  # a merge killed while it merged into an earlier one's OUT
    for where in (out, out / "000002"):
        stage = where / f".hspz-stage-{'0' * 32}"
        stage.mkdir(parents=True)
        if mark is not None:
            (stage / durable.MARK).write_bytes(mark)
    merge_command(batch["plan"], str(out), None, False, batch["results"])
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == sorted(
        p.relative_to(clean) for p in clean.rglob("*")
    )
    assert tree(out) == tree(clean)


def test_repeated_interrupts_abort_only_once_every_job_has_stopped(
    batch, tmp_path, capsys, monkeypatch
):
    """Ctrl-C pressed three times: the first while the jobs stage, the second while their
    threads stop, the third in the pool's shutdown.  `Emitters.abort` runs only once
    every job's staging has stopped (racing them, it left a stage holding segments files and no
    mark, which no later command removed: found by the hostile pass, 2 reruns of 4)."""
    from concurrent.futures import ThreadPoolExecutor, wait

    from hspz.run import replay as rp

    abort, submitted, aborted, waits = Emitters.abort, [], [], []

    def interrupted(self, i):
        raise KeyboardInterrupt  # the first, while every job stages the first batch

    class Pool(ThreadPoolExecutor):
        def submit(self, *args, **kwargs):
            submitted.append(super().submit(*args, **kwargs))
            return submitted[-1]

        def __exit__(self, *exc):
            self.shutdown(wait=False)
            raise KeyboardInterrupt  # the third, while the pool would join its threads

    def second_interrupted(futures):
        waits.append(futures)
        if len(waits) == 1:
            raise KeyboardInterrupt  # the second, while the jobs stop
        return wait(futures)

    def checked(self):
        aborted.append(all(f.done() for f in submitted))
        abort(self)

    stage = emit.Emitter._stage

    def slow(self, result):  # every job still staging when the interrupts come
        time.sleep(0.02)
        return stage(self, result)

    monkeypatch.setattr(emit.Emitter, "_stage", slow)
    monkeypatch.setattr(rp._Progress, "wait_past", interrupted)
    monkeypatch.setattr(Emitters, "abort", checked)
    monkeypatch.setattr(rp, "ThreadPoolExecutor", Pool)
    monkeypatch.setattr(rp, "wait", second_interrupted)
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        merge_command(batch["plan"], str(out), None, False, batch["results"], threads=4)
    wait(submitted)
    assert aborted == [True]
    assert not list(out.rglob(".hspz-stage-*"))


def test_a_merge_syncs_each_folder_a_bounded_number_of_times(batch, tmp_path, monkeypatch):
    """The jobs are published under one journal in OUT: each job's folder is synced once (after
    every move into it), OUT and the stages a fixed number of times whatever the jobs, and every
    segments file once, before its move (counted from the real `os.fsync` calls)."""
    import collections
    import os
    import threading

    synced: collections.Counter[str] = collections.Counter()
    fsync, lock = os.fsync, threading.Lock()

    def counted(fd):
        with lock:  # folders are synced on threads
            synced[os.readlink(f"/proc/self/fd/{fd}")] += 1
        return fsync(fd)

    monkeypatch.setattr(os, "fsync", counted)
    out = tmp_path / "out"
    merge_command(batch["plan"], str(out), None, False, batch["results"])
    root = str(out.resolve())
    stages = {p: n for p, n in synced.items() if os.path.basename(p).startswith(".hspz-stage-")}
    folders = {p: n for p, n in synced.items() if os.path.isdir(p)} | stages
    jobs = {p: n for p, n in folders.items() if p != root and p not in stages}
    assert sorted(jobs) == [f"{root}/{k:06d}" for k in range(1, 6)]
    assert set(jobs.values()) == {1}
    assert folders[root] <= 7  # the retiring, the one journal and queries.tsv
    files = [p for p in synced if p.endswith(".segments")]
    assert files and all(synced[p] == 1 for p in files)
    assert sum(folders.values()) <= len(jobs) + 12


def test_a_merge_syncs_its_job_folders_at_once(batch, tmp_path, monkeypatch):
    """The publish's folder syncs overlap (`durable.fsync_dirs`): on a disk where each sync
    waits for its own commit (0.09 s on the H200 machine), 20 folders one after another cost
    1.8 s.  Each folder sync here takes 0.1 s; at least the five job folders' overlap."""
    import os
    import threading

    fsync, lock = os.fsync, threading.Lock()
    now, most = [0], [0]

    def slow(fd):
        if not os.path.isdir(f"/proc/self/fd/{fd}"):
            return fsync(fd)
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
        time.sleep(0.1)
        with lock:
            now[0] -= 1
        return fsync(fd)

    monkeypatch.setattr(os, "fsync", slow)
    merge_command(batch["plan"], str(tmp_path / "out"), None, False, batch["results"])
    assert most[0] >= 5


@pytest.mark.parametrize("fault", ["journal:2", "publish:2", "publish:9", "published:2"])
def test_a_merge_killed_in_its_one_publish_is_rolled_forward_to_every_job(batch, tmp_path, fault):
    """A SIGKILL after the jobs' journal is written (the first journal retires the older
    queries.tsv), between two of its moves (of one job, or of two) or after them: the next
    command's lock completes every job, as the uninterrupted merge leaves them (queries.tsv,
    the merge's last step, is still missing: OUT is visibly incomplete); a rerun completes it."""
    from test_publish import Spawned, take_lock

    clean = tmp_path / "clean"
    merge_command(batch["plan"], str(clean), None, False, batch["results"])
    out = tmp_path / "out"
    argv = ["merge", "--plan", batch["plan"], "-o", str(out), *batch["results"]]
    assert Spawned(argv, fault, tmp_path).wait()[0] == -9
    take_lock(out)
    jobs = {k: v for k, v in tree(out).items() if not k.startswith(".")}
    assert jobs == {k: v for k, v in tree(clean).items() if k != "queries.tsv"}
    assert merge_command(batch["plan"], str(out), None, False, batch["results"]) == 0
    assert tree(out) == tree(clean)


def test_a_job_folder_that_cannot_take_a_file_is_named_as_one_thread_names_it(batch, tmp_path):
    """A directory where a job's segments file goes is refused with the job-by-job publish's
    line, naming that job's folder (found by the adversarial pass: the batch named OUT)."""
    out = tmp_path / "out"
    assert merge_command(batch["plan"], str(out), None, False, batch["results"]) == 0
    name = sorted((out / "000002").iterdir())[0].name
    (out / "000002" / name).unlink()
    (out / "000002" / name).mkdir()
    with pytest.raises(RunError) as caught:
        merge_command(batch["plan"], str(out), None, False, batch["results"])
    assert (
        str(caught.value) == f"cannot write the output in {out / '000002'}: {name} is a directory"
    )
    assert (out / "000002" / name).is_dir()


def test_work_refuses_a_query_that_became_a_fifo_or_folder_without_waiting(tmp_path):
    """`check_queries` hashed a query that had become a FIFO on a thread blocked in its open
    for ever (the pool waited, so neither the error nor SIGTERM ended `hspZ work`); a FIFO, a
    link to one, a folder and a deleted file are each refused, the first failing job named."""
    import hashlib
    import threading
    from types import SimpleNamespace

    from hspz.commands.work import check_queries
    from hspz.core.errors import InputError
    from hspz.formats.planfile import PlanJob

    good = tmp_path / "good.fa"
    good.write_bytes(b">q\nACGT\n")
    sha = hashlib.sha256(good.read_bytes()).hexdigest()
    os.mkfifo(tmp_path / "q.fifo")
    (tmp_path / "link").symlink_to(tmp_path / "q.fifo")
    (tmp_path / "folder").mkdir()
    bad = ["q.fifo", "link", "folder", "gone.fa"]
    jobs = [PlanJob(1, str(good), 8, sha, None)]  # type: ignore[arg-type]
    jobs += [PlanJob(i + 2, str(tmp_path / n), 8, sha, None) for i, n in enumerate(bad)]  # type: ignore[arg-type]
    got: list[BaseException] = []

    def check() -> None:
        try:
            check_queries(SimpleNamespace(jobs=jobs))  # type: ignore[arg-type]
        except InputError as exc:
            got.append(exc)

    t = threading.Thread(target=check, daemon=True)
    t.start()
    t.join(20)
    if t.is_alive():
        for _ in range(4):
            os.close(os.open(tmp_path / "q.fifo", os.O_RDWR))
        raise AssertionError("check_queries waited on a FIFO")
    assert [str(e) for e in got] == [
        f"job 000002 ({tmp_path / 'q.fifo'}): cannot read it: not a regular file"
    ]
    for k in range(3, len(bad) + 2):
        with pytest.raises(InputError, match=f"job {k:06d} .*cannot read it: "):
            check_queries(SimpleNamespace(jobs=[jobs[0], jobs[k - 1]]))  # type: ignore[arg-type]


def test_a_failed_folder_sync_raises_naming_the_folder(tmp_path, monkeypatch):
    """A folder sync that fails (EIO) still raises from `fsync_dirs`, and its error names the
    folder: os.fsync's names none, so the CLI's one line said only 'Input/output error'."""
    import errno

    from hspz.cli import _one_line
    from hspz.core import durable

    folders = [tmp_path / f"d{i}" for i in range(4)]
    for f in folders:
        f.mkdir()
    (tmp_path / "link").symlink_to(folders[0])
    bad = os.stat(folders[2]).st_ino
    fsync = os.fsync

    def failing(fd):
        if os.fstat(fd).st_ino == bad:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return fsync(fd)

    monkeypatch.setattr(os, "fsync", failing)
    durable.fsync_dirs([folders[0], folders[0], tmp_path / "link", folders[1]])
    with pytest.raises(OSError) as caught:
        durable.fsync_dirs([*folders, folders[2]])
    assert caught.value.errno == errno.EIO
    assert _one_line(caught.value) == f"{folders[2]}: cannot sync the folder: Input/output error"
    folders[3].rmdir()  # removed between listing and sync: raises, never skipped in silence
    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(FileNotFoundError):
        durable.fsync_dirs([folders[0], folders[3]])


@pytest.mark.parametrize("large", [False, True], ids=["small", "large"])
def test_a_merge_of_many_lines_loads_numba_beside_its_reads_and_writes_the_same(
    batch, tmp_path, capsys, large
):
    """A merge whose results files hold at least `NUMBA_BYTES` (lowered here to the batch's
    size) loads numba on a thread as it starts, so that formatting and digesting run in
    numba's loops, which release the GIL; a smaller one never imports numba.  Both write and
    print the bytes of the in-process merge (fresh processes: numba not loaded before)."""
    one = merged(batch, tmp_path, capsys, 1)
    out, ledger = tmp_path / "sub", tmp_path / "sub.tsv"
    argv = ["merge", "--plan", batch["plan"], "-o", str(out), "--ledger", str(ledger)]
    code = textwrap.dedent(
        f"""
        import sys
        from hspz.commands import merge
        from hspz.cli import main
        merge.NUMBA_BYTES = 1 if {large} else 1 << 40
        status = main({[*argv, *batch["results"]]!r})
        print("numba" in sys.modules, file=sys.stderr)
        sys.exit(status)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    err, loaded = done.stderr.rsplit("\n", 2)[0] + "\n", done.stderr.split()[-1]
    assert loaded == str(large)
    shown = [s.replace(str(out), "OUT") for s in (done.stdout, err)]
    assert (tree(out), ledger.read_bytes(), *shown) == one


def test_the_results_bytes_count_what_can_be_read():
    here = Path(__file__)
    assert results_bytes([str(here), str(here), "/no/such/file"]) == 2 * len(here.read_bytes())


@pytest.mark.parametrize("keep", [True, False], ids=["kept", "read-again"])
def test_a_merge_reads_each_results_file_once_unless_they_are_large(
    batch, tmp_path, capsys, monkeypatch, keep
):
    """Results files of at most `KEEP_BYTES` in all are read once, their checks and units
    together, the units kept for the replay; larger ones are checked, then read again one file
    at a time.  The outputs are the same either way."""
    from hspz.commands import merge
    from hspz.formats import results

    one = merged(batch, tmp_path / "one", capsys, 1)
    opened: list[str] = []
    real = results._open_results

    def counted(source, read):
        opened.append(source)
        return real(source, read)

    monkeypatch.setattr(results, "_open_results", counted)
    monkeypatch.setattr(merge, "KEEP_BYTES", 1 << 40 if keep else 0)
    assert merged(batch, tmp_path / "two", capsys, 1) == one
    assert sorted(opened) == sorted(batch["results"] * (1 if keep else 2))


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory, batch: dict) -> dict:
    """The batch's five jobs planned for one worker: its results file holds every job whole,
    with each unit's formatted lines and each job's digest, as `hspZ work` writes them."""
    d, src = tmp_path_factory.mktemp("merge_whole"), batch["dir"]
    plan = d / "plan.txt"
    argv = ["plan", "-r", str(src / "ref.fa"), "--query-list", str(src / "list.txt"), *FLAGS]
    assert main([*argv, *CPU, "-o", str(plan)]) == 0
    result = d / "w0.result"
    assert (
        main(["work", "--plan", str(plan), "--worker", "0", "-t", "2", "-o", str(result), *CPU])
        == 0
    )
    return dict(dir=d, plan=str(plan), results=[str(result)])


def _unformatted(whole: dict, path: Path) -> dict:
    """`whole` with its results written again without the lines and digests `work` made."""
    from hspz.formats.results import read_results, write_results

    header, results = read_results(whole["results"][0])
    for r in results:
        r.rendered = None
    keep = ("plan", "worker", "workers", "busy_ms", "finished_ms")
    write_results(path, results, {k: header[k] for k in keep})
    return dict(whole, results=[str(path)])


def test_work_formats_its_units_and_digests_the_jobs_it_holds_whole(whole, batch):
    from hspz.formats.results import read_results

    header, results = read_results(whole["results"][0])
    assert sorted(header["digests"]) == [str(j) for j in range(5)]
    assert all(r.rendered is not None for r in results)
    assert sum(len(r.rendered or []) for r in results) > 0
    for path in batch["results"]:  # three workers: every job's units are split between them
        header, results = read_results(path)
        assert header["digests"] == {} and all(r.rendered is not None for r in results)


@pytest.mark.parametrize("flags", [(), ("-D",), ("-Z",)], ids=["folders", "split", "archives"])
def test_a_merge_takes_works_lines_and_digests_and_writes_the_bytes_of_one_that_makes_them(
    whole, tmp_path, capsys, monkeypatch, flags
):
    """A merge of results whose lines and digests `work` made neither formats, sorts nor
    hashes a line (without -D: -D cuts other files, formatted again) and writes and prints the
    bytes of a merge of the same results without them, on one thread or several."""
    plain = _unformatted(whole, tmp_path / "plain.result")
    want = merged(plain, tmp_path / "plain", capsys, 1, *flags)
    assert "queries.tsv" in want[0]

    def refuse(*_):
        raise AssertionError("formatted or sorted again")

    if "-D" not in flags:
        monkeypatch.setattr(emit, "format_lines", refuse)
    monkeypatch.setattr(emit, "sorted_lines", refuse)
    for threads in (1, 4):
        assert merged(whole, tmp_path / f"took{threads}", capsys, threads, *flags) == want


def test_a_merge_of_formatted_results_loads_no_numba(whole, tmp_path):
    """With every unit's lines and every job's digest made by `work`, nothing is left for
    numba's loops: the merge never imports it, whatever the results' size (fresh process)."""
    out = tmp_path / "out"
    code = textwrap.dedent(
        f"""
        import sys
        from hspz.commands import merge
        from hspz.cli import main
        merge.NUMBA_BYTES = 1
        status = main({["merge", "--plan", whole["plan"], "-o", str(out), *whole["results"]]!r})
        print("numba" in sys.modules, file=sys.stderr)
        sys.exit(status)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stderr.split()[-1] == "False"


def test_a_failing_units_formatting_is_one_line_and_stops_the_worker(
    whole, tmp_path, capsys, monkeypatch
):
    """A unit whose formatting fails on a render thread (a bug, memory): `hspZ work` ends with
    one line naming the unit, at once (it ran every unit first, then raised the thread's
    RuntimeError: a traceback), writes no results file and keeps the units it finished."""
    from hspz.commands import work
    from hspz.run import render

    def failing(result, tables):
        raise RuntimeError("boom")

    write_unit = work.write_unit

    def slow(*args):  # every unit long enough for the failure to be seen before the next
        time.sleep(0.02)
        return write_unit(*args)

    monkeypatch.setattr(render, "render_unit", failing)
    monkeypatch.setattr(work, "write_unit", slow)
    out = tmp_path / "w0.result"
    argv = ["work", "--plan", whole["plan"], "--worker", "0", "-t", "1", "-o", str(out), *CPU]
    assert main(argv) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("hspZ:")]
    assert err == ["hspZ: work: formatting unit 0 of job 1 failed (RuntimeError: boom)"]
    assert not out.exists()
    assert 0 < len(list(Path(f"{out}.units").iterdir())) < 10


def test_the_numba_check_of_odd_results_files_is_false_at_once(tmp_path):
    """`_formatted` reads a results header unchecked, before the checks: whatever the file, it
    answers False (the checks then refuse it in one line), never raising or waiting (a header
    nested too deep raised RecursionError; an array claiming 1 TiB, MemoryError)."""
    import io
    import threading
    import zipfile

    import numpy as np
    from numpy.lib import format as npy_format

    from hspz.commands.merge import _formatted

    def npz(path: Path, header: bytes) -> str:
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("header.npy", header)
        return str(path)

    deep = io.BytesIO()
    np.save(deep, np.frombuffer(b"[" * 100000 + b"]" * 100000, np.uint8))
    huge = io.BytesIO()
    npy_format.write_array_header_1_0(
        huge, {"descr": "|u1", "fortran_order": False, "shape": (1 << 40,)}
    )
    os.mkfifo(tmp_path / "fifo")
    paths = [
        npz(tmp_path / "deep.npz", deep.getvalue()),
        npz(tmp_path / "huge.npz", huge.getvalue() + b"{}"),
        str(tmp_path / "fifo"),
        "/dev/zero",
        str(tmp_path),
        str(tmp_path / "missing"),
    ]
    got: list[bool] = []
    t = threading.Thread(target=lambda: got.extend(map(_formatted, paths)), daemon=True)
    t.start()
    t.join(20)
    if t.is_alive():
        os.close(os.open(tmp_path / "fifo", os.O_RDWR))
        raise AssertionError("_formatted waited")
    assert got == [False] * len(paths)


def test_a_resumed_units_failing_formatting_is_one_line(whole, tmp_path, capsys, monkeypatch):
    """A rerun whose resumed unit (read from its unit file) fails to format: the same one
    line, the failure seen while the resumed units are handed to the renderer, before the
    worker starts (RenderFailed escaped `hspZ work` there)."""
    from concurrent.futures import wait

    from hspz.run import render

    out = tmp_path / "w0.result"
    argv = ["work", "--plan", whole["plan"], "--worker", "0", "-t", "1", "-o", str(out), *CPU]
    assert main(argv) == 0
    out.unlink()
    capsys.readouterr()

    def failing(result, tables):
        raise RuntimeError("boom")

    add = render.Renderer.add

    def waiting(self, result):  # each unit formatted before the next is handed over
        wait(self.futures)
        return add(self, result)

    monkeypatch.setattr(render, "render_unit", failing)
    monkeypatch.setattr(render.Renderer, "add", waiting)
    assert main(argv) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("hspZ:")]
    assert err == ["hspZ: work: formatting unit 0 of job 1 failed (RuntimeError: boom)"]
    assert not out.exists()
