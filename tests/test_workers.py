"""Workers and the schedule end to end (docs/exactness.md): 1 vs 2 vs 3 workers, both partition
policies, time-sliced workers and thread counts all write the same bytes, `-D` splits and `-Z`
archives included; the `--time` ledger and lifecycle account for every unit."""

from __future__ import annotations

import re

import pytest
from multibin import FLAGS, outputs, write_pair

from hspz.cli import main
from hspz.engine.cpu import BACKEND as CPU


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return write_pair(tmp_path_factory.mktemp("pair"))


def hspz(capsys, monkeypatch, args, env=None):
    """Run the CLI in this process; (exit status, stdout, stderr)."""
    for key in ("HSPZ_UNIT_PARTITION", "HSPZ_CPU_DEVICES"):
        monkeypatch.delenv(key, raising=False)
    for key, value in (env or {}).items():
        monkeypatch.setenv(key, value)
    status = main([str(a) for a in args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.fixture(scope="module")
def baseline(pair, tmp_path_factory):
    """One worker, in this process: plain files, -D -Z archive and --dump-raw."""
    out = tmp_path_factory.mktemp("base")
    ref, qry = pair
    common = [str(a) for a in ("run", "-r", ref, "-q", qry, *FLAGS, "--backend", "cpu")]
    assert main(common + ["-o", str(out / "plain"), "--dump-raw", str(out / "raw.txt")]) == 0
    assert main(common + ["-o", str(out / "dz"), "-D", "-Z", str(out / "dz.tar.gz")]) == 0
    return dict(
        files=outputs(out / "plain"),
        tar=(out / "dz.tar.gz").read_bytes(),
        raw=(out / "raw.txt").read_bytes(),
    )


def ledger(err: str) -> list[dict]:
    rows = [line.split("\t")[1:] for line in err.splitlines() if line.startswith("unit ledger:\t")]
    head, body = rows[0], rows[1:]
    return [dict(zip(head, row, strict=True)) for row in body]


def count(err: str, name: str) -> int:
    return int(re.search(rf"^#{name}: (\d+)$", err, re.M).group(1))


@pytest.mark.parametrize(
    "gpus, env, policy",
    [
        (2, {"HSPZ_UNIT_PARTITION": "0"}, "whole-bin"),
        (2, {"HSPZ_UNIT_PARTITION": "1"}, "unit-partition"),
        (3, {}, "unit-partition"),  # auto: 3 CPU devices of one class
        (3, {"HSPZ_CPU_DEVICES": "1"}, "whole-bin"),  # time-sliced: 3 workers on one device
    ],
)
def test_several_workers_write_the_bytes_of_one(
    pair, baseline, tmp_path, capsys, monkeypatch, gpus, env, policy
):
    ref, qry = pair
    args = [
        "run",
        "-r",
        ref,
        "-q",
        qry,
        *FLAGS,
        "--backend",
        "cpu",
        "--gpus",
        gpus,
        "-y",
        "-o",
        tmp_path / "out",
        "-D",
        "-Z",
        tmp_path / "dz.tar.gz",
        "-t",
        "2",
    ]
    status, _, err = hspz(capsys, monkeypatch, args, env)
    assert status == 0, err
    assert (tmp_path / "dz.tar.gz").read_bytes() == baseline["tar"]
    head = re.search(
        r"^schedule: policy=(\S+) W=(\d+) visits=(\d+) extra_replicas=(\d+)", err, re.M
    )
    assert head.group(1) == policy and int(head.group(2)) == gpus
    rows = ledger(err)
    assert [int(r["ordinal"]) for r in rows] == list(range(10))
    assert len({r["worker"] for r in rows}) == gpus
    if "HSPZ_CPU_DEVICES" in env:
        assert {r["device"] for r in rows} == {"cpu0"}
        assert "time-slice 1 device" in err
    assert sum(int(r["hits"]) for r in rows) == count(err, "seed hits")
    life = re.search(
        r"^lifecycle: 5 ref bins, 10 work units, (\d+) builds, (\d+) uploads, "
        r"(\d+) query swaps$",
        err,
        re.M,
    )
    assert life.group(1) == life.group(2) == head.group(3)
    assert int(head.group(3)) - 5 == int(head.group(4))
    assert (
        len(
            re.findall(r"^unit ledger: worker \d+ finished at [\d.]+ ms, busy [\d.]+ ms", err, re.M)
        )
        == gpus
    )


def test_two_workers_plain_files_and_raw_dump_match_one(
    pair, baseline, tmp_path, capsys, monkeypatch
):
    ref, qry = pair
    args = [
        "run",
        "-r",
        ref,
        "-q",
        qry,
        *FLAGS,
        "--backend",
        "cpu",
        "--gpus",
        "2",
        "-o",
        tmp_path / "out",
        "--dump-raw",
        tmp_path / "raw.txt",
    ]
    status, out, err = hspz(capsys, monkeypatch, args)
    assert status == 0, err
    assert outputs(tmp_path / "out") == baseline["files"]
    assert (tmp_path / "raw.txt").read_bytes() == baseline["raw"]
    assert re.fullmatch(r"digest: [0-9a-f]{16}\n", out)


@pytest.mark.parametrize("threads", ["1", "2"])
def test_thread_counts_write_the_same_bytes(pair, baseline, tmp_path, capsys, monkeypatch, threads):
    ref, qry = pair
    args = [
        "run",
        "-r",
        ref,
        "-q",
        qry,
        *FLAGS,
        "--backend",
        "cpu",
        "-t",
        threads,
        "-o",
        tmp_path / "out",
    ]
    assert hspz(capsys, monkeypatch, args)[0] == 0
    assert outputs(tmp_path / "out") == baseline["files"]


def test_schedule_lines_have_the_specified_shape(pair, tmp_path, capsys, monkeypatch):
    ref, qry = pair
    args = [
        "plan",
        "-r",
        ref,
        "-q",
        qry,
        *FLAGS,
        "--backend",
        "cpu",
        "--gpus",
        "2",
        "-o",
        tmp_path / "plan.txt",
    ]
    status, _, err = hspz(capsys, monkeypatch, args, {"HSPZ_UNIT_PARTITION": "1"})
    assert status == 0, err
    lines = [line for line in err.splitlines() if line.startswith("schedule:")]
    assert re.fullmatch(
        r"schedule: policy=unit-partition W=2 visits=6 extra_replicas=1 "
        r"\(forced by HSPZ_UNIT_PARTITION=1\)",
        lines[0],
    )
    visit = r"R\d+\[\d+\.\.\d+\)"
    for k, line in enumerate(lines[1:3]):
        assert re.fullmatch(
            rf"schedule: worker {k} device cpu{k}: {visit}( {visit})* "
            rf"units=5 visits=\d+",
            line,
        ), line
    assert lines[3] == "schedule: device mapping: worker0->cpu0 worker1->cpu1"


def test_hit_stats_count_every_seed_and_hit(pair, tmp_path, capsys, monkeypatch):
    ref, qry = pair
    args = ["run", "-r", ref, "-q", qry, *FLAGS, "--backend", "cpu", "-d", "-o", tmp_path / "out"]
    status, _, err = hspz(capsys, monkeypatch, args)
    assert status == 0, err
    rows = re.findall(r"^hit-stats: (\S+) +(\d+) +[\d.]+%$", err, re.M)
    assert [label for label, _ in rows] == ["0", "1", "2-4", "5-32", "33-256", ">256"]
    assert sum(int(n) for _, n in rows) == count(err, "seeds")
    assert re.search(
        r"^hit-stats: non-empty seeds: mean [\d.]+  median \d+  p95 \d+  p99 \d+  "
        r"max \d+$",
        err,
        re.M,
    )


def _bin_jobs(pair, engine):
    """(jobs, reference records, query records): two workers, one reference bin each."""
    from hspz.core.options import Options
    from hspz.engine.contract import Context
    from hspz.io.readers import read_records
    from hspz.planning.bins import Plan
    from hspz.planning.schedule import Visit
    from hspz.run.worker import WorkerJob

    ref, qry = (read_records(p) for p in pair)
    ctx = Context.from_options(Options())
    plan = Plan(((0,), (1,)), ((0,),))
    jobs = [WorkerJob(k, k, [Visit(k, 0, 1)], ctx, plan, engine, 1, 0.0) for k in range(2)]
    return jobs, ref, qry


def test_a_failing_worker_process_fails_the_run_with_one_line(pair, tmp_path, monkeypatch):
    from pathlib import Path

    from hspz.core.errors import RunError
    from hspz.run.pool import run_workers

    monkeypatch.syspath_prepend(str(Path(__file__).parent))  # spawned children import the probe
    from numba_probe_engine import NoDevice

    jobs, ref, qry = _bin_jobs(pair, NoDevice())
    with pytest.raises(RunError, match=r"worker \d failed: RuntimeError: device \d is not there"):
        run_workers(jobs, ref, qry, lambda result, extras: None)


def test_a_pool_larger_than_the_jobs_runs_them_unlinks_the_shared_block_and_leaves_nothing(pair):
    """The pool returns its workers' reports; the shared block's name is gone as soon as every
    worker has attached (its memory stays mapped until the pool's `with` ends), and then no
    process is left."""
    import multiprocessing
    import os

    from hspz.run.pool import Pool, run_workers

    jobs, ref, qry = _bin_jobs(pair, CPU)
    got = []
    with Pool(3, CPU) as pool:
        reports = run_workers(jobs, ref, qry, lambda result, extras: got.append(result), pool)
        assert pool.shm is not None and pool.unlinked
        assert not os.path.exists(f"/dev/shm/{pool.shm.name.lstrip('/')}")
    assert sorted(r.ordinal for r in got) == [0, 1] and [r.units for r in reports] == [1, 1]
    assert not multiprocessing.active_children()


def test_a_pooled_worker_gone_before_its_job_fails_the_run_with_one_line(pair):
    """Its pipe has no reader left: handing the job over fails at once (it does not wait)."""
    import multiprocessing

    from hspz.core.errors import RunError
    from hspz.run.pool import Pool, run_workers

    jobs, ref, qry = _bin_jobs(pair, CPU)
    with pytest.raises(RunError, match=r"^worker 1 exited before its job was handed over"):
        with Pool(2, CPU) as pool:
            pool.procs[1].kill()
            pool.procs[1].join()
            run_workers(jobs, ref, qry, lambda result, extras: None, pool)
    assert not multiprocessing.active_children()


def test_a_closed_pool_frees_its_queue_and_pipes_at_once(pair):
    """The queue's semaphores must be unlinked before `entry`'s os._exit (which skips
    multiprocessing's exit hooks, so the resource tracker would warn of leaked semaphores): once
    the pool is closed, nothing holds its queue or pipes, without waiting for the cyclic
    collector."""
    import gc
    import weakref

    from hspz.run.pool import Pool, run_workers

    jobs, ref, qry = _bin_jobs(pair, CPU)
    gc.disable()
    try:
        pool = Pool(2, CPU)
        queues = [weakref.ref(q) for q in [pool.out, *pool.inboxes]]
        run_workers(jobs, ref, qry, lambda result, extras: None, pool)
        pool.close()
        assert [q() for q in queues] == [None] * 3
    finally:
        gc.enable()


def test_bad_input_with_several_workers_is_one_line_and_leaves_no_worker(pair, tmp_path, capsys):
    import multiprocessing

    ref, qry = pair
    status = main(
        [
            "run",
            "-r",
            str(tmp_path / "missing.fa"),
            "-q",
            str(qry),
            "--backend",
            "cpu",
            "--gpus",
            "3",
            "-o",
            str(tmp_path / "out"),
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and "missing.fa" in err[0]
    assert not multiprocessing.active_children() and not (tmp_path / "out").exists()


def test_a_worker_prepares_each_next_query_bin_once_ahead(pair):
    """Visits R0[0..2) R1[0..2): four units, four query swaps, each bin prepared once per swap
    (the next one while a unit runs), ordinals in plan order."""
    import dataclasses

    from hspz.engine.cpu import CpuBackend
    from hspz.planning.schedule import Visit
    from hspz.run import worker as workers

    prepared = []

    class Counting(CpuBackend):
        def prepare_query(self, ctx, index, records):
            prepared.append(index)
            return super().prepare_query(ctx, index, records)

    job, ref, qry = _one_worker_job(pair, [Visit(0, 0, 2), Visit(1, 0, 2)])
    job = dataclasses.replace(job, engine=Counting())
    assert len(ref) >= 2 and len(qry) >= 2
    got = []
    rep = workers.run_worker(job, ref, qry, lambda result, extras: got.append(result.ordinal))
    assert got == [0, 1, 2, 3] and prepared == [0, 1, 0, 1]
    assert (rep.units, rep.builds, rep.uploads, rep.query_swaps) == (4, 2, 2, 4)


def test_the_command_exits_without_teardown_and_loses_nothing(pair, baseline, tmp_path):
    """`python -m hspz` (`cli.entry`, os._exit after main) with two worker processes (each also
    leaves by os._exit once its messages are sent): same files as the in-process run, the whole
    stdout through a pipe, exit status 0, and no resource-tracker warning of leaked semaphores
    (the pool's queues are released before the exit skips multiprocessing's hooks)."""
    import os
    import subprocess
    import sys

    ref, qry = pair
    env = {k: v for k, v in os.environ.items() if not k.startswith("HSPZ_")}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "hspz",
            "run",
            "-r",
            ref,
            "-q",
            qry,
            *map(str, FLAGS),
            "--backend",
            "cpu",
            "--gpus",
            "2",
            "--time",
            "-o",
            str(tmp_path / "out"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert outputs(tmp_path / "out") == baseline["files"]
    assert re.search(r"^digest: [0-9a-f]{16}$", proc.stdout + proc.stderr, re.M)
    assert "unit ledger: worker 1 finished at" in proc.stdout + proc.stderr
    assert "leaked" not in proc.stderr, proc.stderr


def _one_worker_job(pair, visits):
    from hspz.core.options import Options
    from hspz.engine.contract import Context
    from hspz.io.readers import read_records
    from hspz.planning.bins import Plan
    from hspz.run.worker import WorkerJob

    ref, qry = (read_records(p) for p in pair)
    plan = Plan(((0,), (1,)), ((0,), (1,)))
    job = WorkerJob(0, 0, visits, Context.from_options(Options()), plan, CPU, 1, 0.0)
    return job, ref, qry


def test_the_worker_in_this_process_hands_results_to_a_thread_in_order(pair, monkeypatch):
    """One worker: the sink runs on the emit thread, never the worker's, and sees the units in
    the worker's order; the worker runs unit 1 while unit 0's sink is still busy."""
    import threading

    from hspz.planning.schedule import Visit
    from hspz.run.pool import run_workers

    job, ref, qry = _one_worker_job(pair, [Visit(0, 0, 2), Visit(1, 0, 2)])
    got, threads, release = [], set(), threading.Event()

    def sink(result, extras):
        threads.add(threading.current_thread().name)
        if result.ordinal == 0:  # held until the worker has finished unit 1
            assert release.wait(60)
        got.append(result.ordinal)

    from hspz.run import worker as workers

    real = workers._run_unit

    def run_unit(job, engine, rep, ref_bin, qry_bin, index, *rest):
        real(job, engine, rep, ref_bin, qry_bin, index, *rest)
        if rep.units == 2:
            release.set()

    monkeypatch.setattr(workers, "_run_unit", run_unit)
    (rep,) = run_workers([job], ref, qry, sink)
    assert got == [0, 1, 2, 3] and rep.units == 4
    assert threading.current_thread().name not in threads and len(threads) == 1


def test_a_failing_sink_fails_the_in_process_worker(pair):
    from hspz.core.errors import RunError
    from hspz.planning.schedule import Visit
    from hspz.run.pool import run_workers

    job, ref, qry = _one_worker_job(pair, [Visit(0, 0, 2), Visit(1, 0, 2)])
    seen = []

    def sink(result, extras):
        seen.append(result.ordinal)
        raise RunError(f"work unit {result.ordinal} arrived twice")

    with pytest.raises(RunError, match="work unit 0 arrived twice"):
        run_workers([job], ref, qry, sink)
    assert seen[0] == 0


@pytest.mark.parametrize("numba", [False, True])
def test_pooled_workers_load_numba_before_their_job_only_when_asked(pair, numba, monkeypatch):
    """A pool asked to load numba (large bins: `commands.run.holds_large_bins`) has it loaded
    in each process before the job; otherwise the job finds it unloaded (the probe backend
    warms nothing, and its tiny bins prepare with numpy)."""
    from pathlib import Path

    from hspz.run.pool import Pool, run_workers

    monkeypatch.syspath_prepend(str(Path(__file__).parent))  # spawned children import the probe
    from numba_probe_engine import NumbaProbe

    jobs, ref, qry = _bin_jobs(pair, NumbaProbe())
    got = []
    with Pool(2, NumbaProbe(), numba) as pool:
        run_workers(jobs, ref, qry, lambda result, extras: got.append(result.engine_ms), pool)
    assert got == [1.0 if numba else 0.0] * 2


def test_only_plans_with_a_bin_of_small_bytes_or_more_ask_for_numba():
    import numpy as np

    from hspz.commands.run import holds_large_bins
    from hspz.core.options import Options
    from hspz.formats.manifest import Manifest
    from hspz.io.packing import SMALL_BYTES
    from hspz.planning.bins import Plan

    def manifest(query_lengths: list[int]) -> Manifest:
        plan = Plan(((0,), (1,)), ((0, 1),))
        return Manifest(
            Options(),
            np.zeros((8, 8), np.int32),
            plan,
            ["a", "b"],
            [1000, 2000],
            ["c", "d"],
            query_lengths,
            "-",
            "-",
        )

    half = SMALL_BYTES // 2
    assert not holds_large_bins(manifest([half - 1, half - 2]))  # packed: SMALL_BYTES - 1
    assert holds_large_bins(manifest([half - 1, half - 1]))  # two separators: SMALL_BYTES


def test_a_rerun_with_another_layout_leaves_only_its_own_files(
    pair, baseline, tmp_path, capsys, monkeypatch
):
    """Two workers writing into an OUT that holds a finer layout's files: the earlier run's
    files that this layout does not write are removed, with one `output:` line, and OUT equals
    a fresh run's."""
    ref, qry = pair
    finer = [a if a != "4000" else "2000" for a in FLAGS]
    out = tmp_path / "out"
    args = ["run", "-r", ref, "-q", qry, "--backend", "cpu", "-o", out]
    assert hspz(capsys, monkeypatch, [*args, *finer])[0] == 0
    earlier = set(outputs(out)) - set(baseline["files"])
    assert earlier  # names only the finer layout writes (more reference bins)
    status, _, err = hspz(capsys, monkeypatch, [*args, *FLAGS, "--gpus", "2"])
    assert status == 0 and outputs(out) == baseline["files"]
    assert re.search(
        rf"^output: removed {len(earlier)} segments file\(s\) that an earlier run "
        rf"left in .*out and this run did not write \(first: tmp",
        err,
        re.M,
    )


@pytest.fixture(scope="module")
def longer_pair(tmp_path_factory):
    """A simulated 12 x 3 Mbp pair: on the CPU backend at -B 1.5M and -t 1, 1.9 s (--gpus 2) to
    2.8 s (--gpus 1) past its schedule line on two cores, long enough to be stopped while its
    workers run (6 x 3 Mbp at -t 2 took 1.0-1.3 s, and one run ended within the test's wait)."""
    from benchmarks.simulate import PairSpec, write_pair_2bit

    d = tmp_path_factory.mktemp("longer")
    spec = PairSpec(ref_mbp=12, query_mbp=3, chromosomes=4, divergence=0.2, seed=3)
    write_pair_2bit(spec, d / "ref.2bit", d / "qry.2bit")
    return d / "ref.2bit", d / "qry.2bit"


@pytest.mark.parametrize("gpus", [1, 2])
def test_sigterm_stops_the_workers_and_leaves_nothing(longer_pair, tmp_path, gpus):
    """SIGTERM (a scheduler's time limit, `kill`) while the workers run: one line, exit status
    143, no OUT (not even the hidden stage), and no worker process left running on."""
    import os
    import signal
    import subprocess
    import sys
    import time
    import uuid

    ref, qry = longer_pair
    tag = uuid.uuid4().hex  # found in the environment of every process this run starts
    env = {k: v for k, v in os.environ.items() if not k.startswith("HSPZ_")}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hspz",
            "run",
            "-r",
            ref,
            "-q",
            qry,
            "-B",
            "1500000",
            "--backend",
            "cpu",
            "--gpus",
            str(gpus),
            "-t",
            "1",
            "-o",
            tmp_path / "out",
        ],
        env={**env, "HSPZ_TEST_TAG": tag},
        stderr=subprocess.PIPE,
        text=True,
    )
    for line in proc.stderr:
        if line.startswith("schedule: device mapping"):
            break
    time.sleep(0.5)  # the workers are in their first units
    assert proc.poll() is None, "the run ended before it could be stopped"
    proc.send_signal(signal.SIGTERM)
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 143
    assert err.strip().splitlines()[-1] == "hspZ: terminated (SIGTERM)"
    assert "Traceback" not in err and not (tmp_path / "out").exists()
    time.sleep(0.5)
    assert not _processes_with(f"HSPZ_TEST_TAG={tag}".encode())


def _processes_with(entry: bytes) -> list[int]:
    """Live processes whose environment holds `entry`."""
    from pathlib import Path

    found = []
    for p in Path("/proc").iterdir():
        try:
            if p.name.isdigit() and entry in (p / "environ").read_bytes().split(b"\0"):
                found.append(int(p.name))
        except OSError:  # gone, or not ours to read
            pass
    return found
