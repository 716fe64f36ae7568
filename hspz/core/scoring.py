"""Scoring: the 8-symbol substitution matrix, LASTZ score-set files and `--ambiguous`.

Symbols (see `sequence.score_codes`): A C G T = 0..3, lowercase = L (4), N/n = N (5), any other
byte = X (6), the record separator `&` = E (7).  This module is the one source of the matrix that
both backends use.
"""

from __future__ import annotations

import functools
import os
import stat
from pathlib import Path

import numpy as np

from hspz.core.errors import InputError, UsageError
from hspz.core.options import INT32_MAX, SCORE_MAX, XDROP_MAX, shown

A, C, G, T, L, N, X, E = range(8)
HOXD70 = np.array(
    [[91, -114, -31, -123], [-114, 100, -125, -31], [-31, -125, 100, -114], [-123, -31, -114, 91]],
    dtype=np.int32,
)


def build_matrix(xdrop: int, acgt: np.ndarray = HOXD70, ambiguous: str | None = None) -> np.ndarray:
    """The 8x8 int32 matrix of docs/algorithm.md ("Scoring") for this x-drop, ACGT block and
    ambiguity mode."""
    m = np.full((8, 8), -1000, dtype=np.int32)
    m[:4, :4] = acgt
    m[X, :4] = m[:4, X] = -100
    m[X, X] = -100
    if ambiguous is not None:
        mode, reward, penalty = _ambiguity(ambiguous)
        m[N, [A, C, G, T, L]] = m[[A, C, G, T, L], N] = penalty
        m[N, N] = reward
        if mode == "iupac":
            m[X, :7] = m[:7, X] = penalty
            m[X, X] = reward
    m[E, :] = m[:, E] = -10 * xdrop
    return m


def _ambiguity(text: str) -> tuple[str, int, int]:
    parts = text.split(",")
    if len(parts) == 3:
        return parts[0], int(parts[1]), -int(parts[2])
    return parts[0], 0, 0


# LASTZ's score-set settings (dna_utilities.c, read_score_set): each name by its aliases.
_SETTINGS = {
    "bad_score": ("bad", "bad_score"),
    "fill_score": ("fill", "fill_score"),
    "gap_open_penalty": ("O", "open", "gap_open", "gap_open_penalty"),
    "gap_extend_penalty": ("E", "extend", "gap_extend", "gap_extend_penalty"),
    "gapped_threshold": ("L", "gapped_thresh", "gapped_threshold"),
    "y_drop": ("Y", "y_drop"),
    "hsp_threshold": ("K", "hsp_thresh", "hsp_threshold"),
    "x_drop": ("X", "x_drop"),
    "step": ("Z", "step"),
    "seed": ("T", "seed"),
    "ball": ("ball",),
    "bottleneck": ("bottleneck",),
}
_ALIAS = {alias: key for key, aliases in _SETTINGS.items() for alias in aliases}
# Settings LASTZ applies to the HSP stage: hspZ takes them from flags only, so a file holding
# one would give other HSPs than LASTZ gives with it; refused, naming the flag.
_HSP_SETTINGS = {
    "hsp_threshold": "--hspthresh",
    "x_drop": "--xdrop",
    "step": "--step",
    "seed": "--seed",
    "ball": None,
    "bottleneck": None,
}
# Row and column alphabets LASTZ takes for DNA (is_dna_alphabet); lowercase rows and columns
# copy the uppercase ones, N's are replaced by hspZ's own N rules (§3).
_DNA_ALPHABETS = ({*"ACGT"}, {*"ACGTN"}, {*"ACGTacgt"}, {*"ACGTacgtN"})
_HEX = "0123456789abcdefABCDEF"


def read_score_file(path: str | Path) -> np.ndarray:
    """The 4x4 ACGT block of a LASTZ score-set file, validated as LASTZ validates it.

    Settings (`name = value`) come first: the names LASTZ knows, each once, integer values
    (`bad_score` may be `[row:[col:]]score`); those that change the HSP stage (hsp_thresh,
    x_drop, step, seed, ball, bottleneck) are refused, the rest (gap penalties) checked and
    unused.  Then a header of column labels (one character or two hex digits each, no
    repeats), then rows of integer scores, each led by its label or none (then rows take the
    columns' labels in order).  Rows and columns must be a DNA alphabet (A C G T, optionally N
    and a c g t) and every entry within +-SCORE_MAX.  LASTZ reads floats; hspZ refuses them.
    """
    lines = _content_lines(path)
    settings, at = _read_settings(path, lines)
    if at == len(lines):
        raise InputError(f"--scoring: {path} has no score matrix (no column labels)")
    number, header = lines[at]
    cols = [_label(path, number, cell, "column") for cell in header.split()]
    _no_repeats(path, number, cols, "column")
    rows, scores = _read_rows(path, lines[at + 1 :], cols)
    _check_alphabets(path, number, rows, cols)
    _check_bad_labels(path, settings, rows, cols)
    return np.array([[scores[r][c] for c in "ACGT"] for r in "ACGT"], dtype=np.int32)


def _content_lines(path: str | Path) -> list[tuple[int, str]]:
    """(line number, text) of every line that holds more than a comment."""
    text = score_text(path)
    lines = [(n, raw.split("#", 1)[0].strip()) for n, raw in enumerate(text.splitlines(), 1)]
    return [(n, line) for n, line in lines if line]


def score_text(path: str | Path) -> str:
    """A score file's text, read once a process while the file stays the same: a pipe
    (`--scoring <(...)`) gives its bytes once, and a run reads its scores several times (the
    flags' check, the plan, the engine); the second read of a pipe waited forever for a writer.
    A regular file is read again once its inode, size or modification time differ, a pipe once
    it is another pipe."""
    try:
        info = os.stat(path)
        same: tuple[int, ...] = (info.st_dev, info.st_ino)  # `<(...)`: a new pipe each time
        if stat.S_ISREG(info.st_mode):
            same += (info.st_size, info.st_mtime_ns)
        return _read_text(str(path), same)
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"--scoring: cannot read {path}: {exc}") from None


@functools.lru_cache(maxsize=8)
def _read_text(path: str, same: tuple[int, ...]) -> str:
    return Path(path).read_text()


def _read_settings(path: str | Path, lines: list) -> tuple[dict, int]:
    """The leading `name = value` lines as {key: (line number, value)}, and where the matrix
    starts."""
    settings: dict[str, tuple[int, str]] = {}
    at = 0
    while at < len(lines) and "=" in lines[at][1]:
        number, line = lines[at]
        name, value = (part.strip() for part in line.split("=", 1))
        key = _ALIAS.get(name)
        where = f"--scoring: {path} line {number}"
        if key is None or key in settings:
            why = "a second" if key else "an unknown"
            raise InputError(f"{where}: {why} setting {shown(name)} (LASTZ refuses it too)")
        if key in _HSP_SETTINGS:
            flag = _HSP_SETTINGS[key]
            instead = f"give {flag} instead" if flag else "hspZ has no such setting"
            raise InputError(f"{where}: sets {name}, which LASTZ applies to the HSPs; {instead}")
        settings[key] = (number, value)
        _setting_value(path, number, key, value)
        at += 1
    _check_gaps(path, settings)
    return settings, at


def _setting_value(path: str | Path, number: int, key: str, value: str) -> int:
    """A setting's integer (bad_score's after its optional `row:col:` labels), within int32,
    LASTZ's score type."""
    text = value.split(":")[-1] if key == "bad_score" else value
    return _integer(path, number, text, f"{key} {shown(value)}", INT32_MAX)


def _integer(path: str | Path, number: int, text: str, what: str, bound: int) -> int:
    """`text` as an integer within +-bound (ASCII digits, optional sign; no float)."""
    stripped = text.strip()
    if not _is_integer(stripped):
        raise InputError(f"--scoring: {path} line {number}: {what} is not an integer")
    value = int(stripped) if len(stripped) <= 20 else bound + 1
    if abs(value) > bound:
        raise InputError(f"--scoring: {path} line {number}: {what} is outside +-{bound}")
    return value


def _is_integer(text: str) -> bool:
    digits = text[1:] if text[:1] in "+-" else text
    return digits.isascii() and digits.isdigit()


def _check_gaps(path: str | Path, settings: dict) -> None:
    """LASTZ's gap checks: extend >= 0, open + extend > 0 (open may be negative)."""

    def value(key: str, default: int) -> int:
        return (
            _setting_value(path, settings[key][0], key, settings[key][1])
            if key in settings
            else default
        )

    open_, extend = value("gap_open_penalty", 400), value("gap_extend_penalty", 30)
    if "gap_extend_penalty" in settings and extend < 0:
        raise InputError(f"--scoring: {path}: gap_extend_penalty {extend} is negative")
    if "gap_open_penalty" in settings and open_ + extend <= 0:
        raise InputError(
            f"--scoring: {path}: gap_open_penalty {open_} plus gap_extend_penalty "
            f"{extend} is not positive"
        )


def _label(path: str | Path, number: int, cell: str, kind: str) -> str:
    """A label: one character, or two hex digits naming one (00 only for bad_score)."""
    if len(cell) == 2 and cell[0] in _HEX and cell[1] in _HEX:
        code = int(cell, 16)
        if code or kind == "bad_score":
            return chr(code)
    elif len(cell) == 1:
        return cell
    hint = " (no header of column labels?)" if kind == "column" else ""
    raise InputError(
        f"--scoring: {path} line {number}: {shown(cell)} is not a {kind} label "
        f"(one character, or two hex digits){hint}"
    )


def _no_repeats(path: str | Path, number: int, labels: list[str], kind: str) -> None:
    seen = set()
    for label in labels:
        if label in seen:
            raise InputError(
                f"--scoring: {path} line {number}: {kind} {shown(label)} appears twice"
            )
        seen.add(label)


def _read_rows(path: str | Path, lines: list, cols: list[str]) -> tuple[list[str], dict]:
    """Row labels in order and {row: {column: score}}.  The first row decides whether rows are
    labelled (one field more than the header) or not (as many fields: labels taken from the
    columns in order, LASTZ's reading of blastz files)."""
    if not lines:
        raise InputError(f"--scoring: {path} has column labels but no score rows")
    width = len(lines[0][1].split())
    if width not in (len(cols), len(cols) + 1):
        raise InputError(
            f"--scoring: {path} line {lines[0][0]}: {width} fields; a row has "
            f"{len(cols) + 1} (its label, then one score per column) or "
            f"{len(cols)}"
        )
    labelled = width == len(cols) + 1
    rows, scores = [], {}
    for i, (number, line) in enumerate(lines):
        cells = line.split()
        if len(cells) != width:
            raise InputError(
                f"--scoring: {path} line {number}: {len(cells)} fields where the "
                f"first row has {width}"
            )
        if not labelled and i >= len(cols):
            raise InputError(f"--scoring: {path} line {number}: more rows than columns")
        row = _label(path, number, cells.pop(0), "row") if labelled else cols[i]
        rows.append(row)
        _no_repeats(path, number, rows, "row")
        scores[row] = {
            c: _integer(path, number, cell, f"score {shown(cell)}", SCORE_MAX)
            for c, cell in zip(cols, cells, strict=True)
        }
    if not labelled and len(rows) < len(cols):
        raise InputError(f"--scoring: {path}: {len(rows)} unlabelled rows for {len(cols)} columns")
    return rows, scores


def _check_alphabets(path: str | Path, number: int, rows: list[str], cols: list[str]) -> None:
    for kind, labels in (("columns", cols), ("rows", rows)):
        if set(labels) not in _DNA_ALPHABETS:
            raise InputError(
                f"--scoring: {path}: the {kind} are {shown(' '.join(labels))}; a DNA score set "
                "has A, C, G, T (and optionally N, and a c g t)"
            )


def _check_bad_labels(path: str | Path, settings: dict, rows: list[str], cols: list[str]) -> None:
    """bad_score's labels (`row:col:score`, `both:score`) cannot be matrix labels too."""
    if "bad_score" not in settings:
        return
    number, value = settings["bad_score"]
    parts = value.split(":")[:-1]
    if len(parts) > 2:
        raise InputError(
            f"--scoring: {path} line {number}: bad_score {shown(value)} has more than two labels"
        )
    labels = [_label(path, number, part, "bad_score") for part in parts]
    col, row = (labels + labels)[:2] if labels else (None, None)
    if col in cols or row in rows:
        raise InputError(
            f"--scoring: {path} line {number}: bad_score's label is also a matrix label"
        )


def resolve_matrix(xdrop: int, scoring: str | None, ambiguous: str | None) -> np.ndarray:
    """The matrix a run uses, from its options."""
    if not 0 < xdrop <= XDROP_MAX:
        raise UsageError(f"--xdrop must be from 1 to {XDROP_MAX}")
    acgt = HOXD70 if scoring is None else read_score_file(scoring)
    return build_matrix(xdrop, acgt, ambiguous)
