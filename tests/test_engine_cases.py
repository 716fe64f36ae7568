"""Tiny engine cases: `hspZ run` against the independent oracle (tests/oracle.py), byte for byte.

Every case goes through the ``engine`` fixture (conftest.py), which runs hspZ and the oracle and
asserts identical segments files. Where a case is simple enough the expected lines are also derived
by hand; the derivation sits in a comment next to the assertion (docs/algorithm.md).

Hand derivations lean on two facts of HOXD70 with x-drop 910:
- a match scores 91 (A/T) or 100 (C/G); a transition -31; the transversions A<->C, G<->T -114;
- eight transversions in a row drop 912 > 910, so ``planted`` queries (every base outside the
  planted match is a transversion of the reference base it faces) stop extension exactly at the
  match ends.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import evolve, random_dna
from oracle import (
    HOXD70,
    LN4,
    Options,
    extend,
    extend_plain,
    score_matrix,
    score_symbols,
    semantic_chunks,
)

CODE = {b: i for i, b in enumerate(b"ACGT")}
TRANSVERSION = bytes.maketrans(b"ACGT", b"CATG")
TRANSITION = bytes.maketrans(b"ACGT", b"GTAC")
COMPLEMENT = bytes.maketrans(b"ACGTacgtNn", b"TGCAtgcaNn")


def dna(rng: np.random.Generator, n: int, alphabet: bytes = b"ACGT") -> bytes:
    return random_dna(rng, n, alphabet).tobytes()


def revcomp(seq: bytes) -> bytes:
    return seq.translate(COMPLEMENT)[::-1]


def pair_score(ref: bytes, qry: bytes) -> int:
    """HOXD70 score of an ungapped ACGT alignment."""
    return sum(HOXD70[CODE[r]][CODE[q]] for r, q in zip(ref, qry, strict=True))


def line(rname, rs, re, qname, qs, qe, strand, score) -> bytes:
    return f"{rname}\t{rs}\t{re}\t{qname}\t{qs}\t{qe}\t{strand}\t{score}\n".encode()


def planted(ref: bytes, p: int, length: int, qlen: int, j: int, rng) -> bytes:
    """A query of qlen bases holding ref[p:p+length] at j; every other base is a transversion of
    the reference base it faces on that diagonal (random where it faces none)."""
    out = bytearray(dna(rng, qlen))
    for i in range(qlen):
        r = p - j + i
        if 0 <= r < len(ref):
            out[i] = ref[r] if j <= i < j + length else ref[r : r + 1].translate(TRANSVERSION)[0]
    return bytes(out)


def coords(segment_line: bytes) -> tuple[int, int, int, int]:
    """(ref_start, ref_end, query_start, query_end) of one segments line."""
    f = segment_line.split(b"\t")
    return int(f[1]), int(f[2]), int(f[4]), int(f[5])


def lines_of(files: dict[str, bytes]) -> list[bytes]:
    return [ln + b"\n" for data in files.values() for ln in data.splitlines()]


@pytest.fixture
def rng():
    return np.random.default_rng(20240611)


# ---------------------------------------------------------------- oracle self-checks


def test_oracle_fast_xdrop_scan_equals_the_literal_per_base_loop(rng):
    sub = score_matrix(Options())
    sub_np = np.array(sub)
    for _ in range(300):
        n = int(rng.integers(30, 400))
        rs = score_symbols(dna(rng, n, b"ACGTACGTACGTacgN"))
        qs = bytearray(rs)
        for i in rng.integers(0, n, int(rng.integers(0, n // 4))):
            qs[i] = int(rng.integers(0, 7))
        R, Q = int(rng.integers(0, n)), int(rng.integers(0, n))
        xdrop = int(rng.choice([50, 300, 910, 5000]))
        args = (rs, bytes(qs), n, n, R, Q, sub)
        assert extend(*args, sub_np, xdrop) == extend_plain(*args, xdrop)


def test_oracle_chunk_walk_reads_a_position_before_the_first_seed_as_zero_hits():
    # first seed alone exceeds H: pos = -1 every round, limit stays H, one chunk holds everything
    assert semantic_chunks([5000, 10, 10], 100) == [range(0, 3)]
    # cum 60 120 180, H 100: pos 0 (limit -> 160), then the last seed: chunks [0] and [1, 2]
    assert semantic_chunks([60, 60, 60], 100) == [range(0, 1), range(1, 3)]
    assert semantic_chunks([0, 0], 100) == [range(0, 2)]


# ---------------------------------------------------------------- hand-checked cases


def test_identical_sequences_give_one_full_length_plus_hsp(engine, rng):
    seq = dna(rng, 1000)
    files = engine([("r", seq)], [("q", seq)])
    # every base matches, so every seed on diagonal 0 extends to both record ends; dedup keeps one;
    # the minus strand of random DNA has nothing near 3000
    assert files == {
        "tmp1.block0.r0.plus.segments": line("r", 1, 1000, "q", 1, 1000, "+", pair_score(seq, seq))
    }


def test_record_separator_stops_extension_even_with_a_huge_xdrop(engine, rng):
    r1, r2 = dna(rng, 600), dna(rng, 500)
    files = engine([("r1", r1), ("r2", r2)], [("q", r1 + b"A" + r2)], xdrop=10000)
    # reference buffer r1 & r2, query r1 A r2: one diagonal through the separator, where '&'
    # scores -10 * xdrop = -100000, so q's single record splits into one HSP per reference
    # record (a separator scored like a mismatch would give one HSP across both)
    assert files == {
        "tmp1.block0.r0.plus.segments": line("r1", 1, 600, "q", 1, 600, "+", pair_score(r1, r1))
        + line("r2", 1, 500, "q", 602, 1101, "+", pair_score(r2, r2))
    }


def test_u_complements_to_a_so_a_u_for_t_query_aligns_on_the_minus_strand(engine, rng):
    seq = dna(rng, 800)
    files = engine([("r", seq)], [("q", revcomp(seq).replace(b"T", b"U"))])
    # plus: U is X (no seeds, -100); minus: complement(U) = A, so the buffer is seq itself
    assert files == {
        "tmp1.block0.r0.minus.segments": line("r", 1, 800, "q", 1, 800, "-", pair_score(seq, seq))
    }


def test_x_scores_minus_100_but_complements_to_n_on_the_minus_strand(engine, rng):
    seq = dna(rng, 1000)
    with_x = seq[:500] + b"X" + seq[501:]
    plus = engine([("r", seq)], [("q", with_x)], strand="plus")
    # plus: X vs base = -100 is bridged
    score = pair_score(seq, seq) - HOXD70[CODE[seq[500]]][CODE[seq[500]]] - 100
    assert plus == {"tmp1.block0.r0.plus.segments": line("r", 1, 1000, "q", 1, 1000, "+", score)}
    minus = engine([("r", seq)], [("q", revcomp(with_x))], strand="minus")
    # minus: the X becomes N (-1000), which splits the alignment at position 501; the two HSPs
    # sort by query start and the minus file lists them reversed
    assert minus == {
        "tmp1.block0.r0.minus.segments": line(
            "r", 502, 1000, "q", 502, 1000, "-", pair_score(seq[501:], seq[501:])
        )
        + line("r", 1, 500, "q", 1, 500, "-", pair_score(seq[:500], seq[:500]))
    }


def test_one_mismatch_is_bridged_and_costs_its_substitution_score(engine, rng):
    seq = dna(rng, 1000)
    qry = seq[:500] + seq[500:501].translate(TRANSVERSION) + seq[501:]
    files = engine([("r", seq)], [("q", qry)])
    # one transversion drops ~114 << 910 and ~500 matches follow on either side
    assert files == {
        "tmp1.block0.r0.plus.segments": line("r", 1, 1000, "q", 1, 1000, "+", pair_score(seq, qry))
    }


def test_a_5bp_deletion_splits_the_alignment_onto_two_diagonals(engine, rng):
    seq = dna(rng, 1000)
    files = engine([("r", seq)], [("q", seq[:500] + seq[505:])])
    assert list(files) == ["tmp1.block0.r0.plus.segments"]
    rows = [coords(ln) for ln in files["tmp1.block0.r0.plus.segments"].splitlines()]
    # diagonal 0 runs from (1, 1) to about the deletion; diagonal +5 from there to (1000, 995);
    # where each stops inside the misaligned junction is left to the oracle
    assert len(rows) == 2
    (r1, r1e, q1, q1e), (r2, r2e, q2, q2e) = rows
    assert (r1, q1) == (1, 1) and r1 - q1 == 0 and 490 < r1e < 520
    assert (r2e, q2e) == (1000, 995) and r2 - q2 == 5 and 490 < r2 < 520


def test_reverse_complement_hits_only_the_minus_strand(engine, rng):
    seq = dna(rng, 1000)
    files = engine([("r", seq)], [("q", revcomp(seq))])
    # on the reverse complement of q the whole record is seq again: coordinates 1..1000 on both
    assert files == {
        "tmp1.block0.r0.minus.segments": line("r", 1, 1000, "q", 1, 1000, "-", pair_score(seq, seq))
    }


def test_tandem_repeat_small_max_hits_keeps_duplicates_across_semantic_chunks(engine, rng):
    ref = dna(rng, 150) + b"AC" * 1100 + dna(rng, 150)
    qry = b"AC" * 20 + dna(rng, 100)  # the first seed in stream order is an AC window
    opts = dict(hspthresh=1500)
    whole = engine([("r", ref)], [("q", qry)], **opts)
    # each AC window hits ~1100 reference positions; H = 1000 is below the first seed's count,
    # so every round reads position -1 (0 hits), the limit never moves: still one chunk
    assert engine([("r", ref)], [("q", qry)], max_hits=1000, **opts) == whole
    # H = 2000 closes a chunk after each window's ~1100 hits: every chunk re-finds the same
    # diagonals and nothing is deduplicated across chunks
    split = engine([("r", ref)], [("q", qry)], max_hits=2000, **opts)
    assert list(split) == list(whole) == ["tmp1.block0.r0.plus.segments"]
    assert len(lines_of(whole)) > 500
    assert len(lines_of(split)) > 10 * len(lines_of(whole))
    assert set(lines_of(split)) == set(lines_of(whole))


def test_n_run_stops_extension_at_minus_1000(engine, rng):
    seq = dna(rng, 1000)
    qry = seq[:400] + b"N" * 50 + seq[450:]
    files = engine([("r", seq)], [("q", qry)])
    # N scores -1000 against everything: drop 1000 > 910 at the first N from either side
    assert files == {
        "tmp1.block0.r0.plus.segments": line(
            "r", 1, 400, "q", 1, 400, "+", pair_score(seq[:400], seq[:400])
        )
        + line("r", 451, 1000, "q", 451, 1000, "+", pair_score(seq[450:], seq[450:]))
    }


@pytest.mark.parametrize(
    ("ambiguous", "n_vs_base", "n_vs_n", "x_vs_base"),
    [("n", 0, 0, -100), ("iupac", 0, 0, 0), ("iupac,10,30", -30, 10, -30)],
)
def test_ambiguous_scores_n_and_iupac_codes(engine, rng, ambiguous, n_vs_base, n_vs_n, x_vs_base):
    seq = dna(rng, 1000)
    ref = seq[:410] + b"N" + seq[411:]
    qry = seq[:400] + b"N" * 20 + seq[420:700] + b"R" + seq[701:]
    files = engine([("r", ref)], [("q", qry)], ambiguous=ambiguous)
    # 19 N/base + 1 N/N + 1 R(X)/base, at most 19*30 + 30 = 600 below the running max (< 910),
    # so one segment spans everything; the rest are plain matches
    plain = seq[:400] + seq[420:700] + seq[701:]
    score = pair_score(plain, plain) + 19 * n_vs_base + n_vs_n + x_vs_base
    assert files == {"tmp1.block0.r0.plus.segments": line("r", 1, 1000, "q", 1, 1000, "+", score)}


@pytest.mark.parametrize(
    ("ambiguous", "pieces"),
    [
        (None, [(0, 300, 0), (303, 600, 0), (601, 1000, 0)]),  # N/L and X/L are -1000: two cuts
        ("n", [(0, 600, 0), (601, 1000, 0)]),  # N/L = 0; X/L still -1000
        ("iupac,10,30", [(0, 1000, -4 * 30)]),  # N/L and X/L = -30: bridged
    ],
)
def test_ambiguous_codes_against_lowercase_use_the_ambiguity_penalty(
    engine, rng, ambiguous, pieces
):
    seq = dna(rng, 1000)
    ref = seq[:300] + seq[300:303].lower() + seq[303:600] + seq[600:601].lower() + seq[601:]
    qry = seq[:300] + b"NNN" + seq[303:600] + b"R" + seq[601:]
    files = engine([("r", ref)], [("q", qry)], ambiguous=ambiguous)
    plain = [i for i in range(1000) if not 300 <= i < 303 and i != 600]
    expected = b"".join(
        line(
            "r",
            a + 1,
            b,
            "q",
            a + 1,
            b,
            "+",
            extra + sum(HOXD70[CODE[seq[i]]][CODE[seq[i]]] for i in plain if a <= i < b),
        )
        for a, b, extra in pieces
    )
    assert files == {"tmp1.block0.r0.plus.segments": expected}


def test_diverged_middle_trips_xdrop_and_a_large_xdrop_bridges_it(engine, rng):
    seq = dna(rng, 1500)
    qry = seq[:500] + dna(rng, 100) + seq[600:]
    files = engine([("r", seq)], [("q", qry)])
    rows = [coords(ln) for ln in files["tmp1.block0.r0.plus.segments"].splitlines()]
    # random bases average about -43 each under HOXD70: 100 of them drop far more than 910
    assert len(rows) == 2
    (r1, r1e, q1, q1e), (r2, r2e, q2, q2e) = rows
    assert (r1, q1, r2 - q2, r1e - q1e) == (1, 1, 0, 0) and r1e <= 600
    assert (r2e, q2e) == (1500, 1500) and r2 > 500
    # with x-drop 10000 the ~-4300 dip is bridged and both ends are reached
    bridged = engine([("r", seq)], [("q", qry)], xdrop=10000)
    assert bridged == {
        "tmp1.block0.r0.plus.segments": line("r", 1, 1500, "q", 1, 1500, "+", pair_score(seq, qry))
    }


def test_several_records_per_file_with_reverse_complemented_ones(engine, rng):
    r1, r2, r3 = (dna(rng, 600) for _ in range(3))
    q3 = r1[:300] + r1[300:301].translate(TRANSITION) + r1[301:]
    qry = [("q1", r2), ("q2", revcomp(r3)), ("q3", q3), ("q4", revcomp(r2[:300]))]
    files = engine([("r1", r1), ("r2", r2), ("r3", r3)], qry)
    # plus: ordered by query offset in the bin (q1 before q3)
    plus = line("r2", 1, 600, "q1", 1, 600, "+", pair_score(r2, r2)) + line(
        "r1", 1, 600, "q3", 1, 600, "+", pair_score(r1, q3)
    )
    # minus buffer = rc(q4) & rc(q3) & rc(q2) & rc(q1): r2[:300] sorts before r3; the file is
    # written reversed; coordinates are on each record's reverse complement
    minus = line("r3", 1, 600, "q2", 1, 600, "-", pair_score(r3, r3)) + line(
        "r2", 1, 300, "q4", 1, 300, "-", pair_score(r2[:300], r2[:300])
    )
    assert files == {"tmp1.block0.r0.plus.segments": plus, "tmp1.block0.r0.minus.segments": minus}


@pytest.mark.parametrize("masked", ["query", "reference", "both"])
@pytest.mark.parametrize("run", [100, 3])
def test_soft_masked_bases_neither_seed_nor_extend(engine, rng, masked, run):
    """Lowercase scores -1000 against anything (even itself): extension stops at the mask, a
    run of 100 bases or of 3 (which a mask scored as a mismatch, -100 or so, would bridge at
    x-drop 910 into one HSP)."""
    seq = dna(rng, 1000)
    soft = seq[:300] + seq[300 : 300 + run].lower() + seq[300 + run :]
    ref = soft if masked in ("reference", "both") else seq
    qry = soft if masked in ("query", "both") else seq
    files = engine([("r", ref)], [("q", qry)])
    after = 300 + run
    assert files == {
        "tmp1.block0.r0.plus.segments": line(
            "r", 1, 300, "q", 1, 300, "+", pair_score(seq[:300], seq[:300])
        )
        + line(
            "r", after + 1, 1000, "q", after + 1, 1000, "+", pair_score(seq[after:], seq[after:])
        )
    }


def test_dedup_compares_with_the_previous_sorted_hsp_not_the_last_kept(engine, rng):
    a, b, c = dna(rng, 60), dna(rng, 18) + b"A", dna(rng, 60)
    mid = a + dna(rng, 2) + b + dna(rng, 3) + c
    ref = dna(rng, 50) + mid + dna(rng, 50)
    qry = a + b"NN" + b + b"NNN" + c
    files = engine([("r", ref)], [("q", qry)], xdrop=3000, hspthresh=1000)
    # one diagonal: A (>2000) NN (-2000) B (19 bp, < 2000) NNN (-3000) C (>3000), x-drop 3000.
    # anchors in A: right drops 2000 - B + 3000 > 3000 -> [A]
    # anchors in B: both dips pass, A and C repay them -> [A..C]
    # anchors in C: left drops 3000 - B + 2000 > 3000 -> [C]
    # sorted: [A], [A..C] (contains [A]: dropped), [C] (inside its predecessor [A..C]: dropped,
    # although nothing kept contains it)
    assert files == {
        "tmp1.block0.r0.plus.segments": line("r", 51, 110, "q", 1, 60, "+", pair_score(a, a))
    }


def test_scoring_file_plus100_minus50(engine, rng, tmp_path):
    matrix = tmp_path / "score.txt"
    matrix.write_text(
        "# +100/-50\nfill_score = -50\n   A    C    G    T\n"
        "A  100  -50  -50  -50\nC  -50  100  -50  -50\n"
        "G  -50  -50  100  -50\nT  -50  -50  -50  100\n"
    )
    seq = dna(rng, 800)
    qry = bytearray(seq)
    for i in (200, 400, 600):
        qry[i] = seq[i : i + 1].translate(TRANSITION)[0]
    files = engine([("r", seq)], [("q", bytes(qry))], scoring=str(matrix))
    # 797 matches * 100 + 3 mismatches * -50
    assert files == {"tmp1.block0.r0.plus.segments": line("r", 1, 800, "q", 1, 800, "+", 79550)}


def test_scoring_file_rows_without_labels_take_the_columns_in_order(engine, rng, tmp_path):
    matrix = tmp_path / "score.txt"
    matrix.write_text(
        "  T   A   C   G\n-50 -50 -50 -50\n-50 100 -50 -50\n-50 -50 100 -50\n-50 -50 -50 100\n"
    )
    seq = bytearray(dna(rng, 800, b"ACG"))
    for i in (100, 250, 400, 550, 700):
        seq[i] = ord("T")
    seq = bytes(seq)
    files = engine([("r", seq)], [("q", seq)], scoring=str(matrix))
    # the first row is T's (T/T scores -50), as LASTZ reads blastz files: 795 * 100 + 5 * -50
    assert files == {"tmp1.block0.r0.plus.segments": line("r", 1, 800, "q", 1, 800, "+", 79250)}


@pytest.mark.parametrize(
    ("step", "p", "found"),
    [(1, 0, False), (1, 1, True), (3, 1, True), (3, 2, False), (3, 3, False), (3, 4, True)],
)
def test_reference_table_indexes_start_offset_plus_multiples_of_step(engine, rng, step, p, found):
    ref = dna(rng, 300)
    qry = planted(ref, p, 19, 100, 40, rng)
    files = engine([("r", ref)], [("q", qry)], step=step, hspthresh=1000)
    # one 19-bp window is shared; at step 1 the table holds 1, 2, ... (never 0); at step 3,
    # offset = 20 % 3 = 2, start_offset = 1: positions 1, 4, 7, ...
    # the 19 bp score about 1800, and fewer than 20 matches leave entropy at 1
    score = pair_score(ref[p : p + 19], ref[p : p + 19])
    expected = line("r", p + 1, p + 19, "q", 41, 59, "+", score)
    assert files.get("tmp1.block0.r0.plus.segments") == (expected if found else None)


def test_step_3_still_finds_identical_sequences(engine, rng):
    seq = dna(rng, 900)
    files = engine([("r", seq)], [("q", seq)], step=3)
    assert files == {
        "tmp1.block0.r0.plus.segments": line("r", 1, 900, "q", 1, 900, "+", pair_score(seq, seq))
    }


def test_notransition_loses_a_match_seeded_only_through_transitions(engine, rng):
    seq = dna(rng, 1000)
    qry = bytearray(seq)
    for i in range(2, 1000, 6):
        qry[i] = seq[i : i + 1].translate(TRANSITION)[0]
    qry = bytes(qry)
    # a transition every 6 bases puts one at a care position of every 12of19 window (care
    # offsets 0,1,2,4,7,8,11,13,15,16,17,18 meet every residue mod 6), so no exact seed exists;
    # windows whose transitions fall on offsets 3, 9, 15 carry exactly one care transition
    with_transitions = engine([("r", seq)], [("q", qry)])
    assert with_transitions == {
        "tmp1.block0.r0.plus.segments": line("r", 1, 1000, "q", 1, 1000, "+", pair_score(seq, qry))
    }
    assert engine([("r", seq)], [("q", qry)], notransition=True) == {}


def test_custom_seed_pattern_finds_a_15bp_match_that_12of19_cannot(engine, rng):
    ref = dna(rng, 400)
    qry = planted(ref, 150, 15, 120, 50, rng)
    # any 19-window around a 15-bp match has a flank transversion at care offset 0 or 18
    assert engine([("r", ref)], [("q", qry)], hspthresh=1000) == {}
    files = engine([("r", ref)], [("q", qry)], hspthresh=1000, seed="1110110111")
    score = pair_score(ref[150:165], ref[150:165])
    assert files == {"tmp1.block0.r0.plus.segments": line("r", 151, 165, "q", 51, 65, "+", score)}


def test_small_chunks_and_intervals_repeat_the_hsp_once_per_wga_chunk(engine, rng):
    seq = dna(rng, 1000)
    files = engine([("r", seq)], [("q", seq)], lastz_interval_size=300, wga_chunk_size=70)
    # end_pos = 981: intervals (0,300) (300,600) (600,900) (900,981) -> tmp1..tmp4; chunks of 70
    # per interval: 5, 5, 5 and 2 ([900,970) [970,982)); each chunk alone re-finds diagonal 0
    full = line("r", 1, 1000, "q", 1, 1000, "+", pair_score(seq, seq))
    assert files == {
        f"tmp{n}.block0.r0.plus.segments": full * k for n, k in ((1, 5), (2, 5), (3, 5), (4, 2))
    }


def test_a_window_on_an_interval_boundary_is_seeded_by_both_intervals(engine, rng):
    ref = dna(rng, 300)
    qry = planted(ref, 100, 19, 100, 40, rng)
    files = engine([("r", ref)], [("q", qry)], hspthresh=1000, lastz_interval_size=40)
    # end_pos = 81: intervals (0,40) (40,80) (80,81), ends inclusive: window 40 is in tmp1 and tmp2
    expected = line("r", 101, 119, "q", 41, 59, "+", pair_score(ref[100:119], ref[100:119]))
    assert files == {
        "tmp1.block0.r0.plus.segments": expected,
        "tmp2.block0.r0.plus.segments": expected,
    }


@pytest.mark.parametrize(
    ("chunk", "seeded"), [(27, False), (81, False), (80, True), (250000, True)]
)
def test_last_window_is_never_seeded_when_the_chunk_size_divides_the_interval(
    engine, rng, chunk, seeded
):
    ref = dna(rng, 300)
    qry = planted(ref, 100, 19, 100, 81, rng)
    files = engine([("r", ref)], [("q", qry)], hspthresh=1000, wga_chunk_size=chunk)
    # the only shared window is the last one (81 = end_pos); chunks [i, min(i+C, 82)) for i < 81
    # reach it only when C does not divide 81
    expected = line("r", 101, 119, "q", 82, 100, "+", pair_score(ref[100:119], ref[100:119]))
    assert files == ({"tmp1.block0.r0.plus.segments": expected} if seeded else {})


def test_minus_strand_interval_maps_to_qbl_minus_end_to_qbl_minus_start(engine, rng):
    ref = dna(rng, 300)
    qry = revcomp(planted(ref, 100, 19, 100, 40, rng))
    files = engine(
        [("r", ref)], [("q", qry)], hspthresh=1000, lastz_interval_size=40, strand="minus"
    )
    # plus intervals (0,40) (40,80) (80,81) map to (41,81) (1,41) (0,1) on the reverse complement;
    # the shared window sits at 40 there, so only interval 2 seeds it
    expected = line("r", 101, 119, "q", 41, 59, "-", pair_score(ref[100:119], ref[100:119]))
    assert files == {"tmp2.block0.r0.minus.segments": expected}


def test_strand_flag_selects_plus_or_minus_files(engine, rng):
    ref = dna(rng, 1500)
    qry = [("q1", ref[100:700]), ("q2", revcomp(ref[800:1400]))]
    both = engine([("r", ref)], qry)
    assert sorted(both) == ["tmp1.block0.r0.minus.segments", "tmp1.block0.r0.plus.segments"]
    plus = engine([("r", ref)], qry, strand="plus")
    minus = engine([("r", ref)], qry, strand="minus")
    assert plus == {k: v for k, v in both.items() if ".plus." in k}
    assert minus == {k: v for k, v in both.items() if ".minus." in k}
    assert minus["tmp1.block0.r0.minus.segments"] == line(
        "r", 801, 1400, "q2", 1, 600, "-", pair_score(ref[800:1400], ref[800:1400])
    )


@pytest.mark.parametrize(
    ("kegalign", "query_block", "where"),
    [
        # balanced, 1400 bp / 600 -> 3 bins: longest first into the lightest bin, bins by first
        # record
        # ref [r0] [r1 r3] [r2]; query [q0 q2] [q1] [q3]
        (
            False,
            None,
            {"tmp1.block0.r1": ["r3", "r1"], "tmp1.block1.r2": ["r2"], "tmp1.block2.r0": ["r0"]},
        ),
        # KegAlign: close once the total exceeds 600: ref [r0 r1] [r2 r3]; query [q0 q1 q2] [q3]
        (
            True,
            None,
            {"tmp1.block0.r0": ["r1"], "tmp1.block0.r1": ["r3", "r2"], "tmp1.block1.r0": ["r0"]},
        ),
        # one query bin: [q0 q1 q2 q3]
        (
            False,
            100000,
            {"tmp1.block0.r0": ["r0"], "tmp1.block0.r1": ["r3", "r1"], "tmp1.block0.r2": ["r2"]},
        ),
    ],
)
def test_bins_decide_file_names(engine, rng, kegalign, query_block, where):
    refs = [(f"r{i}", dna(rng, n)) for i, n in enumerate((500, 300, 400, 200))]
    qry = [(f"q{i}", seq) for i, (_, seq) in enumerate(refs[::-1])]
    files = engine(
        refs, qry, seq_block_size=600, query_block_size=query_block, kegalign_bins=kegalign
    )
    assert {
        name.removesuffix(".plus.segments"): [
            ln.split(b"\t")[0].decode() for ln in data.splitlines()
        ]
        for name, data in files.items()
    } == where


def test_entropy_rescales_or_drops_a_low_complexity_hsp(engine, rng):
    ref = dna(rng, 150) + dna(rng, 60, b"AT") + dna(rng, 150)
    qry = planted(ref, 150, 60, 200, 70, rng)
    region = ref[150:210]
    total = 60 * 91
    counts = [region.count(b) for b in b"AT"]
    ent = -sum(c / 60 * math.log(c / 60) for c in counts) / LN4  # about 0.5
    # total 5460 lies in [K, 3K] for K = 2500 and 3000; the entropy gate scales it by ent
    hsp = line("r", 151, 210, "q", 71, 130, "+", total)
    assert hsp in lines_of(engine([("r", ref)], [("q", qry)], hspthresh=3000, noentropy=True))
    kept = lines_of(engine([("r", ref)], [("q", qry)], hspthresh=2500))
    assert line("r", 151, 210, "q", 71, 130, "+", int(total * ent)) in kept
    dropped = lines_of(engine([("r", ref)], [("q", qry)], hspthresh=3000))
    assert not [ln for ln in dropped if ln.startswith(b"r\t151\t210\t")]


@pytest.mark.parametrize(("length", "kept"), [(19, True), (20, False)])
def test_entropy_needs_20_exact_matches(engine, rng, length, kept):
    ref = dna(rng, 150) + dna(rng, length, b"AT") + dna(rng, 150)
    qry = planted(ref, 150, length, 120, 50, rng)
    files = engine([("r", ref)], [("q", qry)], hspthresh=1000)
    # total = 91 * length in [1000, 3000]; 19 matches leave ent = 1, 20 apply ent ~0.5 < 1000/1820
    expected = line("r", 151, 150 + length, "q", 51, 50 + length, "+", 91 * length)
    assert (expected in lines_of(files)) is kept
    assert (files == {}) is not kept


# ---------------------------------------------------------------- randomized


def random_records(rng) -> tuple[list, list]:
    unit = dna(rng, int(rng.integers(1, 8)))
    refs = []
    for i in range(int(rng.integers(1, 4))):
        seq = dna(rng, int(rng.integers(300, 1200)))
        if rng.random() < 0.4:
            k = int(rng.integers(0, len(seq)))
            seq = seq[:k] + unit * int(rng.integers(20, 120)) + seq[k:]
        refs.append((f"ref{i}", seq))
    qry = []
    for i in range(int(rng.integers(1, 4))):
        _, src = refs[int(rng.integers(0, len(refs)))]
        a = int(rng.integers(0, len(src) // 2))
        piece = evolve(rng, src[a : a + int(rng.integers(200, 1000))])
        piece = revcomp(piece) if rng.random() < 0.35 else piece
        qry.append((f"qry{i}", dna(rng, int(rng.integers(0, 60))) + piece))
    return refs, qry


def random_options(rng) -> dict:
    def maybe(p, value):
        return value if rng.random() < p else None

    opts = dict(
        strand=rng.choice(["both", "both", "plus", "minus"]),
        seed=rng.choice(["12of19", "12of19", "1110110111", "TT0T1T01TT01T"]),
        step=int(rng.choice([1, 1, 2, 3])),
        notransition=bool(rng.random() < 0.3),
        xdrop=int(rng.choice([910, 910, 400, 2000])),
        hspthresh=int(rng.choice([800, 1500, 3000])),
        noentropy=bool(rng.random() < 0.3),
        ambiguous=rng.choice([None, None, "n", "iupac", "iupac,5,40"]),
        wga_chunk_size=maybe(0.4, int(rng.integers(40, 600))),
        lastz_interval_size=maybe(0.4, int(rng.integers(150, 1500))),
        seq_block_size=maybe(0.4, int(rng.integers(300, 1500))),
        query_block_size=maybe(0.3, int(rng.integers(300, 1500))),
        max_hits=maybe(0.4, int(rng.integers(5, 300))),
        kegalign_bins=bool(rng.random() < 0.3),
        target_prefix=maybe(0.2, "T."),
        query_prefix=maybe(0.2, "Q."),
    )
    return {
        k: (str(v) if isinstance(v, np.str_) else v)
        for k, v in opts.items()
        if v is not None and v != getattr(Options(), k)
    }


@pytest.mark.parametrize("case", range(30))
def test_random_related_pairs_match_the_oracle_byte_for_byte(engine, case):
    rng = np.random.default_rng(1000 + case)
    refs, qry = random_records(rng)
    engine(refs, qry, **random_options(rng))
