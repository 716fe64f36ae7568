"""Batch mode (docs/workers.md, "Many queries against one reference"): every job of
`run --query-list` writes the bytes of a standalone run of its query, with or without an
index, at every worker count and policy; queries.tsv marks a complete batch; every refusal."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from multibin import FLAGS, outputs, records, write_records
from refusal import assert_refused

from hspz.cli import main
from hspz.planning import joblist as bt

QUERIES = ("q1.fa", "q2.fa", "q3.fa")


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """The multibin reference, three queries (the list names q1 twice), their standalone
    outputs, and an index of the reference."""
    d = tmp_path_factory.mktemp("batch")
    ref, qry = records(7)
    write_records(d / "ref.fa", ref)
    write_records(d / "q1.fa", qry[:2])
    write_records(d / "q2.fa", qry[2:])
    write_records(d / "q3.fa", qry[::-1])
    (d / "sub").mkdir()
    # comments, blank lines, a path relative to the list's folder and an absolute one
    (d / "sub" / "list.txt").write_text(
        f"# three queries\n../q1.fa\n\n  ../q2.fa  \n{d / 'q3.fa'}\n# again\n../q1.fa\n"
    )
    alone = {}
    for q in QUERIES:
        assert (
            main(
                [
                    "run",
                    "-r",
                    str(d / "ref.fa"),
                    "-q",
                    str(d / q),
                    "-o",
                    str(d / f"alone-{q}"),
                    *FLAGS,
                    "--backend",
                    "cpu",
                ]
            )
            == 0
        )
        alone[q] = outputs(d / f"alone-{q}")
    assert (
        main(
            [
                "index",
                "-r",
                str(d / "ref.fa"),
                "--index",
                str(d / "ix"),
                "-s",
                "111011001011",
                "-B",
                "4000",
                "--backend",
                "cpu",
            ]
        )
        == 0
    )
    return d, alone


def listed(d: Path) -> list[str]:
    return ["q1.fa", "q2.fa", "q3.fa", "q1.fa"]


@pytest.mark.parametrize("index", [False, True])
@pytest.mark.parametrize("gpus, partition", [("1", None), ("2", "0"), ("2", "1"), ("3", None)])
def test_every_job_of_a_batch_writes_the_bytes_of_its_standalone_run(
    batch, tmp_path, capsys, monkeypatch, index, gpus, partition
):
    d, alone = batch
    monkeypatch.delenv("HSPZ_UNIT_PARTITION", raising=False)
    if partition is not None:
        monkeypatch.setenv("HSPZ_UNIT_PARTITION", partition)
    source = ["--index", str(d / "ix")] if index else ["-r", str(d / "ref.fa")]
    out = tmp_path / "out"
    assert (
        main(
            [
                "run",
                *source,
                "--query-list",
                str(d / "sub" / "list.txt"),
                "-o",
                str(out),
                *FLAGS,
                "--backend",
                "cpu",
                "--gpus",
                gpus,
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    for k, q in enumerate(listed(d), 1):
        assert outputs(out / bt.job_name(k)) == alone[q], (k, q)
    assert "note: job 000004 lists the same file as job 000001" in err
    rows = (out / "queries.tsv").read_text().splitlines()
    assert rows[0].split("\t") == list(bt.QUERIES_COLUMNS) and len(rows) == 5
    assert [r.split("\t")[1] for r in rows[1:]] == [str(d / q) for q in listed(d)]
    assert sorted(p.name for p in out.iterdir()) == [
        "000001",
        "000002",
        "000003",
        "000004",
        "queries.tsv",
    ]


def test_the_batch_schedule_spreads_every_job_over_the_workers_bin_major(
    batch, tmp_path, capsys, monkeypatch
):
    """5 reference bins, jobs of 2 + 1 + 2 + 2 query bins: a 5 x 7 grid of 35 units; each
    reference bin is built once per visit, and the ledger's job column accounts for all."""
    d, _ = batch
    monkeypatch.setenv("HSPZ_UNIT_PARTITION", "1")
    assert (
        main(
            [
                "run",
                "-r",
                str(d / "ref.fa"),
                "--query-list",
                str(d / "sub" / "list.txt"),
                "-o",
                str(tmp_path / "o"),
                *FLAGS,
                "--backend",
                "cpu",
                "--gpus",
                "2",
                "--time",
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    units = re.findall(r"^schedule: worker \d device cpu\d: .* units=(\d+) visits=\d+$", err, re.M)
    assert sum(map(int, units)) == 35
    visits = int(
        re.search(r"^schedule: policy=unit-partition W=2 visits=(\d+)", err, re.M).group(1)
    )
    assert f"lifecycle: 5 ref bins, 35 work units, {visits} builds, {visits} uploads" in err
    rows = [line.split("\t") for line in err.splitlines() if line.startswith("unit ledger:\t")]
    assert rows[0][1:3] == ["job", "ordinal"] and len(rows) == 36
    assert sorted({r[1] for r in rows[1:]}) == ["1", "2", "3", "4"]
    assert len(re.findall(r"^job 00000\d: units=\d+ ", err, re.M)) == 4
    assert re.search(r"^batch: 4 jobs, 35 units, 5 ref bins, ", err, re.M)
    assert len(re.findall(r"^progress: job 00000\d complete: ", err, re.M)) == 4


def test_a_batch_tarball_and_dumps_are_one_per_job(batch, tmp_path, capsys):
    d, _ = batch
    for q in ("q1.fa", "q2.fa"):
        assert (
            main(
                [
                    "run",
                    "-r",
                    str(d / "ref.fa"),
                    "-q",
                    str(d / q),
                    "-o",
                    str(tmp_path / f"solo-{q}"),
                    *FLAGS,
                    "--backend",
                    "cpu",
                    "-Z",
                    "--dump-plan",
                    str(tmp_path / f"plan-{q}.tsv"),
                    "--dump-manifest",
                    str(tmp_path / f"manifest-{q}.txt"),
                    "--dump-raw",
                    str(tmp_path / f"raw-{q}.txt"),
                ]
            )
            == 0
        )
    (tmp_path / "two.txt").write_text(f"{d / 'q1.fa'}\n{d / 'q2.fa'}\n")
    out = tmp_path / "out"
    assert (
        main(
            [
                "run",
                "-r",
                str(d / "ref.fa"),
                "--query-list",
                str(tmp_path / "two.txt"),
                "-o",
                str(out),
                *FLAGS,
                "--backend",
                "cpu",
                "-Z",
                str(tmp_path / "x.tgz"),
                "--dump-plan",
                str(tmp_path / "plan.tsv"),
                "--dump-manifest",
                str(tmp_path / "manifest.txt"),
                "--dump-raw",
                str(tmp_path / "raw.txt"),
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert f"note: --tarball {tmp_path / 'x.tgz'} is ignored with --query-list" in err
    assert sorted(p.name for p in out.iterdir()) == [
        "000001.tar.gz",
        "000002.tar.gz",
        "queries.tsv",
    ]
    assert not (tmp_path / "x.tgz").exists()
    for k, q in enumerate(("q1.fa", "q2.fa"), 1):
        name = bt.job_name(k)
        assert (out / f"{name}.tar.gz").read_bytes() == (
            tmp_path / f"solo-{q}" / "segments.tar.gz"
        ).read_bytes()
        for dump in ("plan.tsv", "raw.txt"):
            assert (tmp_path / f"{dump}.{name}").read_bytes() == (
                tmp_path / f"{dump.split('.')[0]}-{q}.{dump.split('.')[1]}"
            ).read_bytes()
        frozen = (tmp_path / f"manifest.txt.{name}").read_text()
        assert frozen == (tmp_path / f"manifest-{q}.txt").read_text()


def test_queries_tsv_is_written_last_and_a_rerun_replaces_it(batch, tmp_path):
    d, _ = batch
    out = tmp_path / "out"
    (tmp_path / "one.txt").write_text(f"{d / 'q2.fa'}\n")
    assert (
        main(
            [
                "run",
                "-r",
                str(d / "ref.fa"),
                "--query-list",
                str(tmp_path / "one.txt"),
                "-o",
                str(out),
                *FLAGS,
                "--backend",
                "cpu",
            ]
        )
        == 0
    )
    first = (out / "queries.tsv").read_text()
    assert first.splitlines()[1].startswith("000001\t" + str(d / "q2.fa") + "\t")
    # a rerun that fails leaves the earlier queries.tsv alone
    (tmp_path / "bad.txt").write_text(f"{d / 'q2.fa'}\n{tmp_path / 'missing.fa'}\n")
    assert (
        main(
            [
                "run",
                "-r",
                str(d / "ref.fa"),
                "--query-list",
                str(tmp_path / "bad.txt"),
                "-o",
                str(out),
                *FLAGS,
                "--backend",
                "cpu",
            ]
        )
        == 2
    )
    assert (out / "queries.tsv").read_text() == first
    # a rerun that succeeds replaces it
    (tmp_path / "two.txt").write_text(f"{d / 'q1.fa'}\n{d / 'q2.fa'}\n")
    assert (
        main(
            [
                "run",
                "-r",
                str(d / "ref.fa"),
                "--query-list",
                str(tmp_path / "two.txt"),
                "-o",
                str(out),
                *FLAGS,
                "--backend",
                "cpu",
            ]
        )
        == 0
    )
    rows = (out / "queries.tsv").read_text().splitlines()
    assert len(rows) == 3 and rows[2].startswith("000002\t" + str(d / "q2.fa"))
    assert not [p for p in out.iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize(
    "extra, text, pattern",
    [
        (["-B", "0"], None, r"-B 0 cannot be combined with --query-list"),
        (["--kegalign-bins"], None, r"--kegalign-bins cannot be combined with --query-list"),
        (["--from-manifest", "{d}/m.txt"], None, r"--from-manifest cannot be combined with "),
        (["--cpu-only"], None, r"--cpu-only cannot be combined with --query-list"),
        (["-q", "{d}/q1.fa"], None, r"--query and --query-list cannot be combined"),
        ([], "# nothing\n\n", r"lists no queries"),
        ([], "q1.fa\nmissing.fa\n", r"job 000002 \(.*missing\.fa\): cannot read .*missing\.fa"),
        ([], "q1.fa\nnot-fasta.fa\n", r"job 000002 \(.*not-fasta\.fa\): .*no FASTA records"),
        ([], "q1.fa\nempty.fa\n", r"job 000002 \(.*empty\.fa\): .*empty file"),
        ([], "q1.fa\nsub\n", r"job 000002 \(.*sub\): cannot read"),
        # a FIFO nobody writes to held the plan for ever; the work jobs read each query again
        ([], "q1.fa\nfifo\n", r"job 000002 \(.*fifo\): cannot read .*fifo: not a regular file$"),
        ([], "q1.fa\n/dev/zero\n", r"job 000002 \(/dev/zero\): cannot read /dev/zero: not a"),
    ],
)
def test_batch_refusals(batch, tmp_path, capfd, extra, text, pattern):
    d, _ = batch
    for q in ("ref.fa", "q1.fa"):
        shutil.copy(d / q, tmp_path / q)
    (tmp_path / "not-fasta.fa").write_text("this is not a sequence file\n")
    (tmp_path / "empty.fa").write_bytes(b"")
    (tmp_path / "sub").mkdir()
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "list.txt").write_text(text or "q1.fa\n")
    argv = [
        "run",
        "-r",
        str(tmp_path / "ref.fa"),
        "--query-list",
        str(tmp_path / "list.txt"),
        "-o",
        str(tmp_path / "out"),
        *FLAGS,
        "--backend",
        "cpu",
    ]
    assert_refused(
        capfd, argv + [a.format(d=tmp_path) for a in extra], 2, pattern, tmp_path, chatter=True
    )


def test_benchmark_refuses_a_query_list(batch, tmp_path, capfd):
    d, _ = batch
    assert_refused(
        capfd,
        [
            "benchmark",
            "-r",
            str(d / "ref.fa"),
            "-q",
            str(d / "q1.fa"),
            "--query-list",
            str(d / "sub" / "list.txt"),
        ],
        2,
        r"benchmark cannot use --query-list",
        tmp_path,
    )


def test_a_job_the_memory_budget_refuses_is_named(batch, tmp_path, capfd, monkeypatch):
    d, _ = batch
    (tmp_path / "list.txt").write_text(f"{d / 'q2.fa'}\n{d / 'q3.fa'}\n")
    monkeypatch.setenv("HSPZ_HOST_MEMORY_BYTES", str(10 << 20))
    assert_refused(
        capfd,
        [
            "run",
            "-r",
            str(d / "ref.fa"),
            "--query-list",
            str(tmp_path / "list.txt"),
            "-o",
            str(tmp_path / "out"),
            *FLAGS,
            "--backend",
            "cpu",
        ],
        2,
        r"job 000001 \(.*q2\.fa\): memory preflight: ",
        tmp_path,
        chatter=True,
    )


def test_jobs_with_other_reference_bins_are_refused():
    with pytest.raises(
        Exception,
        match=r"job 000002 \(b\.fa\) plans 2 reference bin\(s\) where "
        r"job 000001 plans 1",
    ):
        bt.check_same_reference_bins([((0, 1),), ((0,), (1,))], ["a.fa", "b.fa"])


def peak_rss_kib(argv: list[str]) -> int:
    """Peak RSS of a command, measured by a process of its own that only waits for it."""
    import subprocess
    import sys

    probe = (
        "import resource, subprocess, sys\n"
        "done = subprocess.run(sys.argv[1:], capture_output=True)\n"
        "assert done.returncode == 0, done.stderr.decode()[-2000:]\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return int(out.stdout)


@pytest.mark.slow
def test_a_thousand_job_batch_needs_the_memory_of_its_largest_job(tmp_path):
    """Memory follows the largest job, not the batch: 1,000 queries of 1-2 kbp run in peak RSS
    within 1.5x that of the largest one run alone."""
    import sys

    import numpy as np
    from helpers import mutate, random_dna, write_fasta

    rng = np.random.default_rng(11)
    ref = random_dna(rng, 50_000)
    write_fasta(tmp_path / "ref.fa", [("r", ref)])
    lines = []
    for k in range(1000):
        n = 2000 if k == 500 else int(rng.integers(1000, 1800))
        at = int(rng.integers(0, len(ref) - n))
        write_fasta(tmp_path / f"q{k}.fa", [(f"q{k}", mutate(rng, ref[at : at + n], 0.1))])
        lines.append(f"q{k}.fa")
    (tmp_path / "list.txt").write_text("\n".join(lines) + "\n")
    hspz = [
        sys.executable,
        "-m",
        "hspz",
        "run",
        "-r",
        str(tmp_path / "ref.fa"),
        "--backend",
        "cpu",
        "-s",
        "111011001011",
        "-H",
        "1500",
    ]
    alone = peak_rss_kib(hspz + ["-q", str(tmp_path / "q500.fa"), "-o", str(tmp_path / "a")])
    batch = peak_rss_kib(
        hspz + ["--query-list", str(tmp_path / "list.txt"), "-o", str(tmp_path / "b")]
    )
    assert len((tmp_path / "b" / "queries.tsv").read_text().splitlines()) == 1001
    assert outputs(tmp_path / "b" / "000501") == outputs(tmp_path / "a")
    assert batch <= 1.5 * alone, (batch, alone)


@pytest.fixture
def gpu_shaped(monkeypatch):
    """`hspZ plan --query-list` planned as for one H200 (a GPU plan's budget and devices)
    while the CPU backend is selected: the path a GPU plan takes through the query reads."""
    from hspz.commands import query_list as ql
    from hspz.planning.schedule import DeviceProfile, Devices

    h200 = Devices("gpu", (DeviceProfile(132, 60 << 20, 1_980_000, "H200"),), (141 << 30,))
    monkeypatch.setattr(ql, "devices_for", lambda engine, workers: h200)
    monkeypatch.setattr("hspz.run.freeze.device_budget", lambda devices, workers: 100 << 30)
    return ql


def twobit_list(d: Path, tmp_path: Path) -> Path:
    from hspz.io.readers import read_records
    from hspz.io.records import Record
    from hspz.io.twobit import write_2bit

    held = np.frombuffer(b"ACGTNacgtn", np.uint8)
    for name in ("q1", "q2", "q3"):
        recs = read_records(d / f"{name}.fa")  # as 2bit: any other symbol becomes N
        recs = [Record(r.name, np.where(np.isin(r.seq, held), r.seq, ord("N"))) for r in recs]
        write_2bit(tmp_path / f"{name}.2bit", recs)
    (tmp_path / "list.txt").write_text("q1.2bit\nq2.2bit\nq3.2bit\nq1.2bit\n")
    return tmp_path / "list.txt"


def plan_argv(d: Path, query_list: Path, out: Path) -> list[str]:
    return ["plan", "-r", str(d / "ref.fa"), "--query-list", str(query_list), "-o", str(out)]


def test_a_gpu_plan_reads_its_queries_ahead_without_bases_into_the_same_plan_file(
    batch, tmp_path, gpu_shaped, monkeypatch
):
    d, _ = batch
    query_list = twobit_list(d, tmp_path)
    argv = [*FLAGS, "--backend", "cpu"]
    kept: list = []

    def planned(path: str, bases: bool) -> tuple:
        read = plan_query(path, bases)
        kept.append((bases, [hasattr(r, "seq") for r in read[0]]))
        return read

    plan_query = gpu_shaped.planned_query
    monkeypatch.setattr(gpu_shaped, "planned_query", planned)
    assert main([*plan_argv(d, query_list, tmp_path / "ahead.plan"), *argv]) == 0
    assert len(kept) == 4 and not any(bases or any(seq) for bases, seq in kept)
    # the read as it was: every query decoded and kept, one at a time
    monkeypatch.setattr(
        gpu_shaped, "query_reads", lambda listed, bases: (plan_query(q.path, True) for q in listed)
    )
    assert main([*plan_argv(d, query_list, tmp_path / "kept.plan"), *argv]) == 0
    assert (tmp_path / "ahead.plan").read_bytes() == (tmp_path / "kept.plan").read_bytes()


def test_a_bad_2bit_query_of_a_gpu_plan_is_one_line_naming_its_job(
    batch, tmp_path, capfd, gpu_shaped
):
    d, _ = batch
    query_list = twobit_list(d, tmp_path)
    data = (tmp_path / "q3.2bit").read_bytes()
    (tmp_path / "q3.2bit").write_bytes(data[: len(data) // 2])  # truncated
    assert_refused(
        capfd,
        [*plan_argv(d, query_list, tmp_path / "x.plan"), *FLAGS, "--backend", "cpu"],
        2,
        r"job 000003 \(.*q3\.2bit\): .*q3\.2bit: .*past the end of the file",
        tmp_path,
        chatter=True,  # the list's note on job 000004
    )


def test_a_users_file_named_like_the_batch_record_is_refused_and_kept(batch, tmp_path, capfd):
    """OUT/.hspz-retired that no batch wrote is refused before any work and left as it was; the
    record a killed batch left is taken over (the batch's own)."""
    d, _ = batch
    out = tmp_path / "out"
    out.mkdir()
    mine = out / ".hspz-retired"
    mine.write_text("my notes\n")
    argv = ["run", "-r", str(d / "ref.fa"), "--query-list", str(d / "sub" / "list.txt")]
    argv += ["-o", str(out), *FLAGS, "--backend", "cpu"]
    assert main(argv) == 2
    assert "is not the record a batch keeps there" in capfd.readouterr().err
    assert mine.read_text() == "my notes\n"
    assert sorted(p.name for p in out.iterdir()) == [".hspz-retired"]
    mine.write_text('{"hspz": "batch", "entries": ["000007"]}\n')  # a killed batch's record
    assert main(argv) == 0
    assert (out / "queries.tsv").is_file() and not mine.exists()


@pytest.mark.parametrize("name", [".hspz-retired", "queries.tsv"])
@pytest.mark.parametrize("linked", [False, True])
def test_a_fifo_under_a_batch_name_is_refused_without_waiting_on_it(batch, tmp_path, name, linked):
    """A FIFO (or a link to one) at OUT/.hspz-retired or OUT/queries.tsv is refused at once and
    kept: the check never opens it to wait for a writer (found by the adversarial pass: the
    record's read hung the run and merge for ever)."""
    import os
    import subprocess
    import sys

    d, _ = batch
    out = tmp_path / "out"
    out.mkdir()
    fifo = tmp_path / "fifo" if linked else out / name
    os.mkfifo(fifo)
    if linked:
        (out / name).symlink_to(fifo)
    argv = ["run", "-r", str(d / "ref.fa"), "--query-list", str(d / "sub" / "list.txt")]
    argv += ["-o", str(out), *FLAGS, "--backend", "cpu"]
    try:
        done = subprocess.run(
            [sys.executable, "-m", "hspz", *argv], capture_output=True, text=True, timeout=20
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"a FIFO at OUT/{name} hung the run")
    assert done.returncode == 2
    assert f"{out / name} is " in done.stderr
    assert (out / name).is_symlink() == linked and fifo.exists()
    assert sorted(p.name for p in out.iterdir()) == [name]


@pytest.mark.parametrize(
    "record",
    [
        '{"hspz": "batch", "entries": ["../notes", "/etc/passwd"]}',
        '{"hspz": "batch", "entries": [1, null]}',
        '{"hspz": "batch", "entries": ["000001", "000001/../x"]}',
    ],
)
def test_a_record_naming_what_no_batch_records_is_refused_and_kept(batch, tmp_path, capfd, record):
    """A batch records job entry names only: a record with anything else in its entries is a
    user's file, refused and kept (found by the adversarial pass: it was replaced)."""
    d, _ = batch
    out = tmp_path / "out"
    out.mkdir()
    mine = out / ".hspz-retired"
    mine.write_text(record)
    argv = ["run", "-r", str(d / "ref.fa"), "--query-list", str(d / "sub" / "list.txt")]
    argv += ["-o", str(out), *FLAGS, "--backend", "cpu"]
    assert main(argv) == 2
    assert "is not the record a batch keeps there" in capfd.readouterr().err
    assert mine.read_text() == record


def test_the_plan_hashes_the_very_bytes_its_records_came_from(batch, tmp_path, monkeypatch):
    """A query edited while the plan reads it: the size and sha256 the plan records for the
    job are those of the bytes its records were decoded from (the file is read once), so the
    work jobs' check refuses the edited file instead of running it under another's records."""
    from hspz.commands import query_list
    from hspz.formats.planfile import read_plan

    d, _ = batch
    original = (d / "q1.fa").read_bytes()
    (tmp_path / "q1.fa").write_bytes(original)
    (tmp_path / "list.txt").write_text("q1.fa\n")
    hashed, first = query_list.HashedRecords, original.split()[0][1:].decode()

    def editing(records, *args):  # the query's records made: the file edited before any hash
        if records and records[0].name == first:
            (tmp_path / "q1.fa").write_bytes(original + b">appended\nACGTACGTAC\n")
        return hashed(records, *args)

    monkeypatch.setattr(query_list, "HashedRecords", editing)
    plan = tmp_path / "plan.txt"
    argv = ["plan", "-r", str(d / "ref.fa"), "--query-list", str(tmp_path / "list.txt")]
    assert main([*argv, *FLAGS, "--backend", "cpu", "-o", str(plan)]) == 0
    (job,) = read_plan(str(plan)).jobs
    assert (job.size, job.sha256) == (len(original), hashlib.sha256(original).hexdigest())
    assert (tmp_path / "q1.fa").read_bytes() != original  # the edit did land mid-plan
