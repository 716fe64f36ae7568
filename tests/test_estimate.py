"""`hspZ hits-estimate`: its per-unit hits equal the `--time` ledger's hits column exactly, for
every seeding setting that changes them; `--stride` approximates; the hit histogram is exact."""

from __future__ import annotations

import numpy as np
import pytest
from multibin import FLAGS, write_pair

from hspz.cli import main
from hspz.planning.estimate import HitHistogram, window_multiplicity


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return [str(p) for p in write_pair(tmp_path_factory.mktemp("pair"))]


def estimate_rows(capsys, pair, extra) -> list[tuple[int, ...]]:
    assert main(["hits-estimate", "-r", pair[0], "-q", pair[1], *FLAGS, *extra]) == 0
    out = capsys.readouterr().out
    return [tuple(int(x) for x in line.split("\t")) for line in out.splitlines()]


def ledger_rows(capsys, pair, extra, out) -> list[tuple[int, ...]]:
    assert (
        main(
            [
                "run",
                "-r",
                pair[0],
                "-q",
                pair[1],
                *FLAGS,
                *extra,
                "--backend",
                "cpu",
                "-y",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    rows = [line.split("\t")[1:] for line in err.splitlines() if line.startswith("unit ledger:\t")]
    head = rows[0]
    cols = [head.index(c) for c in ("ref_bin", "query_bin", "ref_bp", "query_bp", "hits")]
    return [tuple(int(row[c]) for c in cols) for row in rows[1:]]


@pytest.mark.parametrize(
    "extra",
    [
        [],
        ["-n"],
        ["-S", "plus", "-e", "2"],
        ["-S", "minus", "-e", "3"],
        ["-I", "1000", "-C", "250"],  # interval a multiple of the chunk: boundaries seeded once
        ["-I", "1111", "-C", "300"],  # otherwise twice
        ["--kegalign-bins", "-I", "700"],
    ],
)
def test_estimate_equals_the_ledger_hits(pair, tmp_path, capsys, extra):
    estimated = estimate_rows(capsys, pair, extra)
    assert len(estimated) > 1
    assert estimated == ledger_rows(capsys, pair, extra, tmp_path / "out")


def test_stride_samples_windows_and_scales(pair, capsys):
    exact = estimate_rows(capsys, pair, [])
    strided = estimate_rows(capsys, pair, ["--stride", "3"])
    assert [r[:4] for r in strided] == [r[:4] for r in exact]
    assert all(r[4] % 3 == 0 for r in strided)
    total, approx = sum(r[4] for r in exact), sum(r[4] for r in strided)
    assert abs(approx - total) < 0.2 * total


def test_window_multiplicity_counts_overlapping_chunks():
    mult = window_multiplicity(10, [(0, 4), (3, 6), (6, 12)])
    assert mult.tolist() == [1, 1, 1, 2, 1, 1, 1, 1, 1, 1]


def test_hit_histogram_buckets_and_nearest_rank_quantiles():
    h = HitHistogram()
    h.add_counts(np.array([0, 0, 1, 3, 5, 40, 300, 1, 1]))
    h.add_counts(np.array([2, 0]))
    assert h.buckets().tolist() == [3, 3, 2, 1, 1, 1]
    nonempty = sorted([1, 3, 5, 40, 300, 1, 1, 2])
    for q in (0.5, 0.95, 0.99):
        assert h.quantile(q) == nonempty[int((len(nonempty) - 1) * q)]
    assert "max 300" in h.report()[-1]


def test_the_projection_prices_each_unit_and_the_runs_partition(tmp_path, capsys):
    """--ns-per-hit: a 6th column of hits x ns per unit, their total, and the wall at --gpus W
    as the busiest worker's units under the partition run --gpus W prints."""
    import re

    from multibin import FLAGS, write_pair

    from hspz.cli import main

    ref, qry = write_pair(tmp_path)
    args = ["-r", str(ref), "-q", str(qry), *FLAGS, "--gpus", "2"]
    assert main(["hits-estimate", *args, "--ns-per-hit", "2.5"]) == 0
    out, err = capsys.readouterr()
    rows = [line.split("\t") for line in out.splitlines()]
    assert all(float(r[5]) == pytest.approx(int(r[4]) * 2.5e-6, abs=5e-4) for r in rows)
    total = re.search(r"projected at 2.5 ns/hit: ([\d.]+) s of GPU time for 10 units", err)
    assert float(total.group(1)) == pytest.approx(sum(int(r[4]) for r in rows) * 2.5e-9, abs=1e-3)
    assert main(["run", *args, "-o", str(tmp_path / "o"), "--backend", "cpu"]) == 0
    run_err = capsys.readouterr().err
    policy = re.search(r"schedule: policy=(\S+) W=2 visits=(\d+)", run_err).groups()
    assert f"2 worker(s), policy={policy[0]}, visits={policy[1]}" in err


def test_the_projection_adds_a_fixed_cost_per_unit_and_per_worker(tmp_path, capsys):
    """--unit-ms adds to every unit's column and the total; --worker-ms once per worker, to its
    first unit's column, the total and each worker's busy time."""
    import re

    from multibin import FLAGS, write_pair

    from hspz.cli import main

    ref, qry = write_pair(tmp_path)
    args = [
        "hits-estimate",
        "-r",
        str(ref),
        "-q",
        str(qry),
        *FLAGS,
        "--gpus",
        "2",
        "--ns-per-hit",
        "2.5",
    ]
    assert main(args) == 0
    plain_out, plain_err = capsys.readouterr()
    assert main([*args, "--unit-ms", "100", "--worker-ms", "1000"]) == 0
    out, err = capsys.readouterr()
    plain = [line.split("\t") for line in plain_out.splitlines()]
    rows = [line.split("\t") for line in out.splitlines()]
    added = [float(r[5]) - float(p[5]) for r, p in zip(rows, plain, strict=True)]
    assert sum(x == pytest.approx(1100, abs=1e-3) for x in added) == 2  # each worker's first
    assert sum(x == pytest.approx(100, abs=1e-3) for x in added) == len(rows) - 2

    def totals(text):
        head = re.search(r"projected at ([^:]+): ([\d.]+) s of GPU time for (\d+) units", text)
        busy = re.search(r"at --gpus 2: (\d+) worker\(s\).*\((.*)\)$", text, re.M)
        each = [float(x) for x in re.findall(r"worker \d+ ([\d.]+) s", busy.group(2))]
        return head.group(1), float(head.group(2)), int(head.group(3)), int(busy.group(1)), each

    label, total, units, workers, busy = totals(err)
    _, plain_total, _, _, plain_busy = totals(plain_err)
    assert label == "2.5 ns/hit + 100 ms/unit + 1000 ms/worker"
    assert total == pytest.approx(plain_total + units * 0.1 + workers * 1.0, abs=2e-3)
    assert len(busy) == workers == 2
    assert sum(busy) == pytest.approx(sum(plain_busy) + units * 0.1 + workers * 1.0, abs=2e-3)


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--unit-ms", "5"], r"--unit-ms prices a projection: give --ns-per-hit too"),
        (["--ns-per-hit", "0"], r"--ns-per-hit: '?0'? must be above 0 and below 1e9"),
        (["--ns-per-hit", "1", "--worker-ms", "-1"], r"--worker-ms: '?-1'? must be at least 0"),
        (["--ns-per-hit", "1", "--unit-ms", "x"], r"--unit-ms: '?x'? is not a number"),
    ],
)
def test_a_bad_projection_cost_is_one_line(tmp_path, capsys, extra, message):
    import re

    from multibin import write_pair

    from hspz.cli import main

    ref, qry = write_pair(tmp_path)
    assert main(["hits-estimate", "-r", str(ref), "-q", str(qry), *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and re.search(message, err[0]), err
