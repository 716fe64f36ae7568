"""The GPU engine's host-side logic, without a device.  `gpu._prefetched` (the CPU seeder run
ahead) keeps its items in order, takes them on the calling thread, runs at most `depth` at once
and raises a failure at its item's turn.  `gpu._minus_bytes`, array code that numpy runs as
CuPy does, gives the host's minus strand; `gpu._filter_kernel` falls back from 16-bit halves
where they would overflow, and from the seed filter's 16-bit seed bounds."""

from __future__ import annotations

import dataclasses
import threading
import time

import numpy as np
import pytest

from hspz.engine import gpu
from hspz.io.packing import pack_bin, reverse_complement
from hspz.io.records import Record
from hspz.stages import xdrop


def test_results_come_in_item_order_though_later_items_finish_first():
    first_may_end = threading.Event()

    def fn(x: int) -> int:
        if x == 0:
            assert first_may_end.wait(5), "item 1 never ran beside item 0"
        if x == 1:
            first_may_end.set()
        return x * 10

    assert list(gpu._prefetched(fn, range(6), 2)) == [0, 10, 20, 30, 40, 50]


def test_at_most_depth_items_run_at_once_and_items_are_taken_in_order_by_the_caller():
    lock, active, peak = threading.Lock(), [0], [0]
    second_started = threading.Event()
    taken: list[tuple[int, int]] = []
    done: list[int] = []

    def items():
        for x in range(8):
            taken.append((x, threading.get_ident()))
            yield x

    def fn(x: int) -> int:
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        if x == 1:
            second_started.set()
        if x == 0:  # runs until item 1 runs beside it: two at once, however loaded the host
            assert second_started.wait(5), "item 1 never ran beside item 0"
        time.sleep(0.005)
        with lock:
            active[0] -= 1
        return x

    for x in gpu._prefetched(fn, items(), 3):
        done.append(x)
        assert len(taken) - len(done) <= 3  # never more than `depth` taken and not yet handed
    assert done == list(range(8))
    assert [x for x, _ in taken] == list(range(8))
    assert {ident for _, ident in taken} == {threading.get_ident()}
    assert 2 <= peak[0] <= 3


def test_a_failure_is_raised_at_its_items_turn():
    def fn(x: int) -> int:
        if x == 2:
            raise ValueError("item 2")
        return x

    got = []
    with pytest.raises(ValueError, match="item 2"):
        for x in gpu._prefetched(fn, range(5), 2):
            got.append(x)
    assert got == [0, 1]


def test_the_minus_strand_made_from_the_plus_strands_bytes_is_the_hosts(monkeypatch):
    monkeypatch.setattr(gpu, "cp", np)  # the same array calls, on the host
    every = np.arange(256, dtype=np.uint8).repeat(3)
    rng = np.random.default_rng(7)
    some = rng.choice(np.frombuffer(b"ACGTUXnryk", np.uint8), 999)
    plus = pack_bin(
        [Record("a", every[every != ord("&")]), Record("b", some), Record("c", some[:1])]
    )
    minus = gpu._minus_bytes(plus.buf, plus.block_len)
    assert minus.dtype == np.uint8
    assert np.array_equal(minus, reverse_complement(plus).buf)


def test_the_filter_falls_back_where_its_16_bit_halves_would_overflow(monkeypatch):
    from hspz.core.options import Options
    from hspz.engine.contract import Context

    assert gpu._filter_kernel(Context.from_options(Options())) == ("filter_seed16", 1)
    edge = Context.from_options(Options(xdrop=gpu.HALF - 9))  # the largest the halves hold
    assert gpu._filter_kernel(edge) == ("filter_seed16", 1)
    past = Context.from_options(Options(xdrop=gpu.HALF - 8))
    assert gpu._filter_kernel(past) == ("filter_seed", 1)
    wide = Context.from_options(Options(xdrop=gpu.HALF))
    assert gpu._filter_kernel(wide) == ("filter_seed", 1)
    monkeypatch.setitem(gpu._state, "filter", "nib16")
    assert gpu._filter_kernel(Context.from_options(Options())) == ("filter_nib16", 1)
    assert gpu._filter_kernel(wide) == ("filter_nib", 1)
    monkeypatch.setitem(gpu._state, "filter", "lane4")
    assert gpu._filter_kernel(wide) == ("filter_lane4", 4)
    monkeypatch.setitem(gpu._state, "filter", "seed16")
    assert gpu._filter_kernel(Context.from_options(Options())) == ("filter_seed16", 1)
    assert gpu._filter_kernel(wide) == ("filter_seed", 1)


def test_the_seed_filter_falls_back_where_a_seed_bound_would_pass_16_bits(monkeypatch):
    """filter_seed's per-anchor bounds are uint16: a matrix whose best score times the seed's
    span reaches 2**16 takes the filter without them (`gpu.SEED_KERNELS`)."""
    from hspz.core.options import Options
    from hspz.engine.contract import Context

    monkeypatch.setitem(gpu._state, "filter", "seed16")
    ctx = Context.from_options(Options())
    assert ctx.shape.size * int(xdrop.best_scores(ctx.matrix).max()) < 1 << 16
    steep = dataclasses.replace(ctx, matrix=ctx.matrix * 40)
    assert gpu._filter_kernel(steep) == ("filter_nib", 1)  # nor do its 16-bit halves fit


def test_every_filter_the_knob_accepts_is_a_gpu_filter():
    """HSPZ_GPU_FILTER's accepted values (`knobs.GPU_FILTERS`) are exactly `gpu.FILTERS`."""
    from hspz.core import knobs

    assert set(knobs.GPU_FILTERS) == set(gpu.FILTERS)


class _FakeRun:
    """Stands for `gpu._GroupRun` in `run_groups`' order tests: a group of `total` hits whose
    launches, walks and finish are written to a shared log."""

    log: list = []

    def __init__(self, ctx, ref, qry, jobs, walk_full, host_seeds):
        self.name, total = jobs
        self.pieces: list = []
        run = self

        class G:
            def launch_filter(self, h0, h1, shift, stream):
                run.log.append(("launch", run.name, h0))
                return (run.name, h0)

            def survivors(self, filtered):
                run.log.append(("walk", *filtered))
                return filtered

        self.g = G()
        self.g.total = total  # type: ignore[attr-defined]

    def finish(self, submit):
        self.log.append(("finish", self.name))
        return [(self.name, list(self.pieces))]


@pytest.mark.parametrize("ahead", [0, 1, 2, 5])
def test_run_groups_launches_each_filter_ahead_and_finishes_groups_in_order(monkeypatch, ahead):
    """The pieces of all groups as one sequence: piece i is walked only after the filters of
    pieces i + 1 .. i + ahead were launched (or there are none), a group is finished once its
    last piece is walked, before any later piece is walked, and groups come out in order; a
    group without hits among them is finished when made (it holds no piece) and comes out in
    its turn."""
    monkeypatch.setattr(gpu, "_GroupRun", _FakeRun)
    _FakeRun.log = log = []
    groups = [(("a", 25), None), (("b", 0), None), (("c", 10), None), (("d", 31), None)]
    out = list(gpu.run_groups(None, None, None, groups, False, None, None, 10, ahead))
    pieces = {"a": [0, 10, 20], "b": [], "c": [0], "d": [0, 10, 20, 30]}
    assert out == [[(g, [(g, h0) for h0 in pieces[g]])] for g in "abcd"]
    launches = [e[1:] for e in log if e[0] == "launch"]
    walks = [e[1:] for e in log if e[0] == "walk"]
    assert launches == walks == [(g, h0) for g in "abcd" for h0 in pieces[g]]
    for i, piece in enumerate(walks):
        launched_before = {e[1:] for e in log[: log.index(("walk", *piece))] if e[0] == "launch"}
        assert set(launches[: i + 1 + ahead]) <= launched_before
        assert not set(launches[i + 2 + ahead :]) & launched_before
    finished = [e[1] for e in log if e[0] == "finish"]
    assert finished == (list("abcd") if ahead == 0 else list("bacd"))  # b: at once, no hits
    for g in "acd":  # finished right after its last walk
        last = log.index(("walk", g, pieces[g][-1]))
        assert [e for e in log[last + 1 :] if e[0] != "launch"][0] == ("finish", g)
