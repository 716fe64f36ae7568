"""Worker processes never outlive their run (issue 15, item 6): a run SIGKILLed while its
workers start, once they have attached the shared records, or once results are being staged
leaves no worker process, no resource tracker and no /dev/shm segment, and a rerun writes the
same bytes; `--gpus 1000` on a plan of three reference bins starts exactly three processes;
the resource tracker unlinks a shared block whose owner was killed before any worker attached.

Every process a test starts carries a unique HSPZ_TEST_TAG in its environment, which is how
they are found (and, when a test fails half-way, stopped: by pid, never by name).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from multibin import FLAGS, write_pair

from hspz.cli import main

SETTLE_S = 10.0  # how long the kernel and the resource tracker may take to clear up


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """The multibin pair and the segments files of a one-worker run (the bytes every run of
    it must write)."""
    d = tmp_path_factory.mktemp("faults")
    ref, qry = write_pair(d)
    assert (
        main(
            [
                "run",
                "-r",
                str(ref),
                "-q",
                str(qry),
                *FLAGS,
                "--backend",
                "cpu",
                "-o",
                str(d / "out"),
            ]
        )
        == 0
    )
    return ref, qry, segments(d / "out")


def segments(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.glob("*.segments"))}


class Tagged:
    """The processes of one test run, found by the tag in their environment."""

    def __init__(self):
        self.tag = uuid.uuid4().hex
        self.entry = f"HSPZ_TEST_TAG={self.tag}".encode()

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HSPZ_")}
        return {**env, "HSPZ_TEST_TAG": self.tag}

    def pids(self) -> list[int]:
        found = []
        for p in Path("/proc").iterdir():
            try:
                if p.name.isdigit() and self.entry in (p / "environ").read_bytes().split(b"\0"):
                    found.append(int(p.name))
            except OSError:  # gone, or a zombie
                pass
        return found

    def workers(self, parent: int) -> list[int]:
        """Worker processes (multiprocessing spawn children) of `parent`."""
        out = []
        for pid in self.pids():
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == parent and b"spawn_main" in cmdline:
                out.append(pid)
        return out

    def kill_all(self) -> None:
        """SIGKILL every tagged process but the resource tracker, give the tracker SETTLE_S to
        unlink what they left and exit, then SIGKILL what is left (a test that fails must not
        leave segments in /dev/shm either)."""

        def kill(pids):
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

        kill(pid for pid in self.pids() if not self._is_tracker(pid))
        kill(self.settled())

    @staticmethod
    def _is_tracker(pid: int) -> bool:
        try:
            return b"resource_tracker" in Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return False

    def settled(self) -> list[int]:
        """The tagged processes still alive once they had SETTLE_S to go."""
        deadline = time.monotonic() + SETTLE_S
        while self.pids() and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.pids()


def shm_segments(pids: list[int]) -> set[str]:
    """/dev/shm/psm_* blocks mapped by these processes (deleted or not)."""
    found = set()
    for pid in pids:
        try:
            maps = Path(f"/proc/{pid}/maps").read_text()
        except OSError:
            continue
        for line in maps.splitlines():
            if "/dev/shm/psm_" in line:
                found.add(line.split("/dev/shm/", 1)[1].split()[0])
    return found


def hspz_run(pair, out: Path, tagged: Tagged, *extra: str) -> subprocess.Popen:
    ref, qry, _ = pair
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hspz",
            "run",
            "-r",
            str(ref),
            "-q",
            str(qry),
            *FLAGS,
            "--backend",
            "cpu",
            "-t",
            "1",
            "-o",
            str(out),
            *extra,
        ],
        env=tagged.env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def wait_for(proc: subprocess.Popen, condition, timeout: float = 120.0) -> bool:
    """Poll `condition()` until it holds (True) or the run ends first (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.002)
    raise AssertionError("the condition never held")


def _attached(tagged: Tagged, proc: subprocess.Popen, out: Path) -> bool:
    workers = tagged.workers(proc.pid)
    return len(workers) == 2 and all(shm_segments([w]) for w in workers)


POINTS = {
    # a worker process exists (it may still be importing)
    "workers-started": lambda tagged, proc, out: bool(tagged.workers(proc.pid)),
    # both workers have mapped the shared records
    "workers-attached": _attached,
    # the emitter has staged a unit's segments file while the workers run on
    "results-staged": lambda tagged, proc, out: any(out.rglob("*.segments")),
}


@pytest.mark.parametrize("point", list(POINTS))
def test_a_sigkilled_run_leaves_no_worker_and_no_shared_memory_and_reruns_the_same_bytes(
    pair, tmp_path, point
):
    out = tmp_path / "out"
    for _ in range(3):  # a loaded machine may let a run end between two polls: run it again
        shutil.rmtree(out, ignore_errors=True)
        tagged = Tagged()
        proc = hspz_run(pair, out, tagged, "--gpus", "2")
        reached = wait_for(proc, lambda t=tagged, p=proc: POINTS[point](t, p, out))
        if reached:
            break
        proc.wait(timeout=60)
    try:
        blocks = shm_segments([proc.pid, *tagged.workers(proc.pid)])
        proc.kill()
        proc.wait(timeout=60)
        assert reached, f"the run ended before {point}, three times"
        left = tagged.settled()
        assert not left, f"processes left after the SIGKILL: {left}"
        assert not [b for b in blocks if Path("/dev/shm", b).exists()], blocks
    finally:
        tagged.kill_all()
    rerun = hspz_run(pair, out, Tagged(), "--gpus", "2")
    assert rerun.wait(timeout=300) == 0
    assert segments(out) == pair[2]


def test_gpus_1000_on_three_reference_bins_starts_exactly_three_worker_processes(pair, tmp_path):
    """Watched while it runs: the worker processes the run starts, each seen by its pid."""
    tagged = Tagged()
    layout = ["-B", "7000"]  # 3 reference bins x 2 query bins
    proc = hspz_run(pair, tmp_path / "out", tagged, *layout, "--gpus", "1000")
    seen: set[int] = set()
    try:
        while proc.poll() is None and len(seen) <= 3:
            seen.update(tagged.workers(proc.pid))
            time.sleep(0.005)
        assert len(seen) <= 3, f"{len(seen)}+ worker processes started"
        assert proc.wait(timeout=300) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        tagged.kill_all()
    assert len(seen) == 3
    ref, qry, _ = pair
    expected = tmp_path / "one"
    assert (
        main(
            [
                "run",
                "-r",
                str(ref),
                "-q",
                str(qry),
                *FLAGS,
                *layout,
                "--backend",
                "cpu",
                "-o",
                str(expected),
            ]
        )
        == 0
    )
    assert segments(tmp_path / "out") == segments(expected)


def test_the_resource_tracker_unlinks_the_block_of_a_killed_run_before_workers_attach(tmp_path):
    """The window between `share` and the last worker's attach: the block is registered with
    multiprocessing's resource tracker, which unlinks it once its owner is gone."""
    tagged = Tagged()
    script = (
        "import sys, time, numpy as np\n"
        "from hspz.io.records import Record\n"
        "from hspz.run.pool import share\n"
        "shm, _ = share([[Record('a', np.zeros(4096, np.uint8))]])\n"
        "print(shm.name, flush=True)\n"
        "time.sleep(600)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script], env=tagged.env(), stdout=subprocess.PIPE, text=True
    )
    try:
        name = proc.stdout.readline().strip().lstrip("/")
        assert name and Path("/dev/shm", name).exists()
        proc.kill()
        proc.wait(timeout=60)
        assert not tagged.settled()
        assert not Path("/dev/shm", name).exists()
    finally:
        tagged.kill_all()


def test_a_worker_whose_parent_is_already_gone_exits_at_once():
    """The race `die_with_parent` closes: the parent died before the request was made (the
    process was reparented), so it exits with status 1 and says nothing."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from hspz.run.libc import die_with_parent\ndie_with_parent(-1)\nraise SystemExit(0)",
        ],
        timeout=60,
        capture_output=True,
    )
    assert (done.returncode, done.stdout, done.stderr) == (1, b"", b"")


def test_a_worker_is_killed_when_its_parent_dies():
    """PR_SET_PDEATHSIG: a process that asked, whose parent is SIGKILLed, is SIGKILLed too."""
    tagged = Tagged()
    middle = (
        "import os, subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', "
        "'import os, time\\nfrom hspz.run.libc import die_with_parent\\n"
        'die_with_parent(int(os.environ["PARENT"]))\\nprint("ready", flush=True)\\n'
        "time.sleep(600)'], env={**os.environ, 'PARENT': str(os.getpid())}, "
        "stdout=subprocess.PIPE, text=True)\n"
        "print(child.pid, child.stdout.readline().strip(), flush=True)\n"
        "time.sleep(600)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", middle], env=tagged.env(), stdout=subprocess.PIPE, text=True
    )
    try:
        pid, ready = proc.stdout.readline().split()
        assert ready == "ready" and int(pid) in tagged.pids()
        proc.kill()
        proc.wait(timeout=60)
        assert not tagged.settled()
    finally:
        tagged.kill_all()
