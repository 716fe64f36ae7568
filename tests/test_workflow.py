"""The Snakemake workflow: lints and formats clean, resolves under both profiles, validates its
config in one line, writes results/<job>/ byte for byte as `hspZ run --query-list` does (a sheet,
a list file, one query), reruns nothing that was done when rows are added or reordered, resumes
a killed work job unit by unit, and makes its report and gapped stage."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers import mutate, write_fasta
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent  # snakemake's shell jobs must find this environment's hspZ
ENV = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
HAVE_SLURM_PLUGIN = importlib.util.find_spec("snakemake_executor_plugin_slurm") is not None
HAVE_LASTZ = shutil.which("lastz") is not None

# Three 3 kbp reference records with -B 3000 give three reference bins: workers: 2 really splits
# the work, and workers: 5 is cut to three by the plan.
OPTIONS = {"seq_block_size": 3000, "hspthresh": 2000}
SHEET = [("alpha", "q1.fa"), ("beta", "q2.fa"), ("gamma", "q3.fa")]
JOBS = [
    {
        "name": "sheet",
        "reference": "ref.fa",
        "queries": "queries.tsv",
        "workers": 2,
        "index": True,
        "gapped": HAVE_LASTZ,
        "options": OPTIONS,
    },
    {
        "name": "listed",
        "reference": "ref.fa",
        "query_list": "lists/queries.txt",
        "workers": 5,
        "index": False,
        "diagonal_partition": True,
        "tarball": True,
        "report": False,
        "options": {**OPTIONS, "xdrop": 800},
    },
    {
        "name": "single",
        "reference": "ref.fa",
        "query": "q2.fa",
        "index": False,
        "report": False,
        "options": OPTIONS,
    },
]
# job -> (its queries in job order, the hspZ flags that reproduce it)
EXPECTED = {
    "sheet": (["q1.fa", "q2.fa", "q3.fa"], []),
    "listed": (["q2.fa", "q1.fa"], ["-D", "-Z", "--xdrop", "800"]),
    "single": (["q2.fa"], []),
}


def snakemake(
    workdir: Path, config: Path, *args: str, profile: str | None = "local", env: dict | None = None
) -> subprocess.CompletedProcess:
    """Snakemake on the repository's workflow, working in `workdir` so the checkout stays clean."""
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "workflow" / "Snakefile")]
    cmd += ["--directory", str(workdir), "--configfile", str(config), *args]
    if profile:
        cmd += ["--profile", str(ROOT / "profiles" / profile)]
        cmd += slurm_executor() if profile == "slurm" else []
    return subprocess.run(cmd, capture_output=True, text=True, env=env or ENV, timeout=900)


def hspz(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "hspZ"), *args], capture_output=True, text=True, env=ENV)


def slurm_executor() -> list[str]:
    """Without the plugin the SLURM profile still resolves every resource in a local dry run."""
    return [] if HAVE_SLURM_PLUGIN else ["--executor", "local"]


def revcomp(seq: np.ndarray) -> np.ndarray:
    return np.frombuffer(seq.tobytes()[::-1].translate(bytes.maketrans(b"ACGT", b"TGCA")), np.uint8)


def make_workdir(workdir: Path, jobs: list[dict] | None = None, sheet=SHEET) -> Path:
    """A reference, three related queries, a sheet, a list file and a config.yaml in
    `workdir`; returns the config."""
    rng = np.random.default_rng(11)
    bases = np.frombuffer(b"ACGT", dtype=np.uint8)
    ref = {f"chr{i}": bases[rng.integers(0, 4, 3000)] for i in (1, 2, 3)}
    queries = {
        "q1.fa": {
            "q1a": mutate(rng, ref["chr1"][400:2600], 0.04),
            "q1b": revcomp(mutate(rng, ref["chr3"][100:2300], 0.07)),
        },
        "q2.fa": {
            "q2a": np.concatenate(
                [mutate(rng, ref["chr2"][0:1500], 0.05), bases[rng.integers(0, 4, 800)]]
            )
        },
        "q3.fa": {"q3a": mutate(rng, ref["chr3"][500:2900], 0.03)},
    }
    workdir.mkdir(parents=True, exist_ok=True)
    write_fasta(workdir / "ref.fa", ref)
    for name, records in queries.items():
        write_fasta(workdir / name, records)
    write_sheet(workdir, sheet)
    (workdir / "lists").mkdir(exist_ok=True)
    (workdir / "lists" / "queries.txt").write_text(
        "# relative to this list\n../q2.fa\n\n../q1.fa\n"
    )
    jobs = [{**job, "backend": "cpu", "threads": 1} for job in (jobs or JOBS)]
    config = workdir / "config.yaml"
    config.write_text(yaml.safe_dump({"jobs": jobs}, sort_keys=False))
    return config


def write_sheet(workdir: Path, rows) -> None:
    (workdir / "queries.tsv").write_text("name\tpath\n" + "".join(f"{n}\t{p}\n" for n, p in rows))


def run_flags(job: dict) -> list[str]:
    return [f"--{key.replace('_', '-')}={value}" for key, value in job["options"].items()]


def tree(directory: Path) -> dict[str, bytes]:
    """Every file below `directory` by relative path, but Snakemake's timestamps."""
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and p.name != ".snakemake_timestamp"
    }


def dry_run_jobs(done: subprocess.CompletedProcess, rule: str) -> list[str]:
    """The job blocks of one rule (or checkpoint) in a dry run's listing."""
    blocks = re.split(r"\n(?:rule|checkpoint) ", done.stdout + done.stderr)
    return [block for block in blocks if block.startswith(f"{rule}:")]


def test_snakemake_lint_passes() -> None:
    done = snakemake(ROOT, ROOT / "config" / "config.yaml", "--lint", profile=None)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_rules_are_snakefmt_clean() -> None:
    done = subprocess.run(
        [str(BIN / "snakefmt"), "--check", str(ROOT / "workflow")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_dry_run_resolves_under_local_and_slurm_profiles(tmp_path: Path) -> None:
    config = make_workdir(tmp_path)
    for profile in ("local", "slurm"):
        done = snakemake(tmp_path, config, "-n", "-p", profile=profile)
        assert done.returncode == 0, done.stdout + done.stderr
        plans = dry_run_jobs(done, "hspz_plan")
        assert sorted(job.split("wildcards: batch=")[1].split()[0] for job in plans) == sorted(
            EXPECTED
        )
        assert len(dry_run_jobs(done, "hspz_index")) == 1  # one reference, one layout
        assert all("gpu=0" in job for job in plans)  # backend cpu: no GPU asked for
        # a cluster's plans count seed hits for the work jobs' runtime; the local profile's not
        counted = ["--sizes-hits" in job for job in plans]
        assert counted == [profile == "slurm"] * len(plans), (profile, plans)
    slurm = yaml.safe_load((ROOT / "profiles" / "slurm" / "config.v8+.yaml").read_text())
    assert slurm["executor"] == "slurm"


# snakemake with one exit hook of its own, registered before snakemake's and so run after them:
# how many objects are frozen as the interpreter goes down
FROZEN_AT_EXIT = """
import atexit, gc, runpy, sys
atexit.register(lambda: print("frozen at exit:", gc.get_freeze_count(), file=sys.stderr))
sys.argv = ["snakemake", *sys.argv[1:]]
runpy.run_module("snakemake", run_name="__main__")
"""


def test_snakemake_exits_when_the_last_job_is_done(tmp_path: Path) -> None:
    """The scheduler's rescheduling timers (a thread each, not daemons) are cancelled when the
    workflow ends (`cancel_rescheduling`): snakemake exits soon after its last line, not a
    --max-jobs-per-timespan window (1 s) later.  Its objects are frozen then
    (`freeze_for_exit`), so that the exit's collection skips them."""
    import time

    config = make_workdir(tmp_path, [JOBS[2]])
    cmd = [sys.executable, "-c", FROZEN_AT_EXIT]
    cmd += ["--snakefile", str(ROOT / "workflow" / "Snakefile")]
    cmd += ["--directory", str(tmp_path), "--configfile", str(config)]
    cmd += ["--profile", str(ROOT / "profiles" / "local")]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=ENV)
    assert proc.stderr is not None
    last, frozen = None, None
    for line in proc.stderr:
        if line.startswith("Complete log"):
            last = time.monotonic()
        if line.startswith("frozen at exit:"):
            frozen = int(line.split(":")[1])
    proc.wait(timeout=600)
    ended = time.monotonic()
    assert proc.returncode == 0 and last is not None
    assert ended - last < 0.6, f"snakemake exited {ended - last:.2f} s after its last line"
    assert frozen is not None and frozen > 10_000, frozen


def test_backend_gpu_asks_a_gpu_for_its_plan_job(tmp_path: Path) -> None:
    """Its work jobs, which a dry run lists only once the plan is done:
    test_each_work_job_takes_its_own_workers_size_and_a_gpu_where_its_job_asks."""
    config = make_workdir(tmp_path, [JOBS[2]])
    job = yaml.safe_load(config.read_text())["jobs"][0]
    config.write_text(yaml.safe_dump({"jobs": [{**job, "backend": "gpu"}]}))
    done = snakemake(tmp_path, config, "-n", profile="slurm")
    assert done.returncode == 0, done.stdout + done.stderr
    assert all("gpu=1" in job for job in dry_run_jobs(done, "hspz_plan"))


@pytest.mark.parametrize(
    "job, message",
    [
        (
            {**JOBS[2], "options": {"max_hitz": 5}},
            r"config\.jobs\[0\]\.options: Additional "
            r"properties are not allowed \('max_hitz'",
        ),
        ({**JOBS[2], "workers": 0}, r"config\.jobs\[0\]\.workers: 0 is less than the minimum"),
        (
            {"name": "x", "reference": "ref.fa"},
            r"config: jobs\[0\] \(x\) needs exactly one of "
            r"query, queries and query_list",
        ),
        ({**JOBS[2], "name": "reports"}, r"config\.jobs\[0\]\.name: 'reports' should not be"),
        (
            {**JOBS[2], "gapped": True, "tarball": True},
            r"config: job single: gapped: true needs "
            r"the segments folders",
        ),
        (
            {**JOBS[2], "gapped_format": "sam"},
            r"config\.jobs\[0\]\.gapped_format: 'sam' is not "
            r"one of \['maf', 'maf-', 'axt'",
        ),
    ],
)
def test_a_bad_config_is_one_clear_line(tmp_path: Path, job: dict, message: str) -> None:
    make_workdir(tmp_path)  # the inputs exist: each case fails on its own fault alone
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"jobs": [job]}))
    done = snakemake(tmp_path, bad, "-n", "--cores", "1", profile=None)
    out = done.stdout + done.stderr
    assert done.returncode != 0 and re.search(message, out), out
    assert "Failed validating" not in out and out.count("\n") < 12, out


def test_sheet_rows_with_their_own_options_form_batches_of_their_own(tmp_path: Path) -> None:
    config = make_workdir(tmp_path, [JOBS[0]])
    (tmp_path / "queries.tsv").write_text(
        "name\tpath\thspthresh\nalpha\tq1.fa\t\nbeta\tq2.fa\t2500\ngamma\tq3.fa\t\n"
    )
    done = snakemake(tmp_path, config, "-n")
    assert done.returncode == 0, done.stdout + done.stderr
    plans = dry_run_jobs(done, "hspz_plan")
    assert sorted(job.split("wildcards: batch=")[1].split()[0] for job in plans) == [
        "sheet/g1",
        "sheet/g2",
    ]


@pytest.fixture(scope="module")
def workflow_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The workflow run once with the local profile in a scratch directory."""
    workdir = tmp_path_factory.mktemp("workflow")
    # one gapped job per segments file: the gather has several parts to put in order
    config = make_workdir(workdir, [{**JOBS[0], "gapped_group_bytes": 1}, *JOBS[1:]])
    done = snakemake(workdir, config, "--cores", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    return workdir


@pytest.mark.parametrize("name", list(EXPECTED))
def test_results_are_byte_identical_to_run_query_list(workflow_run: Path, name: str) -> None:
    queries, flags = EXPECTED[name]
    job = next(j for j in JOBS if j["name"] == name)
    listing = workflow_run / f"{name}.list"
    listing.write_text("".join(f"{workflow_run / q}\n" for q in queries))
    out = workflow_run / "run" / name
    done = hspz(
        "run",
        "--reference",
        str(workflow_run / "ref.fa"),
        "--query-list",
        str(listing),
        "--output",
        str(out),
        "--backend",
        "cpu",
        *run_flags(job),
        *flags,
    )
    assert done.returncode == 0, done.stderr
    expected = tree(out)
    assert len(expected) > len(queries), "the test pair should produce HSPs"
    got = tree(workflow_run / "results" / name)
    assert got.pop("names.tsv").decode().splitlines()[0] == "name\tjob\tpath"
    assert got == expected


def test_a_jobs_options_and_flags_reach_its_plan_and_merge(workflow_run: Path) -> None:
    """On this small pair `-D` splits no file and --xdrop 800 changes no HSP, so the byte
    comparison above cannot see them: the listed job's plan says xdrop 800 (the sheet's the
    default 910), and its merge, and only its, is given -D."""
    assert "xdrop 800" in (workflow_run / "work" / "listed" / "plan.txt").read_text().splitlines()
    assert "xdrop 910" in (workflow_run / "work" / "sheet" / "plan.txt").read_text().splitlines()
    done = snakemake(
        workflow_run, workflow_run / "config.yaml", "-n", "-p", "--forcerun", "hspz_merge"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    merges = {
        re.search(r"wildcards: batch=(\w+)", job)[1]: job
        for job in dry_run_jobs(done, "hspz_merge")
    }
    assert sorted(merges) == ["listed", "sheet", "single"]
    for batch, job in merges.items():
        assert (re.search(r"hspZ merge .* -D( |$)", job, re.M) is not None) == (batch == "listed")


def test_names_tsv_maps_sheet_names_to_job_numbers(workflow_run: Path) -> None:
    rows = (workflow_run / "results" / "sheet" / "names.tsv").read_text().splitlines()
    assert rows[1:] == [f"{n}\t{k:06d}\t{workflow_run / p}" for k, (n, p) in enumerate(SHEET, 1)]


def test_work_jobs_are_the_planned_workers_not_more_than_reference_bins(workflow_run: Path):
    for name, expected in (("sheet", 2), ("listed", 3), ("single", 1)):
        results = sorted(p.name for p in (workflow_run / "work" / name).glob("*.result"))
        assert results == [f"worker{k}.result" for k in range(expected)]
    assert len(list((workflow_run / "work" / "index").iterdir())) == 1
    for rule in (
        "hspz_index",
        "hspz_plan",
        "hspz_work",
        "hspz_merge",
        "hspz_dotplot",
        "hspz_summary",
    ):
        assert any((workflow_run / "logs" / rule).rglob("*.log")), f"no log for {rule}"


def test_the_report_holds_a_summary_and_a_dot_plot_per_query(workflow_run: Path) -> None:
    reports = workflow_run / "results" / "reports" / "sheet"
    assert sorted(p.name for p in reports.iterdir()) == [
        "000001.dotplot.png",
        "000001.hsps.png",
        "000002.dotplot.png",
        "000002.hsps.png",
        "000003.dotplot.png",
        "000003.hsps.png",
        "summary.html",
        "summary.tsv",
    ]
    rows = [r.split("\t") for r in (reports / "summary.tsv").read_text().splitlines()]
    assert [r[0] for r in rows[1:]] == ["alpha", "beta", "gamma"]
    assert rows[0][:3] == ["name", "job", "path"] and "hits" in rows[0]
    done = snakemake(
        workflow_run, workflow_run / "config.yaml", "--report", str(workflow_run / "report.html")
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (workflow_run / "report.html").stat().st_size > 10_000


def report_results(html: str) -> dict:
    """The report's items: path -> name, labels, caption, data URI (its `var results`)."""
    import json

    return json.JSONDecoder().raw_decode(html[html.index("var results = {") + 14 :])[0]


def test_the_report_names_the_run_and_shows_tables_plots_and_alignments(workflow_run: Path):
    """The landing page names each batch's reference, queries, options, hspZ version and total
    HSPs; the summary is an HTML table (not a download); the plots are labelled by sheet name;
    the gapped alignments are items when made; every item has a caption."""
    import base64

    from hspz import __version__

    html = workflow_run / "report.html"
    if not html.exists():
        done = snakemake(workflow_run, workflow_run / "config.yaml", "--report", str(html))
        assert done.returncode == 0, done.stdout + done.stderr
    text = html.read_text()
    landing = text[text.index("var workflow_desc") :][:20_000]
    total = sum(
        int(r.split("\t")[6])
        for r in (workflow_run / "results" / "sheet" / "queries.tsv").read_text().splitlines()[1:]
    )
    for fact in (
        'Batch <tt class=\\"docutils literal\\">sheet',
        "ref.fa",
        "3 (alpha, beta, gamma)",
        f"<td>{total:,}</td>",
        "--hspthresh",
        f"<td>{__version__}</td>",
        'Batch <tt class=\\"docutils literal\\">listed',
    ):
        assert fact in landing, fact
    results = report_results(text)
    summary = results["results/reports/sheet/summary.html"]
    page = base64.b64decode(summary["data_uri"].split(",", 1)[1]).decode()
    assert summary["data_uri"].startswith("data:text/html") and "<table>" in page
    assert all(f"<td>{name}</td>" in page for name in ("alpha", "beta", "gamma"))
    plots = {k: v for k, v in results.items() if k.endswith(".png")}
    assert len(plots) == 6
    assert sorted(v["labels"]["query"] for v in plots.values()) == sorted(
        ["alpha", "beta", "gamma"] * 2
    )
    gapped = sorted(k for k in results if k.startswith("results/gapped/"))
    assert gapped == (
        [f"results/gapped/sheet/00000{k}.maf" for k in (1, 2, 3)] if HAVE_LASTZ else []
    )
    assert all(len(v["caption"]) > 200 for v in results.values())


@pytest.mark.lastz
@pytest.mark.skipif(not HAVE_LASTZ, reason="lastz is not installed")
def test_the_gapped_stage_writes_one_maf_per_query_with_lastz(workflow_run: Path) -> None:
    """One job per segments file (gapped_group_bytes: 1), gathered per query: the bytes of
    `hspZ gapped` over all of the query's files in one process."""
    gapped = workflow_run / "results" / "gapped" / "sheet"
    mafs = sorted(gapped.iterdir())
    assert [p.name for p in mafs] == ["000001.maf", "000002.maf", "000003.maf"]
    groups = [
        (workflow_run / "work" / "sheet" / "gapped" / p.stem / "groups.txt")
        .read_text()
        .splitlines()
        for p in mafs
    ]
    assert all(len(g.split()) == 1 for group in groups for g in group)
    assert max(len(g) for g in groups) > 1, "a query should have several files"
    for maf in mafs:
        text = maf.read_text()
        assert text.startswith("##maf version=1") and "\na score=" in text
        whole = workflow_run / f"whole.{maf.name}"
        done = hspz(
            "gapped",
            "--plan",
            str(workflow_run / "work" / "sheet" / "plan.txt"),
            "--job",
            maf.stem,
            "--output",
            str(whole),
            str(workflow_run / "results" / "sheet" / maf.stem),
        )
        assert done.returncode == 0, done.stderr
        assert whole.read_bytes() == maf.read_bytes()


def units_computed(workdir: Path, batch: str) -> int:
    """Units the last work jobs of a batch computed (their logs' `ran N unit(s)` lines)."""
    logs = (workdir / "logs" / "hspz_work" / batch).glob("*.log")
    return sum(int(re.search(r"ran (\d+) unit\(s\)", p.read_text()).group(1)) for p in logs)


def test_adding_and_reordering_sheet_rows_recomputes_nothing_that_was_done(tmp_path: Path):
    """Rows keyed by name: a rerun after the sheet gains a row and is reordered computes only
    the new row's units (3 reference bins x 1 query bin), and writes what a fresh run writes."""
    config = make_workdir(tmp_path, [JOBS[0]], SHEET[:2])
    done = snakemake(tmp_path, config, "--cores", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert units_computed(tmp_path, "sheet") == 9  # q1: 2 query bins, q2: 1; 3 reference bins
    write_sheet(tmp_path, [SHEET[2], SHEET[1], SHEET[0]])
    done = snakemake(tmp_path, config, "--cores", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert units_computed(tmp_path, "sheet") == 3
    fresh = make_workdir(tmp_path / "fresh", [JOBS[0]], [SHEET[2], SHEET[1], SHEET[0]])
    assert snakemake(tmp_path / "fresh", fresh, "--cores", "2").returncode == 0
    names = ("names.tsv", "queries.tsv")  # hold the folders' own paths
    got, want = tree(tmp_path / "results" / "sheet"), tree(tmp_path / "fresh" / "results" / "sheet")
    assert {k: v for k, v in got.items() if k not in names} == {
        k: v for k, v in want.items() if k not in names
    }


def test_a_killed_work_job_is_rerun_and_computes_only_its_missing_units(tmp_path: Path):
    """A work job SIGKILLed after its second unit (HSPZ_FAULT) fails the run; the rerun
    (--rerun-incomplete) finds those two units and computes the rest, and the merged result is
    the bytes of an unbroken run."""
    config = make_workdir(
        tmp_path, [{**JOBS[2], "workers": 1, "options": {**OPTIONS, "seq_block_size": 1000}}]
    )
    killed = snakemake(
        tmp_path, config, "--cores", "1", "--retries", "0", env={**ENV, "HSPZ_FAULT": "work-unit:2"}
    )
    assert killed.returncode != 0
    assert not (tmp_path / "results" / "single" / "queries.tsv").exists()
    done = snakemake(tmp_path, config, "--cores", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    log = (tmp_path / "logs" / "hspz_work" / "single" / "0.log").read_text()
    assert "work: worker 0 resumes: 2 of 3 unit(s) already done" in log
    assert "ran 1 unit(s)" in log
    listing = tmp_path / "one.list"
    listing.write_text(f"{tmp_path / 'q2.fa'}\n")
    ref = hspz(
        "run",
        "-r",
        str(tmp_path / "ref.fa"),
        "--query-list",
        str(listing),
        "-o",
        str(tmp_path / "ref-run"),
        "--backend",
        "cpu",
        "--seq-block-size=1000",
        "--hspthresh=2000",
    )
    assert ref.returncode == 0, ref.stderr
    got = tree(tmp_path / "results" / "single")
    got.pop("names.tsv")
    assert got == tree(tmp_path / "ref-run")


# --- issue 23: sheets and configs checked at parse time, no text reaches a shell unquoted ----


def parse_error(tmp_path: Path, config: Path, dry: bool = True) -> str:
    """A run (a dry run unless `dry` is false) that must be refused at parse time: its
    one-line error, no traceback."""
    done = snakemake(tmp_path, config, *(["-n"] if dry else []), "--cores", "1", profile=None)
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    assert "Traceback" not in out and out.count("\n") < 12, out
    return out


@pytest.mark.parametrize(
    "header, row, message",
    [
        # class 3: column names are never flags; reserved and repeated columns are refused
        (
            "name\tpath\tx||touch${IFS}PWNED||true",
            "alpha\tq1.fa\t1",
            r"queries\.tsv: column 'x\|\|touch\$\{IFS\}PWNED\|\|true' is not a run option",
        ),
        (
            "name\tpath\tquery_list",
            "alpha\tq1.fa\tlists/queries.txt",
            r"queries\.tsv: column 'query_list' is reserved",
        ),
        ("name\tpath\tpath", "alpha\tq1.fa\tq2.fa", r"queries\.tsv: column 'path' is given twice"),
        (
            "name\tpath\tseq_block_size",
            "alpha\tq1.fa\t5000",
            r"queries\.tsv: column 'seq_block_size' decides the reference bins",
        ),
        # class 4: cells typed by the options' schema, empty and unknown cells named by row
        (
            "name\tpath\txdrop",
            "alpha\tq1.fa\tabc",
            r"queries\.tsv: row 2, column xdrop: 'abc' is not of type 'integer'",
        ),
        ("name\tpath\tstrand", "alpha\tq1.fa\tboth;ls", r"queries\.tsv: row 2, column strand: "),
        ("name\tpath\thspthresh", "alpha\tq1.fa\t-5", r"queries\.tsv: row 2, column hspthresh: "),
        (
            "name\tpath\txdorp",
            "alpha\tq1.fa\t5",
            r"queries\.tsv: column 'xdorp' is not a run option \(did you mean 'xdrop'\?\)",
        ),
        ("name\tpath", "alpha\t", r"queries\.tsv: row 2, column path: empty"),
        ("name\tpath", "\tq1.fa", r"queries\.tsv: row 2, column name: empty"),
        (
            "name\tpath",
            "alpha\tq1.fa\nalpha\tq2.fa",
            r"queries\.tsv: row 3, column name: 'alpha' is used twice \(first on row 2\)",
        ),
        ("name\tpath", "alpha\tmissing.fa", r"queries\.tsv: row 2, column path: .*missing\.fa"),
        ("name", "alpha", r"queries\.tsv: the sheet needs the columns name and path"),
    ],
)
def test_a_bad_sheet_is_one_line_naming_row_and_column(
    tmp_path: Path, header: str, row: str, message: str
) -> None:
    config = make_workdir(tmp_path, [JOBS[0]])
    (tmp_path / "queries.tsv").write_text(f"{header}\n{row}\n")
    out = parse_error(tmp_path, config, dry=False)  # a real run: a column that reached a
    assert re.search(message, out), out  # shell command would run it
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize(
    "jobs, message, extra",
    [
        ([JOBS[2]], r"config\.work: 'w o;rk' does not match", {"work": "w o;rk"}),
        (
            [{**JOBS[2], "lastz": "lastz;ls"}],
            r"config\.jobs\[0\]\.lastz: 'lastz;ls' does not match",
            {},
        ),
        (
            [JOBS[2], {**JOBS[2], "query": "q1.fa"}],
            r"config\.jobs\[1\]\.name: 'single' is used twice \(first by jobs\[0\]\)",
            {},
        ),
        ([{**JOBS[2], "name": "index"}], r"config\.jobs\[0\]\.name: 'index' should not be", {}),
        ([{**JOBS[2], "name": "gapped"}], r"config\.jobs\[0\]\.name: 'gapped' should not be", {}),
        ([{**JOBS[2], "name": "a;b"}], r"config\.jobs\[0\]\.name: 'a;b' does not match", {}),
        (
            [{**JOBS[2], "reference": ""}],
            r"config\.jobs\[0\]\.reference: .*empty|"
            r"config\.jobs\[0\]\.reference: '' should be non-empty",
            {},
        ),
        (
            [{**JOBS[2], "query": "nothere.fa"}],
            r"config\.jobs\[0\]\.query: nothere\.fa is not a file",
            {},
        ),
        (
            [{**JOBS[2], "reference": "nothere.fa"}],
            r"config\.jobs\[0\]\.reference: nothere\.fa is not a file",
            {},
        ),
    ],
)
def test_a_bad_job_list_is_one_line_before_any_job_runs(
    tmp_path: Path, jobs: list[dict], message: str, extra: dict
) -> None:
    config = make_workdir(tmp_path, jobs)
    config.write_text(yaml.safe_dump({**yaml.safe_load(config.read_text()), **extra}))
    out = parse_error(tmp_path, config)
    assert re.search(message, out), out


def hostile_workdir(workdir: Path) -> Path:
    """The test inputs under names a shell would split, expand or take for options: quotes,
    `;`, `$(...)`, spaces and a leading `-`, in the reference, the sheet's file name, its
    paths and names (job names and the results, work and logs folders are refused such
    characters by the schema)."""
    make_workdir(workdir)
    odd = "-x ;$(touch PWNED) 'q\" `touch PWNED2`"
    (workdir / f"{odd}ref.fa").write_bytes((workdir / "ref.fa").read_bytes())
    (workdir / f"{odd}q1.fa").write_bytes((workdir / "q1.fa").read_bytes())
    sheet = f"{odd}sheet.tsv"
    (workdir / sheet).write_text(
        f"name\tpath\txdrop\n{odd}alpha\t{odd}q1.fa\t900\nbeta$(touch PWNED)\tq2.fa\t900\n"
    )
    jobs = [
        {
            "name": "odd",
            "reference": f"{odd}ref.fa",
            "queries": sheet,
            "workers": 2,
            "backend": "cpu",
            "threads": 1,
            "index": True,
            "options": OPTIONS,
        },
        {
            "name": "plain",
            "reference": f"{odd}ref.fa",
            "query": f"{odd}q1.fa",
            "backend": "cpu",
            "threads": 1,
            "index": False,
            "report": False,
            "options": OPTIONS,
        },
    ]
    config = workdir / "config.yaml"
    config.write_text(yaml.safe_dump({"jobs": jobs}, sort_keys=False))
    return config


def test_hostile_names_reach_no_shell_and_give_run_query_lists_bytes(tmp_path: Path) -> None:
    config = hostile_workdir(tmp_path)
    done = snakemake(tmp_path, config, "--cores", "2")
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert not list(tmp_path.rglob("PWNED*")), "a shell ran text from the config or sheet"
    names = (tmp_path / "results" / "odd" / "names.tsv").read_text().splitlines()
    assert [row.split("\t")[0] for row in names[1:]] == [
        "-x ;$(touch PWNED) 'q\" `touch PWNED2`alpha",
        "beta$(touch PWNED)",
    ]
    listing = tmp_path / "odd.list"
    odd = "-x ;$(touch PWNED) 'q\" `touch PWNED2`"
    listing.write_text(f"{tmp_path / (odd + 'q1.fa')}\n")
    ref = hspz(
        "run",
        f"--reference={tmp_path / (odd + 'ref.fa')}",
        "--query-list",
        str(listing),
        "-o",
        str(tmp_path / "ref-run"),
        "--backend",
        "cpu",
        *run_flags({"options": OPTIONS}),
    )
    assert ref.returncode == 0, ref.stderr
    got = tree(tmp_path / "results" / "plain")
    got.pop("names.tsv")
    assert got == tree(tmp_path / "ref-run")


# --- the batch contract for results/<job>/ and its reports --------------------------------


def test_a_smaller_rerun_leaves_no_stale_job_folder_or_dot_plot(tmp_path: Path) -> None:
    job = {**JOBS[0], "workers": 1, "index": False, "gapped": False}
    config = make_workdir(tmp_path, [job])
    done = snakemake(tmp_path, config, "--cores", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    write_sheet(tmp_path, SHEET[:2])
    done = snakemake(tmp_path, config, "--cores", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    results = tmp_path / "results"
    assert sorted(p.name for p in (results / "sheet").iterdir()) == [
        "000001",
        "000002",
        "names.tsv",
        "queries.tsv",
    ]
    assert sorted(p.name for p in (results / "reports" / "sheet").iterdir()) == [
        "000001.dotplot.png",
        "000001.hsps.png",
        "000002.dotplot.png",
        "000002.hsps.png",
        "summary.html",
        "summary.tsv",
    ]


def test_a_deleted_job_folder_is_rebuilt(tmp_path: Path) -> None:
    job = {**JOBS[0], "workers": 1, "index": False, "gapped": False, "report": False}
    config = make_workdir(tmp_path, [job])
    done = snakemake(tmp_path, config, "--cores", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    before = tree(tmp_path / "results" / "sheet")
    shutil.rmtree(tmp_path / "results" / "sheet" / "000003")
    dry = snakemake(tmp_path, config, "-n")
    assert dry.returncode == 0 and dry_run_jobs(dry, "hspz_merge"), dry.stdout + dry.stderr
    done = snakemake(tmp_path, config, "--cores", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert tree(tmp_path / "results" / "sheet") == before
    again = snakemake(tmp_path, config, "-n")
    assert "Nothing to be done" in again.stdout + again.stderr


# --- issue 25: jobs sized from their plan, cores used, resume, deployment ------------------


def test_work_jobs_ask_for_their_plans_memory_and_time(workflow_run: Path) -> None:
    """`hspZ plan --sizes` gives every worker its memory (and with --sizes-hits, which the
    local profile leaves out, its seed hits and runtime); hspz_work's resources are those
    times retry_factor per attempt, far below the 32000 MB once asked."""
    sizes = (workflow_run / "work" / "sheet" / "sizes.tsv").read_text().splitlines()
    head = ["worker", "backend", "units", "hits", "mem_mb", "runtime_s"]
    assert sizes[0].split("\t") == head
    rows = [dict(zip(head, r.split("\t"), strict=True)) for r in sizes[1:]]
    assert [r["worker"] for r in rows] == ["0", "1"] and {r["backend"] for r in rows} == {"cpu"}
    assert sum(int(r["units"]) for r in rows) == 3 * 4  # 3 reference bins x 4 query bins
    assert all(100 < int(r["mem_mb"]) < 2000 and r["runtime_s"] == "-" for r in rows)
    # the local profile's config (size_runtime off): under another the plans would be redone
    done = snakemake(workflow_run, workflow_run / "config.yaml", "-n", "--forcerun", "hspz_work")
    assert done.returncode == 0, done.stdout + done.stderr
    work = [
        job
        for job in dry_run_jobs(done, "hspz_work")
        if re.search(r"^ +wildcards: (.*)$", job, re.M)[1].startswith("batch=sheet,")
    ]
    assert len(work) == 2
    for job in work:
        k = int(re.search(r"wildcards: batch=sheet, k=(\d+)", job)[1])
        mem = int(re.search(r"\bmem_mb=(\d+)", job)[1])
        assert mem == -(-int(rows[k]["mem_mb"]) * 3 // 2), job  # x 1.5 on the first attempt
        assert int(re.search(r"\bruntime=(\d+)", job)[1]) == 360  # no hits counted: 240 x 1.5
    sized = workflow_run / "sized.tsv"
    plan = hspz(
        "plan",
        "--index",
        str(next((workflow_run / "work" / "index").iterdir())),
        "-r",
        str(workflow_run / "ref.fa"),
        "--query-list",
        str(workflow_run / "work" / "sheet" / "queries.txt"),
        "--gpus",
        "2",
        "--backend",
        "cpu",
        "-t",
        "1",
        "--sizes",
        str(sized),
        "--sizes-hits",
        "-o",
        str(workflow_run / "sized.plan"),
        *run_flags({"options": OPTIONS}),
    )
    assert plan.returncode == 0, plan.stderr
    counted = [
        dict(zip(head, r.split("\t"), strict=True)) for r in sized.read_text().splitlines()[1:]
    ]
    assert [r["mem_mb"] for r in counted] == [r["mem_mb"] for r in rows]
    assert all(int(r["hits"]) > 0 and int(r["runtime_s"]) >= 5 for r in counted)


def test_each_work_job_takes_its_own_workers_size_and_a_gpu_where_its_job_asks(
    workflow_run: Path, tmp_path: Path
) -> None:
    """hspz_work's mem_mb and runtime come from its own worker's row of sizes.tsv, times
    retry_factor (the rows made to differ here: 300 and 700 MB, 600 and 1800 s), and a job
    whose backend is gpu asks a GPU for its work jobs, not only its plan (the plans done, the
    work jobs are listed; run's plans are not redone for the changed backend)."""
    run = tmp_path / "run"
    shutil.copytree(workflow_run, run, symlinks=True)
    sizes = run / "work" / "sheet" / "sizes.tsv"
    head, *rows = (line.split("\t") for line in sizes.read_text().splitlines())
    own = {"0": {"mem_mb": "300", "runtime_s": "600"}, "1": {"mem_mb": "700", "runtime_s": "1800"}}
    table = [[{**dict(zip(head, r, strict=True)), **own[r[0]]}[h] for h in head] for r in rows]
    sizes.write_text("".join("\t".join(r) + "\n" for r in [head, *table]))
    config = yaml.safe_load((run / "config.yaml").read_text())
    config["jobs"][0]["backend"] = "gpu"
    (run / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    done = snakemake(
        run, run / "config.yaml", "-n", "--forcerun", "hspz_work", "--rerun-triggers", "mtime"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    work = {
        int(m[1]): job
        for job in dry_run_jobs(done, "hspz_work")
        if (m := re.search(r"wildcards: batch=sheet, k=(\d+)", job))
    }
    assert sorted(work) == [0, 1]
    for k, (mem, minutes) in {0: (450, 15), 1: (1050, 45)}.items():  # x 1.5, first attempt
        assert int(re.search(r"\bmem_mb=(\d+)", work[k])[1]) == mem, work[k]
        assert int(re.search(r"\bruntime=(\d+)", work[k])[1]) == minutes, work[k]
        assert re.search(r"\bgpu=1\b", work[k]), work[k]
    others = [job for job in dry_run_jobs(done, "hspz_work") if "batch=sheet," not in job]
    assert others and all(re.search(r"\bgpu=0\b", job) for job in others)


def test_threads_default_to_the_cores_over_the_concurrent_work_jobs(tmp_path: Path) -> None:
    config = make_workdir(tmp_path, [JOBS[0]])
    job = yaml.safe_load(config.read_text())["jobs"][0]
    job.pop("threads")
    config.write_text(yaml.safe_dump({"jobs": [job]}))
    done = snakemake(tmp_path, config, "-n", "-p", "--cores", "6", profile=None)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "--threads=3" in dry_run_jobs(done, "hspz_plan")[0]  # 6 cores, workers: 2
    assert re.search(r"hspZ index .* --threads=6 ", dry_run_jobs(done, "hspz_index")[0])


def test_workers_above_the_reference_bins_is_one_warning_line(workflow_run: Path) -> None:
    done = snakemake(workflow_run, workflow_run / "config.yaml", "-n")
    lines = [line for line in (done.stdout + done.stderr).splitlines() if "workers: 5" in line]
    assert lines == [
        "hspZ workflow: job listed: workers: 5, but its plan makes 3 work job(s): "
        "the reference has 3 bin(s) at this layout (-B), and a worker needs a bin "
        "of its own"
    ]


def test_a_work_jobs_log_shows_its_progress(workflow_run: Path) -> None:
    log = (workflow_run / "logs" / "hspz_work" / "sheet" / "0.log").read_text()
    assert re.search(r"^progress: \d+% \(", log, re.M), log


def test_merge_summary_and_dot_plots_never_import_cupy(workflow_run: Path, tmp_path: Path) -> None:
    """A `cupy` that records its import, first on the path: the merge, summary and dot-plot
    commands never touch it."""
    fake = tmp_path / "fake"
    fake.mkdir()
    marker = tmp_path / "imported"
    (fake / "cupy.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    env = {**ENV, "PYTHONPATH": os.pathsep.join([str(fake), *sys.path])}
    sheet = workflow_run / "results" / "sheet"
    plan = str(workflow_run / "work" / "sheet" / "plan.txt")
    commands = [
        [
            "merge",
            "--plan",
            plan,
            "--output",
            str(tmp_path / "m"),
            *map(str, sorted((workflow_run / "work" / "sheet").glob("*.result"))),
        ],
        [
            "summarize",
            "--queries",
            str(sheet / "queries.tsv"),
            "--names",
            str(sheet / "names.tsv"),
            "--ledger",
            str(workflow_run / "work" / "sheet" / "ledger.tsv"),
            "--output",
            str(tmp_path / "s.tsv"),
        ],
        [
            "dotplot",
            "--plan",
            plan,
            "--job",
            "000001",
            "--output",
            str(tmp_path / "d.png"),
            str(sheet / "000001"),
        ],
    ]
    for args in commands:
        done = subprocess.run([str(BIN / "hspZ"), *args], capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stderr
    assert not marker.exists()


def test_the_workflow_runs_as_a_module_with_use_rule_star(tmp_path: Path) -> None:
    """snakedeploy's way: another Snakefile that declares the workflow as a module and uses
    every rule builds the results (rule all is the module's default target)."""
    config = make_workdir(tmp_path, [JOBS[2]])
    (tmp_path / "Snakefile").write_text(
        f'configfile: "{config.name}"\n\n\nmodule hspz:\n    snakefile:\n'
        f'        "{ROOT / "workflow" / "Snakefile"}"\n    config:\n        config\n\n\n'
        "use rule * from hspz\n"
    )
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--directory",
        str(tmp_path),
        "--snakefile",
        str(tmp_path / "Snakefile"),
        "--cores",
        "2",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "results" / "single" / "queries.tsv").is_file()
    assert (tmp_path / "work" / "single" / "results.manifest").is_file()


def module_snakefile(tmp_path: Path, config: Path, snakefile: str) -> Path:
    """A user's Snakefile that uses the workflow as a module from `snakefile` and writes down
    the install source the workflow chose for its conda env (HSPZ_INSTALL_SOURCE)."""
    path = tmp_path / "Snakefile"
    path.write_text(
        f'import os\n\nconfigfile: "{config.name}"\n\n\nmodule hspz:\n    snakefile:\n'
        f'        "{snakefile}"\n    config:\n        config\n\n\nuse rule * from hspz\n\n\n'
        'open("source.txt", "w").write(os.environ["HSPZ_INSTALL_SOURCE"])\n'
    )
    return path


def git_commit(repo: Path, message: str) -> str:
    """Commits everything in `repo` (a git repository from its first commit on): the hash."""
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    steps = [] if (repo / ".git").exists() else [["init", "-q"]]
    for step in [*steps, ["add", "-A"], ["commit", "-q", "-m", message]]:
        subprocess.run(git + step, check=True, capture_output=True)
    return subprocess.run(
        git + ["rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()


def module_repo(repo: Path) -> str:
    """A git repository holding the workflow and the package, as the project's own does: the
    hash of its one commit."""
    repo.mkdir()
    for part in ("workflow", "hspz", "pyproject.toml", "README.md", "LICENSE"):
        if (ROOT / part).is_dir():
            shutil.copytree(ROOT / part, repo / part, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(ROOT / part, repo / part)
    return git_commit(repo, "workflow")


def test_a_module_from_a_git_repository_resolves_and_installs_hspz_from_it(tmp_path: Path) -> None:
    """The workflow as a module from a git repository at a commit (`git+file://`, the code path
    of a GitHub module: Snakemake reads every file through its source cache, none from a
    folder): it parses and its DAG resolves, and its conda env would pip-install hspZ from that
    repository at that commit; as a module by path, from the checkout."""
    repo = tmp_path / "repo"
    commit = module_repo(repo)
    run = tmp_path / "run"
    config = make_workdir(run, [JOBS[2]])
    env = {k: v for k, v in ENV.items() if k != "HSPZ_INSTALL_SOURCE"}
    cases = {
        f"git+file://{repo}/workflow/Snakefile@{commit}": f"hspz[workflow] @ git+file://{repo}@{commit}",
        str(ROOT / "workflow" / "Snakefile"): f"hspz[workflow] @ {ROOT.as_uri()}",
    }
    for snakefile, source in cases.items():
        cmd = [
            sys.executable,
            "-m",
            "snakemake",
            "--directory",
            str(run),
            "--snakefile",
            str(module_snakefile(run, config, snakefile)),
            "--cores",
            "2",
            "-n",
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "hspz_plan" in done.stdout
        assert (run / "source.txt").read_text() == source
        if shutil.which("conda"):  # not installable here (neither PyPI nor Debian has it)
            conda = subprocess.run(
                cmd + ["--sdm", "conda"], capture_output=True, text=True, env=env, timeout=300
            )
            assert conda.returncode == 0, conda.stdout + conda.stderr
    done = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**env, "HSPZ_INSTALL_SOURCE": "hspz==0.1.0"},
    )
    assert done.returncode == 0 and (run / "source.txt").read_text() == "hspz==0.1.0"


def test_the_conda_env_installs_hspz_only_through_its_post_deploy_script(tmp_path) -> None:
    """hspz.yaml is conda's part (no pip: section, whose relative path would name the working
    directory once Snakemake copies the file to .snakemake/conda/) and names hspZ's version, so
    a release rebuilds the env; the post-deploy script pip-installs HSPZ_INSTALL_SOURCE and
    refuses to run without it."""
    env = yaml.safe_load((ROOT / "workflow" / "envs" / "hspz.yaml").read_text())
    assert set(env) == {"channels", "dependencies"}
    assert all(isinstance(d, str) for d in env["dependencies"])  # no pip: list
    assert {d.split()[0] for d in env["dependencies"]} == {"python", "pip", "lastz"}
    version = re.search(r'^version = "(.+)"', (ROOT / "pyproject.toml").read_text(), re.M)[1]
    assert f"# hspZ {version} " in (ROOT / "workflow" / "envs" / "hspz.yaml").read_text()
    script = ROOT / "workflow" / "envs" / "hspz.post-deploy.sh"
    assert os.access(script, os.X_OK)
    assert 'pip install --no-input "$HSPZ_INSTALL_SOURCE"' in script.read_text()
    bare = {k: v for k, v in os.environ.items() if k != "HSPZ_INSTALL_SOURCE"}
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=bare)
    assert done.returncode == 2 and "HSPZ_INSTALL_SOURCE is not set" in done.stderr


def site_packages(venv: Path) -> Path:
    """The site-packages of a venv that this interpreter made."""
    return venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"


def lend_build_tools(venv: Path) -> None:
    """Links this environment's pip and setuptools (pyproject's build backend, in the test
    extra) into the fresh `venv`, which then has what the conda env has, Python and pip, plus
    the backend that pip would fetch there."""
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    site = site_packages(venv)
    for requirement in map(Requirement, ["pip", *requires]):
        dist = importlib.metadata.distribution(requirement.name)
        missing = f"{requirement} (the test extra) is missing: make reinstalls"
        assert requirement.specifier.contains(dist.version), missing
        for top in {Path(f).parts[0] for f in dist.files or ()} - {"..", "__pycache__"}:
            (site / top).symlink_to(Path(str(dist.locate_file(top))))


def post_deploy(tmp_path: Path, source: str) -> Path:
    """Runs hspz.post-deploy.sh with HSPZ_INSTALL_SOURCE=`source` in a fresh venv standing in
    for the conda env (its bin/ first on PATH), offline: pip takes hspZ alone (no index, no
    dependencies) and builds it with the lent setuptools (no build isolation), its build
    folders under tmp_path, not the source's. The venv."""
    venv = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    lend_build_tools(venv)
    config = tmp_path / "distutils.cfg"
    config.write_text(
        f"[build]\nbuild_base = {tmp_path / 'build'}\n[egg_info]\negg_base = {tmp_path}\n"
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PIP_", "PYTHON", "VIRTUAL_ENV", "HSPZ_"))
    }
    env |= {
        "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "HSPZ_INSTALL_SOURCE": source,
        "PIP_CONFIG_FILE": os.devnull,  # not this machine's indexes, links or constraints
        "PIP_NO_INDEX": "1",
        "PIP_NO_DEPS": "1",
        "PIP_NO_BUILD_ISOLATION": "0",  # pip reads this one inverted: "0" turns isolation off
        "PIP_CACHE_DIR": str(tmp_path / "pip-cache"),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "DIST_EXTRA_CONFIG": str(config),  # setuptools' build/ and egg-info out of the source
    }
    script = ROOT / "workflow" / "envs" / "hspz.post-deploy.sh"
    done = subprocess.run(
        [str(script)], capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "build").is_dir() and (tmp_path / "hspz.egg-info").is_dir()
    return venv


def installed_hspz(venv: Path) -> tuple[str, dict, str]:
    """hspZ as `venv` sees it: its version, its direct_url.json (PEP 610) and the
    file its package is imported from."""
    probe = (
        "import importlib.metadata as m, importlib.util as u, json\n"
        "d = m.distribution('hspz')\n"
        "print(json.dumps([d.version, json.loads(d.read_text('direct_url.json')),"
        " u.find_spec('hspz').origin]))\n"
    )
    python = venv / "bin" / "python"
    done = subprocess.run(  # -I: not the checkout where the tests run
        [str(python), "-I", "-c", probe], capture_output=True, text=True, check=True
    )
    version, url, origin = json.loads(done.stdout)
    return version, url, origin


@pytest.mark.parametrize("way", ["checkout by path", "module from git at a commit"])
def test_the_post_deploy_script_installs_a_copy_of_hspz_from_the_workflows_source(
    tmp_path: Path, way: str
) -> None:
    """The conda env's post-deploy script, run in a fresh venv standing in for the env (conda
    is not installable here), with the HSPZ_INSTALL_SOURCE that the workflow computes for a
    checkout by path and for a module from git (the module test above checks both): hspZ at
    pyproject's version, a real copy in the env's site-packages (not editable, no link to the
    source), with its kernels and its hspZ command; from git, the module's commit, not the
    branch's later one."""
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    if way == "checkout by path":
        source, place, commit = f"hspz[workflow] @ {ROOT.as_uri()}", ROOT.as_uri(), None
    else:
        repo = tmp_path / "repo"
        commit = module_repo(repo)
        source, place = f"hspz[workflow] @ git+file://{repo}@{commit}", f"file://{repo}"
        with (repo / "hspz" / "__init__.py").open("a") as later:
            later.write("LATER = True\n")
        pyproject = (repo / "pyproject.toml").read_text()
        (repo / "pyproject.toml").write_text(pyproject.replace(f'"{version}"', '"9.9.9"', 1))
        git_commit(repo, "a later commit on the branch")
    venv = post_deploy(tmp_path, source)
    site = site_packages(venv)
    found, url, origin = installed_hspz(venv)
    assert found == version and url["url"] == place
    assert url.get("vcs_info", {}).get("commit_id") == commit
    assert not url.get("dir_info", {}).get("editable")
    assert Path(origin) == site / "hspz" / "__init__.py"
    assert Path(origin).resolve().is_relative_to(site.resolve())  # a copy, no link to the source
    assert not list(site.glob("__editable__*"))
    assert Path(origin).read_bytes() == (ROOT / "hspz" / "__init__.py").read_bytes()
    assert list((site / "hspz" / "engine" / "kernels").glob("*.cu"))
    assert (venv / "bin" / "hspZ").is_file()


def test_a_license_file_says_what_pyproject_says() -> None:
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert 'license = "MIT"' in (ROOT / "pyproject.toml").read_text()
