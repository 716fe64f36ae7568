"""Inputs that must be read, and read alike (issue 15, item 3), and scores that must print whole
(item 4): the positive side of the bad-input catalogue (tests/catalogues/inputs.py).

A FASTA written with CRLF or CR-alone line ends, a UTF-8 byte-order mark, or blanks before its
'>' holds the same records as the plain LF file, so a run over it prints the same digest, gzip
and bgzip (multi-member) included.  Before, a CR-only file read as records without bases, a
byte-order mark hid the first record and a blank before '>' merged two records.  LASTZ 1.04.22
reads CRLF and blanks before '>' as LF (the same HSPs), reads a CR-only file but loses the first
base after a header that has a description, and refuses a byte-order mark ("bad fasta
character"); hspZ skips the mark.

DNA with many N, IUPAC codes or X hard-masking passes the protein rule (over half the bases must
be A, C, G, T, U, N or X of either case).  Scores past 2^31 print whole on the CPU backend
(their GPU twins are in test_gpu.py); LASTZ's scores are int32, so it agrees up to 2^31 and
loses the HSP beyond.
"""

from __future__ import annotations

import gzip
import re
import shutil
import subprocess
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from helpers import fasta_bytes, mutate, random_dna, sigterm_after
from scorefiles import MILLION

from hspz.cli import main
from hspz.core.errors import InputError
from hspz.io.fasta import read_fasta_bytes
from hspz.io.readers import read_records

BOM = b"\xef\xbb\xbf"


def _pair() -> tuple[bytes, bytes]:
    """A two-record reference and a query of mutated copies of parts of it, as LF FASTA with
    descriptions and 60-base lines: a few HSPs at the default settings."""
    rng = np.random.default_rng(15)
    ref = [random_dna(rng, 3000), random_dna(rng, 2500)]
    qry = [
        np.concatenate([random_dna(rng, 300), mutate(rng, ref[0][500:2500], 0.05)]),
        mutate(rng, ref[1][::-1].copy(), 0.05),
    ]

    def fasta(prefix: str, seqs) -> bytes:
        return fasta_bytes([(f"{prefix}{i} description {i}", s) for i, s in enumerate(seqs)], 60)

    return fasta("chr", ref), fasta("ctg", qry)


def _variants(lf: bytes) -> dict[str, bytes]:
    """The same FASTA written every way issue 15 names, and a few combinations."""
    crlf = lf.replace(b"\n", b"\r\n")
    cr = lf.replace(b"\n", b"\r")
    blanks = lf.replace(b"\n>", b"\n \t >")
    return {
        "crlf": crlf,
        "cr-only": cr,
        "bom": BOM + lf,
        "blanks-before-gt": b"  " + blanks,
        "bom-cr-blanks": BOM + b"\t" + blanks.replace(b"\n", b"\r"),
        "mixed-line-ends": _cycled_line_ends(lf),
        "gzip-cr-only": gzip.compress(cr),
        "bgzip-crlf-bom": gzip.compress(BOM + crlf[:1000]) + gzip.compress(crlf[1000:]),
    }


def _cycled_line_ends(lf: bytes) -> bytes:
    """LF, CRLF and CR in turn, line after line."""
    lines = lf.split(b"\n")
    ends = [(b"\n", b"\r\n", b"\r")[i % 3] for i in range(len(lines) - 1)] + [b""]
    return b"".join(line + end for line, end in zip(lines, ends, strict=True))


def _digest(capsys, tmp: Path, ref: Path, qry: Path) -> str:
    out = tmp / f"out-{ref.name}-{qry.name}"
    capsys.readouterr()
    assert main(["run", "-r", str(ref), "-q", str(qry), "-o", str(out), "--backend", "cpu"]) == 0
    return re.search(r"^digest: (\w+)$", capsys.readouterr().out, re.M).group(1)


@pytest.fixture(scope="module")
def pair_files(tmp_path_factory) -> tuple[Path, Path, dict[str, tuple[Path, Path]]]:
    d = tmp_path_factory.mktemp("variants")
    ref, qry = _pair()
    (d / "ref.fa").write_bytes(ref)
    (d / "qry.fa").write_bytes(qry)
    files = {}
    for (name, r), q in zip(_variants(ref).items(), _variants(qry).values(), strict=True):
        files[name] = (d / f"ref.{name}.fa", d / f"qry.{name}.fa")
        files[name][0].write_bytes(r)
        files[name][1].write_bytes(q)
    return d / "ref.fa", d / "qry.fa", files


@pytest.mark.parametrize("variant", list(_variants(b"")))
def test_every_way_of_writing_a_fasta_gives_the_records_and_the_digest_of_the_lf_file(
    pair_files, variant, tmp_path, capsys
):
    ref, qry, files = pair_files
    vref, vqry = files[variant]
    assert read_records(vref) == read_records(ref)
    assert read_records(vqry) == read_records(qry)
    expected = _digest(capsys, tmp_path, ref, qry)
    assert expected != "e3b0c44298fc1c14"  # the pair has HSPs: the digest is not of nothing
    assert _digest(capsys, tmp_path, vref, vqry) == expected


def test_lastz_reads_crlf_and_blanks_before_gt_as_lf(pair_files, tmp_path):
    lastz = shutil.which("lastz")
    if lastz is None:
        pytest.skip("lastz not installed")
    ref, qry, files = pair_files

    def lines(r: Path) -> list[str]:
        fmt = "--format=general-:name1,start1,end1,name2,start2,end2,strand2,score"
        done = subprocess.run(
            [lastz, f"{r}[multiple]", str(qry), "--nogapped", fmt],
            capture_output=True,
            text=True,
            check=True,
        )
        return sorted(done.stdout.splitlines())

    plain = lines(ref)
    assert plain and lines(files["crlf"][0]) == plain
    assert lines(files["blanks-before-gt"][0]) == plain


@pytest.mark.parametrize(
    "seq",
    [
        b"ACGTN" * 40 + b"N" * 800,  # mostly N: a gap-filled scaffold
        b"ACGT" * 60 + b"RYKMSWBDHV" * 20,  # 45% IUPAC codes
        b"acgtACGT" * 30 + b"X" * 300,  # X hard-masked (RepeatMasker -x)
        b"ACGU" * 50 + b"acgu" * 50,  # RNA
        b"ACGT" * 10 + b"EFILPQ" * 6 + b"*-EF",  # exactly half nucleotides
    ],
)
def test_dna_with_many_n_iupac_codes_or_x_masking_passes_the_protein_rule(seq):
    records = read_fasta_bytes(b">dna\n" + seq + b"\n", "dna.fa")
    assert records[0].seq.tobytes() == seq


def test_one_base_short_of_half_nucleotides_is_refused_as_protein():
    with pytest.raises(InputError, match=r"p\.fa: 50% of the bases are not nucleotides"):
        read_fasta_bytes(b">p\n" + b"ACGT" * 10 + b"EFILPQ" * 6 + b"*-EFI" + b"\n", "p.fa")


def test_the_protein_rule_decides_a_large_file_on_an_evenly_spaced_sample():
    rng = np.random.default_rng(8)
    amino = np.frombuffer(b"ACDEFGHIKLMNPQRSTVWY", np.uint8)
    protein = amino[rng.integers(0, 20, 3_000_000)]  # 3 Mbp: a sample of 1 base in 3
    with pytest.raises(InputError, match=r"big\.fa: [78]\d% of the bases are not nucleotides"):
        read_fasta_bytes(b">p\n" + protein.tobytes() + b"\n", "big.fa")
    iupac = np.frombuffer(b"ACGTACGTACGRYKMSWBDH", np.uint8)[rng.integers(0, 20, 3_000_000)]
    assert read_fasta_bytes(b">d\n" + iupac.tobytes() + b"\n", "big.fa")[0].seq.size == 3_000_000


def test_a_file_of_nul_bytes_is_refused_in_memory_of_its_own_size():
    """A header and then NUL bytes (a damaged or sparse file) is refused as not DNA, holding
    about twice its size: the low bytes' offsets are taken a piece at a time (all at once,
    8 bytes each, a 2 GB file needed 24 GB and was killed)."""
    data = b">z\n" + bytes(1 << 25)
    tracemalloc.start()
    try:
        with pytest.raises(InputError, match=r"z\.fa: 100% of the bases are not nucleotides"):
            read_fasta_bytes(data, "z.fa")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * len(data), peak / len(data)


# ---- scores past 2^31 ---------------------------------------------------------------------


def _identical(tmp: Path, n: int, seed: int = 3) -> Path:
    path = tmp / f"id{n}.fa"
    seq = random_dna(np.random.default_rng(seed), n).tobytes()
    path.write_bytes(b">s\n" + seq + b"\n")
    return path


def _segments(out: Path) -> list[list[str]]:
    return [
        line.split("\t")
        for p in sorted(out.glob("*.segments"))
        for line in p.read_text().splitlines()
    ]


def _score_flags(tmp: Path, scores: str = MILLION) -> list[str]:
    (tmp / "scores.txt").write_text(scores)
    return ["--scoring", str(tmp / "scores.txt"), "-x", "5000000", "-S", "plus", "--backend", "cpu"]


def test_an_hsp_scoring_past_2_to_the_31_prints_whole(tmp_path):
    seq = _identical(tmp_path, 3000)
    out = tmp_path / "out"
    assert (
        main(["run", "-r", str(seq), "-q", str(seq), "-o", str(out), *_score_flags(tmp_path)]) == 0
    )
    lines = _segments(out)
    assert ["s", "1", "3000", "s", "1", "3000", "+", "3000000000"] in lines  # was -1294967296
    assert all(int(line[7]) > 0 for line in lines)


def test_an_identical_long_pair_scores_its_length_times_the_match_score(tmp_path):
    seq = _identical(tmp_path, 150_000, seed=4)
    scores = MILLION.replace("1000000", "30000")  # +-30000: 150 kbp make 4.5e9
    out = tmp_path / "out"
    assert (
        main(
            ["run", "-r", str(seq), "-q", str(seq), "-o", str(out), *_score_flags(tmp_path, scores)]
        )
        == 0
    )
    assert ["s", "1", "150000", "s", "1", "150000", "+", "4500000000"] in _segments(out)


def test_a_wide_score_survives_a_results_file_from_work_to_merge(tmp_path, capsys):
    seq = _identical(tmp_path, 3000)
    flags = _score_flags(tmp_path)
    plan, result, out = tmp_path / "plan.txt", tmp_path / "r0.npz", tmp_path / "merged"
    assert main(["plan", "-r", str(seq), "-q", str(seq), "-o", str(plan), *flags]) == 0
    assert (
        main(["work", "--plan", str(plan), "--worker", "0", "-o", str(result), "--backend", "cpu"])
        == 0
    )
    assert main(["merge", "--plan", str(plan), "-o", str(out), str(result)]) == 0
    assert ["s", "1", "3000", "s", "1", "3000", "+", "3000000000"] in _segments(out)


def test_big_legal_scores_equal_lastz_up_to_its_int32_scores(tmp_path):
    lastz = shutil.which("lastz")
    if lastz is None:
        pytest.skip("lastz not installed")
    seq = _identical(tmp_path, 2000, seed=5)  # 2e9: the largest HSP still below 2^31
    out = tmp_path / "out"
    flags = _score_flags(tmp_path)
    assert main(["run", "-r", str(seq), "-q", str(seq), "-o", str(out), *flags]) == 0
    fmt = "--format=general-:name1,start1,end1,name2,start2,end2,strand2,score"
    done = subprocess.run(
        [
            lastz,
            str(seq),
            str(seq),
            "--nogapped",
            "--strand=plus",
            f"--scores={tmp_path / 'scores.txt'}",
            "--xdrop=5000000",
            fmt,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    theirs = sorted(line.split("\t") for line in done.stdout.splitlines())
    assert ["s", "1", "2000", "s", "1", "2000", "+", "2000000000"] in theirs
    assert sorted(_segments(out)) == theirs


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null"])
def test_a_device_is_refused_in_one_line_not_read(tmp_path, capfd, device):
    """/dev/zero given as a sequence file was read into memory for ever (found by the hostile
    pass: `hspZ run -r /dev/zero` grew until killed); a device is refused at once."""
    from hspz.cli import main

    fa = tmp_path / "q.fa"
    fa.write_text(">q\nACGTACGTACGTACGTACGT\n")
    argv = ["run", "-r", device, "-q", str(fa), "-o", str(tmp_path / "out"), "--backend", "cpu"]
    assert main(argv) == 2
    err = capfd.readouterr().err.strip().splitlines()
    assert err[-1] == f"hspZ: {device}: a device, not a sequence file"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("with_index", [False, True])
def test_a_run_blocked_reading_a_fifo_stops_on_sigterm(tmp_path, with_index):
    """A FIFO nobody writes to, as the reference (read on a thread: `read_both`, or the index's
    `Verification`), blocks its reader in open(); SIGTERM must still end the run at once, exit
    143 and no OUT (it hung for ever: the thread pools were waited for on the way out)."""
    import os
    import subprocess
    import sys

    from tests.helpers import write_fasta

    fa = write_fasta(tmp_path / "q.fa", [("q", "ACGT" * 2000)])
    fifo = tmp_path / "ref.fifo"
    os.mkfifo(fifo)
    argv = ["run", "-r", str(fifo), "-q", str(fa), "-o", str(tmp_path / "out"), "--backend", "cpu"]
    if with_index:
        ix = tmp_path / "ix"
        cmd = [sys.executable, "-m", "hspz", "index", "-r", str(fa), "--index", str(ix)]
        subprocess.run([*cmd, "--backend", "cpu"], check=True, capture_output=True)
        argv += ["--index", str(ix)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "hspz", *argv], stderr=subprocess.PIPE, text=True
    )
    sigterm_after(proc, "a run blocked on a FIFO")
    assert not (tmp_path / "out").exists()
