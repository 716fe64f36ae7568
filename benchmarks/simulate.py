"""Deterministic, seeded simulator of a related genome pair (reference, query) for benchmarks.

Owns `PairSpec`, `simulate_pair`, `simulate_queries`, `write_pair`, `spec_digest` and the CLI
(`python benchmarks/simulate.py --help`).  Both genomes come from one ancestor:

* ancestor: background with isochore-like GC windows and CpG depletion, plus the interspersed
  repeats older than the split: SINE-like (~300 bp, poly-A tail) and LINE-like (~6 kbp, mostly
  5'-truncated) copies of a few families.  Repeat copies are soft-masked (lowercase) unless the
  simulated masker misses them (`*_unmasked_fraction`, pieces shorter than `mask_min_bp`).
* reference: every ancestral chromosome, evolved a little (`ref_branch` substitutions/site),
  plus its own young repeats (families descended from the old ones), microsatellites, short
  A/T-rich tracts, tandem repeats, segmental duplications and N gaps.
* query: a contiguous (or sampled) portion of the ancestor evolved so that it differs from the
  reference by `divergence` substitutions/site (HKY, transition-biased, ts/tv = `ts_tv`, GC kept
  at `gc_mean`) with small indels; `1 - ancestral_kept` of it is then replaced by sequence the
  reference lacks; then its own repeats, segmental duplications, inversions, translocations and
  N gaps.  Low-complexity repeats are lineage-specific in both genomes, so seed-hit density
  hardly depends on `divergence`.

The reference depends only on the fields outside `QUERY_FIELDS` (and on `query_mbp` only when
it exceeds `ref_mbp`), so queries with other `query_seed`s run against the same reference.

Everything is vectorised numpy on uint8 ASCII arrays (ACGTacgtN); Python loops run once per
chromosome, per chunk of 16 Mbp, per segmental duplication or per rearrangement, never per base
or per repeat copy.

Calibration (benchmarks/hit_density.py): the real hg38 chr20 (64 Mbp) x mm39 4 Mbp run gives
162e6 hits of the 12of19 transition seed, 6.3e-7 per bp² with both strands (hspZ's default).
The defaults give 6.3e-7..7.3e-7 (both strands; half that per strand) at 64 x 4 and 20 x 2 Mbp,
with about half of each genome lowercase.  The share of hits that pass the 3000 score gate
(real: 0.017%) depends on divergence and ancestral_kept: about 0.3% (64 x 4) to 1% (20 x 2) at
the default divergence 0.15, about 0.02% at divergence 0.4 (a rough x-drop estimate,
`hit_density.estimate_gate`; the engine's count is the real one).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

Records = list[tuple[str, np.ndarray]]

SIMULATOR_VERSION = 1  # bump when the same spec would give other bytes (invalidates caches)
LOWER = 0x20
_CHUNK = 1 << 24
_TAIL_MAX = 40  # longest poly-A tail of a SINE/LINE copy

# Query-only fields: changing them never changes the reference (see module docstring).
QUERY_FIELDS = frozenset(
    {"query_mbp", "query_seed", "query_chromosomes", "query_sampling", "ancestral_kept"}
)

_STREAM_LIBRARY, _STREAM_LAYOUT, _STREAM_ANCESTOR, _STREAM_REF, _STREAM_QUERY = range(5)


@dataclass(frozen=True)
class PairSpec:
    """What to simulate.  Sizes in Mbp; rates per site; fractions of the final genome."""

    ref_mbp: float
    query_mbp: float
    chromosomes: int = 4
    divergence: float = 0.15  # substitutions/site between query and reference
    seed: int = 1
    query_seed: int | None = None  # None: `seed`; vary it for other queries of one reference
    query_chromosomes: int | None = None  # None: chromosomes * query/ref, at least 1
    query_sampling: str = "contiguous"  # or "sampled": pieces from all over the ancestor
    query_piece_kbp: float = 500.0  # piece size when sampled
    ancestral_kept: float = 0.5  # share of the query's ancestral portion kept (rest: new)
    ref_branch: float = 0.015  # substitutions/site on the reference branch (<= divergence/2)
    ts_tv: float = 2.0  # transitions per transversion
    indel_ratio: float = 0.1  # small indels per substitution (half insertions, half deletions)
    indel_mean_bp: float = 3.0
    gc_mean: float = 0.41
    gc_sd: float = 0.04  # between isochore windows
    isochore_kbp: float = 300.0  # mean window length
    cpg_depletion: float = 0.75  # share of CpG dinucleotides mutated away in the ancestor
    sine_fraction: float = 0.14
    line_fraction: float = 0.32  # also stands in for LTR and DNA transposons
    simple_fraction: float = 0.025  # microsatellites
    tandem_fraction: float = 0.01
    tract_fraction: float = 0.0035  # short A/T-rich low-complexity tracts, never masked
    shared_repeat_share: float = 0.45  # share of the interspersed repeats older than the split
    families: int = 5  # SINE and LINE families per lineage (and shared)
    shared_repeat_divergence: float = 0.2  # mean copy-vs-consensus divergence, old families
    lineage_repeat_divergence: float = 0.1  # mean copy-vs-consensus divergence, young families
    lineage_family_divergence: float = 0.2  # young consensus vs the old one it descends from
    line_mean_copy_bp: float = 900.0  # mean length of a 5'-truncated LINE copy
    line_full_share: float = 0.08  # share of LINE copies that are full length
    repeat_unmasked_fraction: float = 0.02  # interspersed copies the masker misses
    simple_unmasked_fraction: float = 0.0  # microsatellites >= mask_min_bp the masker misses
    tandem_unmasked_fraction: float = 0.02
    mask_min_bp: int = 25  # repeat pieces shorter than this are never masked
    segdup_fraction: float = 0.03
    segdup_divergence: float = 0.03  # mean; copies drawn in [0.1x, 2x]
    inversions_per_100mbp: float = 30.0  # query only
    translocations_per_100mbp: float = 15.0  # query only
    n_gaps: int = 3  # N gaps per chromosome
    n_gap_kbp: float = 10.0  # median gap length

    def __post_init__(self) -> None:
        if self.ref_mbp <= 0 or self.query_mbp <= 0 or self.chromosomes < 1:
            raise ValueError("ref_mbp and query_mbp must be > 0 and chromosomes >= 1")
        if not 0 <= self.divergence < 0.75:
            raise ValueError("divergence must be in [0, 0.75)")
        if self.query_sampling not in ("contiguous", "sampled"):
            raise ValueError("query_sampling must be 'contiguous' or 'sampled'")
        if not 0 < self.ancestral_kept <= 1:
            raise ValueError("ancestral_kept must be in (0, 1]")
        if _lineage_share(self) + _shared_share(self) + self.segdup_fraction >= 0.9:
            raise ValueError("repeat and segdup fractions leave no room for background")


def _low_complexity(spec: PairSpec) -> float:
    return spec.simple_fraction + spec.tract_fraction + spec.tandem_fraction


def _lineage_share(spec: PairSpec) -> float:
    """Fraction of a final genome inserted on its own branch: young interspersed repeats and
    all low-complexity repeats (they turn over fast, so each genome has its own, at steady
    state whatever the divergence)."""
    interspersed = (spec.sine_fraction + spec.line_fraction) * (1 - spec.shared_repeat_share)
    return interspersed + _low_complexity(spec)


def _surplus(spec: PairSpec) -> float:
    """Build this much more than the target, then trim to the exact size (segmental
    duplications land unevenly on chromosomes, so their share is added)."""
    return 1.03 + spec.segdup_fraction


def _shared_share(spec: PairSpec) -> float:
    """Fraction of a final genome made of repeats inserted before the split."""
    return (spec.sine_fraction + spec.line_fraction) * spec.shared_repeat_share


# ---------------------------------------------------------------------------------------------
# Byte tables and vector helpers
# ---------------------------------------------------------------------------------------------


def _table(pairs: dict[str, str]) -> np.ndarray:
    """256-entry byte map that applies `pairs` to upper and lower case, identity elsewhere."""
    table = np.arange(256, dtype=np.uint8)
    for a, b in pairs.items():
        table[ord(a)] = ord(b)
        table[ord(a.lower())] = ord(b.lower())
    return table


COMPLEMENT = _table({"A": "T", "T": "A", "C": "G", "G": "C"})
TRANSITION = _table({"A": "G", "G": "A", "C": "T", "T": "C"})
_TRANSVERSION_1 = _table({"A": "C", "C": "A", "G": "T", "T": "G"})
_TRANSVERSION_2 = _table({"A": "T", "T": "A", "C": "G", "G": "C"})
_WEAK_STRONG = np.frombuffer(b"ATCG", dtype=np.uint8)  # code 0,1: weak; 2,3: strong


def reverse_complement(seq: np.ndarray) -> np.ndarray:
    """Reverse complement of a byte array (case and N kept)."""
    return COMPLEMENT[seq[::-1]]


def _offsets(lengths: np.ndarray) -> np.ndarray:
    return np.cumsum(lengths) - lengths


def _within(lengths: np.ndarray) -> np.ndarray:
    """For segments of `lengths` laid back to back: each base's index inside its segment."""
    return np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(_offsets(lengths), lengths)


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenation of arange(s, s + n) over (starts, lengths)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    return np.repeat(np.asarray(starts, dtype=np.int64), lengths) + _within(lengths)


def _cut_to_total(lengths: np.ndarray, total: int) -> np.ndarray:
    """The shortest prefix of `lengths` reaching `total`, its last entry shortened to fit."""
    ends = np.cumsum(lengths)
    k = min(int(np.searchsorted(ends, total)) + 1, len(lengths))
    out = lengths[:k].astype(np.int64)
    if k and ends[k - 1] > total:
        out[-1] -= ends[k - 1] - total
    return out[out > 0]


def _insert(seq: np.ndarray, pos: np.ndarray, payload: np.ndarray, lengths: np.ndarray):
    """Insert segment i of `payload` (segments of `lengths`) before seq[pos[i]]."""
    if payload.size == 0:
        return seq
    order = np.argsort(pos, kind="stable")
    lengths = np.asarray(lengths, dtype=np.int64)
    payload = payload[_ranges(_offsets(lengths)[order], lengths[order])]
    out_pos = np.repeat(np.asarray(pos, dtype=np.int64)[order], lengths[order])
    out_pos += np.arange(payload.size, dtype=np.int64)
    out = np.empty(seq.size + payload.size, dtype=np.uint8)
    keep = np.ones(out.size, dtype=bool)
    keep[out_pos] = False
    out[keep] = seq
    out[out_pos] = payload
    return out


def _bernoulli_positions(rng: np.random.Generator, n: int, rate: float) -> np.ndarray:
    """Sorted positions in [0, n), each chosen independently with probability `rate`."""
    if n <= 0 or rate <= 0:
        return np.empty(0, dtype=np.int64)
    if rate >= 1:
        return np.arange(n, dtype=np.int64)
    expect = n * rate
    draw = int(expect + 6 * math.sqrt(expect) + 16)
    pos = np.cumsum(rng.geometric(rate, draw)) - 1
    while pos[-1] < n:
        pos = np.concatenate([pos, pos[-1] + np.cumsum(rng.geometric(rate, draw))])
    return pos[pos < n]


@dataclass(frozen=True)
class _Model:
    """HKY substitution model at equilibrium GC `gc`, indexed by byte (case kept, N inert):
    for base a the target is its transition partner with weight kappa * pi(partner), else
    a transversion partner with weight pi(partner); a's rate out, relative to the fastest
    base, is `accept[a]`.  kappa = ts_tv / (2 gc (1 - gc)) makes transitions : transversions
    = ts_tv at equilibrium, and the base composition stays at `gc`."""

    cum_ts: np.ndarray  # P(transition | a mutates)
    cum_tv1: np.ndarray  # P(transition or transversion 1 | a mutates)
    accept: np.ndarray
    mean_accept: float


def _model(ts_tv: float, gc: float) -> _Model:
    kappa = ts_tv / (2 * gc * (1 - gc))
    pi = np.zeros(256)
    for base, share in zip(b"ACGTacgt", [1 - gc, gc, gc, 1 - gc] * 2, strict=True):
        pi[base] = share / 2
    codes = np.arange(256)
    w_ts = kappa * pi[TRANSITION[codes]]
    w_tv1, w_tv2 = pi[_TRANSVERSION_1[codes]], pi[_TRANSVERSION_2[codes]]
    total = w_ts + w_tv1 + w_tv2
    safe = np.where(total > 0, total, 1.0)
    accept = total / total.max()
    mean = float(sum(pi[b] * accept[b] for b in b"ACGT"))
    return _Model(w_ts / safe, (w_ts + w_tv1) / safe, accept, mean)


def _substitute(rng: np.random.Generator, seq: np.ndarray, pos: np.ndarray, model: _Model) -> None:
    """Substitute every seq[pos] in place (target chosen by the model; case kept, N kept)."""
    base = seq[pos]
    u = rng.random(pos.size)
    tv = np.where(u < model.cum_tv1[base], _TRANSVERSION_1[base], _TRANSVERSION_2[base])
    seq[pos] = np.where(u < model.cum_ts[base], TRANSITION[base], tv)


def _substitute_at_rate(
    rng: np.random.Generator, seq: np.ndarray, rate: float, model: _Model
) -> None:
    """HKY substitutions at `rate` per site on average (per base by the model's rates)."""
    pos = _bernoulli_positions(rng, seq.size, min(1.0, rate / model.mean_accept))
    pos = pos[rng.random(pos.size) < model.accept[seq[pos]]]
    _substitute(rng, seq, pos, model)


def _mutate_segments(
    rng: np.random.Generator,
    payload: np.ndarray,
    lengths: np.ndarray,
    rates: np.ndarray,
    model: _Model,
) -> None:
    """Substitute each base of segment i with probability rates[i]."""
    ends = np.cumsum(lengths)
    for start in range(0, payload.size, _CHUNK):
        stop = min(payload.size, start + _CHUNK)
        seg = np.searchsorted(ends, np.arange(start, stop), side="right")
        hit = rng.random(stop - start, dtype=np.float32) < rates[seg].astype(np.float32)
        _substitute(rng, payload, start + np.flatnonzero(hit), model)


def _random_bases(rng: np.random.Generator, n: int, gc: float) -> np.ndarray:
    """n i.i.d. uppercase bases with GC share `gc`."""
    return _background(rng, n, gc, 0.0, float(max(n, 1)))


# ---------------------------------------------------------------------------------------------
# Ancestral background
# ---------------------------------------------------------------------------------------------


def _isochores(rng: np.random.Generator, n: int, spec_gc: tuple[float, float, float]):
    """Window ends and per-window GC (15-bit thresholds) covering [0, n)."""
    gc_mean, gc_sd, window_bp = spec_gc
    ends = np.empty(0, dtype=np.int64)
    while ends.size == 0 or ends[-1] < n:
        count = int(n / window_bp) + 4
        lens = np.maximum(1000, rng.exponential(window_bp, count)).astype(np.int64)
        base = ends[-1] if ends.size else 0
        ends = np.concatenate([ends, base + np.cumsum(lens)])
    gc = np.clip(rng.normal(gc_mean, gc_sd, ends.size), 0.2, 0.8)
    return ends, (gc * 32768).astype(np.uint16)


def _background(
    rng: np.random.Generator, n: int, gc_mean: float, gc_sd: float, window_bp: float
) -> np.ndarray:
    """Uppercase random sequence whose GC share varies between isochore-like windows."""
    ends, thresholds = _isochores(rng, n, (gc_mean, gc_sd, window_bp))
    out = np.empty(n, dtype=np.uint8)
    for start in range(0, n, _CHUNK):
        stop = min(n, start + _CHUNK)
        window = np.searchsorted(ends, np.arange(start, stop), side="right")
        r = rng.integers(0, 1 << 16, stop - start, dtype=np.uint16)
        strong = (r & 0x7FFF) < thresholds[window]
        out[start:stop] = _WEAK_STRONG[2 * strong.view(np.uint8) + (r >> 15).astype(np.uint8)]
    return out


def _deplete_cpg(rng: np.random.Generator, seq: np.ndarray, strength: float) -> None:
    """Turn a share `strength` of CpG into TpG or CpA (the methylation-deamination decay)."""
    if strength <= 0 or seq.size < 2:
        return
    upper = seq & np.uint8(0xDF)
    pos = np.flatnonzero((upper[:-1] == ord("C")) & (upper[1:] == ord("G")))
    del upper
    pos = pos[rng.random(pos.size) < strength]
    pos += rng.random(pos.size) < 0.5
    seq[pos] = TRANSITION[seq[pos]]


# ---------------------------------------------------------------------------------------------
# Repeats
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Families:
    """Consensus sequences of one repeat class, each followed by a poly-A run of _TAIL_MAX."""

    seq: np.ndarray
    starts: np.ndarray
    sizes: np.ndarray
    weights: np.ndarray
    kind: str  # "sine" or "line"


def _families_from(kind: str, consensi: list[np.ndarray]) -> _Families:
    tail = np.full(_TAIL_MAX, ord("A"), dtype=np.uint8)
    bodies = [np.concatenate([c, tail]) for c in consensi]
    sizes = np.array([c.size for c in consensi], dtype=np.int64)
    starts = _offsets(np.array([b.size for b in bodies], dtype=np.int64))
    weights = 1.0 / np.arange(1, len(consensi) + 1)  # a few families dominate (Zipf-like)
    return _Families(np.concatenate(bodies), starts, sizes, weights / weights.sum(), kind)


def _library(spec: PairSpec) -> dict[tuple[str, str], _Families]:
    """Repeat families by (kind, group); group "ref"/"query" descend from the "shared" ones."""
    rng = np.random.default_rng([spec.seed, _STREAM_LIBRARY])
    lib: dict[tuple[str, str], _Families] = {}
    shape = {"sine": (300, 20, 0.52), "line": (6000, 400, 0.42)}
    for kind, (mean, sd, gc) in shape.items():
        old = [
            _random_bases(rng, max(50, int(rng.normal(mean, sd))), gc) for _ in range(spec.families)
        ]
        lib[kind, "shared"] = _families_from(kind, old)
        for group in ("ref", "query"):
            young = [c.copy() for c in old]
            for c in young:
                _substitute_at_rate(rng, c, spec.lineage_family_divergence, _model(spec.ts_tv, 0.5))
            lib[kind, group] = _families_from(kind, young)
    return lib


def _copy_lengths(rng: np.random.Generator, fam: _Families, spec: PairSpec, count: int):
    """Family, kept length (from the 3' end, tail included) and full length of each copy."""
    f = rng.choice(fam.sizes.size, count, p=fam.weights)
    full = fam.sizes[f] + rng.integers(8, _TAIL_MAX + 1, count)
    if fam.kind == "sine":
        part = (full * rng.uniform(0.3, 1.0, count)).astype(np.int64)
        keep = np.where(rng.random(count) < 0.8, full, part)
    else:
        trunc = 60 + rng.exponential(spec.line_mean_copy_bp, count).astype(np.int64)
        keep = np.where(rng.random(count) < spec.line_full_share, full, np.minimum(full, trunc))
    return f, keep, full


def _soft_mask(
    rng: np.random.Generator, payload: np.ndarray, lengths: np.ndarray, missed: float, min_bp: int
) -> None:
    """Lowercase every segment except those shorter than `min_bp` and a share `missed` of the
    others (the masker misses short fragments and some diverged or impure copies)."""
    masked = (rng.random(lengths.size) >= missed) & (lengths >= min_bp)
    payload[np.repeat(masked, lengths)] |= np.uint8(LOWER)


def _interspersed(rng, fam: _Families, total: int, divergence: float, spec: PairSpec):
    """Copies of `fam` (random strand, 5'-truncated) adding up to `total` bp.  Poly-A tails
    are masked even on copies the masker misses (a simple-repeat finder catches them)."""
    mean = fam.sizes.mean() if fam.kind == "sine" else spec.line_mean_copy_bp
    f, keep, full = _copy_lengths(rng, fam, spec, int(1.5 * total / mean) + 8)
    lengths = _cut_to_total(keep, total)
    k = lengths.size
    f, full = f[:k], full[:k]
    w = _within(lengths)
    rc = np.repeat(rng.random(k) < 0.5, lengths)
    flipped = np.where(rc, np.repeat(lengths, lengths) - 1 - w, w)
    src = np.repeat(fam.starts[f] + full - lengths, lengths) + flipped
    del w
    payload = fam.seq[src]
    tail = src >= np.repeat(fam.starts[f] + fam.sizes[f], lengths)
    del src
    payload[rc] = COMPLEMENT[payload[rc]]
    rates = rng.uniform(0.5, 1.5, k) * divergence
    _mutate_segments(rng, payload, lengths, rates, _model(spec.ts_tv, spec.gc_mean))
    _soft_mask(rng, payload, lengths, spec.repeat_unmasked_fraction, spec.mask_min_bp)
    payload[tail] |= np.uint8(LOWER)
    return payload, lengths


def _tiled(units: np.ndarray, unit_len: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Segment i repeats units[i, :unit_len[i]] over lengths[i] bases."""
    seg = np.repeat(np.arange(lengths.size), lengths)
    return units[seg, _within(lengths) % unit_len[seg]]


def _microsatellites(rng: np.random.Generator, total: int, spec: PairSpec, short: bool = False):
    """Simple repeats: 1-6 bp units, AT-rich, 12-150 bp, up to 12% impure.  `short`: A/T-rich
    low-complexity tracts (1-2 bp units, 10-24 bp, up to 8% impure) that no masker flags."""
    mean = 16 if short else 40
    count = int(1.5 * total / mean) + 8
    sizes = [0.6, 0.4, 0, 0, 0, 0] if short else [0.25, 0.3, 0.1, 0.2, 0.1, 0.05]
    unit_len = rng.choice(np.arange(1, 7), count, p=sizes)
    bases = [0.4, 0.1, 0.1, 0.4] if short else [0.32, 0.18, 0.18, 0.32]
    units = rng.choice(np.frombuffer(b"ACGT", np.uint8), (count, 6), p=bases)
    if short:
        raw = np.minimum(24, 9 + rng.geometric(1 / 7, count))
    else:
        raw = np.minimum(150, 11 + rng.geometric(1 / 29, count))
    lengths = _cut_to_total(raw, total)
    k = lengths.size
    payload = _tiled(units[:k], unit_len[:k], lengths)
    rates = rng.uniform(0, 0.08 if short else 0.12, k)
    _mutate_segments(rng, payload, lengths, rates, _model(spec.ts_tv, 0.5))
    if not short:
        _soft_mask(rng, payload, lengths, spec.simple_unmasked_fraction, spec.mask_min_bp)
    return payload, lengths


def _tandem(rng: np.random.Generator, total: int, spec: PairSpec):
    """Tandem (satellite-like) repeats: 10-200 bp units, 2-40 copies, 2-15% diverged."""
    count = int(1.5 * total / 600) + 8
    unit_len = np.exp(rng.uniform(np.log(10), np.log(200), count)).astype(np.int64)
    units = _random_bases(rng, count * 200, 0.45).reshape(count, 200)
    copies = 1 + rng.geometric(1 / 8, count)
    lengths = _cut_to_total(np.minimum(unit_len * np.minimum(copies, 40), 8000), total)
    k = lengths.size
    payload = _tiled(units[:k], unit_len[:k], lengths)
    _mutate_segments(rng, payload, lengths, rng.uniform(0.02, 0.15, k), _model(spec.ts_tv, 0.5))
    _soft_mask(rng, payload, lengths, spec.tandem_unmasked_fraction, spec.mask_min_bp)
    return payload, lengths


def _repeat_payload(rng, spec: PairSpec, lib, group: str, size: float):
    """All repeats of one branch ("shared" = ancestral) for a chromosome whose final size is
    `size`: (payload, lengths) in random order."""
    old = group == "shared"
    share = spec.shared_repeat_share if old else 1 - spec.shared_repeat_share
    div = spec.shared_repeat_divergence if old else spec.lineage_repeat_divergence
    low = 0.0 if old else size
    parts = [
        _interspersed(rng, lib["sine", group], int(size * spec.sine_fraction * share), div, spec),
        _interspersed(rng, lib["line", group], int(size * spec.line_fraction * share), div, spec),
        _microsatellites(rng, int(low * spec.simple_fraction), spec),
        _microsatellites(rng, int(low * spec.tract_fraction), spec, short=True),
        _tandem(rng, int(low * spec.tandem_fraction), spec),
    ]
    payload = np.concatenate([p for p, _ in parts])
    lengths = np.concatenate([n for _, n in parts])
    order = rng.permutation(lengths.size)
    return payload[_ranges(_offsets(lengths)[order], lengths[order])], lengths[order]


def _insert_repeats(
    rng, seq: np.ndarray, spec: PairSpec, lib, group: str, size: float
) -> np.ndarray:
    payload, lengths = _repeat_payload(rng, spec, lib, group, size)
    if group != "shared":  # young copies: CpG decayed less
        _deplete_cpg(rng, payload, spec.cpg_depletion / 2)
    pos = rng.integers(0, seq.size + 1, lengths.size)
    return _insert(seq, pos, payload, lengths)


# ---------------------------------------------------------------------------------------------
# Ancestor
# ---------------------------------------------------------------------------------------------


def _chromosome_sizes(rng: np.random.Generator, total_bp: float, count: int) -> np.ndarray:
    weights = rng.uniform(0.6, 1.4, count)
    sizes = np.floor(total_bp * weights / weights.sum()).astype(np.int64)
    sizes[0] += int(round(total_bp)) - int(sizes.sum())
    return sizes


def _ancestor(spec: PairSpec, lib, final_sizes: np.ndarray, first: int = 0) -> list[np.ndarray]:
    """One ancestral chromosome per final reference chromosome of `final_sizes` bp (numbered
    from `first`: each number has its own random stream)."""
    own = 1 - _lineage_share(spec) - spec.segdup_fraction
    chroms = []
    for i, size in enumerate(final_sizes, first):
        rng = np.random.default_rng([spec.seed, _STREAM_ANCESTOR, i])
        scaled = float(size) * _surplus(spec)
        n_bg = int(scaled * (own - _shared_share(spec)))
        seq = _background(rng, n_bg, spec.gc_mean, spec.gc_sd, spec.isochore_kbp * 1000)
        seq = _insert_repeats(rng, seq, spec, lib, "shared", scaled)
        _deplete_cpg(rng, seq, spec.cpg_depletion)
        chroms.append(seq)
    return chroms


# ---------------------------------------------------------------------------------------------
# Descendants
# ---------------------------------------------------------------------------------------------


def _small_indels(
    rng: np.random.Generator, seq: np.ndarray, rate: float, spec: PairSpec
) -> np.ndarray:
    """Insert, then delete, short runs (geometric lengths, mean `indel_mean_bp`, at most 50),
    each at `rate` / 2 events per site; inserted bases take the case of the base before."""
    p = 1 / max(1.0, spec.indel_mean_bp)
    pos = _bernoulli_positions(rng, seq.size, rate / 2)
    lengths = np.minimum(rng.geometric(p, pos.size), 50)
    payload = _random_bases(rng, int(lengths.sum()), spec.gc_mean)
    payload |= np.repeat(seq[np.maximum(pos - 1, 0)] & np.uint8(LOWER), lengths)
    seq = _insert(seq, pos, payload, lengths)
    pos = _bernoulli_positions(rng, seq.size, rate / 2)
    gone = _ranges(pos, np.minimum(rng.geometric(p, pos.size), 50))
    keep = np.ones(seq.size, dtype=bool)
    keep[gone[gone < seq.size]] = False
    return seq[keep]


def _evolve_bases(rng, chroms: list[np.ndarray], spec: PairSpec, rate: float) -> list[np.ndarray]:
    out = []
    for seq in chroms:
        _substitute_at_rate(rng, seq, rate, _model(spec.ts_tv, spec.gc_mean))
        out.append(_small_indels(rng, seq, rate * spec.indel_ratio, spec))
    return out


def _segmental_duplications(rng, chroms: list[np.ndarray], spec: PairSpec) -> list[np.ndarray]:
    """Copy segments (1-300 kbp, a few % diverged, either strand) to random places."""
    sizes = np.array([c.size for c in chroms], dtype=np.int64)
    total = int(spec.segdup_fraction * sizes.sum())
    if total < 1000:
        return chroms
    cap = max(1000, min(300_000, int(sizes.min()) // 4))
    raw = np.clip(rng.lognormal(np.log(8000), 1.0, int(total / 5000) + 8), 1000, cap)
    lengths = _cut_to_total(raw.astype(np.int64), total)
    src = rng.choice(sizes.size, lengths.size, p=sizes / sizes.sum())
    dst = np.where(rng.random(lengths.size) < 0.6, src, rng.choice(sizes.size, lengths.size))
    pieces = []
    for c, n in zip(src, lengths, strict=True):
        start = int(rng.integers(0, max(1, sizes[c] - n)))
        piece = chroms[c][start : start + n].copy()
        pieces.append(reverse_complement(piece) if rng.random() < 0.5 else piece)
    lengths = np.array([p.size for p in pieces], dtype=np.int64)
    payload = np.concatenate(pieces)
    rates = rng.uniform(0.1, 2.0, lengths.size) * spec.segdup_divergence
    _mutate_segments(rng, payload, lengths, rates, _model(spec.ts_tv, spec.gc_mean))
    offs = _offsets(lengths)
    out = []
    for c, seq in enumerate(chroms):
        mine = np.flatnonzero(dst == c)
        sub = payload[_ranges(offs[mine], lengths[mine])]
        out.append(_insert(seq, rng.integers(0, seq.size + 1, mine.size), sub, lengths[mine]))
    return out


def _event_length(rng: np.random.Generator, median: float, limit: int) -> int:
    return int(np.clip(rng.lognormal(np.log(median), 1.2), 100, max(100, limit)))


def _rearrange(rng, chroms: list[np.ndarray], spec: PairSpec) -> None:
    """Inversions, and translocations (reciprocal, equal length; with one chromosome a
    transposition), in place: chromosome sizes do not change."""
    sizes = np.array([c.size for c in chroms], dtype=np.float64)
    scale = sizes.sum() / 1e8
    for _ in range(rng.poisson(spec.inversions_per_100mbp * scale)):
        c = rng.choice(sizes.size, p=sizes / sizes.sum())
        n = _event_length(rng, 50_000, chroms[c].size // 4)
        s = int(rng.integers(0, max(1, chroms[c].size - n)))
        chroms[c][s : s + n] = reverse_complement(chroms[c][s : s + n])
    for _ in range(rng.poisson(spec.translocations_per_100mbp * scale)):
        a, b = rng.choice(sizes.size, 2, replace=sizes.size == 1, p=sizes / sizes.sum())
        n = _event_length(rng, 200_000, int(min(sizes[a], sizes[b])) // 5)
        sa = int(rng.integers(0, max(1, chroms[a].size - n)))
        if a != b:
            sb = int(rng.integers(0, max(1, chroms[b].size - n)))
            piece = chroms[a][sa : sa + n].copy()
            chroms[a][sa : sa + n] = chroms[b][sb : sb + n]
            chroms[b][sb : sb + n] = piece
            continue
        seq = chroms[a]
        piece = seq[sa : sa + n].copy()
        rest = np.concatenate([seq[:sa], seq[sa + n :]])
        at = int(rng.integers(0, rest.size + 1))
        chroms[a][:] = np.concatenate([rest[:at], piece, rest[at:]])


def _add_gaps(rng: np.random.Generator, seq: np.ndarray, spec: PairSpec) -> None:
    """Replace `n_gaps` runs (lognormal lengths, <= 2% of the chromosome each) by N."""
    if spec.n_gaps <= 0 or seq.size < 1000:
        return
    limit = max(10, seq.size // 50)
    lengths = np.clip(rng.lognormal(np.log(spec.n_gap_kbp * 1000), 1.0, spec.n_gaps), 10, limit)
    lengths = lengths.astype(np.int64)
    starts = rng.integers(0, seq.size - lengths + 1)
    seq[_ranges(starts, lengths)] = ord("N")


def _finish(
    rng, chroms, spec: PairSpec, lib, group: str, targets, rearrange: bool
) -> list[np.ndarray]:
    """Branch-specific insertions, segmental duplications, trimming, rearrangements, gaps."""
    chroms = [
        _insert_repeats(rng, seq, spec, lib, group, float(t) * _surplus(spec))
        for seq, t in zip(chroms, targets, strict=True)
    ]
    chroms = _segmental_duplications(rng, chroms, spec)
    chroms = [seq[: int(t)].copy() for seq, t in zip(chroms, targets, strict=True)]
    if rearrange:
        _rearrange(rng, chroms, spec)
    for seq in chroms:
        _add_gaps(rng, seq, spec)
    return chroms


def _branch_rates(spec: PairSpec) -> tuple[float, float]:
    """Per-branch substitution rates (ref, query) whose combined p-distance is `divergence`
    (two hits at one site agree half the time with ts/tv = 2)."""
    d = spec.divergence
    ref = min(spec.ref_branch, d / 2)
    return ref, max(0.0, (d - ref) / (1 - 1.5 * ref))


def _ancestral_need(spec: PairSpec, final_bp: float) -> float:
    """Ancestral bp a descendant of `final_bp` is built from."""
    return final_bp * (1 - _lineage_share(spec) - spec.segdup_fraction)


def _reference(spec: PairSpec, lib, ancestor: list[np.ndarray], sizes: np.ndarray) -> Records:
    rng = np.random.default_rng([spec.seed, _STREAM_REF])
    ref_rate, _ = _branch_rates(spec)
    scale = min(1.0, spec.ref_mbp * 1e6 / float(sizes.sum()))
    targets = np.floor(sizes * scale).astype(np.int64)
    chroms = [a[: int(a.size * scale)].copy() for a in ancestor]
    chroms = _evolve_bases(rng, chroms, spec, ref_rate)
    chroms = _finish(rng, chroms, spec, lib, "ref", targets, rearrange=False)
    return [(f"chr{i + 1}", seq) for i, seq in enumerate(chroms)]


def _genome_slice(ancestor: list[np.ndarray], starts: np.ndarray, a: int, b: int) -> np.ndarray:
    """Bytes [a, b) of the ancestor's chromosomes laid end to end (`starts`: their offsets)."""
    first = int(np.searchsorted(starts, a, side="right")) - 1
    last = int(np.searchsorted(starts, b - 1, side="right")) - 1 if b > a else first
    parts = [
        ancestor[i][max(a - int(starts[i]), 0) : min(b - int(starts[i]), ancestor[i].size)]
        for i in range(first, last + 1)
    ]
    return np.concatenate(parts) if parts else np.empty(0, np.uint8)


def _portion(
    rng, ancestor: list[np.ndarray], needs: np.ndarray, spec: PairSpec
) -> list[np.ndarray]:
    """The query's ancestral material: one contiguous stretch, or pieces from all over."""
    starts = _offsets(np.array([a.size for a in ancestor], dtype=np.int64))
    genome = int(sum(a.size for a in ancestor))
    needs = np.floor(needs * min(1.0, genome / max(1.0, float(needs.sum())))).astype(np.int64)
    total = int(needs.sum())
    if spec.query_sampling == "contiguous":
        begin = int(rng.integers(0, genome - total + 1))
        material = _genome_slice(ancestor, starts, begin, begin + total)
    else:
        count = max(1, int(round(total / (spec.query_piece_kbp * 1000))))
        sizes = np.diff(np.linspace(0, total, count + 1).astype(np.int64))
        gaps = np.sort(rng.integers(0, genome - total + 1, count))
        begins = gaps + _offsets(sizes)
        order = rng.permutation(count)
        material = np.concatenate(
            [
                _genome_slice(ancestor, starts, int(begins[i]), int(begins[i] + sizes[i]))
                for i in order
            ]
        )
    return [material[o : o + n].copy() for o, n in zip(_offsets(needs), needs, strict=True)]


def _turnover(rng: np.random.Generator, seq: np.ndarray, spec: PairSpec, lib) -> None:
    """Replace a share 1 - ancestral_kept of the sequence (100 bp-100 kbp blocks) by new
    query-lineage sequence (ancestral DNA lost, lineage-specific DNA gained)."""
    total = int((1 - spec.ancestral_kept) * seq.size)
    if total <= 0:
        return
    raw = np.clip(rng.lognormal(np.log(3000), 1.0, int(total / 3000) * 2 + 8), 100, 100_000)
    lengths = _cut_to_total(raw.astype(np.int64), total)
    starts = rng.integers(0, np.maximum(1, seq.size - lengths + 1))
    idx = _ranges(starts, lengths)
    idx = idx[idx < seq.size]
    seq[idx] = _filler(rng, idx.size, spec, lib)


def _filler(rng: np.random.Generator, n: int, spec: PairSpec, lib) -> np.ndarray:
    """n bp of sequence the reference lacks: background with old repeats (CpG-depleted, as in
    the ancestor) plus young query-lineage repeats, in the usual shares."""
    own = 1 - _lineage_share(spec) - _shared_share(spec)
    seq = _background(rng, int(n * own), spec.gc_mean, spec.gc_sd, spec.isochore_kbp * 1000)
    seq = _insert_repeats(rng, seq, spec, lib, "shared", n)
    _deplete_cpg(rng, seq, spec.cpg_depletion)
    seq = _insert_repeats(rng, seq, spec, lib, "query", n)
    return np.resize(seq, n)


def _query_chromosome_count(spec: PairSpec) -> int:
    if spec.query_chromosomes is not None:
        return max(1, spec.query_chromosomes)
    return max(1, min(spec.chromosomes, round(spec.chromosomes * spec.query_mbp / spec.ref_mbp)))


def _query(spec: PairSpec, lib, ancestor: list[np.ndarray], query_seed: int) -> Records:
    rng = np.random.default_rng([spec.seed, _STREAM_QUERY, query_seed])
    _, query_rate = _branch_rates(spec)
    targets = _chromosome_sizes(rng, spec.query_mbp * 1e6, _query_chromosome_count(spec))
    needs = np.array([_ancestral_need(spec, t) * _surplus(spec) for t in targets])
    chroms = _evolve_bases(rng, _portion(rng, ancestor, needs, spec), spec, query_rate)
    for seq in chroms:
        _turnover(rng, seq, spec, lib)
    chroms = _finish(rng, chroms, spec, lib, "query", targets, rearrange=True)
    return [(f"qchr{i + 1}", seq) for i, seq in enumerate(chroms)]


# ---------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------


def _layout(spec: PairSpec, query_mbp: float):
    """Library and reference chromosome sizes (independent of query-only fields unless
    `query_mbp` exceeds `ref_mbp`)."""
    layout = np.random.default_rng([spec.seed, _STREAM_LAYOUT])
    sizes = _chromosome_sizes(layout, max(spec.ref_mbp, query_mbp) * 1e6, spec.chromosomes)
    return _library(spec), sizes


def _prepare(spec: PairSpec, query_mbp: float):
    """Library, ancestor and reference chromosome sizes (`_layout`)."""
    lib, sizes = _layout(spec, query_mbp)
    return lib, _ancestor(spec, lib, sizes), sizes


def _query_seed(spec: PairSpec) -> int:
    return spec.seed if spec.query_seed is None else spec.query_seed


def simulate_pair(spec: PairSpec) -> tuple[Records, Records]:
    """(reference records, query records), each a list of (name, uint8 ASCII array)."""
    lib, ancestor, sizes = _prepare(spec, spec.query_mbp)
    return _reference(spec, lib, ancestor, sizes), _query(spec, lib, ancestor, _query_seed(spec))


_FORKED: dict = {}  # what forked children read from their parent (no copies, no pickling)


def _forked_ancestor(i: int) -> np.ndarray:
    spec, lib, sizes = _FORKED["spec"], _FORKED["lib"], _FORKED["sizes"]
    return _ancestor(spec, lib, sizes[i : i + 1], first=i)[0]


def _forked_genome(job: tuple[str, int | None]) -> None:
    """Write the reference (seed None) or the query of this seed."""
    path, seed = job
    spec, lib, ancestor, sizes = (_FORKED[k] for k in ("spec", "lib", "ancestor", "sizes"))
    if seed is None:
        records = _reference(spec, lib, ancestor, sizes)
    else:
        records = _query(spec, lib, ancestor, seed)
    write_records(Path(path), records, "2bit")


def write_pair_2bit(spec: PairSpec, ref_path: str | Path, qry_path: str | Path) -> None:
    """simulate_pair(spec) as two 2bit files, built in forked processes: the ancestor one
    chromosome a process (each has its own random stream), then the reference and the query side
    by side (each has its own stream).  The same bytes as simulate_pair, in about a third of the
    time with enough cores (benchmarks that generate genome-sized pairs on the device)."""
    write_queries_2bit(spec, ref_path, {qry_path: _query_seed(spec)})


def write_queries_2bit(
    spec: PairSpec, ref_path: str | Path, queries: dict[str | Path, int]
) -> None:
    """simulate_queries as 2bit files (the reference, and one query per seed), built in forked
    processes as `write_pair_2bit` builds its pair."""
    import multiprocessing

    fork = multiprocessing.get_context("fork")
    lib, sizes = _layout(spec, spec.query_mbp)
    _FORKED.update(spec=spec, lib=lib, sizes=sizes)
    cores = max(1, multiprocessing.cpu_count())
    try:
        with fork.Pool(min(len(sizes), cores)) as pool:
            _FORKED["ancestor"] = pool.map(_forked_ancestor, range(len(sizes)))
        jobs = [(str(ref_path), None)] + [(str(p), int(s)) for p, s in queries.items()]
        with fork.Pool(min(len(jobs), cores)) as pool:
            pool.map(_forked_genome, jobs, chunksize=1)
    finally:
        _FORKED.clear()


def simulate_queries(spec: PairSpec, query_seeds: Sequence[int]) -> tuple[Records, list[Records]]:
    """One reference and one query per seed (each its own portion and branch), building the
    ancestor once; query i equals simulate_pair(replace(spec, query_seed=seeds[i]))[1]."""
    lib, ancestor, sizes = _prepare(spec, spec.query_mbp)
    ref = _reference(spec, lib, ancestor, sizes)
    return ref, [_query(spec, lib, ancestor, int(s)) for s in query_seeds]


def spec_digest(spec: PairSpec, reference_only: bool = False) -> str:
    """Short stable hash of the spec (only the fields the reference depends on, if asked)."""
    fields = {**dataclasses.asdict(spec), "simulator_version": SIMULATOR_VERSION}
    if reference_only:
        fields = {k: v for k, v in fields.items() if k not in QUERY_FIELDS}
        fields["query_mbp_over_ref"] = max(spec.query_mbp, spec.ref_mbp)
    blob = json.dumps(fields, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def write_records(path: Path, records: Records, fmt: str) -> Path:
    """Write records as FASTA ("fa") or UCSC 2bit ("2bit") with hspz.io.packing."""
    from hspz.io.fasta import write_fasta
    from hspz.io.records import Record
    from hspz.io.twobit import write_2bit

    recs = [Record(name, seq) for name, seq in records]
    if fmt == "fa":
        write_fasta(path, recs)
    elif fmt == "2bit":
        write_2bit(path, recs)
    else:
        raise ValueError(f"unknown format {fmt!r} (fa or 2bit)")
    return path


def write_pair(
    spec: PairSpec, outdir: str | Path, formats: Sequence[str] = ("fa", "2bit")
) -> dict[str, Path]:
    """Simulate and write ref.<fmt> and query.<fmt> for each format; keys "ref.fa" etc."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    ref, query = simulate_pair(spec)
    paths = {}
    for fmt in formats:
        for stem, records in (("ref", ref), ("query", query)):
            paths[f"{stem}.{fmt}"] = write_records(outdir / f"{stem}.{fmt}", records, fmt)
    return paths


# ---------------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------------


def _coerce(field: dataclasses.Field, text: str):
    kind = str(field.type)
    if "int" in kind and "None" in kind:
        return None if text.lower() == "none" else int(text)
    return {"int": int, "float": float, "str": str}.get(kind, float)(text)


def spec_from_args(ref_mbp: float, query_mbp: float, settings: Sequence[str] = ()) -> PairSpec:
    """PairSpec from sizes and "field=value" strings (as the CLI's --set)."""
    by_name = {f.name: f for f in dataclasses.fields(PairSpec)}
    values = {}
    for item in settings:
        name, _, text = item.partition("=")
        if name not in by_name:
            raise SystemExit(f"unknown PairSpec field {name!r}; fields: {', '.join(by_name)}")
        values[name] = _coerce(by_name[name], text)
    return PairSpec(ref_mbp=ref_mbp, query_mbp=query_mbp, **values)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ref-mbp", type=float, required=True)
    parser.add_argument("--query-mbp", type=float, required=True)
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    parser.add_argument("--formats", default="fa,2bit", help="comma list of fa, 2bit")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="any other PairSpec field, e.g. --set divergence=0.2 --set seed=7",
    )
    args = parser.parse_args(argv)
    spec = spec_from_args(args.ref_mbp, args.query_mbp, args.set)
    paths = write_pair(spec, args.out, tuple(args.formats.split(",")))
    for key, path in paths.items():
        print(f"{key}\t{path}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.exit(main())
