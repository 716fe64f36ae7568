"""Environment knobs (docs/knobs.md): parsed and validated in one place.

Every knob is exact: it may change speed, never bytes.  An unrecognised value of
HSPZ_UNIT_PARTITION, HSPZ_REF_BUCKETS, HSPZ_REF_BUCKET_SHIFT or HSPZ_GPU_FILTER is an error;
HSPZ_DEVICE_SEEDS, HSPZ_CHUNK_WALK and HSPZ_LAYOUT_FORCE_WORKERS ignore values they do not know.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hspz.core.errors import UsageError
from hspz.core.options import MAX_WORKERS, shown

# HSPZ_REF_BUCKETS=1 without a shift counting-sorts each piece's hits by 1 kbp reference windows:
# finer than the knob's 16..31 allows, and the fastest window measured on the H200
# (BENCHMARKS.md, "reference order"), though still slower than no sort, so auto is off.
DEFAULT_BUCKET_SHIFT = 10
# HSPZ_GPU_FILTER's values (experimental, issue 27): the GPU filter kernel; gpu.FILTERS names them
GPU_FILTERS = (
    "pass",
    "hits2",
    "hits4",
    "lane",
    "lane4",
    "lane8",
    "nib",
    "nib16",
    "seed",
    "seed16",
)


@dataclass(frozen=True)
class Knobs:
    unit_partition: bool | None  # None = automatic
    device_seeds: bool | None  # None = default (device seeder when workers > 1)
    ref_buckets: bool | None  # None = auto
    bucket_shift: int
    chunk_walk_full: bool
    layout_force_workers: int | None
    shift_given: bool = False  # HSPZ_REF_BUCKET_SHIFT set: it alone turns bucketing on
    gpu_filter: str | None = None  # HSPZ_GPU_FILTER (experimental): None = gpu.DEFAULT_FILTER


def read(env: Mapping[str, str] | None = None) -> Knobs:
    """The knobs of this environment; UsageError for a value docs/knobs.md calls an error."""
    if env is None:
        env = os.environ
    return Knobs(
        unit_partition=_strict(env, "HSPZ_UNIT_PARTITION", {"0": False, "1": True}),
        device_seeds={"0": False, "1": True}.get(env.get("HSPZ_DEVICE_SEEDS", "")),
        ref_buckets=_strict(env, "HSPZ_REF_BUCKETS", {"auto": None, "0": False, "1": True}),
        bucket_shift=_shift(env),
        chunk_walk_full=env.get("HSPZ_CHUNK_WALK") == "full",
        layout_force_workers=_workers(env.get("HSPZ_LAYOUT_FORCE_WORKERS")),
        shift_given=bool(env.get("HSPZ_REF_BUCKET_SHIFT")),
        gpu_filter=_strict(env, "HSPZ_GPU_FILTER", {f: f for f in GPU_FILTERS}),
    )


def _strict(env: Mapping[str, str], name: str, values: dict[str, Any]) -> Any:
    text = env.get(name)
    if text is None or text == "":
        return None
    if text not in values:
        allowed = ", ".join(values)
        raise UsageError(f"{name}={shown(text)[1:-1]} is not one of: unset, {allowed}")
    return values[text]


def _shift(env: Mapping[str, str]) -> int:
    text = env.get("HSPZ_REF_BUCKET_SHIFT")
    if text is None or text == "":
        return DEFAULT_BUCKET_SHIFT
    if not (text.isascii() and text.isdigit() and len(text) <= 2 and 16 <= int(text) <= 31):
        raise UsageError(
            f"HSPZ_REF_BUCKET_SHIFT={shown(text)[1:-1]} must be an integer from 16 to 31"
        )
    return int(text)


def _workers(text: str | None) -> int | None:
    """A worker count from 1 to MAX_WORKERS (as --gpus), else None (the knob is ignored)."""
    if not (text and text.isascii() and text.isdigit() and len(text) <= 6):
        return None
    return int(text) if 1 <= int(text) <= MAX_WORKERS else None


def buckets_on(knobs: Knobs, ref_len: int) -> bool:
    """Whether the GPU visits hits in reference-window order: HSPZ_REF_BUCKETS=1 or a shift.
    Auto is off: on the H200 every window measured slower than seed order (BENCHMARKS.md,
    "GPU ns per seed hit (H200)", tried and not kept)."""
    if knobs.ref_buckets is not None:
        return knobs.ref_buckets
    return knobs.shift_given
