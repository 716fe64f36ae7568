"""The workflow's report from the library (hspz/tools/plots.py): dot plots draw every HSP in the
plot order, the distribution plot copes with no HSPs, and the summary joins queries.tsv,
names.tsv and the ledger (TSV and HTML)."""

from __future__ import annotations

import numpy as np
import pytest
from multibin import FLAGS

from hspz.cli import main
from hspz.tools import plots


def test_segments_are_read_back_line_for_line(multibin_run):
    d = multibin_run[0]
    texts = plots.segments_texts(d / "out")
    h = plots.read_segments(texts)
    lines = b"".join(texts).splitlines()
    assert len(h["score"]) == len(lines) > 1000
    first = lines[0].split(b"\t")
    assert (h["ref_name"][0], int(h["ref_start"][0]), h["strand"][0]) == (
        first[0].decode(),
        int(first[1]),
        first[6].decode(),
    )


def test_a_dot_plot_is_a_png_of_every_hsp(multibin_run, tmp_path):
    d, _, _, m = multibin_run
    png = tmp_path / "q.png"
    n = plots.dotplot(
        plots.segments_texts(d / "out"),
        (m.ref_names, m.ref_lengths),
        (m.qry_names, m.qry_lengths),
        png,
        "multibin",
    )
    assert n == len(b"".join(plots.segments_texts(d / "out")).splitlines())
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_a_dot_plot_reads_a_tarball_too(multibin_run, tmp_path):
    d, ref, qry, m = multibin_run
    assert (
        main(
            [
                "run",
                "-r",
                str(ref),
                "-q",
                str(qry),
                "-o",
                str(tmp_path / "z"),
                *FLAGS,
                "--backend",
                "cpu",
                "-Z",
            ]
        )
        == 0
    )
    assert sorted(plots.segments_texts(tmp_path / "z" / "segments.tar.gz")) == sorted(
        plots.segments_texts(d / "out")
    )


def test_the_summary_joins_sheet_names_queries_and_ledger(tmp_path):
    (tmp_path / "queries.tsv").write_text(
        "job\tpath\tbytes\tsha256\tblocks\tunits\thsps\tdigest\tcompletion\n"
        "000001\t/a.fa\t10\tab\t1\t2\t5\tdd\tcomplete\n"
        "000002\t/b.fa\t20\tcd\t1\t2\t7\tee\tcomplete\n"
    )
    (tmp_path / "names.tsv").write_text(
        "name\tjob\tpath\nalpha\t000001\t/a.fa\nbeta\t000002\t/b.fa\n"
    )
    (tmp_path / "ledger.tsv").write_text(
        "job\tordinal\tworker\tdevice\tref_bin\tquery_bin\tref_bp\tquery_bp\tgpu_ms\t"
        "host_start_ms\thost_end_ms\tseeds\thits\traw_hsps\thsps\n"
        "000001\t0\t0\tcpu0\t0\t0\t1\t1\t1500\t0\t0\t3\t4\t5\t2\n"
        "000001\t1\t0\tcpu0\t1\t0\t1\t1\t500\t0\t0\t3\t6\t5\t3\n"
        "000002\t0\t1\tcpu1\t0\t0\t1\t1\t250\t0\t0\t1\t1\t7\t7\n"
    )
    plots.summarize(
        tmp_path / "queries.tsv",
        tmp_path / "names.tsv",
        tmp_path / "ledger.tsv",
        tmp_path / "summary.tsv",
    )
    rows = [r.split("\t") for r in (tmp_path / "summary.tsv").read_text().splitlines()]
    head = rows[0]
    table = [dict(zip(head, r, strict=True)) for r in rows[1:]]
    assert [(t["name"], t["job"], t["hits"], t["engine_s"]) for t in table] == [
        ("alpha", "000001", "10", "2.0"),
        ("beta", "000002", "1", "0.25"),
    ]


# --- the dot plot's layout ------------------------------------------------------------------


def test_query_contigs_are_ordered_by_their_best_hsps_reference_position():
    """Record 0's best HSP (score 90) lies at 500, record 1's at 100, record 3's best beats its
    other HSP at 50; record 2 has none and goes last, file order kept among ties."""
    qidx = np.array([0, 0, 1, 3, 3, 4])
    score = np.array([10, 90, 40, 5, 70, 70])
    ref_pos = np.array([20, 500, 100, 50, 300, 100])
    assert plots.query_order(qidx, score, ref_pos, 5).tolist() == [1, 4, 3, 0, 2]
    # ties on position keep file order; no HSPs at all is file order
    assert plots.query_order(np.array([1, 0]), np.array([5, 5]), np.array([7, 7]), 2).tolist() == [
        0,
        1,
    ]
    assert plots.query_order(np.empty(0, np.int64), np.empty(0), np.empty(0), 3).tolist() == [
        0,
        1,
        2,
    ]


def test_record_starts_follow_the_plot_order():
    assert plots.starts_of([10, 20, 30], np.array([2, 0, 1])).tolist() == [30, 40, 0]


def test_separators_are_all_drawn_for_few_records_and_only_around_wide_ones_for_many():
    assert plots.separators([10, 20, 30], np.arange(3)).tolist() == [10, 30]
    # a 767-contig assembly: 760 tiny contigs and 7 of 10% each
    lengths = [1_000] * 760 + [200_000] * 7
    order = np.arange(767)
    lines = plots.separators(lengths, order)
    assert 0 < len(lines) <= 8
    total = sum(lengths)
    assert all(x >= 760_000 for x in lines) and max(lines) < total


def test_record_names_label_only_a_few_wide_records():
    at, names = plots.named_ticks(["chr1", "chr2", "tiny"], [1000, 3000, 10], np.arange(3))
    assert names == ["chr1", "chr2"] and at.tolist() == [500.0, 2500.0]
    assert plots.named_ticks(["only"], [5], np.arange(1))[1] == []
    many = [f"c{k}" for k in range(41)]
    assert plots.named_ticks(many, [100] * 41, np.arange(41))[1] == []


def test_the_plots_are_titled_by_the_sheet_name(tmp_path):
    names = tmp_path / "names.tsv"
    names.write_text("name\tjob\tpath\nalpha\t000001\t/a.fa\nbeta\t000002\t/b.fa\n")
    assert plots.job_title("000002", "/b.fa", names) == "beta (job 000002)"
    assert plots.job_title("000002", "/x/b.fa", None) == "job 000002: b.fa"
    from hspz.core.errors import InputError

    with pytest.raises(InputError, match="no row for job 000003"):
        plots.job_title("000003", "/c.fa", names)


def test_a_767_contig_query_plots_in_best_position_order(tmp_path):
    """Contigs given in reverse of their reference order plot as one rising diagonal: in plot
    order the contigs' best HSPs climb along the reference."""
    n = 767
    ref = (["ref"], [n * 1000])
    qry = ([f"contig{k}" for k in range(n)], [1000] * n)
    lines = [
        f"ref\t{(n - 1 - k) * 1000 + 1}\t{(n - k) * 1000}\tcontig{k}\t1\t1000\t+\t90000\n"
        for k in range(n)
    ]
    texts = [("".join(lines)).encode()]
    h = plots.read_segments(texts)
    qidx = plots.record_index(h["query_name"], qry[0])
    order = plots.query_order(qidx, h["score"], h["ref_start"], n)
    assert order.tolist() == list(range(n - 1, -1, -1))
    assert plots.separators(qry[1], order).size == 0  # 767 records of 0.13%: no lines
    png = tmp_path / "many.png"
    assert plots.dotplot(texts, ref, qry, png, "many") == n
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_the_distribution_plot_is_a_png_and_copes_with_no_hsps(multibin_run, tmp_path):
    d = multibin_run[0]
    assert plots.distribution(plots.segments_texts(d / "out"), tmp_path / "h.png", "x") > 1000
    assert plots.distribution([], tmp_path / "none.png", "none") == 0
    assert (tmp_path / "none.png").read_bytes()[:4] == b"\x89PNG"


def test_the_summary_html_is_a_table_with_totals_and_escaped_names(tmp_path):
    (tmp_path / "queries.tsv").write_text(
        "job\tpath\tbytes\tsha256\tblocks\tunits\thsps\tdigest\tcompletion\n"
        "000001\t/d/a.fa\t1000\tab\t1\t2\t1500\tdd\tcomplete\n"
        "000002\t/d/b.fa\t2000\tcd\t1\t2\t7\tee\tcomplete\n"
    )
    (tmp_path / "names.tsv").write_text(
        "name\tjob\tpath\n<alpha>\t000001\t/d/a.fa\nbeta\t000002\t/d/b.fa\n"
    )
    (tmp_path / "ledger.tsv").write_text(
        "job\tordinal\tworker\tdevice\tref_bin\tquery_bin\tref_bp\tquery_bp\tgpu_ms\t"
        "host_start_ms\thost_end_ms\tseeds\thits\traw_hsps\thsps\n"
        "000001\t0\t0\tcpu0\t0\t0\t1\t1\t1500\t0\t0\t3\t4\t5\t2\n"
        "000002\t0\t1\tcpu1\t0\t0\t1\t1\t250\t0\t0\t1\t1\t7\t7\n"
    )
    maf = tmp_path / "000001.maf"
    maf.write_text("##maf version=1 scoring=lastz\na score=5\ns x\n\na score=7\ns y\n\n")
    axt = tmp_path / "000002.axt"
    axt.write_text("0 r 1 5 q 1 5 + 10\nACGTA\nACGTA\n\n")
    html = tmp_path / "summary.html"
    plots.summarize(
        tmp_path / "queries.tsv",
        tmp_path / "names.tsv",
        tmp_path / "ledger.tsv",
        tmp_path / "summary.tsv",
        html,
        [maf, axt],
        "batch x",
    )
    page = html.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<table>" in page
    assert "&lt;alpha&gt;" in page and "<alpha>" not in page
    assert "<td class='n'>1,500</td>" in page  # HSPs, thousands separated
    assert "total (2 queries)" in page and "<td class='n'>1,507</td>" in page  # HSP total
    assert "<td>a.fa</td>" in page  # the file's name, not its folder
    tsv = (tmp_path / "summary.tsv").read_text().splitlines()
    assert (
        tsv[0].endswith("gapped_alignments")
        and tsv[1].split("\t")[-1] == "2"
        and tsv[2].split("\t")[-1] == "1"
    )


def test_gapped_alignments_are_counted_per_format(tmp_path):
    cases = {
        "q.maf": ("##maf version=1\na score=1\ns a\n\na score=2\ns b\n\n", 2),
        "q.maf-": ("a score=1\ns a\n\n", 1),
        "q.axt": ("0 r 1 2 q 1 2 + 5\nAC\nAC\n\n1 r 3 4 q 3 4 + 5\nGT\nGT\n\n", 2),
        "q.general": ("#score\tname1\n5\tr\n6\tr\n7\tr\n", 3),
        "q.general-": ("5\tr\n", 1),
    }
    for name, (text, count) in cases.items():
        (tmp_path / name).write_text(text)
        assert plots.alignments(tmp_path / name) == count, name
