"""Scoring: the 8-symbol substitution matrix, LASTZ score-set files and `--ambiguous`.

Symbols (see `sequence.score_codes`): A C G T = 0..3, lowercase = L (4), N/n = N (5), any other
byte = X (6), the record separator `&` = E (7).  This module is the one source of the matrix that
both backends use.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hspz.errors import InputError, UsageError

A, C, G, T, L, N, X, E = range(8)
HOXD70 = np.array(
    [[91, -114, -31, -123], [-114, 100, -125, -31], [-31, -125, 100, -114], [-123, -31, -114, 91]],
    dtype=np.int32,
)


def build_matrix(
    xdrop: int, acgt: np.ndarray = HOXD70, ambiguous: str | None = None
) -> np.ndarray:
    """The 8x8 int32 matrix of behaviour.md §3 for this x-drop, ACGT block and ambiguity mode."""
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


def read_score_file(path: str | Path) -> np.ndarray:
    """The 4x4 ACGT block of a LASTZ score-set file; undefined pairs get `fill_score`.

    Reads `name = value` settings (only `bad_score` and `fill_score` matter here; the others,
    gap penalties for instance, are accepted and ignored) and one matrix with a header row of
    column symbols and one row per row symbol.  Non-integer scores are rejected.
    """
    try:
        lines = Path(path).read_text().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"--scoring: cannot read {path}: {exc}") from None
    settings, rows = {}, []
    for number, raw in enumerate(lines, 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if "=" in line:
            key, value = (s.strip() for s in line.split("=", 1))
            settings[key] = (number, value)
        else:
            rows.append((number, line.split()))
    fill = _setting_int(path, settings, "fill_score", -100)
    if "bad_score" in settings:
        _setting_int(path, settings, "bad_score", 0)
    return _matrix_block(path, rows, fill)


def _setting_int(path, settings: dict, key: str, default: int) -> int:
    if key not in settings:
        return default
    number, value = settings[key]
    text = value.split(":")[-1].strip()  # bad_score may be written `X:-1000`
    try:
        return int(text)
    except ValueError:
        raise InputError(f"--scoring: {path} line {number}: {key} '{value}' is not an integer") from None


def _matrix_block(path, rows: list, fill: int) -> np.ndarray:
    if not rows:
        raise InputError(f"--scoring: {path} has no score matrix")
    header = rows[0][1]
    block = np.full((4, 4), fill, dtype=np.int32)
    for number, cells in rows[1:]:
        if len(cells) != len(header) + 1:
            raise InputError(f"--scoring: {path} line {number}: expected {len(header) + 1} fields")
        r = "ACGT".find(cells[0]) if len(cells[0]) == 1 else -1
        for sym, cell in zip(header, cells[1:], strict=True):
            try:
                value = int(cell)
            except ValueError:
                raise InputError(
                    f"--scoring: {path} line {number}: '{cell}' is not an integer score"
                ) from None
            c = "ACGT".find(sym) if len(sym) == 1 else -1
            if r >= 0 and c >= 0:
                block[r, c] = value
    return block


def resolve_matrix(xdrop: int, scoring: str | None, ambiguous: str | None) -> np.ndarray:
    """The matrix a run uses, from its options."""
    if xdrop <= 0:
        raise UsageError("--xdrop must be positive")
    acgt = HOXD70 if scoring is None else read_score_file(scoring)
    return build_matrix(xdrop, acgt, ambiguous)
