"""benchmarks/plot.py draws benchmarks/run.py's JSON records: one line per arm and machine, each
point the median wall of the latest session's runs of a workload, written as a PNG."""

from __future__ import annotations

import json

import pytest

from benchmarks.plot import load_records, main, plot, points, thread_points, thread_table

pytest.importorskip("matplotlib")

SIZES = {"tiny": (1_000_000, 500_000), "S": (10_000_000, 10_000_000)}


def _records(
    machine: str,
    arm: str,
    kind: str,
    walls: dict[str, list[float]],
    session: str = "2026-12-01T10:00:00+00:00",
    hits: bool = True,
) -> list[dict]:
    out = []
    for workload, ws in walls.items():
        ref_bp, query_bp = SIZES[workload]
        for i, w in enumerate(ws, 1):
            rec = dict(
                machine=machine,
                arm=arm,
                kind=kind,
                workload=workload,
                session=session,
                ref_bp=ref_bp,
                query_bp=query_bp,
                wall_s=w,
                run=i,
                loadavg=[1.5, 1.0, 1.0],
            )
            if kind.startswith("hspz") and hits:
                rec.update(seed_hits=1000 * ref_bp // 10**5, engine_s=w / 2)
            out.append(rec)
    return out


def _write(path, records) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_plot_writes_a_png_with_one_line_per_arm_and_machine_at_the_median_run(tmp_path):
    records = (
        _records(
            "dev", "hspZ cpu -t 1", "hspz-cpu", {"S": [9.0, 7.0, 8.0], "tiny": [3.0, 1.0, 2.0]}
        )
        + _records("dev", "lastz --nogapped", "lastz", {"tiny": [0.5, 0.7, 0.6]})
        + _records("H200", "hspZ gpu", "hspz-gpu", {"tiny": [0.9, 1.1, 1.0], "S": [1.2, 1.4, 1.3]})
    )
    path = tmp_path / "records.jsonl"
    _write(path, records)
    png = tmp_path / "scaling.png"
    drawn = plot(load_records([path]), png, x="bp2")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert set(drawn) == {"hspZ cpu -t 1 (dev)", "lastz --nogapped (dev)", "hspZ gpu (H200)"}
    cpu = drawn["hspZ cpu -t 1 (dev)"]
    assert [p["workload"] for p in cpu] == ["tiny", "S"]  # sorted by size, not by file order
    assert [p["size"] for p in cpu] == [1e6 * 5e5, 1e7 * 1e7]
    assert [(p["wall_s"], p["fastest"], p["slowest"]) for p in cpu] == [
        (2.0, 1.0, 3.0),
        (8.0, 7.0, 9.0),
    ]
    assert drawn["hspZ gpu (H200)"][1]["ns_per_hit"] == pytest.approx(0.65e9 / 100_000)


def test_plot_draws_the_latest_session_of_an_arm_unless_sessions_are_pooled():
    old = _records(
        "dev",
        "lastz --nogapped",
        "lastz",
        {"tiny": [5.0, 5.0, 5.0]},
        session="2026-11-29T10:00:00+00:00",
    )
    new = _records("dev", "lastz --nogapped", "lastz", {"tiny": [1.0, 2.0, 3.0]})
    latest = points(old + new, x="bp2")["lastz --nogapped (dev)"]
    assert [p["walls"] for p in latest] == [[1.0, 2.0, 3.0]]
    pooled = points(old + new, x="bp2", sessions="all")["lastz --nogapped (dev)"]
    assert pooled[0]["walls"] == [5.0, 5.0, 5.0, 1.0, 2.0, 3.0] and pooled[0]["wall_s"] == 4.0


def test_plot_by_seed_hits_takes_a_lastz_points_size_from_the_hspz_records_of_its_workload():
    records = _records("dev", "hspZ cpu -t 1", "hspz-cpu", {"tiny": [1.0]}) + _records(
        "dev", "lastz --nogapped", "lastz", {"tiny": [1.0], "S": [2.0]}
    )
    drawn = points(records)  # x: seed hits
    assert [p["size"] for p in drawn["lastz --nogapped (dev)"]] == [10_000]
    assert [p["workload"] for p in drawn["lastz --nogapped (dev)"]] == ["tiny"]  # S: no hits


def test_plot_command_writes_the_png_and_prints_the_table(tmp_path, capsys):
    path = tmp_path / "r.jsonl"
    _write(path, _records("dev", "hspZ cpu -t 1", "hspz-cpu", {"tiny": [3.0, 1.0, 2.0]}))
    png = tmp_path / "p.png"
    assert main([str(path), "-o", str(png), "--table"]) == 0
    assert png.stat().st_size > 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| hspZ")]
    assert rows == ["| hspZ cpu -t 1 (dev) | tiny | 2.00 | 3.00 1.00 2.00 | 1e+05 | 1.50-1.50 |"]


def test_thread_points_give_each_version_its_speed_up_over_its_own_one_thread_run(tmp_path):
    recs = []
    cases = ((None, {1: [80, 90, 100], 2: [45], 16: [8]}), ("/x/old", {1: [160], 16: [20]}))
    for alt, walls in cases:
        for t, ws in walls.items():
            recs += [
                dict(
                    machine="m",
                    arm=f"hspZ cpu -t {t}",
                    kind="hspz-cpu",
                    workload="w",
                    threads=t,
                    alt=alt,
                    commit="abc",
                    wall_s=w,
                    engine_s=w - 1,
                    peak_rss_mib=100.0 * t,
                    estimate_mib=100.0,
                    loadavg=[1.0, 1, 1],
                )
                for w in ws
            ]
    got = thread_points(recs)
    mine, old = got["w, abc (m)"], got["w, alt old (m)"]
    assert [(p["threads"], p["speedup"]) for p in mine] == [(1, 1.0), (2, 90 / 45), (16, 90 / 8)]
    assert [p["speedup"] for p in old] == [1.0, 8.0]
    assert (
        "| w, abc (m) | 16 | 8.00 | 8.00 | 7.00 | 11.25x | 1600 | 100.0 | 16.00 |"
        in thread_table(got)
    )
    _write(tmp_path / "r.jsonl", recs)
    assert main([str(tmp_path / "r.jsonl"), "--threads", str(tmp_path / "t.png")]) == 0
    assert (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"
