"""Devices and budgets: which devices a backend offers, how much memory one worker may use (a
GPU's free memory, or the host's as its cgroup limits it), `--max-hits 0` and the share of
`--threads` each worker gets.  `HSPZ_HOST_MEMORY_BYTES` overrides the host memory the budget sees
(a test hook)."""

from __future__ import annotations

import math
import os
from pathlib import Path

from hspz import knobs
from hspz import plan as planning
from hspz import schedule as scheduling
from hspz.options import Options


def backend_of(engine) -> str:
    return "gpu" if engine.__name__.endswith(".gpu") else "cpu"


def devices_for(engine, gpus: int) -> scheduling.Devices:
    if backend_of(engine) == "gpu":
        return scheduling.gpu_devices()
    return scheduling.cpu_devices(gpus)


def host_memory_bytes() -> int | None:
    """Host memory available to this process: HSPZ_HOST_MEMORY_BYTES, else the tightest cgroup
    limit above it, else MemAvailable."""
    forced = os.environ.get("HSPZ_HOST_MEMORY_BYTES", "")
    if forced.isdigit():
        return int(forced)
    limits = [x for x in (_cgroup_free(), _meminfo_available()) if x is not None]
    return min(limits) if limits else None


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() and int(text) < (1 << 62) else None


def _cgroup_free() -> int | None:
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    best = None
    for line in lines:
        _, ctrl, rel = line.split(":", 2)
        if ctrl == "":
            root, files = Path("/sys/fs/cgroup"), ("memory.max", "memory.current")
        elif "memory" in ctrl.split(","):
            root, files = Path("/sys/fs/cgroup/memory"), ("memory.limit_in_bytes",
                                                          "memory.usage_in_bytes")
        else:
            continue
        d = root / rel.lstrip("/")
        while d.is_relative_to(root):
            limit, used = _read_int(d / files[0]), _read_int(d / files[1])
            if limit is not None and used is not None:
                best = limit - used if best is None else min(best, limit - used)
            if d == root:
                break
            d = d.parent
    return best


def _meminfo_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def device_budget(devices: scheduling.Devices, workers: int) -> int | None:
    """Bytes one worker may use: free GPU memory of device 0 shared by the workers on it, or
    90% of host memory shared by every CPU worker."""
    if devices.backend == "gpu":
        import cupy

        free = cupy.cuda.Device(0).mem_info[0]
        return free // math.ceil(workers / devices.count)
    host = host_memory_bytes()
    return None if host is None else host * 9 // 10 // max(workers, 1)


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
