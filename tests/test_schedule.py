"""The schedule: count-quota unit partition, LPT whole-bin ownership, the policy choice and its
reasons, and the `schedule:` lines."""

from __future__ import annotations

import itertools

import pytest

from hspz.core.errors import UsageError
from hspz.planning.bins import Plan
from hspz.planning.schedule import (
    DeviceProfile,
    Devices,
    Visit,
    assign_bins,
    choose_policy,
    cpu_devices,
    make_schedule,
    partition_knob,
    schedule_lines,
    unit_partition,
    units_of,
)

H200 = DeviceProfile(132, 60 << 20, 1_980_000, "H200")


def gpus(*profiles: DeviceProfile) -> Devices:
    return Devices("gpu", profiles, tuple(141 << 30 for _ in profiles))


def test_lpt_gives_the_largest_bins_to_the_lightest_workers():
    assert assign_bins([5, 9, 3, 7, 1], 2) == [[1, 2, 4], [0, 3]]
    assert assign_bins([4, 4, 4], 3) == [[0], [1], [2]]


@pytest.mark.parametrize(
    "r, q, w",
    [(r, q, w) for r, q, w in itertools.product(range(1, 8), range(1, 6), range(1, 6)) if w <= r],
)
def test_unit_partition_covers_every_unit_once_with_count_quotas(r, q, w):
    bp = [(7 * b) % 5 + 10 for b in range(r)]
    part = unit_partition(bp, q, w)
    units = [units_of(v, q) for v in part]
    assert sorted(u for us in units for u in us) == list(range(r * q))
    assert sorted(len(u) for u in units) == sorted(
        (r * q) // w + (k < (r * q) % w) for k in range(w)
    )
    for visits in part:  # whole bins first, then as few split bins as the quotas force
        assert [v.ref_bin for v in visits] == sorted({v.ref_bin for v in visits})
    split = {v.ref_bin for vs in part for v in vs if v.units < q}
    assert sum(len(vs) for vs in part) - r == sum(
        len({k for k, vs in enumerate(part) if any(v.ref_bin == b for v in vs)}) - 1 for b in split
    )
    # the fewest: a worker whose quota holds c units can take c // q bins whole, no more, so
    # every other bin is split; the residuals, cut from one stream, add a visit at most per cut
    assert len(split) == r - sum(len(u) // q for u in units)
    residuals = sum(1 for u in units if len(u) % q)
    assert sum(len(vs) for vs in part) <= r + max(0, residuals - 1)


def test_unit_partition_splits_one_bin_when_the_quota_needs_it():
    assert unit_partition([10, 10, 10], 2, 2) == [
        [Visit(0, 0, 2), Visit(2, 0, 1)],
        [Visit(1, 0, 2), Visit(2, 1, 2)],
    ]


@pytest.mark.parametrize(
    "knob, workers, devices, use, reason",
    [
        (None, 1, gpus(H200), False, "auto: W=1"),
        (None, 2, gpus(H200, H200), True, "auto: 2 matching devices (132 SMs, 1980 MHz, 60 MiB L2"),
        (None, 3, gpus(H200, H200), False, "auto: 3 workers time-slice 2 devices"),
        (None, 2, gpus(H200), False, "auto: 2 workers time-slice 1 device"),
        (
            None,
            2,
            gpus(H200, DeviceProfile(128, 72 << 20, 2_520_000)),
            False,
            "auto: device 1 differs from device 0 (128 vs 132 SMs",
        ),
        (None, 2, gpus(H200, DeviceProfile(132, 60 << 20, 1_800_000)), True, "auto: 2 matching"),
        (
            None,
            2,
            gpus(H200, DeviceProfile(132, 60 << 20, 1_700_000)),
            False,
            "auto: device 1 differs",
        ),
        (True, 2, gpus(H200), True, "forced by HSPZ_UNIT_PARTITION=1"),
        (False, 2, gpus(H200, H200), False, "forced by HSPZ_UNIT_PARTITION=0"),
        (None, 3, cpu_devices(3), True, "auto: 3 CPU devices of one class"),
    ],
)
def test_policy_and_reason(knob, workers, devices, use, reason):
    got = choose_policy(knob, workers, devices)
    assert got[0] == use and got[1].startswith(reason), got


def test_partition_knob_rejects_other_values(monkeypatch):
    for value, want in (("0", False), ("1", True)):
        monkeypatch.setenv("HSPZ_UNIT_PARTITION", value)
        assert partition_knob() is want
    monkeypatch.delenv("HSPZ_UNIT_PARTITION")
    assert partition_knob() is None
    monkeypatch.setenv("HSPZ_UNIT_PARTITION", "yes")
    with pytest.raises(UsageError, match="HSPZ_UNIT_PARTITION"):
        partition_knob()


def test_never_more_workers_than_reference_bins_and_gpu_lines():
    plan = Plan(((0,), (1,)), ((0,), (1,), (2,)))
    s = make_schedule(plan, [5, 5], 4, gpus(H200, H200), None)
    assert s.workers == 2 and s.policy == "unit-partition"
    assert schedule_lines(s) == [
        "schedule: policy=unit-partition W=2 visits=2 extra_replicas=0 (auto: 2 matching "
        "devices (132 SMs, 1980 MHz, 60 MiB L2; static attributes only, clocks within 10%))",
        "schedule: worker 0 device 0: R0[0..3) units=3 visits=1",
        "schedule: worker 1 device 1: R1[0..3) units=3 visits=1",
        "schedule: device mapping: worker0->device0 worker1->device1",
    ]
    sliced = make_schedule(Plan(((0,), (1,), (2,)), ((0,),)), [1, 2, 3], 3, gpus(H200), None)
    assert sliced.devices == [0, 0, 0] and sliced.policy == "whole-bin"
    assert (
        schedule_lines(sliced)[-1]
        == "schedule: device mapping: worker0->device0 worker1->device0 worker2->device0"
    )
