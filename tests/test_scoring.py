"""The substitution matrix and LASTZ score-set files (hspz/core/scoring.py; docs/algorithm.md,
"Scoring").

The expected matrix is written out per symbol pair from the rules of docs/algorithm.md
("Scoring"), one pair at a time.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from helpers import mutate, random_dna, write_fasta
from scorefiles import HOXD70 as FULL

from hspz.core.errors import InputError, UsageError
from hspz.core.scoring import build_matrix, read_score_file, resolve_matrix

SYMBOLS = "ACGTLNXE"
HOXD70 = {
    "A": {"A": 91, "C": -114, "G": -31, "T": -123},
    "C": {"A": -114, "C": 100, "G": -125, "T": -31},
    "G": {"A": -31, "C": -125, "G": 100, "T": -114},
    "T": {"A": -123, "C": -31, "G": -114, "T": 91},
}


def _expected(a: str, b: str, xdrop: int, acgt=HOXD70, ambiguous: str | None = None) -> int:
    """One matrix entry from docs/algorithm.md's rules, applied in order of precedence."""
    mode, reward, penalty = None, 0, 0
    if ambiguous is not None:
        parts = ambiguous.split(",")
        mode = parts[0]
        if len(parts) == 3:
            reward, penalty = int(parts[1]), -int(parts[2])
    pair = {a, b}
    if "E" in pair:
        return -10 * xdrop
    if a in "ACGT" and b in "ACGT":
        return acgt[a][b]
    if "X" in pair and mode == "iupac":
        return reward if a == b == "X" else penalty
    if "N" in pair and mode is not None and pair <= set("ACGTLN"):
        return reward if a == b == "N" else penalty
    if a == b == "X":
        return -100
    if "X" in pair and pair - {"X"} <= set("ACGT"):
        return -100
    return -1000  # L against anything, N without --ambiguous, X vs L/N


@pytest.mark.parametrize("ambiguous", [None, "n", "iupac", "iupac,7,33", "iupac,0,1"])
@pytest.mark.parametrize("xdrop", [910, 1, 37])
def test_every_symbol_pair_follows_the_spec_rules(xdrop, ambiguous):
    m = build_matrix(xdrop, ambiguous=ambiguous)
    assert m.shape == (8, 8) and m.dtype == np.int32
    for (i, a), (j, b) in itertools.product(enumerate(SYMBOLS), repeat=2):
        assert m[i, j] == _expected(a, b, xdrop, ambiguous=ambiguous), (a, b)


def test_spot_values_of_the_default_matrix():
    m = build_matrix(910)
    idx = {s: i for i, s in enumerate(SYMBOLS)}
    assert m[idx["A"], idx["A"]] == 91 and m[idx["C"], idx["G"]] == -125
    assert m[idx["L"], idx["L"]] == -1000 and m[idx["L"], idx["A"]] == -1000
    assert m[idx["N"], idx["N"]] == -1000 and m[idx["N"], idx["A"]] == -1000
    assert m[idx["X"], idx["A"]] == -100 and m[idx["X"], idx["X"]] == -100
    assert m[idx["X"], idx["L"]] == -1000 and m[idx["N"], idx["X"]] == -1000
    assert (m[idx["E"], :] == -9100).all() and (m[:, idx["E"]] == -9100).all()


def test_iupac_scores_n_and_x_with_reward_and_penalty_while_n_mode_leaves_x_alone():
    m = build_matrix(100, ambiguous="iupac,5,9")
    n, x, lo = 5, 6, 4
    assert m[n, n] == 5 and (m[n, :5] == -9).all() and (m[:5, n] == -9).all()
    assert m[x, x] == 5 and (m[x, :6] == -9).all() and (m[:6, x] == -9).all()
    assert m[lo, lo] == -1000
    plain_n = build_matrix(100, ambiguous="n")
    assert plain_n[n, n] == 0 and plain_n[n, 0] == 0 and plain_n[n, x] == -1000
    assert plain_n[x, x] == -100 and plain_n[x, lo] == -1000


def test_a_custom_acgt_block_replaces_only_the_acgt_block():
    acgt = np.arange(16, dtype=np.int32).reshape(4, 4) * 7 - 50
    m = build_matrix(500, acgt=acgt)
    block = {a: {b: int(acgt[i, j]) for j, b in enumerate("ACGT")} for i, a in enumerate("ACGT")}
    for (i, a), (j, b) in itertools.product(enumerate(SYMBOLS), repeat=2):
        assert m[i, j] == _expected(a, b, 500, acgt=block), (a, b)


def test_resolve_matrix_rejects_a_non_positive_xdrop():
    with pytest.raises(UsageError):
        resolve_matrix(0, None, None)


# --------------------------------------------------------------------------------------------
# LASTZ score-set files
# --------------------------------------------------------------------------------------------

LASTZ_FILE = """\
# a LASTZ score set (comments and blank lines are ignored)

bad_score          = X:-1000  # used for sub[X][*] and sub[*][X]
fill_score         = -100
gap_open_penalty   = 400
gap_extend_penalty = 30

     A     C     G     T
A   91  -114   -31  -123
C -114   100  -125   -31
G  -31  -125   100  -114
T -123   -31  -114    91
"""


def _write(tmp_path, text: str, name: str = "scores.txt"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_lastz_score_file_gives_its_acgt_block(tmp_path):
    block = read_score_file(_write(tmp_path, LASTZ_FILE))
    assert block.dtype == np.int32
    assert block.tolist() == [[HOXD70[a][b] for b in "ACGT"] for a in "ACGT"]


def test_columns_and_rows_are_matched_by_symbol_not_by_position(tmp_path):
    text = """\
       T    N    G    C    A
  C   11   -1   12   13   14
  N   -1   -1   -1   -1   -1
  A   21   -1   22   23   24
  T   31   -1   32   33   34
  G   41   -1   42   43   44
"""
    block = read_score_file(_write(tmp_path, text))
    header = "TNGCA"
    rows = {
        "C": [11, -1, 12, 13, 14],
        "A": [21, -1, 22, 23, 24],
        "T": [31, -1, 32, 33, 34],
        "G": [41, -1, 42, 43, 44],
    }
    for i, a in enumerate("ACGT"):
        for j, b in enumerate("ACGT"):
            assert block[i, j] == rows[a][header.index(b)], (a, b)


def test_a_score_file_reaches_the_run_matrix(tmp_path):
    text = (
        "fill_score = -3\n   A   C   G   T\nA  1  2  3  4\nC 5 6 7 8\nG 9 10 11 12\nT 13 14 15 16\n"
    )
    m = resolve_matrix(50, str(_write(tmp_path, text)), None)
    assert m[:4, :4].tolist() == [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12], [13, 14, 15, 16]]
    assert m[7, 0] == -500 and m[4, 0] == -1000


def test_rows_without_labels_take_the_column_labels_in_order_as_lastz_reads_blastz_files(tmp_path):
    text = "   T  G  C  A\n 1  2  3  4\n 5  6  7  8\n 9 10 11 12\n13 14 15 16\n"
    block = read_score_file(_write(tmp_path, text))
    rows = {"T": [1, 2, 3, 4], "G": [5, 6, 7, 8], "C": [9, 10, 11, 12], "A": [13, 14, 15, 16]}
    for i, a in enumerate("ACGT"):
        for j, b in enumerate("ACGT"):
            assert block[i, j] == rows[a]["TGCA".index(b)], (a, b)


def test_labels_may_be_two_hex_digits_as_in_lastz(tmp_path):
    text = "   41 43 47 54\n41 1 2 3 4\n43 5 6 7 8\n47 9 10 11 12\n54 13 14 15 16\n"
    assert read_score_file(_write(tmp_path, text)).tolist() == [
        [1, 2, 3, 4],
        [5, 6, 7, 8],
        [9, 10, 11, 12],
        [13, 14, 15, 16],
    ]


def test_gap_settings_and_a_largest_legal_entry_are_accepted(tmp_path):
    text = (
        "gap_open_penalty = -10\nE = 30\ny_drop = 9400\ngapped_threshold = 3000\n"
        "bad_score = X:-1000\n" + FULL.replace("91  -114", "1000000  -114", 1)
    )
    assert read_score_file(_write(tmp_path, text))[0, 0] == 1_000_000


@pytest.mark.parametrize(
    "text, message",
    [
        (
            FULL.replace("-114   -31  -123", "1.5   -31  -123"),
            r"line 2: score '1\.5' is not an int",
        ),
        (FULL.replace("91\n", "4e1\n"), r"line 5: score '4e1' is not an integer"),
        ("fill_score = -1.5\n" + FULL, r"line 1: fill_score '-1\.5' is not an integer"),
        ("bad_score = X:-2.5\n" + FULL, r"line 1: bad_score 'X:-2\.5' is not an integer"),
        ("# only settings\nfill_score = -5\ngap_open_penalty = 400\n", r"has no score matrix"),
        ("", r"has no score matrix"),
        ("   A   C  G  T\nA 1 2\n", r"line 2: 3 fields; a row has 5 .* or 4"),
        ("   A   C  G  T\n", r"column labels but no score rows"),
    ],
)
def test_malformed_score_files_are_input_errors(tmp_path, text, message):
    with pytest.raises(InputError, match=message):
        read_score_file(_write(tmp_path, text))


def test_an_unreadable_score_file_is_an_input_error_naming_it(tmp_path):
    with pytest.raises(InputError, match=r"--scoring: cannot read .*missing\.txt"):
        read_score_file(tmp_path / "missing.txt")
    with pytest.raises(InputError, match=r"--scoring: cannot read"):
        read_score_file(tmp_path)  # a directory
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"\xff\xfe\x00\x81 A C\n")
    with pytest.raises(InputError, match=r"--scoring: cannot read .*binary\.txt"):
        read_score_file(binary)


def test_the_score_bounds_keep_every_int32_sum_of_the_gpu_capped_walks():
    """options.py's derivation, checked against the caps engine/gpu.py walks with (read from
    its source: CuPy is not needed to know them)."""
    import re
    from pathlib import Path

    from hspz.core import options
    from hspz.io.records import MAX_BIN_BP

    source = (Path(options.__file__).parents[1] / "engine" / "gpu.py").read_text()
    caps = [int(re.search(rf"^{name} = (\d+)", source, re.M).group(1)) for name in ("CAP", "CAP2")]
    assert max(caps) <= options.WALK_CAP
    s, x, top = options.SCORE_MAX, options.XDROP_MAX, options.INT32_MAX
    assert 2 * options.WALK_CAP * s <= top  # mr + ml
    assert 10 * x <= top  # the separator's entry
    assert x + 8 * (s + 10 * x) <= top  # a walk's deepest drawdown, bound_walk's 8-base test
    assert MAX_BIN_BP * s < 2**53  # a maximal HSP: exact in float64, far inside int64
    assert options.MAX_BP == MAX_BIN_BP and options.HSPTHRESH_MAX == top
    assert build_matrix(x).min() == -10 * x  # the largest x-drop still builds an int32 matrix


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_score_file_on_a_pipe_is_read_once_and_the_run_ends(tmp_path):
    """`--scoring <(...)`: a pipe gives its bytes once, and a run reads its scores several
    times (the flags' check, the plan, the engine); the second read waited forever for a
    writer.  The run ends with the same digest as from a regular file of the same text."""
    rng = np.random.default_rng(3)
    ref = random_dna(rng, 20_000)
    qry = mutate(rng, ref[2_000:12_000], 0.05)
    write_fasta(tmp_path / "r.fa", [("r", ref)])
    write_fasta(tmp_path / "q.fa", [("q", qry)])
    (tmp_path / "s.txt").write_text(FULL)
    os.mkfifo(tmp_path / "s.fifo")
    digests = []
    for scores in ("s.txt", "s.fifo"):
        writer = None
        if scores.endswith("fifo"):  # one writer, once, as `<(cat s.txt)` gives
            writer = threading.Thread(target=(tmp_path / scores).write_text, args=(FULL,))
            writer.start()
        done = subprocess.run(
            [sys.executable, "-m", "hspz", "run", "-r", "r.fa", "-q", "q.fa", "-o", scores + ".out"]
            + ["--backend", "cpu", "-t", "2", "--scoring", scores],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if writer is not None:
            writer.join()
        assert done.returncode == 0, done.stderr
        digests.append(done.stdout.split("digest: ")[-1].split()[0])
    assert digests[0] == digests[1]
