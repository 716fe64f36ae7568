"""The workflow's report and gapped stage from the library: dot plots draw every HSP, the summary
joins queries.tsv, names.tsv and the ledger, and the gapped stage hands each segments file to
the real lastz as KegAlign does (skipped without lastz)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from multibin import FLAGS, write_pair

from hspz.cli import main
from hspz.formats.frozen import read_manifest
from hspz.tools import gapped, plots


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
def test_the_gapped_stage_runs_lastz_per_segments_file_as_kegalign_does(related, tmp_path):
    """Every segments file extended by the real lastz, alignments concatenated in emission
    order: a MAF with one header and blocks on the planned records."""
    d, ref, qry, m = related
    segs = d / "out"
    n = gapped.run_gapped(m, str(ref), str(qry), segs, str(tmp_path / "q.maf"))
    assert n == len([p for p in segs.iterdir() if p.suffix == ".segments"]) > 1
    text = (tmp_path / "q.maf").read_text()
    assert text.startswith("##maf version=1 scoring=lastz\n")
    assert text.count("##maf") == 1
    blocks = text.count("\na score=")
    assert blocks >= 4
    names = {line.split()[1] for line in text.splitlines() if line.startswith("s ")}
    assert names <= set(m.ref_names) | set(m.qry_names) and len(names) >= 4
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
    from hspz.core.errors import RunError

    with pytest.raises(RunError, match=r"cannot run /no/such/lastz"):
        gapped.run_gapped(m, str(ref), str(qry), d / "out", str(tmp_path / "x.maf"),
                          lastz="/no/such/lastz")
    assert not (tmp_path / "x.maf").exists()


def test_bytes_2bit_cannot_hold_become_n_as_fatotwobit_makes_them(tmp_path):
    from hspz.io.readers import read_records
    from hspz.io.records import Record

    recs = [Record("r", np.frombuffer(b"ACGTRYkm\x00acgtN", np.uint8))]
    path = gapped.lastz_input(recs, tmp_path, "x")
    assert path.suffix == ".2bit"
    assert read_records(path)[0].seq.tobytes() == b"ACGTNNnnNacgtN"


# --- the dot plot's layout ------------------------------------------------------------------

def test_query_contigs_are_ordered_by_their_best_hsps_reference_position():
    """Record 0's best HSP (score 90) lies at 500, record 1's at 100, record 3's best beats its
    other HSP at 50; record 2 has none and goes last, file order kept among ties."""
    qidx = np.array([0, 0, 1, 3, 3, 4])
    score = np.array([10, 90, 40, 5, 70, 70])
    ref_pos = np.array([20, 500, 100, 50, 300, 100])
    assert plots.query_order(qidx, score, ref_pos, 5).tolist() == [1, 4, 3, 0, 2]
    # ties on position keep file order; no HSPs at all is file order
    assert plots.query_order(np.array([1, 0]), np.array([5, 5]), np.array([7, 7]),
                             2).tolist() == [0, 1]
    assert plots.query_order(np.empty(0, np.int64), np.empty(0), np.empty(0), 3).tolist() == \
        [0, 1, 2]


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
    lines = [f"ref\t{(n - 1 - k) * 1000 + 1}\t{(n - k) * 1000}\tcontig{k}\t1\t1000\t+\t90000\n"
             for k in range(n)]
    texts = [("".join(lines)).encode()]
    h = plots.read_segments(texts)
    qidx = plots.record_index(h["query_name"], qry[0])
    order = plots.query_order(qidx, h["score"], h["ref_start"], n)
    assert order.tolist() == list(range(n - 1, -1, -1))
    assert plots.separators(qry[1], order).size == 0  # 767 records of 0.13%: no lines
    png = tmp_path / "many.png"
    assert plots.dotplot(texts, ref, qry, png, "many") == n
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_the_distribution_plot_is_a_png_and_copes_with_no_hsps(run, tmp_path):
    d = run[0]
    assert plots.distribution(plots.segments_texts(d / "out"), tmp_path / "h.png", "x") > 1000
    assert plots.distribution([], tmp_path / "none.png", "none") == 0
    assert (tmp_path / "none.png").read_bytes()[:4] == b"\x89PNG"


def test_the_summary_html_is_a_table_with_totals_and_escaped_names(tmp_path):
    (tmp_path / "queries.tsv").write_text(
        "job\tpath\tbytes\tsha256\tblocks\tunits\thsps\tdigest\tcompletion\n"
        "000001\t/d/a.fa\t1000\tab\t1\t2\t1500\tdd\tcomplete\n"
        "000002\t/d/b.fa\t2000\tcd\t1\t2\t7\tee\tcomplete\n")
    (tmp_path / "names.tsv").write_text("name\tjob\tpath\n<alpha>\t000001\t/d/a.fa\n"
                                        "beta\t000002\t/d/b.fa\n")
    (tmp_path / "ledger.tsv").write_text(
        "job\tordinal\tworker\tdevice\tref_bin\tquery_bin\tref_bp\tquery_bp\tgpu_ms\t"
        "host_start_ms\thost_end_ms\tseeds\thits\traw_hsps\thsps\n"
        "000001\t0\t0\tcpu0\t0\t0\t1\t1\t1500\t0\t0\t3\t4\t5\t2\n"
        "000002\t0\t1\tcpu1\t0\t0\t1\t1\t250\t0\t0\t1\t1\t7\t7\n")
    maf = tmp_path / "000001.maf"
    maf.write_text("##maf version=1 scoring=lastz\na score=5\ns x\n\na score=7\ns y\n\n")
    axt = tmp_path / "000002.axt"
    axt.write_text("0 r 1 5 q 1 5 + 10\nACGTA\nACGTA\n\n")
    html = tmp_path / "summary.html"
    plots.summarize(tmp_path / "queries.tsv", tmp_path / "names.tsv", tmp_path / "ledger.tsv",
                    tmp_path / "summary.tsv", html, [maf, axt], "batch x")
    page = html.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<table>" in page
    assert "&lt;alpha&gt;" in page and "<alpha>" not in page
    assert "<td class='n'>1,500</td>" in page  # HSPs, thousands separated
    assert "total (2 queries)" in page and "<td class='n'>1,507</td>" in page  # HSP total
    assert "<td>a.fa</td>" in page  # the file's name, not its folder
    tsv = (tmp_path / "summary.tsv").read_text().splitlines()
    assert tsv[0].endswith("gapped_alignments") and tsv[1].split("\t")[-1] == "2" and \
        tsv[2].split("\t")[-1] == "1"


def test_gapped_alignments_are_counted_per_format(tmp_path):
    cases = {"q.maf": ("##maf version=1\na score=1\ns a\n\na score=2\ns b\n\n", 2),
             "q.maf-": ("a score=1\ns a\n\n", 1),
             "q.axt": ("0 r 1 2 q 1 2 + 5\nAC\nAC\n\n1 r 3 4 q 3 4 + 5\nGT\nGT\n\n", 2),
             "q.general": ("#score\tname1\n5\tr\n6\tr\n7\tr\n", 3),
             "q.general-": ("5\tr\n", 1)}
    for name, (text, count) in cases.items():
        (tmp_path / name).write_text(text)
        assert plots.alignments(tmp_path / name) == count, name


# --- the gapped stage in groups ---------------------------------------------------------------

def test_files_are_split_into_consecutive_groups_of_bounded_bytes():
    sizes = [("a", 400), ("b", 500), ("c", 200), ("d", 2000), ("e", 10)]
    assert gapped.split_groups(sizes, 1000) == [["a", "b"], ["c"], ["d"], ["e"]]
    assert gapped.split_groups(sizes, 1) == [["a"], ["b"], ["c"], ["d"], ["e"]]
    assert gapped.split_groups(sizes, 10**9) == [["a", "b", "c", "d", "e"]]
    assert gapped.split_groups([], 10) == [[]]  # no files: one group, the header alone


def test_the_groups_file_round_trips_and_refuses_other_text(tmp_path):
    from hspz.core.errors import InputError

    for groups in ([["a", "b"], ["c"]], [[]]):
        gapped.write_groups(tmp_path / "g.txt", groups)
        assert gapped.read_groups(tmp_path / "g.txt") == groups
    (tmp_path / "bad.txt").write_text("a b")
    with pytest.raises(InputError, match="not a groups file"):
        gapped.read_groups(tmp_path / "bad.txt")


def test_file_formats_put_the_header_on_the_first_file_only():
    assert [gapped.file_format("maf", f) for f in (True, False)] == ["maf-", "maf-"]
    assert [gapped.file_format("general", f) for f in (True, False)] == ["general", "general-"]
    assert [gapped.file_format("axt", f) for f in (True, False)] == ["axt", "axt"]
    assert gapped.header("maf") == gapped.MAF_HEADER and gapped.header("axt") == b""
    from hspz.core.errors import InputError

    with pytest.raises(InputError, match="not one of maf, maf-, axt, general, general-"):
        gapped.check_format("sam")


@pytest.fixture(scope="module")
def related(tmp_path_factory):
    """Four random 3 kbp reference records and three query records copied from them with
    substitutions (one reverse-complemented, one a fusion of two), one bin per record: six
    small segments files on both strands that lastz extends in milliseconds."""
    d = tmp_path_factory.mktemp("related")
    rng = np.random.default_rng(5)
    bases = np.frombuffer(b"ACGT", np.uint8)
    ref = {f"chr{k}": bases[rng.integers(0, 4, 3000)] for k in range(1, 5)}

    def mutate(seq, rate=0.04):
        out = seq.copy()
        hit = rng.random(len(seq)) < rate
        out[hit] = bases[rng.integers(0, 4, int(hit.sum()))]
        return out

    def revcomp(seq):
        return np.frombuffer(seq.tobytes()[::-1].translate(bytes.maketrans(b"ACGT", b"TGCA")),
                             np.uint8)

    qry = {"qa": mutate(ref["chr1"][200:2800]),
           "qb": revcomp(mutate(ref["chr2"][100:2900])),
           "qc": np.concatenate([mutate(ref["chr3"][0:1500]),
                                 revcomp(mutate(ref["chr4"][1000:2500]))])}
    for path, recs in ((d / "ref.fa", ref), (d / "qry.fa", qry)):
        path.write_bytes(b"".join(b">" + n.encode() + b"\n" + s.tobytes() + b"\n"
                                  for n, s in recs.items()))
    assert main(["run", "-r", str(d / "ref.fa"), "-q", str(d / "qry.fa"), "-o", str(d / "out"),
                 "--backend", "cpu", "-B", "3000", "--query-block-size", "3000", "-H", "2000",
                 "--dump-manifest", str(d / "manifest.txt")]) == 0
    return d, d / "ref.fa", d / "qry.fa", read_manifest(d / "manifest.txt")


@pytest.mark.lastz
@pytest.mark.skipif(shutil.which("lastz") is None, reason="lastz is not installed")
@pytest.mark.parametrize("fmt", ["maf", "axt", "general"])
def test_groups_gathered_in_order_are_the_bytes_of_one_run_over_all_files(
        related, tmp_path, fmt):
    """Cut into groups of any size, extended one group at a time (the reference 2bit written
    once) and concatenated in group order: the bytes `run_gapped` writes over all files, which
    are the per-file outputs concatenated in emission order."""
    d, ref, qry, m = related
    segs = d / "out"
    whole = tmp_path / f"whole.{fmt}"
    n = gapped.run_gapped(m, str(ref), str(qry), segs, str(whole), fmt=fmt)
    files = gapped.job_files(m, segs)
    assert n == len(files) >= 4
    assert {f.split(".")[3] for f in files} == {"plus", "minus"}
    expected = whole.read_bytes()
    assert plots.alignments(whole) >= 4
    ref2bit = tmp_path / "reference.2bit"
    gapped.write_reference(m, str(ref), ref2bit)
    sizes = [(f, (segs / f).stat().st_size) for f in files]
    total = sum(s for _, s in sizes)
    for bound in (1, total // 3, total):
        groups = gapped.split_groups(sizes, bound)
        parts = []
        for g, group in enumerate(groups):
            out = tmp_path / f"part{g}.{bound}.{fmt}"
            gapped.extend_group(m, str(ref), str(qry), segs, group, g == 0, str(out),
                                fmt=fmt, reference_2bit=str(ref2bit))
            parts.append(out.read_bytes())
        assert b"".join(parts) == expected, (bound, len(groups))
        if bound == 1:  # one file a group: the per-file outputs, header on the first only
            assert len(groups) == len(files)
            assert parts[0].startswith(gapped.header(fmt))
            if fmt == "general":
                assert parts[0].startswith(b"#") and not parts[1].startswith(b"#")


@pytest.mark.lastz
@pytest.mark.skipif(shutil.which("lastz") is None, reason="lastz is not installed")
def test_the_cli_stages_split_extend_and_gather_to_the_bytes_of_stage_all(related, tmp_path,
                                                                         capsys):
    """`hspZ gapped` as the workflow's rules call it: --stage reference once, --stage split,
    --stage extend per group, the parts concatenated: the bytes of the default --stage all."""
    d, ref, qry, _ = related
    plan = tmp_path / "plan.txt"
    assert main(["plan", "-r", str(ref), "-q", str(qry), "-o", str(plan), "--backend", "cpu",
                 "-B", "3000", "--query-block-size", "3000", "-H", "2000"]) == 0
    common = ["gapped", "--plan", str(plan), "--job", "1"]
    segs = str(d / "out")
    assert main([*common, "--format", "axt", "-o", str(tmp_path / "all.axt"), segs]) == 0
    assert main([*common, "--stage", "reference", "-o", str(tmp_path / "ref.2bit")]) == 0
    assert main([*common, "--stage", "split", "--group-bytes", "120", "-o",
                 str(tmp_path / "groups.txt"), segs]) == 0
    groups = gapped.read_groups(tmp_path / "groups.txt")
    assert len(groups) > 1
    parts = []
    for g in range(len(groups)):
        out = tmp_path / f"part{g}.axt"
        assert main([*common, "--stage", "extend", "--groups", str(tmp_path / "groups.txt"),
                     "--group", str(g), "--reference-2bit", str(tmp_path / "ref.2bit"),
                     "--format", "axt", "-o", str(out), segs]) == 0
        parts.append(out.read_bytes())
    assert b"".join(parts) == (tmp_path / "all.axt").read_bytes()
    assert plots.alignments(tmp_path / "all.axt") >= 4
    capsys.readouterr()
    # refused in one line, nothing written: no groups file, a group past the last, a groups
    # file of other files, an unknown format, no SEGMENTS
    (tmp_path / "other.txt").write_text("tmp9.block0.r0.plus.segments\n")
    for extra, message in (
            (["--stage", "extend", segs], "--stage extend needs --groups"),
            (["--stage", "extend", "--groups", str(tmp_path / "groups.txt"), "--group",
              str(len(groups)), segs], f"--group: {len(groups)} must be at most"),
            (["--stage", "extend", "--groups", str(tmp_path / "other.txt"), segs],
             "does not list the files of SEGMENTS"),
            (["--format", "sam", segs], "'sam' is not one of maf, maf-, axt, general"),
            (["--stage", "split"], "--stage split needs the job's segments folder")):
        assert main([*common, *extra, "-o", str(tmp_path / "refused")]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
        assert not (tmp_path / "refused").exists()
