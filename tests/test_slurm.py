"""The workflow on a real SLURM: a single-node cluster on localhost (tests/slurm.py) runs it with
profiles/slurm through snakemake-executor-plugin-slurm, and its final outputs are the local
profile's, byte for byte; fake GPUs give each GPU job its own device; stopping the cluster leaves
nothing behind. Skipped where the cluster cannot start (not root, no SLURM and no apt-get), and
where SLURM is not installed unless HSPZ_SLURM_INSTALL=1 lets the test apt-get it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import slurm
import yaml
from test_workflow import JOBS, make_workdir

pytestmark = pytest.mark.slurm

ROOT = Path(__file__).resolve().parents[1]
PROFILES = ROOT / "profiles"
BIN = Path(sys.executable).parent  # the jobs' shells must find this environment's hspZ


# What the SLURM run is checked on; to test another config, change `workflow_inputs` (it writes
# a config and its inputs into an empty folder and returns the config's path) and COMPARED:
# after a local-profile run and a SLURM run, every file that COMPARED matches must be the same
# bytes. The final outputs only: plans and work results hold timings (once results/ holds
# nothing else, ("results/**",)).
def workflow_inputs(workdir: Path) -> Path:
    """test_workflow's inputs and config (a sheet with the index, the report and the gapped
    stage; a list file; one query), with backend auto and `gpus: true`: plan and work jobs
    then ask SLURM for a GPU (they get a fake one; hspZ, finding no CUDA device, runs its CPU
    backend)."""
    config = make_workdir(workdir)
    jobs = yaml.safe_load(config.read_text())["jobs"]
    jobs = [{**job, "backend": "auto", "gpus": True} for job in jobs]
    config.write_text(yaml.safe_dump({"jobs": jobs}, sort_keys=False))
    return config


# every final output but the report's summary, which holds the engine's timings
# (a pattern ending in "**" matches folders only)
COMPARED = (
    "results/sheet/**/*",
    "results/listed/**/*",
    "results/single/**/*",
    "results/gapped/**/*",
    "results/reports/**/*.png",
)

# The plugin's settings for a cluster without slurmdbd: job states from squeue (sacct would
# never learn them and Snakemake would wait forever), the first check after one second.
TEST_SETTINGS = {"slurm-status-command": "squeue", "slurm-init-seconds-before-status-checks": 1}


def skip_unless_startable() -> None:
    """Skip, saying why, where no cluster can start; the Debian packages are installed only
    when HSPZ_SLURM_INSTALL=1 asks for it (.ci/run sets it): `make test` installs nothing."""
    if reason := slurm.unavailable():
        pytest.skip(reason)
    if missing := slurm.missing():
        if os.environ.get("HSPZ_SLURM_INSTALL") != "1":
            pytest.skip(
                f"SLURM is not installed ({', '.join(missing)} missing): "
                "`python3 tests/slurm.py install` installs it, or set "
                "HSPZ_SLURM_INSTALL=1 to let the test do so"
            )
        slurm.install()


@pytest.fixture(scope="module")
def cluster() -> slurm.Cluster:
    """One cluster for the module's tests, stopped (daemons killed by PID) after the last."""
    skip_unless_startable()
    with slurm.running() as running:
        yield running


def snakemake(
    workdir: Path, config: Path, profiles: list[Path], env: dict[str, str], *args: str
) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "workflow" / "Snakefile")]
    cmd += ["--directory", str(workdir), "--configfile", str(config), *args]
    for profile in profiles:
        cmd += ["--profile", str(profile)]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)


def with_bin(env: dict[str, str]) -> dict[str, str]:
    return {**env, "PATH": f"{BIN}:{env['PATH']}"}


def slurm_profile(cluster: slurm.Cluster, folder: Path, work_minutes: int | None = None) -> Path:
    """profiles/slurm as this cluster needs it, as one profile: every key of the real profile,
    as shipped (no memory or time of its own is changed), with TEST_SETTINGS added and, with
    `work_minutes`, that time limit for every work job.  One profile, not the real one and an
    overlay: Snakemake 9.15, which pip installs on a fresh machine, reads only the last of
    several --profile options."""
    profile = yaml.safe_load((PROFILES / "slurm" / "config.v8+.yaml").read_text())
    if work_minutes is not None:
        profile.setdefault("set-resources", {}).setdefault("hspz_work", {})["runtime"] = (
            work_minutes
        )
        profile["retries"] = 0  # the time limit is the test: no second attempt with more
    profile.update(TEST_SETTINGS)
    folder.mkdir()
    (folder / "config.v8+.yaml").write_text(yaml.safe_dump(profile))
    return folder


def files(root: Path, patterns: tuple[str, ...]) -> dict[str, bytes]:
    """The files under `root` that `patterns` match, by relative path, but Snakemake's
    directory() timestamps."""
    paths = {p for pattern in patterns for p in root.glob(pattern) if p.is_file()}
    paths = sorted(p for p in paths if p.name != ".snakemake_timestamp")
    return {str(path.relative_to(root)): path.read_bytes() for path in paths}


def snakemake_jobs(output: str) -> list[tuple[str, str, int]]:
    """(kind, rule, GPUs) of each job in a Snakemake run's output: kind "local" for a job run in
    the Snakemake process (`localrule NAME:`), "group" for a job run inside a group job (its
    block indented under `Group job NAME`), "" for one handed to the executor; each group job
    itself is ("", its group's name, 0)."""
    blocks = re.split(r"\n(?=(?: {4})?(?:local)?(?:rule|checkpoint) \w+:\n)", output)
    jobs = []
    for block in blocks:
        if head := re.match(r"( {4})?(local)?(?:rule|checkpoint) (\w+):\n", block):
            gpus = re.search(r"^ +resources: .*\bgpu=(\d+)", block, re.M)
            kind = "group" if head[1] else head[2] or ""
            jobs.append((kind, head[3], int(gpus[1]) if gpus else 0))
    jobs += [("", group, 0) for group in re.findall(r"Group job (\w+) \(jobs in", output)]
    return jobs


def slurm_jobs(cluster: slurm.Cluster) -> list[tuple[str, str, str, int]]:
    """(rule, state, TRES per job, CPUs) of each SLURM job the plugin submitted, from the
    `--comment rule_NAME[_wildcards_...]` it gives each; a group job's NAME is its group's
    (the plugin writes GROUP_RULE_RULE...)."""
    table = cluster.run(
        "squeue", "-h", "--states=all", "-O", "Comment:|,State:|,tres-per-job:|,NumCPUs:"
    )
    rows = [line.split("|") for line in table.stdout.split() if line.startswith("rule_")]
    jobs = []
    for comment, state, tres, cpus in rows:
        rule = re.sub(r"^rule_|_wildcards_.*$", "", comment)
        jobs.append((re.sub(r"^(hspz_report)_.*$", r"\1", rule), state, tres, int(cpus)))
    return jobs


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:  # gone meanwhile
        return b""


def test_stopping_the_cluster_leaves_no_process_and_no_file() -> None:
    """Runs before the module's cluster starts: only one cluster can be up at a time."""
    skip_unless_startable()
    with slurm.running() as cluster:
        job = cluster.run("sbatch", "--parsable", "--output=/dev/null", "--wrap", "sleep 600")
        assert job.returncode == 0, job.stderr
        deadline = time.monotonic() + 30
        while b"sleep\x00600\x00" not in map(
            cmdline, processes := slurm.cluster_processes(cluster.root)
        ):
            assert time.monotonic() < deadline, "the job's sleep never started"
            time.sleep(0.2)
        assert set(cluster.pids.values()) <= set(processes)
        root = cluster.root
    assert not [pid for pid in processes if slurm.alive(pid)]
    assert not root.exists()
    assert not slurm.DEFAULT_CONF.is_symlink()


def test_two_concurrent_gpu_jobs_see_devices_0_and_1(cluster: slurm.Cluster, tmp_path: Path):
    # Each job writes the device it was given, then waits for the other's file: both ran at once.
    script = (
        f'echo "$CUDA_VISIBLE_DEVICES" > {tmp_path}/gpu.$SLURM_JOB_ID; '
        f"for i in $(seq 300); do [ $(ls {tmp_path} | wc -l) -ge 2 ] && exit 0; sleep 0.1; "
        "done; exit 1"
    )
    steps = [
        subprocess.Popen(
            ["srun", "--gpus=1", "bash", "-c", script],
            env=cluster.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [step.communicate(timeout=60)[0] for step in steps]
    assert [step.returncode for step in steps] == [0, 0], outputs
    assert sorted(p.read_text().strip() for p in tmp_path.iterdir()) == ["0", "1"]


def test_workflow_on_slurm_writes_the_local_profiles_bytes(
    cluster: slurm.Cluster, tmp_path: Path
) -> None:
    # Both runs work in the same folder, so no output may differ by an absolute path: first the
    # local one, whose folder is then moved aside, then the SLURM one in a fresh copy.
    workdir, local = tmp_path / "run", tmp_path / "local"
    local_run = snakemake(
        workdir,
        workflow_inputs(workdir),
        [PROFILES / "local"],
        with_bin(dict(os.environ)),
        "--cores",
        "2",
    )
    assert local_run.returncode == 0, local_run.stderr[-4000:]
    workdir.rename(local)
    expected = files(local, COMPARED)
    assert all(files(local, (p,)) for p in COMPARED), "a compared output is missing"

    assert cluster.memory_mb < 32000  # a node smaller than the 32 GB once asked for
    profiles = [slurm_profile(cluster, tmp_path / "test-profile")]
    done = snakemake(workdir, workflow_inputs(workdir), profiles, with_bin(cluster.env))
    assert done.returncode == 0, done.stderr[-4000:] + "\n" + cluster.log_tail()
    assert files(workdir, COMPARED) == expected

    # Each job of the local run ran here too: as a SLURM job that completed, or locally (rule
    # all); each SLURM job was given the GPU its Snakemake job asked for.
    ran = snakemake_jobs(done.stderr)
    submitted = [(rule, gpus) for kind, rule, gpus in ran if not kind]
    on_slurm = slurm_jobs(cluster)
    assert {state for _, state, _, _ in on_slurm} == {"COMPLETED"}
    given = [
        (rule, int(tres.split(":")[-1]) if "gpu" in tres else 0) for rule, _, tres, _ in on_slurm
    ]
    assert submitted and sorted(given) == sorted(submitted)
    local_jobs = snakemake_jobs(local_run.stderr)
    assert sorted(rule for _, rule, _ in ran if rule != "hspz_report") == sorted(
        rule for _, rule, _ in local_jobs
    )

    # The profile's group: each batch's merge and its dot plots ran inside one SLURM job (none
    # was submitted alone), which asked for one CPU: its jobs one after another, on a 2-CPU node
    # where the sheet batch's 1 + 3 side by side would have asked for 4.
    inside = sorted(rule for kind, rule, _ in ran if kind == "group")
    assert inside == ["hspz_dotplot"] * 3 + ["hspz_merge"] * 3, inside
    groups = [cpus for rule, _, _, cpus in on_slurm if rule == "hspz_report"]
    assert groups == [1, 1, 1], on_slurm
    assert not {"hspz_merge", "hspz_dotplot"} & {rule for rule, _ in submitted}


def test_a_work_job_its_time_limit_ends_is_rerun_and_computes_only_its_missing_units(
    cluster: slurm.Cluster, tmp_path: Path
) -> None:
    """A SLURM time limit: the work job stops itself after its second unit (HSPZ_FAULT's
    `stop`), its one-minute limit passes and SLURM ends it (TIMEOUT); the rerun resumes from
    its two unit files, computes the third, and merges the bytes of an unbroken run."""
    config = make_workdir(tmp_path / "run", [{**JOBS[2], "workers": 1, "gpus": False}])
    profiles = [slurm_profile(cluster, tmp_path / "p", work_minutes=1)]
    stopped = snakemake(
        tmp_path / "run",
        config,
        profiles,
        {**with_bin(cluster.env), "HSPZ_FAULT": "work-unit:2:stop"},
    )
    assert stopped.returncode != 0
    states = [state for rule, state, _, _ in slurm_jobs(cluster) if rule == "hspz_work"]
    assert "TIMEOUT" in states, states
    done = snakemake(tmp_path / "run", config, profiles, with_bin(cluster.env))
    assert done.returncode == 0, done.stderr[-4000:] + "\n" + cluster.log_tail()
    log = (tmp_path / "run" / "logs" / "hspz_work" / "single" / "0.log").read_text()
    assert "work: worker 0 resumes: 2 of 3 unit(s) already done" in log, log
    listing = tmp_path / "one.list"
    listing.write_text(f"{tmp_path / 'run' / 'q2.fa'}\n")
    ref = subprocess.run(
        [
            str(BIN / "hspZ"),
            "run",
            "-r",
            str(tmp_path / "run" / "ref.fa"),
            "--query-list",
            str(listing),
            "-o",
            str(tmp_path / "ref"),
            "--backend",
            "cpu",
            "--seq-block-size=3000",
            "--hspthresh=2000",
        ],
        capture_output=True,
        text=True,
    )
    assert ref.returncode == 0, ref.stderr
    got = files(tmp_path / "run" / "results" / "single", ("**/*",))
    got.pop("names.tsv")
    want = files(tmp_path / "ref", ("**/*",))
    assert want and got == want
