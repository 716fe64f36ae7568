"""The projection's model and its fit (hspz.planning.pricing, benchmarks/projection_fit.py) and
hits-estimate's pricing flags and file: synthetic ledgers whose costs are known, and a real
CPU-backend ledger (the fit does not depend on the backend)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from benchmarks import projection_fit as pf
from hspz.planning.pricing import Pricing, features, fit

TRUE = Pricing(
    ns_per_hit=0.09, unit_ms=40.0, worker_ms=400.0, ref_ms_per_mbp=2.0, query_ms_per_mbp=1.5
)
HEAD = (
    "ordinal",
    "worker",
    "device",
    "ref_bin",
    "query_bin",
    "ref_bp",
    "query_bp",
    "gpu_ms",
    "host_start_ms",
    "host_end_ms",
    "seeds",
    "hits",
    "raw_hsps",
    "hsps",
)


def synthetic_log(path, ref_bins, query_bins, pricing=TRUE, noise=0.0, seed=0, hits_per=None):
    """A `--time` log of one worker running every reference bin against every query bin,
    each unit taking exactly pricing's cost (times 1 + noise * a normal draw)."""
    rng = np.random.default_rng(seed)
    rows, t = [], 500.0
    for r, rbp in enumerate(ref_bins):
        for q, qbp in enumerate(query_bins):
            hits = int(rbp * qbp * 6.8e-7) if hits_per is None else hits_per
            f = features([rbp], [qbp], [hits], [r], [[0]])[0]
            f[1] = float(not rows)
            f[2] = rbp / 1e6 if q == 0 else 0.0
            ms = float(pricing.cost(f[None])[0]) * (1 + noise * rng.standard_normal())
            rows.append(
                (r * len(query_bins) + q, 0, 0, r, q, rbp, qbp, ms * 0.9, t, t + ms, 1, hits, 0, 0)
            )
            t += ms
    text = ["time: wall  99.000 100.0%", "unit ledger:\t" + "\t".join(HEAD)]
    text += ["unit ledger:\t" + "\t".join(str(x) for x in row) for row in rows]
    path.write_text("\n".join(text) + "\n")
    return path


def layouts(tmp_path, noise=0.0):
    spec = {
        "50M": ([52e6, 60e6, 56e6, 61e6, 66e6, 85e6, 55e6, 65e6], [50e6, 50e6]),
        "100M": ([117e6, 116e6, 116e6, 66e6, 85e6], [100e6]),
        "175M": ([177e6, 181e6, 141e6], [100e6]),
        "250M": ([253e6, 247e6], [100e6]),
        "500M": ([500e6], [100e6]),
    }
    return [
        str(
            synthetic_log(
                tmp_path / f"run-B{k}-1.log",
                [int(x) for x in r],
                [int(x) for x in q],
                noise=noise,
                seed=i,
            )
        )
        for i, (k, (r, q)) in enumerate(spec.items())
    ]


def test_features_charge_a_workers_first_unit_and_each_visit_start():
    f = features(
        [100e6, 100e6, 200e6, 200e6],
        [10e6, 20e6, 10e6, 20e6],
        [1e6, 2e6, 3e6, 4e6],
        [0, 0, 1, 1],
        [[0, 1], [2, 3]],
    )
    assert f[:, 1].tolist() == [1, 0, 1, 0]  # each worker's first unit
    assert f[:, 2].tolist() == [100, 0, 200, 0]  # each visit's first unit, ref Mbp
    assert f[:, 3].tolist() == [10, 20, 10, 20]
    assert f[:, 4].tolist() == [1, 2, 3, 4]
    assert f[:, 5].tolist() == pytest.approx([0.1, 0.2, 0.6, 0.8])  # hits/1e6 x ref Gbp
    one = features([100e6] * 3, [1e6] * 3, [0] * 3, [0, 1, 0], [[0, 1, 2]])
    assert one[:, 2].tolist() == [100, 100, 100]  # back to bin 0: a new visit


def test_fit_recovers_known_costs_and_drops_a_negative_term():
    rng = np.random.default_rng(1)
    n = 40
    f = features(
        rng.integers(50e6, 500e6, n),
        rng.integers(20e6, 100e6, n),
        rng.integers(1e8, 2e10, n),
        list(range(n)),
        [list(range(n))],
    )
    got = fit(f, TRUE.cost(f))
    assert got.vector() == pytest.approx(TRUE.vector(), rel=1e-6)
    y = TRUE.cost(f) - 30.0 * f[:, 0] - 1000 * f[:, 1]  # a negative worker term would fit best
    less = fit(f, y)
    assert less.worker_ms == 0 and (less.vector() >= 0).all()
    with pytest.raises(ValueError, match="no nonzero feature"):
        fit(f[1:], TRUE.cost(f)[1:])  # no worker's first unit left to fit worker_ms on


def test_fit_on_two_layouts_projects_the_others(tmp_path, capsys):
    logs = layouts(tmp_path, noise=0.02)
    out = tmp_path / "pricing.json"
    assert (
        pf.main(
            [
                *logs,
                "--fit",
                "50M,250M",
                "--pricing-out",
                str(out),
                "--json",
                str(tmp_path / "fit.jsonl"),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert re.search(
        r"summary \(wall\): fitted on 250M,50M; 3 of 3 held-out layouts within "
        r"10%",
        text,
    ), text
    got = Pricing(**json.loads(out.read_text()))
    assert got.ns_per_hit == pytest.approx(TRUE.ns_per_hit, rel=0.1)
    assert "hits-estimate flags: --ns-per-hit" in text
    assert re.search(r"hg38 x mm39-sized: [\d.]+ s on one GPU", text)
    rec = json.loads((tmp_path / "fit.jsonl").read_text())
    held = [r for r in rec["runs"] if not r["fitted_on"]]
    assert {r["label"] for r in held} == {"100M", "175M", "500M"}
    assert all(r["total_within"] and r["units_within"] for r in held)


def test_a_model_without_bin_terms_misses_the_other_layouts(tmp_path, capsys):
    """The check can fail: hits and a constant alone, fitted on one layout, land outside 10%
    elsewhere when the bins carry a real cost."""
    spec = {"small": ([20e6] * 10, [50e6] * 2), "big": ([500e6], [100e6])}
    logs = [
        str(
            synthetic_log(
                tmp_path / f"run-B{k}-1.log",
                [int(x) for x in r],
                [int(x) for x in q],
                hits_per=int(5e9),
            )
        )
        for k, (r, q) in spec.items()
    ]
    assert pf.main([*logs, "--fit", "small", "--terms", "unit_ms,ns_per_hit"]) == 0
    text = capsys.readouterr().out
    assert "0 of 1 held-out layouts within 10%" in text, text


def test_a_per_hit_cost_growing_with_the_bin_is_fitted_when_asked(tmp_path, capsys):
    cache = Pricing(**{**TRUE.__dict__, "ns_per_hit_per_ref_gbp": 0.05})
    logs = [
        str(synthetic_log(tmp_path / f"run-B{k}-1.log", r, q, pricing=cache))
        for k, (r, q) in {
            "a": ([60_000_000, 50_000_000, 85_000_000], [50_000_000] * 2),
            "b": ([250_000_000, 200_000_000], [100_000_000]),
            "c": ([500_000_000], [100_000_000]),
        }.items()
    ]
    assert (
        pf.main(
            [
                *logs,
                "--fit",
                "a,b",
                "--terms",
                "unit_ms,worker_ms,ref_ms_per_mbp,"
                "query_ms_per_mbp,ns_per_hit,ns_per_hit_per_ref_gbp",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "1 of 1 held-out layouts within 10%" in text, text
    assert "--ns-per-hit-per-ref-gbp 0.05" in text


def test_a_ledger_tsv_reads_as_the_time_log(tmp_path):
    log = synthetic_log(tmp_path / "run-B1M-1.log", [10_000_000, 20_000_000], [5_000_000])
    rows = [
        line.split("\t")[1:]
        for line in log.read_text().splitlines()
        if line.startswith("unit ledger:\t")
    ]
    tsv = tmp_path / "ledger.tsv"
    tsv.write_text(
        "".join("\t".join(["job" if i == 0 else "000000", *r]) + "\n" for i, r in enumerate(rows))
    )
    assert pf.parse_run(f"1M={tsv}").units == pf.parse_run(str(log)).units


def test_printed_unit_tables_refit_as_the_logs_they_came_from(tmp_path, capsys):
    """`--tables` reads the unit tables an earlier fit printed: the same bins, hits and wall
    steps as the logs, so the same fit and the same checks."""
    logs = layouts(tmp_path, noise=0.02)
    assert pf.main([*logs, "--fit", "50M,250M"]) == 0
    printed = capsys.readouterr().out
    tables = tmp_path / "fit.log"
    tables.write_text(printed)
    again = pf.parse_tables(str(tables))
    for run, log in zip(sorted(again, key=lambda r: r.label), sorted(logs), strict=True):
        first = pf.parse_run(log)
        assert run.label == first.label
        assert pf.run_features(run) == pytest.approx(pf.run_features(first))
        assert pf.measured(run, "wall") == pytest.approx(pf.measured(first, "wall"), abs=0.05)
    assert pf.main(["--tables", str(tables), "--fit", "50M,250M"]) == 0
    refit = capsys.readouterr().out
    summary = [line for line in printed.splitlines() if line.startswith("summary")]
    assert summary and summary == [
        line for line in refit.splitlines() if line.startswith("summary")
    ]


def test_the_wall_target_counts_the_gap_between_units(tmp_path):
    log = synthetic_log(tmp_path / "run-B1M-1.log", [10_000_000, 20_000_000], [5_000_000])
    run = pf.parse_run(str(log))
    run.units[1]["host_start_ms"] += 50.0  # a reference build before the second unit
    wall, gpu = pf.measured(run, "wall"), pf.measured(run, "gpu")
    cost = TRUE.cost(pf.run_features(run))
    assert wall == pytest.approx(cost)  # steps end to end: the 50 ms stays in the step
    assert gpu == pytest.approx(cost * 0.9)


def test_a_real_cpu_ledger_fits_and_checks(tmp_path, capsys):
    """Two layouts of the multi-bin pair run on the CPU backend with --time; the fit reads
    their ledgers like a GPU run's (no accuracy asked of CPU timings on a shared machine)."""
    from multibin import FLAGS, write_pair

    from hspz.cli import main

    ref, qry = write_pair(tmp_path)
    logs = []
    for label, block in (("4k", "4000"), ("9k", "9000")):
        flags = list(FLAGS)
        flags[flags.index("-B") + 1] = block
        assert (
            main(
                [
                    "run",
                    "-r",
                    str(ref),
                    "-q",
                    str(qry),
                    *flags,
                    "--backend",
                    "cpu",
                    "--time",
                    "-t",
                    "1",
                    "-o",
                    str(tmp_path / label),
                ]
            )
            == 0
        )
        captured = capsys.readouterr()
        path = tmp_path / f"run-B{label}-1.log"
        path.write_text(captured.out + captured.err)
        logs.append(f"{label}={path}")
    pricing = tmp_path / "pricing.json"
    assert (
        pf.main(
            [*logs, "--fit", "4k", "--terms", "unit_ms,ns_per_hit", "--pricing-out", str(pricing)]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert re.search(r"fit on 4k \(1 runs, 10 units, target wall\)", text), text
    assert re.search(r"total 9k: projected [\d.]+ s, measured [\d.]+ s", text)
    flags = list(FLAGS)
    flags[flags.index("-B") + 1] = "9000"
    assert (
        main(["hits-estimate", "-r", str(ref), "-q", str(qry), *flags, "--pricing", str(pricing)])
        == 0
    )
    est = tmp_path / "estimate.tsv"
    est.write_text(capsys.readouterr().out)
    assert (
        pf.main([*logs, "--fit", "4k", "--terms", "unit_ms,ns_per_hit", "--estimate", f"9k={est}"])
        == 0
    )
    text = capsys.readouterr().out
    assert re.search(
        r"estimate 9k: \d+ units, hits equal to the ledger's: True; priced as the "
        r"fit prices the ledger: True",
        text,
    ), text


def test_hits_estimate_prices_from_flags_or_a_file_alike(tmp_path, capsys):
    from multibin import FLAGS, write_pair

    from hspz.cli import main

    ref, qry = write_pair(tmp_path)
    args = ["hits-estimate", "-r", str(ref), "-q", str(qry), *FLAGS]
    assert (
        main([*args, "--ns-per-hit", "2", "--ref-ms-per-mbp", "1000", "--query-ms-per-mbp", "500"])
        == 0
    )
    flags_out, flags_err = capsys.readouterr()
    rows = [line.split("\t") for line in flags_out.splitlines()]
    nq = len({r[1] for r in rows})
    for r in rows:  # one worker, ordinal order: a visit starts at each query bin 0
        visit = int(r[1]) == 0
        want = int(r[4]) * 2e-6 + int(r[3]) / 1e6 * 500 + visit * int(r[2]) / 1e6 * 1000
        assert float(r[5]) == pytest.approx(want, abs=2e-3)
    assert nq == 2
    file = tmp_path / "p.json"
    file.write_text(json.dumps({"ns_per_hit": 9, "ref_ms_per_mbp": 1000, "query_ms_per_mbp": 500}))
    assert main([*args, "--pricing", str(file), "--ns-per-hit", "2"]) == 0
    file_out, file_err = capsys.readouterr()
    assert file_out == flags_out
    assert "2 ns/hit + 1000 ms/ref Mbp a visit + 500 ms/query Mbp a unit" in file_err


@pytest.mark.parametrize(
    "content, message",
    [
        ("{", r"--pricing \S+: not JSON"),
        ('{"ns_per_hit": 1, "bogus": 2}', r"unknown term 'bogus'"),
        ('{"ns_per_hit": 1, "unit_ms": -1}', r"unit_ms must be a number >= 0"),
        ('{"unit_ms": 1}', r"has no ns_per_hit: give --ns-per-hit too"),
        ("[1]", r"not a JSON object"),
    ],
)
def test_a_bad_pricing_file_is_one_line(tmp_path, capsys, content, message):
    from multibin import FLAGS, write_pair

    from hspz.cli import main

    ref, qry = write_pair(tmp_path)
    file = tmp_path / "p.json"
    file.write_text(content)
    assert (
        main(["hits-estimate", "-r", str(ref), "-q", str(qry), *FLAGS, "--pricing", str(file)]) == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("hspZ: ") and re.search(message, err[0]), err
