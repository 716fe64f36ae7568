"""The gapped stage from the library (hspz/tools/gapped.py): each segments file handed to the real
lastz as KegAlign does, in emission order (skipped without lastz), in groups whose outputs
gathered in order are the bytes of one run over all files."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from helpers import mutate, random_dna, write_fasta

from hspz.cli import main
from hspz.formats.frozen import read_manifest
from hspz.tools import gapped, plots


def test_emission_order_is_units_then_intervals_plus_before_minus():
    names = [
        "tmp2.block0.r0.plus.segments",
        "tmp1.block1.r0.plus.segments",
        "tmp1.block0.r1.plus.segments",
        "tmp1.block0.r0.minus.segments",
        "tmp1.block0.r0.plus.split2.segments",
        "tmp1.block0.r0.plus.split1.segments",
        "notes.txt",
    ]
    assert gapped.emission_order(names, 2) == [
        "tmp1.block0.r0.plus.split1.segments",
        "tmp1.block0.r0.plus.split2.segments",
        "tmp1.block0.r0.minus.segments",
        "tmp2.block0.r0.plus.segments",
        "tmp1.block1.r0.plus.segments",
        "tmp1.block0.r1.plus.segments",
    ]


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
    first = gapped.emission_order([p.name for p in segs.iterdir()], len(m.plan.query_bins))[0]
    one = tmp_path / "one"
    one.mkdir()
    shutil.copy(segs / first, one / first)
    gapped.run_gapped(m, str(ref), str(qry), one, str(tmp_path / "one.maf"))
    assert text.startswith((tmp_path / "one.maf").read_text())


def test_lastz_failing_is_one_line(multibin_run, tmp_path):
    d, ref, qry, m = multibin_run
    from hspz.core.errors import RunError

    with pytest.raises(RunError, match=r"cannot run /no/such/lastz"):
        gapped.run_gapped(
            m, str(ref), str(qry), d / "out", str(tmp_path / "x.maf"), lastz="/no/such/lastz"
        )
    assert not (tmp_path / "x.maf").exists()


def test_bytes_2bit_cannot_hold_become_n_as_fatotwobit_makes_them(tmp_path):
    from hspz.io.readers import read_records
    from hspz.io.records import Record

    recs = [Record("r", np.frombuffer(b"ACGTRYkm\x00acgtN", np.uint8))]
    path = gapped.lastz_input(recs, tmp_path, "x")
    assert path.suffix == ".2bit"
    assert read_records(path)[0].seq.tobytes() == b"ACGTNNnnNacgtN"


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
    ref = {f"chr{k}": random_dna(rng, 3000) for k in range(1, 5)}

    def copy(seq):
        return mutate(rng, seq, 0.04)

    def revcomp(seq):
        return np.frombuffer(
            seq.tobytes()[::-1].translate(bytes.maketrans(b"ACGT", b"TGCA")), np.uint8
        )

    qry = {
        "qa": copy(ref["chr1"][200:2800]),
        "qb": revcomp(copy(ref["chr2"][100:2900])),
        "qc": np.concatenate([copy(ref["chr3"][0:1500]), revcomp(copy(ref["chr4"][1000:2500]))]),
    }
    write_fasta(d / "ref.fa", ref)
    write_fasta(d / "qry.fa", qry)
    assert (
        main(
            [
                "run",
                "-r",
                str(d / "ref.fa"),
                "-q",
                str(d / "qry.fa"),
                "-o",
                str(d / "out"),
                "--backend",
                "cpu",
                "-B",
                "3000",
                "--query-block-size",
                "3000",
                "-H",
                "2000",
                "--dump-manifest",
                str(d / "manifest.txt"),
            ]
        )
        == 0
    )
    return d, d / "ref.fa", d / "qry.fa", read_manifest(d / "manifest.txt")


@pytest.mark.lastz
@pytest.mark.skipif(shutil.which("lastz") is None, reason="lastz is not installed")
@pytest.mark.parametrize("fmt", ["maf", "axt", "general"])
def test_groups_gathered_in_order_are_the_bytes_of_one_run_over_all_files(related, tmp_path, fmt):
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
    pair = sizes[1][1] + sizes[2][1]  # the second and third files fit one group together
    for bound in (1, pair, total):
        groups = gapped.split_groups(sizes, bound)
        if bound == pair:  # a group after the first holds two files or more
            assert any(len(group) > 1 for group in groups[1:]), groups
        parts = []
        for g, group in enumerate(groups):
            out = tmp_path / f"part{g}.{bound}.{fmt}"
            gapped.extend_group(
                m,
                str(ref),
                str(qry),
                segs,
                group,
                g == 0,
                str(out),
                fmt=fmt,
                reference_2bit=str(ref2bit),
            )
            parts.append(out.read_bytes())
        assert b"".join(parts) == expected, (bound, len(groups))
        if bound == 1:  # one file a group: the per-file outputs, header on the first only
            assert len(groups) == len(files)
            assert parts[0].startswith(gapped.header(fmt))
            if fmt == "general":
                assert parts[0].startswith(b"#") and not parts[1].startswith(b"#")


@pytest.mark.lastz
@pytest.mark.skipif(shutil.which("lastz") is None, reason="lastz is not installed")
def test_the_cli_stages_split_extend_and_gather_to_the_bytes_of_stage_all(
    related, tmp_path, capsys
):
    """`hspZ gapped` as the workflow's rules call it: --stage reference once, --stage split,
    --stage extend per group, the parts concatenated: the bytes of the default --stage all."""
    d, ref, qry, _ = related
    plan = tmp_path / "plan.txt"
    assert (
        main(
            [
                "plan",
                "-r",
                str(ref),
                "-q",
                str(qry),
                "-o",
                str(plan),
                "--backend",
                "cpu",
                "-B",
                "3000",
                "--query-block-size",
                "3000",
                "-H",
                "2000",
            ]
        )
        == 0
    )
    common = ["gapped", "--plan", str(plan), "--job", "1"]
    segs = str(d / "out")
    assert main([*common, "--format", "axt", "-o", str(tmp_path / "all.axt"), segs]) == 0
    assert main([*common, "--stage", "reference", "-o", str(tmp_path / "ref.2bit")]) == 0
    assert (
        main(
            [
                *common,
                "--stage",
                "split",
                "--group-bytes",
                "120",
                "-o",
                str(tmp_path / "groups.txt"),
                segs,
            ]
        )
        == 0
    )
    groups = gapped.read_groups(tmp_path / "groups.txt")
    assert len(groups) > 1
    parts = []
    for g in range(len(groups)):
        out = tmp_path / f"part{g}.axt"
        assert (
            main(
                [
                    *common,
                    "--stage",
                    "extend",
                    "--groups",
                    str(tmp_path / "groups.txt"),
                    "--group",
                    str(g),
                    "--reference-2bit",
                    str(tmp_path / "ref.2bit"),
                    "--format",
                    "axt",
                    "-o",
                    str(out),
                    segs,
                ]
            )
            == 0
        )
        parts.append(out.read_bytes())
    assert b"".join(parts) == (tmp_path / "all.axt").read_bytes()
    assert plots.alignments(tmp_path / "all.axt") >= 4
    capsys.readouterr()
    # refused in one line, nothing written: no groups file, a group past the last, a groups
    # file of other files, an unknown format, no SEGMENTS
    (tmp_path / "other.txt").write_text("tmp9.block0.r0.plus.segments\n")
    for extra, message in (
        (["--stage", "extend", segs], "--stage extend needs --groups"),
        (
            [
                "--stage",
                "extend",
                "--groups",
                str(tmp_path / "groups.txt"),
                "--group",
                str(len(groups)),
                segs,
            ],
            f"--group: {len(groups)} must be at most",
        ),
        (
            ["--stage", "extend", "--groups", str(tmp_path / "other.txt"), segs],
            "does not list the files of SEGMENTS",
        ),
        (["--format", "sam", segs], "'sam' is not one of maf, maf-, axt, general"),
        (["--stage", "split"], "--stage split needs the job's segments folder"),
    ):
        assert main([*common, *extra, "-o", str(tmp_path / "refused")]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
        assert not (tmp_path / "refused").exists()
