"""The schedule: which worker runs which work units on which device, and the `schedule:` lines.

`--gpus W` makes min(W, reference bins) workers; worker k uses device k mod D.  When each worker
has its own device and every device the run uses is the same class (equal SM count and L2,
nominal clocks within 10%), the frozen plan's units are split by count quotas (`unit_partition`:
whole reference bins first, then contiguous query slices of as few bins as possible, each split
bin costing one extra reference build); otherwise each worker owns whole reference bins assigned
by deterministic longest-processing-time (`assign_bins`).  `HSPZ_UNIT_PARTITION=0|1` forces
either (read through `hspz.core.knobs`).  The CPU backend presents its W workers as W CPU devices
of one class (`cpu0`, ...), so the same machinery runs without a GPU; `HSPZ_CPU_DEVICES=N` (a
test hook) gives it fewer device slots, which makes workers time-slice as they do on too few
GPUs.

The schedule only decides where and when units run, never what they compute: output bytes do not
depend on it (docs/exactness.md).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from hspz.core import knobs
from hspz.planning.bins import Plan, workers_for


@dataclass(frozen=True)
class DeviceProfile:
    """Static attributes that decide whether two devices are the same class."""

    sm_count: int
    l2_bytes: int
    clock_khz: int
    name: str = ""


@dataclass(frozen=True)
class Devices:
    """The devices a run can use: `backend` is "cpu" or "gpu"."""

    backend: str
    profiles: tuple[DeviceProfile, ...]
    memory: tuple[int, ...] = ()  # total bytes per device (GPU only)

    @property
    def count(self) -> int:
        return max(len(self.profiles), 1)

    def label(self, device: int) -> str:
        return f"cpu{device}" if self.backend == "cpu" else str(device)


def cpu_devices(workers: int) -> Devices:
    """W CPU "devices" of one class (fewer with the HSPZ_CPU_DEVICES test hook)."""
    n = workers
    text = os.environ.get("HSPZ_CPU_DEVICES", "")
    if text.isdigit() and int(text) >= 1:
        n = int(text)
    return Devices("cpu", tuple(DeviceProfile(0, 0, 0, "cpu") for _ in range(max(n, 1))))


def gpu_devices() -> Devices:
    """Every visible GPU, its profile and memory from the CUDA driver (`engine.cuda_driver`:
    no CuPy, so a plan imports none)."""
    from hspz.engine import cuda_driver

    found = cuda_driver.devices()
    profiles = tuple(DeviceProfile(d.sm_count, d.l2_bytes, d.clock_khz, d.name) for d in found)
    return Devices("gpu", profiles, tuple(d.total_bytes for d in found))


# --------------------------------------------------------------------------------------------
# Policy
# --------------------------------------------------------------------------------------------


def partition_knob() -> bool | None:
    """HSPZ_UNIT_PARTITION through `hspz.core.knobs` (None: automatic); a bad value is an error."""
    return knobs.read().unit_partition


def same_class(a: DeviceProfile, b: DeviceProfile) -> bool:
    """Equal SM count and L2, nominal clocks within 10%."""
    return (
        a.sm_count == b.sm_count
        and a.l2_bytes == b.l2_bytes
        and abs(a.clock_khz - b.clock_khz) * 10 <= abs(b.clock_khz)
    )


def choose_policy(knob: bool | None, workers: int, devices: Devices) -> tuple[bool, str]:
    """(use the unit partition, the reason printed on the `schedule:` line)."""
    if knob is not None:
        return knob, f"forced by HSPZ_UNIT_PARTITION={int(knob)}"
    if workers <= 1:
        return False, "auto: W=1"
    used = devices.profiles[: min(workers, devices.count)]
    if workers > len(used):
        plural = "" if len(used) == 1 else "s"
        return False, f"auto: {workers} workers time-slice {len(used)} device{plural}"
    if devices.backend == "cpu":
        return True, f"auto: {len(used)} CPU devices of one class"
    first = used[0]
    for i, p in enumerate(used):
        if not same_class(p, first):
            return False, (
                f"auto: device {i} differs from device 0 ({p.sm_count} vs "
                f"{first.sm_count} SMs, {p.clock_khz // 1000} vs "
                f"{first.clock_khz // 1000} MHz, {p.l2_bytes >> 20} vs "
                f"{first.l2_bytes >> 20} MiB L2)"
            )
    return True, (
        f"auto: {len(used)} matching devices ({first.sm_count} SMs, "
        f"{first.clock_khz // 1000} MHz, {first.l2_bytes >> 20} MiB L2; static "
        f"attributes only, clocks within 10%)"
    )


# --------------------------------------------------------------------------------------------
# Partitions
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Visit:
    """One reference bin and the contiguous query bins [first, end) a worker runs against it."""

    ref_bin: int
    first: int
    end: int

    @property
    def units(self) -> int:
        return self.end - self.first

    def __str__(self) -> str:
        return f"R{self.ref_bin}[{self.first}..{self.end})"


def assign_bins(ref_bp: Sequence[int], workers: int) -> list[list[int]]:
    """Deterministic LPT: largest bin first into the lightest worker (ties: lowest worker,
    lowest bin); each worker's bins in ascending order."""
    load = [0] * max(workers, 1)
    out: list[list[int]] = [[] for _ in load]
    for b in sorted(range(len(ref_bp)), key=lambda i: (-ref_bp[i], i)):
        w = min(range(len(load)), key=lambda i: (load[i], i))
        load[w] += ref_bp[b]
        out[w].append(b)
    return [sorted(bins) for bins in out]


def whole_bin_partition(ref_bp: Sequence[int], n_query: int, workers: int) -> list[list[Visit]]:
    return [[Visit(b, 0, n_query) for b in bins] for bins in assign_bins(ref_bp, workers)]


def _visits_at(offset: int, length: int, q: int) -> int:
    """Bin visits of a residual piece of `length` units starting at stream offset `offset`."""
    return 0 if length == 0 else 1 + ((offset % q) + length - 1) // q


def _large_quota_order(
    workers: int, n_large: int, d_small: int, d_large: int, q: int
) -> list[bool]:
    """Which workers take the larger quota: the order along the residual stream minimising
    total visits, then visits on large-quota workers, ties keeping large quotas earliest."""
    n_small = workers - n_large
    best: dict[tuple[int, int], tuple[int, int]] = {(0, 0): (0, 0)}
    came_large: dict[tuple[int, int], bool] = {}
    for i in range(n_small + 1):
        for j in range(n_large + 1):
            if (i, j) not in best:
                continue
            tot, lg = best[(i, j)]
            s = i * d_small + j * d_large
            if i < n_small:
                cand = (tot + _visits_at(s, d_small, q), lg)
                if (i + 1, j) not in best or cand < best[(i + 1, j)]:
                    best[(i + 1, j)], came_large[(i + 1, j)] = cand, False
            if j < n_large:
                v = _visits_at(s, d_large, q)
                cand = (tot + v, lg + v)
                if (i, j + 1) not in best or cand < best[(i, j + 1)]:
                    best[(i, j + 1)], came_large[(i, j + 1)] = cand, True
    is_large = [False] * workers
    i, j = n_small, n_large
    while i + j > 0:
        if came_large[(i, j)]:
            is_large[i + j - 1] = True
            j -= 1
        else:
            i -= 1
    return is_large


def unit_partition(ref_bp: Sequence[int], n_query: int, workers: int) -> list[list[Visit]]:
    """Count quotas of N = R·Q units (N div W, N mod W of them one larger).  A quota c gives
    c div Q whole bins (largest bins first into the lightest worker with a free slot) and a
    residual of c mod Q units cut from one stream of the leftover bins' units (bins by size,
    then query order), so a split bin is visited by as few workers as possible."""
    r, q, w = len(ref_bp), n_query, max(workers, 1)
    if w == 1 or r == 0 or q == 0:
        return whole_bin_partition(ref_bp, q, w)
    n = r * q
    small, n_large = n // w, n % w
    large = small + 1 if n_large else small
    is_large = _large_quota_order(w, n_large, small % q, large % q, q)
    quota = [large if is_large[x] else small for x in range(w)]
    visits: list[list[Visit]] = [[] for _ in range(w)]
    taken = _whole_slots(ref_bp, quota, q, visits)
    rest = sorted((b for b in range(r) if b not in taken), key=lambda b: (-ref_bp[b], b))
    stream = [(b, k) for b in rest for k in range(q)]
    offset = 0
    for x in range(w):
        end = offset + quota[x] % q
        while offset < end:
            b = stream[offset][0]
            stop = offset
            while stop < end and stream[stop][0] == b:
                stop += 1
            visits[x].append(Visit(b, stream[offset][1], stream[stop - 1][1] + 1))
            offset = stop
    return [sorted(v, key=lambda t: t.ref_bin) for v in visits]


def _whole_slots(
    ref_bp: Sequence[int], quota: list[int], q: int, visits: list[list[Visit]]
) -> set[int]:
    load = [0] * len(quota)
    used = [0] * len(quota)
    taken: set[int] = set()
    for b in sorted(range(len(ref_bp)), key=lambda i: (-ref_bp[i], i)):
        free = [x for x in range(len(quota)) if used[x] < quota[x] // q]
        if not free:
            break
        x = min(free, key=lambda i: (load[i], i))
        load[x] += ref_bp[b]
        used[x] += 1
        taken.add(b)
        visits[x].append(Visit(b, 0, q))
    return taken


# --------------------------------------------------------------------------------------------
# The schedule and its lines
# --------------------------------------------------------------------------------------------


@dataclass
class Schedule:
    """Per worker: its device and its visits, executed in order."""

    policy: str  # "unit-partition" or "whole-bin"
    reason: str
    visits: list[list[Visit]]
    devices: list[int]
    labels: list[str] = field(default_factory=list)
    n_ref_bins: int = 0

    @property
    def workers(self) -> int:
        return len(self.visits)

    @property
    def total_visits(self) -> int:
        return sum(len(v) for v in self.visits)


def run_schedule(plan: Plan, ref_bp: Sequence[int], workers: int, devices: Devices) -> Schedule:
    """The schedule a run of `plan` uses: `workers` (`--gpus`) workers on `devices`, the
    partition as HSPZ_UNIT_PARTITION chooses (`partition_knob`); what `run`, `plan`, a query
    list and `hits-estimate --pricing` all schedule with."""
    return make_schedule(plan, ref_bp, workers, devices, partition_knob())


def make_schedule(
    plan: Plan, ref_bp: Sequence[int], gpus: int, devices: Devices, knob: bool | None
) -> Schedule:
    """min(--gpus, reference bins) workers, the policy and the partition."""
    workers = workers_for(gpus, plan)
    use_units, reason = choose_policy(knob, workers, devices)
    q = len(plan.query_bins)
    part = (
        unit_partition(ref_bp, q, workers) if use_units else whole_bin_partition(ref_bp, q, workers)
    )
    dev = [k % devices.count for k in range(workers)]
    return Schedule(
        "unit-partition" if use_units else "whole-bin",
        reason,
        part,
        dev,
        [devices.label(d) for d in dev],
        len(plan.ref_bins),
    )


def schedule_lines(s: Schedule) -> list[str]:
    """The `schedule:` lines (docs/report-lines.md, "`schedule:`")."""
    extra = max(s.total_visits - s.n_ref_bins, 0)
    lines = [
        f"schedule: policy={s.policy} W={s.workers} visits={s.total_visits} "
        f"extra_replicas={extra} ({s.reason})"
    ]
    for k, visits in enumerate(s.visits):
        units = sum(v.units for v in visits)
        body = " ".join(str(v) for v in visits)
        lines.append(
            f"schedule: worker {k} device {s.labels[k]}: {body} units={units} visits={len(visits)}"
        )
    mapping = " ".join(f"worker{k}->{_mapping_label(s.labels[k])}" for k in range(s.workers))
    lines.append(f"schedule: device mapping: {mapping}")
    return lines


def _mapping_label(label: str) -> str:
    return label if label.startswith("cpu") else f"device{label}"


def units_of(visits: Sequence[Visit], n_query: int) -> list[int]:
    """The ordinals a worker runs, in its execution order."""
    return [v.ref_bin * n_query + q for v in visits for q in range(v.first, v.end)]
