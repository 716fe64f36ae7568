"""The Snakemake workflow: lints clean, resolves under both profiles, validates its config, and
reproduces `hspZ run` byte for byte through plan -> work -> merge."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent  # snakemake's shell jobs must find this environment's hspZ
ENV = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
HAVE_SLURM_PLUGIN = importlib.util.find_spec("snakemake_executor_plugin_slurm") is not None

# Three 3 kbp reference records with -B 3000 give three reference bins: workers: 2 really splits
# the work, and workers: 5 is cut to three by the plan. The batch job runs two queries against the
# same reference, with merge's -D and -Z.
OPTIONS = {"seq_block_size": 3000, "hspthresh": 2000}
JOBS = [
    {"name": "pair", "reference": "ref.fa", "query": "q1.fa", "workers": 2, "options": OPTIONS},
    {
        "name": "batch",
        "reference": "ref.fa",
        "query": ["q2.fa", "q1.fa"],
        "workers": 5,
        "diagonal_partition": True,
        "tarball": True,
        "options": {**OPTIONS, "strand": "both", "xdrop": 800},
    },
]
CHAINS = {
    "pair": ("q1.fa", JOBS[0]),
    "batch/000001": ("q2.fa", JOBS[1]),
    "batch/000002": ("q1.fa", JOBS[1]),
}


def snakemake(
    workdir: Path, config: Path, *args: str, profile: str | None = None
) -> subprocess.CompletedProcess:
    """Snakemake on the repository's workflow, working in `workdir` so the checkout stays clean."""
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile")]
    cmd += ["--directory", str(workdir), "--configfile", str(config), *args]
    if profile:
        cmd += ["--profile", str(ROOT / "profiles" / profile)]
        cmd += slurm_executor() if profile == "slurm" else []
    return subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=600)


def hspz(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "hspZ"), *args], capture_output=True, text=True, env=ENV)


def slurm_executor() -> list[str]:
    """Without the plugin the SLURM profile still resolves every resource in a local dry run."""
    return [] if HAVE_SLURM_PLUGIN else ["--executor", "local"]


def write_fasta(path: Path, records: dict[str, np.ndarray]) -> None:
    with open(path, "wb") as out:
        for name, seq in records.items():
            out.write(b">" + name.encode() + b"\n" + seq.tobytes() + b"\n")


def mutate(rng: np.random.Generator, seq: np.ndarray, rate: float) -> np.ndarray:
    out = seq.copy()
    hit = rng.random(len(seq)) < rate
    out[hit] = np.frombuffer(b"ACGT", dtype=np.uint8)[rng.integers(0, 4, int(hit.sum()))]
    return out


def revcomp(seq: np.ndarray) -> np.ndarray:
    return np.frombuffer(seq.tobytes()[::-1].translate(bytes.maketrans(b"ACGT", b"TGCA")), np.uint8)


def make_workdir(workdir: Path) -> Path:
    """A reference, two related queries and a config.yaml in `workdir`; returns the config."""
    rng = np.random.default_rng(11)
    bases = np.frombuffer(b"ACGT", dtype=np.uint8)
    ref = {f"chr{i}": bases[rng.integers(0, 4, 3000)] for i in (1, 2, 3)}
    q1 = {
        "q1a": mutate(rng, ref["chr1"][400:2600], 0.04),
        "q1b": revcomp(mutate(rng, ref["chr3"][100:2300], 0.07)),
    }
    q2 = {
        "q2a": np.concatenate(
            [mutate(rng, ref["chr2"][0:1500], 0.05), bases[rng.integers(0, 4, 800)]]
        )
    }
    workdir.mkdir(parents=True, exist_ok=True)
    write_fasta(workdir / "ref.fa", ref)
    write_fasta(workdir / "q1.fa", q1)
    write_fasta(workdir / "q2.fa", q2)
    jobs = [{**job, "backend": "cpu", "threads": 1} for job in JOBS]
    config = workdir / "config.yaml"
    config.write_text(yaml.safe_dump({"jobs": jobs}, sort_keys=False))
    return config


def run_flags(job: dict) -> list[str]:
    flags = [f"--{key.replace('_', '-')}={value}" for key, value in job["options"].items()]
    flags += ["-D"] if job.get("diagonal_partition") else []
    return flags + (["-Z"] if job.get("tarball") else [])


def segments(directory: Path) -> dict[str, bytes]:
    """Every file by name, but Snakemake's .snakemake_timestamp in a directory() output."""
    paths = sorted(p for p in directory.iterdir() if p.name != ".snakemake_timestamp")
    return {path.name: path.read_bytes() for path in paths}


def dry_run_jobs(done: subprocess.CompletedProcess, rule: str) -> list[str]:
    """The job blocks of one rule (or checkpoint) in a dry run's listing."""
    blocks = re.split(r"\n(?:rule|checkpoint) ", done.stdout + done.stderr)
    return [block for block in blocks if block.startswith(f"{rule}:")]


def cli_missing() -> str | None:
    probe = hspz("plan", "--help")
    return None if probe.returncode == 0 else f"hspZ plan is unavailable: {probe.stderr.strip()}"


def test_snakemake_lint_passes(tmp_path: Path) -> None:
    done = snakemake(tmp_path, ROOT / "config" / "config.yaml", "--lint")
    assert done.returncode == 0, done.stdout + done.stderr


def test_dry_run_resolves_under_local_and_slurm_profiles(tmp_path: Path) -> None:
    config = make_workdir(tmp_path)
    for profile in ("local", "slurm"):
        done = snakemake(tmp_path, config, "-n", profile=profile)
        assert done.returncode == 0, done.stdout + done.stderr
        plans = dry_run_jobs(done, "hspz_plan")
        assert sorted(job.split("wildcards: job=")[1].split()[0] for job in plans) == sorted(CHAINS)
        if profile == "slurm":  # backend: cpu asks for no GPU; no partition: the default one
            assert all("gpu=0" in job and "slurm_partition" not in job for job in plans)
    slurm = yaml.safe_load((ROOT / "profiles" / "slurm" / "config.v8+.yaml").read_text())
    assert slurm["executor"] == "slurm"


def test_config_with_an_unknown_option_is_refused_at_parse_time(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"jobs": [{**JOBS[0], "options": {"max_hitz": 5}}]}))
    done = snakemake(tmp_path, bad, "-n", "--cores", "1")
    assert done.returncode != 0
    assert "max_hitz" in done.stdout + done.stderr


@pytest.fixture(scope="module")
def workflow_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The workflow run once with the local profile in a scratch directory."""
    if reason := cli_missing():
        pytest.skip(reason)
    workdir = tmp_path_factory.mktemp("workflow")
    config = make_workdir(workdir)
    done = snakemake(workdir, config, "--cores", "2", profile="local")
    assert done.returncode == 0, done.stdout + done.stderr
    return workdir


@pytest.mark.parametrize("chain", list(CHAINS))
def test_workflow_segments_are_byte_identical_to_hspz_run(workflow_run: Path, chain: str) -> None:
    query, job = CHAINS[chain]
    out = workflow_run / "run" / chain
    inputs = ["--reference", str(workflow_run / "ref.fa"), "--query", str(workflow_run / query)]
    done = hspz("run", *inputs, "--output", str(out), "--backend", "cpu", *run_flags(job))
    assert done.returncode == 0, done.stderr
    results = workflow_run / "results" / chain
    expected = segments(out)
    assert expected, "the test pair should produce HSPs"
    assert segments(results / "segments") == expected
    digest = [line for line in done.stdout.splitlines() if line.startswith("digest: ")]
    assert (results / "digest.txt").read_text().splitlines() == digest


def test_work_jobs_are_the_planned_workers_not_more_than_reference_bins(workflow_run: Path) -> None:
    for chain, expected in (("pair", 2), ("batch/000001", 3), ("batch/000002", 3)):
        results = sorted(p.name for p in (workflow_run / "results" / chain / "work").iterdir())
        assert results == [f"{k}.result" for k in range(expected)]
    for rule in ("hspz_plan", "hspz_work", "hspz_merge"):
        assert any((workflow_run / "logs" / rule).rglob("*.log")), f"no log for {rule}"


def test_slurm_profile_asks_one_gpu_per_work_job_unless_the_backend_is_cpu(
    workflow_run: Path,
) -> None:
    jobs = yaml.safe_load((workflow_run / "config.yaml").read_text())["jobs"]
    auto = workflow_run / "auto.yaml"
    auto.write_text(yaml.safe_dump({"jobs": [{**job, "backend": "auto"} for job in jobs]}))
    for config, gpus in ((workflow_run / "config.yaml", "gpu=0"), (auto, "gpu=1")):
        # mtime only: the changed backend would otherwise rerun the plans (work jobs unknown)
        args = ("-n", "--forcerun", "hspz_work", "--rerun-triggers", "mtime")
        done = snakemake(workflow_run, config, *args, profile="slurm")
        assert done.returncode == 0, done.stdout + done.stderr
        work = dry_run_jobs(done, "hspz_work")
        assert len(work) == 2 + 3 + 3
        assert all(gpus in job and "slurm_partition" not in job for job in work)
