"""What a projection charges for a work unit (`hspZ hits-estimate --ns-per-hit`), and the
features a least-squares fit of a run's unit ledger uses (benchmarks/projection_fit.py).

A unit's projected wall, in ms, is linear in six features of the unit and its place in its
worker's execution order:

    unit_ms                        every unit (launch and host overheads)
    + worker_ms                    a worker's first unit (first launches, pools, caches)
    + ref_ms_per_mbp * ref Mbp     a unit that starts a reference visit (the bin's build and
                                   upload: the worker's first unit, or a new reference bin)
    + query_ms_per_mbp * query Mbp every unit (its query bin's seed stream, in groups)
    + ns_per_hit * hits / 1e6      every unit (the filter and the walks)
    + ns_per_hit_per_ref_gbp * hits / 1e6 * ref Gbp
                                   every unit (a per-hit cost that grows with the reference
                                   bin: its share of the caches; 0 unless fitted)

The fit and `hits-estimate` share `features` and `Pricing.cost`, so a fitted file prices the
estimate's rows exactly as the fit priced the ledger's.  A pricing file is JSON holding these
names (`to_json`, `read_file`); any left out is 0.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields

import numpy as np

from hspz.core.errors import UsageError

TERMS = (
    "unit_ms",
    "worker_ms",
    "ref_ms_per_mbp",
    "query_ms_per_mbp",
    "ns_per_hit",
    "ns_per_hit_per_ref_gbp",
)
FIVE = TERMS[:5]  # the default fit: the sixth only where several bin sizes are fitted


@dataclass(frozen=True)
class Pricing:
    """The coefficients of the six terms (module docstring)."""

    ns_per_hit: float
    unit_ms: float = 0.0
    worker_ms: float = 0.0
    ref_ms_per_mbp: float = 0.0
    query_ms_per_mbp: float = 0.0
    ns_per_hit_per_ref_gbp: float = 0.0

    def vector(self) -> np.ndarray:
        """The coefficients in `TERMS` order, per feature unit of `features`."""
        return np.array([getattr(self, t) for t in TERMS], np.float64)

    def cost(self, feats: np.ndarray) -> np.ndarray:
        """Projected ms of each row of `features`."""
        return np.asarray(feats, np.float64) @ self.vector()

    def label(self) -> str:
        parts = [f"{self.ns_per_hit:g} ns/hit"]
        for name, unit in (
            ("unit_ms", "ms/unit"),
            ("worker_ms", "ms/worker"),
            ("ref_ms_per_mbp", "ms/ref Mbp a visit"),
            ("query_ms_per_mbp", "ms/query Mbp a unit"),
            ("ns_per_hit_per_ref_gbp", "ns/hit per ref Gbp"),
        ):
            if getattr(self, name):
                parts.append(f"{getattr(self, name):g} {unit}")
        return " + ".join(parts)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1) + "\n"


def features(
    ref_bp: Sequence[int],
    query_bp: Sequence[int],
    hits: Sequence[int],
    ref_bin: Sequence[int],
    order: Sequence[Sequence[int]],
) -> np.ndarray:
    """One row per unit (indexed as the sequences are), columns in `TERMS` order: 1, whether
    it is its worker's first unit, its reference Mbp if it starts a visit, its query Mbp, its
    hits / 1e6 (so that ns_per_hit multiplies to ms), and that times its reference Gbp.
    `order`: each worker's units (row indices) in execution order; a unit starts a visit when
    it is its worker's first or its reference bin differs from the unit before it."""
    n = len(hits)
    out = np.zeros((n, len(TERMS)), np.float64)
    out[:, 0] = 1.0
    out[:, 3] = np.asarray(query_bp, np.float64) / 1e6
    out[:, 4] = np.asarray(hits, np.float64) / 1e6
    out[:, 5] = out[:, 4] * np.asarray(ref_bp, np.float64) / 1e9
    for units in order:
        for k, u in enumerate(units):
            if k == 0:
                out[u, 1] = 1.0
            if k == 0 or ref_bin[units[k - 1]] != ref_bin[u]:
                out[u, 2] = ref_bp[u] / 1e6
    return out


def fit(feats: np.ndarray, measured_ms: np.ndarray, terms: Sequence[str] = FIVE) -> Pricing:
    """Least squares of measured ms on the feature columns named in `terms` (the others 0),
    no coefficient below 0: a term whose coefficient comes out negative is dropped and the rest
    refitted (a negative fixed cost would price a larger bin as cheaper).  Raises ValueError if
    a fitted column is all zero (nothing to fit it on)."""
    a = np.asarray(feats, np.float64)
    y = np.asarray(measured_ms, np.float64)
    cols = [TERMS.index(t) for t in terms]
    if not len(a) or (np.abs(a[:, cols]).sum(axis=0) == 0).any():
        raise ValueError("a fitted term has no nonzero feature in the fitted rows")
    values = dict.fromkeys(TERMS, 0.0)
    while cols:
        scale = np.abs(a[:, cols]).max(axis=0)
        coef = np.linalg.lstsq(a[:, cols] / scale, y, rcond=None)[0] / scale
        if (coef >= 0).all():
            values.update({TERMS[c]: float(x) for c, x in zip(cols, coef, strict=True)})
            break
        cols.pop(int(np.argmin(coef)))
    return Pricing(**values)


def read_file(path: str) -> dict[str, float]:
    """A pricing file's coefficients (a JSON object of `TERMS` names to numbers >= 0); a
    missing, unreadable or malformed file is a UsageError naming --pricing."""
    try:
        with open(path) as fh:
            data = json.load(fh)
    except OSError as exc:
        raise UsageError(f"--pricing {path}: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"--pricing {path}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise UsageError(f"--pricing {path}: not a JSON object of {', '.join(TERMS)}")
    known = {f.name for f in fields(Pricing)}
    out = {}
    for key, value in data.items():
        if key not in known:
            raise UsageError(f"--pricing {path}: unknown term {key!r} (known: {', '.join(TERMS)})")
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or not 0 <= value < 1e9
        ):
            raise UsageError(f"--pricing {path}: {key} must be a number >= 0 and below 1e9")
        out[key] = float(value)
    return out
