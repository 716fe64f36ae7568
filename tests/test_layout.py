"""Planning decisions: `-B 0` (its `layout:` line, HSPZ_LAYOUT_FORCE_WORKERS, exactly the default
plan at one worker), the memory preflight (halving with a note, clear errors, never for
`--kegalign-bins` or a manifest) and `--max-hits 0`."""

from __future__ import annotations

import re

import numpy as np
import pytest
from multibin import FLAGS, outputs, records, write_pair

from hspz.cli import main
from hspz.formats.frozen import read_manifest
from hspz.planning import bins as planning_bins
from hspz.planning import layout, memory

SEED = FLAGS[FLAGS.index("-s") + 1]
BASE = ["-s", SEED, "-H", "150", "-E", "-C", "1500", "--backend", "cpu", "-t", "1"]


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return [str(p) for p in write_pair(tmp_path_factory.mktemp("pair"))]


def run(capsys, monkeypatch, args, env=None):
    monkeypatch.delenv("HSPZ_LAYOUT_FORCE_WORKERS", raising=False)
    monkeypatch.delenv("HSPZ_HOST_MEMORY_BYTES", raising=False)
    for key, value in (env or {}).items():
        monkeypatch.setenv(key, value)
    status = main([str(a) for a in args])
    captured = capsys.readouterr()
    return status, captured.err


def test_auto_layout_at_one_worker_is_the_default_plan(pair, tmp_path, capsys, monkeypatch):
    common = ["run", "-r", pair[0], "-q", pair[1], *BASE]
    status, err = run(capsys, monkeypatch, common + ["-B", "0", "-o", tmp_path / "auto"])
    assert status == 0, err
    assert (
        "layout: auto W=1 -> --seq-block-size 500000000 --query-block-size 500000000 "
        "(R=1 Q=1, 1 units)" in err
    )
    assert run(capsys, monkeypatch, common + ["-o", tmp_path / "default"])[0] == 0
    assert outputs(tmp_path / "auto") == outputs(tmp_path / "default")


def test_auto_layout_for_three_workers_prints_flags_that_reproduce_it(
    pair, tmp_path, capsys, monkeypatch
):
    common = ["run", "-r", pair[0], "-q", pair[1], *BASE]
    status, err = run(
        capsys,
        monkeypatch,
        common + ["-B", "0", "-o", tmp_path / "auto", "--dump-manifest", tmp_path / "m.txt"],
        {"HSPZ_LAYOUT_FORCE_WORKERS": "3"},
    )
    assert status == 0, err
    line = re.search(
        r"^layout: auto W=3 -> --seq-block-size (\d+) --query-block-size (\d+) "
        r"\(R=3 Q=1, 3 units\)$",
        err,
        re.M,
    )
    assert line, err
    m = read_manifest(tmp_path / "m.txt")
    assert (m.requested["seq_block_size"], m.options.seq_block_size) == (0, int(line.group(1)))
    again = common + [
        "-B",
        line.group(1),
        "--query-block-size",
        line.group(2),
        "-o",
        tmp_path / "explicit",
    ]
    assert run(capsys, monkeypatch, again)[0] == 0
    assert outputs(tmp_path / "explicit") == outputs(tmp_path / "auto")


def test_auto_reference_bins_are_a_multiple_of_the_workers():
    assert layout.auto_ref_bin_count(10, 1, 4) == 4
    assert layout.auto_ref_bin_count(10, 7, 4) == 8
    assert layout.auto_ref_bin_count(3, 1, 4) == 3  # at most one bin per record
    lengths = [r.size for _, r in records()[0]]
    bins = planning_bins.balanced_bins_n(lengths, 4)
    assert len(bins) == 4 and sorted(i for b in bins for i in b) == list(range(len(lengths)))


def needs(pair_lengths, target: int) -> int:
    """The preflight's estimate for the plan at `target` (both sides): the whole run's host
    memory at one worker, one thread, H 1000."""
    model = memory.MemoryModel("cpu", SEED.count("1"), 1, 1000, 1500, True, 1)
    p = planning_bins.make_plan(*pair_lengths, target, target)
    return memory.cpu_estimate(model, p, *pair_lengths, 1).total


def test_preflight_halves_the_blocks_until_a_unit_fits(pair, tmp_path, capsys, monkeypatch):
    lengths = [[s.size for _, s in side] for side in records()]
    big, small = needs(lengths, 20000), needs(lengths, 10000)
    assert small < big
    budget = str(int((big + small) / 2 / 0.9))
    common = ["run", "-r", pair[0], "-q", pair[1], *BASE, "-m", "1000"]
    status, err = run(
        capsys,
        monkeypatch,
        common + ["-B", "20000", "-o", tmp_path / "shrunk"],
        {"HSPZ_HOST_MEMORY_BYTES": budget},
    )
    assert status == 0, err
    assert re.search(
        r"^note: the largest unit .* halving --seq-block-size to 10000 and "
        r"--query-block-size to 10000",
        err,
        re.M,
    )
    explicit = common + ["-B", "10000", "--query-block-size", "10000", "-o", tmp_path / "direct"]
    assert run(capsys, monkeypatch, explicit)[0] == 0
    assert outputs(tmp_path / "shrunk") == outputs(tmp_path / "direct")


@pytest.mark.parametrize(
    "extra, message",
    [
        (["-B", "20000"], "records are never split"),
        (["-B", "20000", "--kegalign-bins"], "--kegalign-bins never shrinks"),
    ],
)
def test_preflight_fails_clearly_when_it_cannot_shrink(
    pair, tmp_path, capsys, monkeypatch, extra, message
):
    status, err = run(
        capsys,
        monkeypatch,
        ["run", "-r", pair[0], "-q", pair[1], *BASE, *extra, "-o", tmp_path / "out"],
        {"HSPZ_HOST_MEMORY_BYTES": "1000000"},
    )
    assert status == 2
    assert err.splitlines()[-1].startswith("hspZ: memory preflight:") and message in err
    assert not (tmp_path / "out").exists()


def test_a_manifest_is_never_replanned_to_fit(pair, tmp_path, capsys, monkeypatch):
    common = ["run", "-r", pair[0], "-q", pair[1], *BASE]
    assert (
        run(
            capsys,
            monkeypatch,
            common + ["-o", tmp_path / "a", "--dump-manifest", tmp_path / "m.txt"],
        )[0]
        == 0
    )
    status, err = run(
        capsys,
        monkeypatch,
        [
            "run",
            "-r",
            pair[0],
            "-q",
            pair[1],
            "--from-manifest",
            tmp_path / "m.txt",
            "-o",
            tmp_path / "b",
        ],
        {"HSPZ_HOST_MEMORY_BYTES": "1000000"},
    )
    assert status == 2 and "a frozen plan is never replanned" in err.splitlines()[-1]


def test_max_hits_zero_is_kegalign_per_gib_and_16_gib_on_the_cpu(
    pair, tmp_path, capsys, monkeypatch
):
    assert memory.kegalign_max_hits(16 << 30) == 67108864
    gib = np.float32(np.float32(150_000_000_000) / np.float32(1073741824.0))
    assert memory.kegalign_max_hits(150_000_000_000) == int(np.float32(4194304) * gib)
    status, err = run(
        capsys,
        monkeypatch,
        [
            "run",
            "-r",
            pair[0],
            "-q",
            pair[1],
            *BASE,
            "-m",
            "0",
            "-o",
            tmp_path / "o",
            "--dump-manifest",
            tmp_path / "m.txt",
        ],
    )
    assert status == 0, err
    m = read_manifest(tmp_path / "m.txt")
    assert (m.requested["max_hits"], m.options.max_hits) == (0, 67108864)


@pytest.mark.parametrize("backend, extra", [("cpu", 6), ("gpu", 1)])
def test_memory_model_counts_the_next_query_bin_when_there_are_several(backend, extra):
    """CPU workers hold the next query bin's strands and codes (6 B per base) while a unit runs;
    the GPU model adds the swapped bin's bytes on the device (1 B per base)."""
    model = memory.MemoryModel(backend, SEED.count("1"), 1, 1000, 1500, True, 1)
    one, two = (memory.unit_bytes(model, 10_000, 7_000, bins) for bins in (1, 2))
    assert two - one == extra * 7_000
