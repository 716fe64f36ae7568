"""The workflow's report and gapped stage from the library: dot plots draw every HSP, the summary
joins queries.tsv, names.tsv and the ledger, and the gapped stage hands each segments file to
the real lastz as KegAlign does (skipped without lastz)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from multibin import FLAGS, write_pair

from hspz import gapped, plots
from hspz.cli import main
from hspz.manifest import read_manifest


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A run of the multibin pair with its manifest."""
    d = tmp_path_factory.mktemp("plots")
    ref, qry = write_pair(d)
    assert main(["run", "-r", str(ref), "-q", str(qry), "-o", str(d / "out"), *FLAGS,
                 "--backend", "cpu", "--dump-manifest", str(d / "manifest.txt")]) == 0
    return d, ref, qry, read_manifest(d / "manifest.txt")


def test_segments_are_read_back_line_for_line(run):
    d = run[0]
    texts = plots.segments_texts(d / "out")
    h = plots.read_segments(texts)
    lines = b"".join(texts).splitlines()
    assert len(h["score"]) == len(lines) > 1000
    first = lines[0].split(b"\t")
    assert (h["ref_name"][0], int(h["ref_start"][0]), h["strand"][0]) == \
        (first[0].decode(), int(first[1]), first[6].decode())


def test_a_dot_plot_is_a_png_of_every_hsp(run, tmp_path):
    d, _, _, m = run
    png = tmp_path / "q.png"
    n = plots.dotplot(plots.segments_texts(d / "out"), (m.ref_names, m.ref_lengths),
                      (m.qry_names, m.qry_lengths), png, "multibin")
    assert n == len(b"".join(plots.segments_texts(d / "out")).splitlines())
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_a_dot_plot_reads_a_tarball_too(run, tmp_path):
    d, ref, qry, m = run
    assert main(["run", "-r", str(ref), "-q", str(qry), "-o", str(tmp_path / "z"), *FLAGS,
                 "--backend", "cpu", "-Z"]) == 0
    assert sorted(plots.segments_texts(tmp_path / "z" / "segments.tar.gz")) == \
        sorted(plots.segments_texts(d / "out"))


def test_the_summary_joins_sheet_names_queries_and_ledger(tmp_path):
    (tmp_path / "queries.tsv").write_text(
        "job\tpath\tbytes\tsha256\tblocks\tunits\thsps\tdigest\tcompletion\n"
        "000001\t/a.fa\t10\tab\t1\t2\t5\tdd\tcomplete\n"
        "000002\t/b.fa\t20\tcd\t1\t2\t7\tee\tcomplete\n")
    (tmp_path / "names.tsv").write_text("name\tjob\tpath\nalpha\t000001\t/a.fa\n"
                                        "beta\t000002\t/b.fa\n")
    (tmp_path / "ledger.tsv").write_text(
        "job\tordinal\tworker\tdevice\tref_bin\tquery_bin\tref_bp\tquery_bp\tgpu_ms\t"
        "host_start_ms\thost_end_ms\tseeds\thits\traw_hsps\thsps\n"
        "000001\t0\t0\tcpu0\t0\t0\t1\t1\t1500\t0\t0\t3\t4\t5\t2\n"
        "000001\t1\t0\tcpu0\t1\t0\t1\t1\t500\t0\t0\t3\t6\t5\t3\n"
        "000002\t0\t1\tcpu1\t0\t0\t1\t1\t250\t0\t0\t1\t1\t7\t7\n")
    plots.summarize(tmp_path / "queries.tsv", tmp_path / "names.tsv", tmp_path / "ledger.tsv",
                    tmp_path / "summary.tsv")
    rows = [r.split("\t") for r in (tmp_path / "summary.tsv").read_text().splitlines()]
    head = rows[0]
    table = [dict(zip(head, r, strict=True)) for r in rows[1:]]
    assert [(t["name"], t["job"], t["hits"], t["engine_s"]) for t in table] == \
        [("alpha", "000001", "10", "2.0"), ("beta", "000002", "1", "0.25")]


def test_emission_order_is_units_then_intervals_plus_before_minus():
    names = ["tmp2.block0.r0.plus.segments", "tmp1.block1.r0.plus.segments",
             "tmp1.block0.r1.plus.segments", "tmp1.block0.r0.minus.segments",
             "tmp1.block0.r0.plus.split2.segments", "tmp1.block0.r0.plus.split1.segments",
             "notes.txt"]
    assert gapped.emission_order(names, 2) == [
        "tmp1.block0.r0.plus.split1.segments", "tmp1.block0.r0.plus.split2.segments",
        "tmp1.block0.r0.minus.segments", "tmp2.block0.r0.plus.segments",
        "tmp1.block1.r0.plus.segments", "tmp1.block0.r1.plus.segments"]


@pytest.mark.lastz
@pytest.mark.skipif(shutil.which("lastz") is None, reason="lastz is not installed")
def test_the_gapped_stage_runs_lastz_per_segments_file_as_kegalign_does(run, tmp_path):
    """Every segments file extended by the real lastz, alignments concatenated in emission
    order: a MAF with one header and blocks on the planned records."""
    d, ref, qry, m = run
    # each file's first 20 anchors: lastz takes minutes over all of this repetitive pair's
    segs = tmp_path / "segs"
    segs.mkdir()
    for p in (d / "out").iterdir():
        (segs / p.name).write_bytes(b"".join(p.read_bytes().splitlines(True)[:20]))
    n = gapped.run_gapped(m, str(ref), str(qry), segs, str(tmp_path / "q.maf"))
    assert n == len([p for p in segs.iterdir() if p.suffix == ".segments"]) > 1
    text = (tmp_path / "q.maf").read_text()
    assert text.startswith("##maf version=1 scoring=lastz\n")
    blocks = text.count("\na score=")
    assert blocks > 10
    names = {line.split()[1] for line in text.splitlines() if line.startswith("s ")}
    assert names <= set(m.ref_names) | set(m.qry_names)
    # the same as asking lastz for one file by hand
    first = gapped.emission_order([p.name for p in segs.iterdir()],
                                  len(m.plan.query_bins))[0]
    one = tmp_path / "one"
    one.mkdir()
    shutil.copy(segs / first, one / first)
    gapped.run_gapped(m, str(ref), str(qry), one, str(tmp_path / "one.maf"))
    assert text.startswith((tmp_path / "one.maf").read_text())


def test_lastz_failing_is_one_line(run, tmp_path):
    d, ref, qry, m = run
    from hspz.errors import RunError

    with pytest.raises(RunError, match=r"cannot run /no/such/lastz"):
        gapped.run_gapped(m, str(ref), str(qry), d / "out", str(tmp_path / "x.maf"),
                          lastz="/no/such/lastz")
    assert not (tmp_path / "x.maf").exists()


def test_bytes_2bit_cannot_hold_become_n_as_fatotwobit_makes_them(tmp_path):
    from hspz.sequence import Record, read_records

    recs = [Record("r", np.frombuffer(b"ACGTRYkm\x00acgtN", np.uint8))]
    path = gapped.lastz_input(recs, tmp_path, "x")
    assert path.suffix == ".2bit"
    assert read_records(path)[0].seq.tobytes() == b"ACGTNNnnNacgtN"
