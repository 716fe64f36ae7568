"""A real single-node SLURM on localhost, for the workflow's SLURM test and CI (not a test module).

Debian 12's SLURM 22.05 and munge, run as root without systemd: `install` adds the packages that
are missing (a policy-rc.d keeps apt from starting their daemons); `start` writes slurm.conf and
gres.conf under a fresh temp folder and starts a private munged, slurmctld and slurmd there,
detached, with their PIDs recorded; `stop` cancels the jobs, kills by PID and removes the folder.
The node has the machine's CPUs and memory (`slurmd -C`) and two fake GPUs as GRES, symlinks to
/dev/null, so each job that asks `--gpus=1` sees its own CUDA_VISIBLE_DEVICES (0 or 1).

Job status comes from `squeue` (MinJobAge keeps finished jobs there for 5 minutes): there is no
slurmdbd, so `sacct` knows no job and snakemake-executor-plugin-slurm must be run with
`--slurm-status-command squeue`. The one file `start` writes outside the folder is a symlink
/etc/slurm/slurm.conf to it: the plugin strips SLURM_CONF from the environment of the `srun`
inside each job, so that srun finds the cluster only at the default path. An existing
/etc/slurm/slurm.conf is never replaced (`unavailable` says why the cluster cannot start).

    python3 tests/slurm.py install    # the packages (what .ci/run does before `make test`)
    python3 tests/slurm.py up         # start a cluster by hand; prints its folder
    python3 tests/slurm.py down DIR   # stop it

Only the standard library: .ci/run calls it with the system's python3.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")
SBIN = ("slurmctld", "slurmd", "munged")
CLIENTS = ("sbatch", "squeue", "scancel", "scontrol", "sinfo", "srun", "munge", "unmunge")
SEARCH_PATH = os.pathsep.join(
    ["/usr/sbin", "/usr/bin", "/sbin", "/bin", os.environ.get("PATH", "")]
)
DEFAULT_CONF = Path("/etc/slurm/slurm.conf")
POLICY_RC_D = Path("/usr/sbin/policy-rc.d")
# Every process of the cluster carries this variable, so `stop` finds job processes that
# outlived their slurmstepd. Never export it in a shell of your own.
MARKER = "HSPZ_TEST_SLURM"
GPUS = 2
NODE_KEYS = ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore", "RealMemory")
# The node's RealMemory: the machine's, but at most this (a 23 GB node, smaller than the 32 GB a
# work job once asked for), so that the workflow's SLURM test shows the shipped profile fits it.
NODE_MEMORY_MB = 23000
UNFINISHED = ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED")


class SlurmError(RuntimeError):
    """The cluster could not be installed, started or stopped; the message says where to look."""


def missing() -> list[str]:
    """The SLURM and munge programs not installed here."""
    return [name for name in SBIN + CLIENTS if shutil.which(name, path=SEARCH_PATH) is None]


def unavailable() -> str | None:
    """Why a cluster cannot be started here, or None when it can (perhaps after `install`)."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        return "starting SLURM daemons needs root on Linux"
    if missing() and shutil.which("apt-get", path=SEARCH_PATH) is None:
        return f"SLURM is not installed ({', '.join(missing())} missing) and there is no apt-get"
    if _foreign_conf():
        owner = DEFAULT_CONF.resolve().parent
        if (owner / "cluster.json").exists():
            return f"a test cluster is up: stop it with `python3 tests/slurm.py down {owner}`"
        return f"{DEFAULT_CONF} exists (a SLURM configured here): the test does not replace it"
    return None


def install() -> None:
    """apt-get install what is missing, without letting apt start any daemon."""
    if not missing():
        return
    with _no_daemon_starts():
        command = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *PACKAGES]
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        if _apt(command, env).returncode != 0:  # stale package lists: update once, then retry
            _apt(["apt-get", "update", "-q"], env)
            done = _apt(command, env)
            if done.returncode != 0:
                raise SlurmError(f"apt-get install {' '.join(PACKAGES)} failed:\n{done.stdout}")
    if missing():
        raise SlurmError(f"installed {' '.join(PACKAGES)}, but {', '.join(missing())} missing")


@dataclass
class Cluster:
    """A running cluster: its folder, its daemons' PIDs and the environment for its clients."""

    root: Path
    node: str = ""
    memory_mb: int = 0
    pids: dict[str, int] = field(default_factory=dict)
    children: list[subprocess.Popen] = field(default_factory=list, repr=False)  # to reap

    @property
    def env(self) -> dict[str, str]:
        """os.environ plus the marker that lets `stop` find this cluster's job processes."""
        return {**os.environ, "PATH": SEARCH_PATH, MARKER: str(self.root)}

    def run(self, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
        """A SLURM client command (sbatch, squeue, ...) against this cluster."""
        return subprocess.run(args, capture_output=True, text=True, env=self.env, timeout=timeout)

    def log_tail(self, lines: int = 15) -> str:
        """The end of every daemon's log, for a failure message."""
        tails = []
        for log in sorted((self.root / "log").glob("*")):
            text = log.read_text(errors="replace").splitlines()[-lines:]
            tails.append(f"--- {log.name}\n" + "\n".join(text))
        return "\n".join(tails)

    def save(self) -> None:
        state = {"node": self.node, "memory_mb": self.memory_mb, "pids": self.pids}
        (self.root / "cluster.json").write_text(json.dumps(state))

    @classmethod
    def load(cls, root: Path) -> Cluster:
        state = json.loads((root / "cluster.json").read_text())
        return cls(root, state["node"], state["memory_mb"], state["pids"])


def start(timeout: float = 60) -> Cluster:
    """A fresh cluster whose node is idle; whatever was started is stopped if it fails."""
    if reason := unavailable():
        raise SlurmError(reason)
    if missing():
        raise SlurmError(f"SLURM is not installed ({', '.join(missing())}): call install() first")
    root = Path(tempfile.mkdtemp(prefix="hspz-slurm-"))
    root.chmod(0o755)  # munged wants every folder above its socket searchable by all
    cluster = Cluster(root)
    try:
        _start_munge(cluster, timeout)
        _write_config(cluster)
        _daemon(cluster, "slurmctld", "-D", "-c", "-i", "-f", str(root / "slurm.conf"))
        _daemon(cluster, "slurmd", "-D", "-f", str(root / "slurm.conf"), "-N", cluster.node)
        _wait_idle(cluster, timeout)
    except BaseException:
        stop(cluster)
        raise
    return cluster


def stop(cluster: Cluster, timeout: float = 20) -> None:
    """Cancel every job, kill the daemons and leftover job processes by PID, remove the folder."""
    survivors = []
    try:
        if "slurmctld" in cluster.pids and _alive(cluster.pids["slurmctld"], cluster.root):
            _cancel_jobs(cluster, timeout)
        for name in ("slurmd", "slurmctld", "munged"):
            if name in cluster.pids and not _kill(cluster.pids[name], cluster.root, timeout):
                survivors.append(cluster.pids[name])
        survivors += [pid for pid in cluster_processes(cluster.root) if not _kill(pid, None, 5)]
        for child in cluster.children:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout)
    finally:
        with contextlib.suppress(OSError):
            if DEFAULT_CONF.is_symlink() and DEFAULT_CONF.readlink() == cluster.root / "slurm.conf":
                DEFAULT_CONF.unlink()
        shutil.rmtree(cluster.root, ignore_errors=True)
    if survivors:
        raise SlurmError(f"processes {survivors} survived SIGKILL")


@contextlib.contextmanager
def running(timeout: float = 60) -> Iterator[Cluster]:
    """`start`, then `stop` however the block ends."""
    cluster = start(timeout)
    try:
        yield cluster
    finally:
        stop(cluster)


def alive(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie, dead but not yet reaped, is not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _apt(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=900,
    )


@contextlib.contextmanager
def _no_daemon_starts() -> Iterator[None]:
    """A policy-rc.d that exits 101 ("action forbidden") for the block; the old one back after."""
    old = POLICY_RC_D.read_bytes() if POLICY_RC_D.exists() else None
    POLICY_RC_D.write_text("#!/bin/sh\nexit 101\n")
    POLICY_RC_D.chmod(0o755)
    try:
        yield
    finally:
        if old is None:
            POLICY_RC_D.unlink()
        else:
            POLICY_RC_D.write_bytes(old)


def _foreign_conf() -> bool:
    """A /etc/slurm/slurm.conf there (a dangling link left by a killed test run is not)."""
    return DEFAULT_CONF.exists()


def _start_munge(cluster: Cluster, timeout: float) -> None:
    """A munged of the cluster's own: its key and socket in the folder, no system state."""
    root = cluster.root / "munge"
    root.mkdir(mode=0o755)
    key = root / "munge.key"
    key.touch(mode=0o600)
    key.write_bytes(os.urandom(1024))
    socket_path = root / "socket"
    _daemon(
        cluster,
        "munged",
        "-F",
        f"--socket={socket_path}",
        f"--key-file={key}",
        f"--pid-file={root / 'munged.pid'}",
        f"--log-file={cluster.root / 'log/munged.log'}",
        f"--seed-file={root / 'seed'}",
    )
    deadline = time.monotonic() + timeout
    while not socket_path.exists():
        if time.monotonic() > deadline or not alive(cluster.pids["munged"]):
            raise SlurmError(f"munged did not start\n{cluster.log_tail()}")
        time.sleep(0.05)
    cred = subprocess.run(
        ["munge", "-n", "-S", str(socket_path)], capture_output=True, env=cluster.env, timeout=10
    )
    check = subprocess.run(
        ["unmunge", "-S", str(socket_path)],
        input=cred.stdout,
        capture_output=True,
        env=cluster.env,
        timeout=10,
    )
    if check.returncode != 0:
        raise SlurmError(f"munge -n | unmunge failed: {check.stderr.decode().strip()}")


def _write_config(cluster: Cluster) -> None:
    """slurm.conf, gres.conf and the fake GPUs; /etc/slurm/slurm.conf links to the slurm.conf."""
    root = cluster.root
    node = _node_hardware()
    node["RealMemory"] = str(min(int(node["RealMemory"]), NODE_MEMORY_MB))
    cluster.node, cluster.memory_mb = node["NodeName"], int(node["RealMemory"])
    for name in ("state", "spool"):
        (root / name).mkdir()
    for gpu in range(GPUS):
        (root / f"fakegpu{gpu}").symlink_to("/dev/null")
    ctld_port, slurmd_port = _free_ports(2)
    hardware = " ".join(f"{key}={node[key]}" for key in NODE_KEYS)
    settings = {
        "ClusterName": "hspztest",
        "SlurmctldHost": f"{cluster.node}(127.0.0.1)",
        "SlurmctldPort": ctld_port,
        "SlurmdPort": slurmd_port,
        "SlurmUser": "root",
        "AuthType": "auth/munge",
        "CredType": "cred/munge",
        "AuthInfo": f"socket={root / 'munge' / 'socket'}",
        "StateSaveLocation": root / "state",
        "SlurmdSpoolDir": root / "spool",
        "SlurmctldPidFile": root / "slurmctld.pid",
        "SlurmdPidFile": root / "slurmd.pid",
        "SlurmctldLogFile": root / "log" / "slurmctld.log",
        "SlurmdLogFile": root / "log" / "slurmd.log",
        "ProctrackType": "proctrack/linuxproc",  # no cgroups without systemd
        "TaskPlugin": "task/none",
        "SelectType": "select/cons_tres",
        "SelectTypeParameters": "CR_Core",
        # No slurmdbd. AccountingStorageTRES=gres/gpu would make slurmctld exit here.
        "AccountingStorageType": "accounting_storage/none",
        "JobAcctGatherType": "jobacct_gather/none",
        "JobCompType": "jobcomp/none",
        "MpiDefault": "none",
        "MailProg": "/bin/true",
        "MinJobAge": 300,  # squeue shows a finished job this long: the plugin's status source
        "KillWait": 5,  # seconds from a time limit's SIGTERM to its SIGKILL (30 by default)
        "ReturnToService": 2,
        "GresTypes": "gpu",
    }
    lines = [f"{key}={value}" for key, value in settings.items()]
    lines.append(
        f"NodeName={cluster.node} NodeAddr=127.0.0.1 {hardware} Gres=gpu:{GPUS} State=UNKNOWN"
    )
    lines.append("PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
    (root / "slurm.conf").write_text("\n".join(lines) + "\n")
    gpus = f"{root}/fakegpu[0-{GPUS - 1}]"
    (root / "gres.conf").write_text(f"AutoDetect=off\nName=gpu File={gpus}\n")
    DEFAULT_CONF.parent.mkdir(parents=True, exist_ok=True)
    if DEFAULT_CONF.is_symlink() and not DEFAULT_CONF.exists():
        DEFAULT_CONF.unlink()  # left by a test run that was killed
    DEFAULT_CONF.symlink_to(root / "slurm.conf")


def _node_hardware() -> dict[str, str]:
    """`slurmd -C`'s NodeName line as a dict: what the machine has, as slurmd will report it."""
    done = subprocess.run(
        ["slurmd", "-C"],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "PATH": SEARCH_PATH},
    )
    words = done.stdout.splitlines()[0].split() if done.stdout else []
    node = dict(word.split("=", 1) for word in words if "=" in word)
    if done.returncode != 0 or not all(key in node for key in ("NodeName", *NODE_KEYS)):
        raise SlurmError(f"slurmd -C printed no node line: {done.stdout}{done.stderr}")
    return node


def _free_ports(count: int) -> list[int]:
    """Ports nothing listens on now, so a system SLURM's 6817/6818 are never in the way."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]


def _daemon(cluster: Cluster, name: str, *args: str) -> None:
    """Start one daemon in the foreground of its own session, output in log/<name>.out."""
    logs = cluster.root / "log"
    logs.mkdir(exist_ok=True)
    with open(logs / f"{name}.out", "wb") as out:
        process = subprocess.Popen(
            [shutil.which(name, path=SEARCH_PATH), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=cluster.env,
            start_new_session=True,
        )
    cluster.pids[name] = process.pid
    cluster.children.append(process)
    cluster.save()


def _wait_idle(cluster: Cluster, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            state = cluster.run("sinfo", "-h", "-N", "-o", "%T", timeout=10).stdout.strip()
        except subprocess.TimeoutExpired:
            state = ""
        if state == "idle":
            return
        dead = [name for name, pid in cluster.pids.items() if not alive(pid)]
        if dead or time.monotonic() > deadline:
            why = f"{', '.join(dead)} exited" if dead else f"node still {state or 'unknown'}"
            raise SlurmError(f"SLURM did not come up ({why})\n{cluster.log_tail()}")
        time.sleep(0.2)


def _cancel_jobs(cluster: Cluster, timeout: float) -> None:
    """scancel every job, then wait (bounded) until none is left unfinished."""
    cluster.run("scancel", "--user", "root", timeout=10)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = cluster.run("squeue", "-h", "--states=all", "-o", "%T", timeout=10).stdout
        if not set(states.split()) & set(UNFINISHED):
            return
        time.sleep(0.2)


def _alive(pid: int, root: Path | None) -> bool:
    """`pid` lives and, when `root` is given, is the daemon started with that folder."""
    if not alive(pid):
        return False
    if root is None:
        return True
    with contextlib.suppress(OSError):
        return str(root).encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    return False


def _kill(pid: int, root: Path | None, timeout: float) -> bool:
    """SIGTERM, then SIGKILL after `timeout` seconds; whether it is gone (a PID taken by another
    process counts as gone: that one is left alone)."""
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
        if not _alive(pid, root):
            return True
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while _alive(pid, root) and time.monotonic() < deadline:
            time.sleep(0.05)
    return not _alive(pid, root)


def cluster_processes(root: Path) -> list[int]:
    """Live processes of this cluster: those whose environment carries its MARKER (jobs and
    their children) or that hold a file under its folder open (slurmstepd keeps slurmd's log)."""
    marker = f"{MARKER}={root}".encode()
    ours = {os.getpid(), os.getppid()}
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) not in ours and alive(int(proc.name)):
            with contextlib.suppress(OSError):
                if marker in (proc / "environ").read_bytes().split(b"\0") or _holds(proc, root):
                    pids.append(int(proc.name))
    return pids


def _holds(proc: Path, root: Path) -> bool:
    for fd in (proc / "fd").iterdir():
        with contextlib.suppress(OSError):
            if Path(os.readlink(fd)).is_relative_to(root):
                return True
    return False


def _main(argv: list[str]) -> int:
    if argv == ["install"]:
        started = time.monotonic()
        install()
        print(f"SLURM installed ({time.monotonic() - started:.1f} s)")
    elif argv == ["up"]:
        started = time.monotonic()
        cluster = start()
        print(f"SLURM up in {time.monotonic() - started:.1f} s: {cluster.root}")
    elif len(argv) == 2 and argv[0] == "down":
        if not (Path(argv[1]) / "cluster.json").exists():
            raise SlurmError(f"{argv[1]}: not the folder of a test cluster (no cluster.json)")
        stop(Cluster.load(Path(argv[1])))
    else:
        print("usage: python3 tests/slurm.py install | up | down DIR", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    try:
        sys.exit(_main(sys.argv[1:]))
    except SlurmError as error:
        print(f"slurm.py: {error}", file=sys.stderr)
        sys.exit(1)
