"""benchmarks/run.py runs every arm on a small simulated workload, writes one agreeing table, one
JSON record a run, and the plot of those records."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.run import counts, parse_arms, sweep_arms

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_runner_times_every_arm_and_the_hspz_backends_agree(tmp_path):
    records, png = tmp_path / "runs.jsonl", tmp_path / "scaling.png"
    cmd = [
        sys.executable,
        str(ROOT / "benchmarks" / "run.py"),
        "tiny",
        "--repeat",
        "2",
        "--no-gpu",
        "--threads",
        "2",
        "--workdir",
        str(tmp_path),
        "--machine",
        "test box",
        "--json",
        str(records),
        "--plot",
        str(png),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ")]
    names = [r.split("|")[1].strip() for r in rows[1:]]
    assert names[:2] == ["hspZ cpu -t 1", "hspZ cpu -t 2"]
    lastz = bool(shutil.which("lastz"))
    if lastz:
        assert names[2:] == ["lastz --nogapped", "lastz x2 query pieces"]
    hits = {r.split("|")[9].strip() for r in rows[1:3]}  # after wall, engine, memory
    assert len(hits) == 1 and int(hits.pop()) > 0  # both hspZ arms counted the same hits

    runs = [json.loads(line) for line in records.read_text().splitlines()]
    assert [(r["arm"], r["run"]) for r in runs] == [(n, i) for i in (1, 2) for n in names]
    assert {(r["workload"], r["ref_bp"], r["query_bp"], r["machine"]) for r in runs} == {
        ("tiny", 1_000_000, 500_000, "test box")
    }
    hspz = [r for r in runs if r["kind"] == "hspz-cpu"]
    assert len({r["digest"] for r in hspz}) == 1 and len({r["seed_hits"] for r in hspz}) == 1
    assert all(r["engine_s"] > 0 and r["time"]["wall"] > 0 and len(r["busy_s"]) == 1 for r in hspz)
    assert all(r["wall_s"] > 0 and len(r["loadavg"]) == 3 and r["uptime"] for r in runs)
    if lastz:
        assert {r["hsps"] for r in runs if r["kind"] == "lastz"} != {0}
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_runner_arms_are_named_as_asked_with_an_alt_twin_of_each_hspz_arm(tmp_path):
    arms = parse_arms("cpu1,cpuN,gpu,gpu2,lastz,lastz-pieces", threads=4, alt=tmp_path)
    assert [a.label for a in arms] == [
        "hspZ cpu -t 1",
        "hspZ cpu -t 1 (alt)",
        "hspZ cpu -t 4",
        "hspZ cpu -t 4 (alt)",
        "hspZ gpu",
        "hspZ gpu (alt)",
        "hspZ gpu --gpus 2",
        "hspZ gpu --gpus 2 (alt)",
        "lastz --nogapped",
        "lastz x4 query pieces",
    ]
    assert [(a.threads, a.gpus) for a in arms if a.kind == "hspz-gpu"][::2] == [(4, 1), (4, 2)]
    with pytest.raises(SystemExit, match="unknown arm 'gpu-2'"):
        parse_arms("gpu-2", threads=1, alt=None)


def test_a_thread_sweep_is_capped_at_the_cores_and_the_alt_twin_has_its_own_counts(tmp_path):
    arms = sweep_arms("1,2,4,8,16", "1,4,16", tmp_path, cores=8)
    assert [a.label for a in arms] == [
        "hspZ cpu -t 1",
        "hspZ cpu -t 1 (alt)",
        "hspZ cpu -t 2",
        "hspZ cpu -t 4",
        "hspZ cpu -t 4 (alt)",
        "hspZ cpu -t 8",
    ]
    assert [a.threads for a in sweep_arms("1,2", None, None, cores=2)] == [1, 2]


def test_runner_reads_the_engine_phases_and_the_memory_estimate():
    text = "\n".join(
        [
            "time: engine: seed                     1.500  (cpu 1.200; per thread wall/cpu "
            "0.00/0.00 0.80/0.60 0.70/0.60)",
            "time: peak RSS 400.5 MiB (main), 410.0 MiB (largest process)",
            "time: memory estimate 380.0 MiB (main), 390.5 MiB (largest process), 390.5 MiB in all",
        ]
    )
    got = counts(text)
    assert got["engine_phases"]["seed"]["cpu"] == 1.2
    assert got["engine_phases"]["seed"]["threads"] == [[0.0, 0.0], [0.8, 0.6], [0.7, 0.6]]
    assert (got["estimate_mib"], got["reported_peak_mib"]) == (390.5, 410.0)


def test_runner_reads_the_ledger_busy_time_and_phases_of_a_two_worker_run():
    text = "\n".join(
        [
            "#seeds: 10",
            "#seed hits: 400",
            "#raw HSPs: 3",
            "#HSPs: 2",
            "time: input                            0.500   1.0%",
            "time: wall                            50.000 100.0%",
            "unit ledger:\tordinal\tworker\tdevice\tref_bin\tquery_bin\tref_bp\tquery_bp\tgpu_ms\t"
            "host_start_ms\thost_end_ms\tseeds\thits\traw_hsps\thsps",
            "unit ledger:\t0\t0\tgpu0\t0\t0\t5\t5\t1500.0\t2100.00\t3600.0\t5\t200\t2\t1",
            "unit ledger:\t1\t1\tgpu1\t1\t0\t5\t5\t2500.0\t1900.00\t4400.0\t5\t200\t1\t1",
            "unit ledger: worker 0 finished at 3600.00 ms, busy 1500.00 ms (1 units)",
            "unit ledger: worker 1 finished at 4400.00 ms, busy 2500.00 ms (1 units)",
            "digest: 0123abcd",
        ]
    )
    got = counts(text)
    assert (got["seed_hits"], got["raw_hsps"], got["hsps"], got["digest"]) == (
        400,
        3,
        2,
        "0123abcd",
    )
    assert (got["engine_s"], got["busy_s"], got["units"]) == (4.0, [1.5, 2.5], 2)
    assert got["first_unit_s"] == 1.9 and got["time"] == {"input": 0.5, "wall": 50.0}


def test_runner_finds_a_real_workloads_files_by_file_name_in_a_files_folder(tmp_path):
    from benchmarks.workloads import materialise

    toml = tmp_path / "w.toml"
    toml.write_text(
        '[workloads.pair]\nkind = "real"\nreference = "/nowhere/r.fa.gz"\n'
        'query = "/nowhere/q.2bit"\n'
    )
    carried = tmp_path / "data"
    carried.mkdir()
    with pytest.raises(FileNotFoundError, match="r.fa.gz is missing"):
        materialise("pair", tmp_path, toml)
    with pytest.raises(FileNotFoundError, match="data/r.fa.gz is missing"):
        materialise("pair", tmp_path, toml, files=carried)
    for name in ("r.fa.gz", "q.2bit"):
        (carried / name).write_bytes(b"")
    assert materialise("pair", tmp_path, toml, files=carried) == {
        "reference": carried / "r.fa.gz",
        "query": carried / "q.2bit",
    }


def test_runner_makes_a_2bit_workload_with_the_bytes_simulate_pair_gives(tmp_path):
    from benchmarks.simulate import simulate_pair, write_records
    from benchmarks.workloads import load_workloads, materialise, workload_spec

    toml = tmp_path / "w.toml"
    toml.write_text(
        '[workloads.t2]\nkind = "simulated"\nref_mbp = 0.3\nquery_mbp = 0.2\n'
        'chromosomes = 2\nseed = 3\nformat = "2bit"\n'
    )
    files = materialise("t2", tmp_path / "work", toml)
    ref, query = simulate_pair(workload_spec(load_workloads(toml), "t2"))
    write_records(tmp_path / "r.2bit", ref, "2bit")
    write_records(tmp_path / "q.2bit", query, "2bit")
    assert files["reference"].read_bytes() == (tmp_path / "r.2bit").read_bytes()
    assert files["query"].read_bytes() == (tmp_path / "q.2bit").read_bytes()
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == sorted(
        p.name for p in files.values()
    )  # no .part file left behind


def test_the_overhead_stamper_times_each_hspz_process_and_the_seconds_between(
    tmp_path, monkeypatch
):
    """workflow_overhead.py --stamps: the wrapper runs the hspZ it found (its exit status kept)
    and records each process; `stamped` turns the lines into walls and the gaps around them."""
    import os
    import time

    from benchmarks.workflow_overhead import install_stamper, stamped

    real = tmp_path / "real"
    real.mkdir()
    (real / "hspZ").write_text('#!/bin/sh\nsleep 0.2\n[ "$1" = work ] && exit 3\nexit 0\n')
    (real / "hspZ").chmod(0o755)
    monkeypatch.setenv("PATH", f"{real}{os.pathsep}{os.environ['PATH']}")
    install_stamper(tmp_path / "bin")
    stamps = tmp_path / "stamps.txt"
    monkeypatch.setenv("HSPZ_STAMPS", str(stamps))
    start = time.time()
    codes = [subprocess.run(["hspZ", c, "--x"]).returncode for c in ("plan", "work", "work")]
    together = [subprocess.Popen(["hspZ", "dotplot"]) for _ in range(2)]  # at once
    assert [p.wait() for p in together] == [0, 0]
    time.sleep(0.1)
    got = stamped(stamps, start, time.time())
    assert codes == [0, 3, 3]
    assert list(got) == [
        *("before", "plan", "gap 1", "work", "gap 2", "work#2", "gap 3", "dotplot"),
        *("gap 4", "dotplot#2", "after"),
    ]
    assert all(0.2 <= got[k] < 2.0 for k in ("plan", "work", "work#2", "dotplot", "dotplot#2"))
    assert all(0 <= got[k] < 1.0 for k in ("before", "gap 1", "gap 2", "gap 3"))
    assert got["gap 4"] == 0  # the second dotplot started before the first ended
    assert 0.1 <= got["after"] < 1.0
    monkeypatch.delenv("HSPZ_STAMPS")  # unset: the wrapper stamps nothing and says nothing
    quiet = subprocess.run(["hspZ", "work"], capture_output=True, text=True)
    assert (quiet.returncode, quiet.stderr, stamps.read_text().count("\n")) == (3, "", 5)
