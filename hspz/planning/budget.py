"""Devices and budgets: which devices a backend offers, how much memory a run may use (a GPU's
free memory per worker; on the CPU backend 90% of the host's memory: the tightest cgroup
memory limit of this process, else MemTotal), `--max-hits 0` and the share of `--threads` each
worker gets.  `HSPZ_HOST_MEMORY_BYTES` overrides the host memory the budget sees (a test hook).

The host budget is the memory the run may hold, not what happens to be free when it starts:
the page cache and other processes' reclaimable memory would make MemAvailable refuse a run
that fits, and a number that changes from run to run would make the preflight's halving (a
different plan, a different digest) depend on the moment."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING

from hspz.core import knobs
from hspz.core.options import Options
from hspz.planning import memory as planning
from hspz.planning import schedule as scheduling

if TYPE_CHECKING:
    from hspz.engine.contract import Backend


def devices_for(engine: Backend, workers: int) -> scheduling.Devices:
    """The devices a run of `engine` has: every visible GPU, or `workers` CPU workers (`--gpus`
    counts a CPU run's workers)."""
    if engine.capabilities.on_device:
        return scheduling.gpu_devices()
    return scheduling.cpu_devices(workers)


def host_memory() -> tuple[int, str] | None:
    """(bytes, where from) of the host memory this process may use: HSPZ_HOST_MEMORY_BYTES,
    else the tightest memory limit of its cgroups (v1 or v2, this one and every parent), else
    MemTotal; None when none can be read."""
    forced = os.environ.get("HSPZ_HOST_MEMORY_BYTES", "")
    if forced.isdigit():
        return int(forced), "HSPZ_HOST_MEMORY_BYTES"
    limit, total = _cgroup_limit(), _meminfo_total()
    if limit is not None and (total is None or limit < total):
        return limit, "the cgroup memory limit"
    return None if total is None else (total, "MemTotal")


def host_memory_bytes() -> int | None:
    """`host_memory()`'s bytes."""
    found = host_memory()
    return None if found is None else found[0]


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() and int(text) < (1 << 62) else None  # v1: no limit ~2^63


def _cgroup_limit() -> int | None:
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    best = None
    for line in lines:
        _, ctrl, rel = line.split(":", 2)
        if ctrl == "":
            root, name = Path("/sys/fs/cgroup"), "memory.max"  # v2 ("max": no limit)
        elif "memory" in ctrl.split(","):
            root, name = Path("/sys/fs/cgroup/memory"), "memory.limit_in_bytes"
        else:
            continue
        d = root / rel.lstrip("/")
        while d.is_relative_to(root):
            limit = _read_int(d / name)
            if limit is not None:
                best = limit if best is None else min(best, limit)
            if d == root:
                break
            d = d.parent
    return best


def _meminfo_total() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


HOST_SHARE = 0.9  # of host memory a CPU run may plan to hold


def host_budget() -> tuple[int, str] | None:
    """(bytes a CPU run may hold, what they are 90% of), or None when unknown."""
    found = host_memory()
    return None if found is None else (int(found[0] * HOST_SHARE), found[1])


def device_budget(devices: scheduling.Devices, workers: int) -> int:
    """Bytes one GPU worker may use: free memory of device 0 shared by the workers on it."""
    from hspz.engine import cuda_driver

    return cuda_driver.free_bytes() // math.ceil(workers / devices.count)


def resolve_max_hits(options: Options, devices: scheduling.Devices) -> int:
    """`--max-hits 0` -> KegAlign's 4,194,304 × device GiB (16 GiB stand-in on the CPU)."""
    if options.max_hits > 0:
        return options.max_hits
    if devices.backend == "gpu" and devices.memory:
        return planning.kegalign_max_hits(devices.memory[0])
    return planning.kegalign_max_hits(planning.CPU_DEVICE_GIB << 30)


def layout_workers(gpus: int, devices: scheduling.Devices) -> int:
    """Workers the `-B 0` layout is made for: HSPZ_LAYOUT_FORCE_WORKERS, else
    min(--gpus, devices)."""
    forced = knobs.read().layout_force_workers
    return forced if forced is not None else max(1, min(gpus, devices.count))


def per_worker_threads(threads: int, workers: int) -> int:
    """`--threads` is the machine's budget: one worker gets it as given (0 = all cores),
    several share it."""
    if workers <= 1:
        return threads
    return max(1, (threads or os.cpu_count() or 1) // workers)
