"""Exact seed-hit count of a (reference, query) pair for the default hspZ seed, vectorised.

Owns `count_hits`, `kmer_histogram`, `kmer_codes`, `transition_neighbourhood`, the rough
`estimate_gate` and the CLI (`python benchmarks/hit_density.py REF QUERY`, or
`--simulate REF_MBP QUERY_MBP [--set FIELD=VALUE ...]`; `--gate-sample N` adds the estimate).

The seed is the 12of19 spaced seed `TTT0T00TT00T0T0TTTT` with one transition allowed: every
query position whose 19 bytes are all uppercase ACGT emits its 12-care-base k-mer and the 12
variants with one transition (A<->G, C<->T) at one care position, and each is looked up against
every reference position with that exact k-mer (reference positions also need 19 uppercase ACGT
bytes: lowercase and N never seed).  So

    hits = sum over the 13 variant masks m of dot(query_hist[c ^ m], ref_hist[c])

with both histograms over the 4^12 codes (2 bits a base, A=0 C=1 G=2 T=3, so a transition is
XOR 2 at a care position).  `count_hits` gives the plus strand of the query and, separately, its
minus strand (the reverse complement of each query record seeded the same way).  Density is
hits / (reference bp x query bp); hspZ and LASTZ search both strands by default, so compare
real runs with `density_both`.  Not modelled: the reference table's skipped position 0 of
each bin (docs/algorithm.md, "Seeds": at step 1 the first position is never indexed), a few
hits per bin.

The simulator's calibration in BENCHMARKS.md, "Workloads" (dev machine; CPU only):
`python benchmarks/hit_density.py --simulate 64 4 --set divergence=0.4 --gate-sample 20000`.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SEED_PATTERN = "TTT0T00TT00T0T0TTTT"
CARE = np.array([i for i, c in enumerate(SEED_PATTERN) if c == "T"], dtype=np.int64)
SPAN = len(SEED_PATTERN)
WEIGHT = CARE.size
BINS = 4**WEIGHT
# Code of care base j sits at bits 2*(WEIGHT-1-j); a transition there is XOR 2 at those bits.
VARIANT_MASKS = np.array([0] + [2 << (2 * (WEIGHT - 1 - j)) for j in range(WEIGHT)], dtype=np.int64)
_CHUNK = 1 << 23

Records = Sequence[tuple[str, np.ndarray]]


def _base_codes() -> np.ndarray:
    table = np.full(256, 4, dtype=np.uint8)
    for code, base in enumerate(b"ACGT"):
        table[base] = code
    return table


_CODE = _base_codes()
_COMPLEMENT = np.arange(256, dtype=np.uint8)
for _a, _b in zip(b"ACGTacgt", b"TGCAtgca", strict=True):
    _COMPLEMENT[_a] = _b


def _code_chunks(seq: np.ndarray) -> Iterable[tuple[int, np.ndarray, np.ndarray]]:
    """(first position, valid mask, codes) over windows of _CHUNK seed positions."""
    n = seq.size - SPAN + 1
    for start in range(0, max(n, 0), _CHUNK):
        stop = min(n, start + _CHUNK)
        yield (start, *_chunk_codes(seq[start : stop + SPAN - 1]))


def kmer_codes(seq: np.ndarray, positions: bool = False):
    """Codes (uint32) of the seedable positions of one sequence (all 19 bytes uppercase ACGT);
    with `positions`, (positions, codes)."""
    pos_parts, code_parts = [np.empty(0, dtype=np.int64)], [np.empty(0, dtype=np.uint32)]
    for start, valid, code in _code_chunks(seq):
        code_parts.append(code[valid])
        if positions:
            pos_parts.append(start + np.flatnonzero(valid))
    codes = np.concatenate(code_parts)
    return (np.concatenate(pos_parts), codes) if positions else codes


def _chunk_codes(window: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    vals = _CODE[window]
    bad = np.concatenate([[0], np.cumsum(vals > 3, dtype=np.int32)])
    n = window.size - SPAN + 1
    valid = bad[SPAN:] == bad[:n]
    vals &= 3
    code = np.zeros(n, dtype=np.uint32)
    for offset in CARE:
        code <<= 2
        code |= vals[offset : offset + n]
    return valid, code


def kmer_histogram(records: Iterable[np.ndarray], minus: bool = False) -> np.ndarray:
    """Counts (int64, 4^12 bins) of seedable k-mers over records (reverse complements if minus)."""
    hist = np.zeros(BINS, dtype=np.int64)
    for seq in records:
        if minus:
            seq = _COMPLEMENT[seq[::-1]]
        for _, valid, code in _code_chunks(seq):
            hist += np.bincount(code[valid], minlength=BINS)
    return hist


def transition_neighbourhood(hist: np.ndarray) -> np.ndarray:
    """out[c] = sum over the 13 masks m of hist[c ^ m] (c itself and its 12 one-transition
    variants); each XOR swaps digit values 0<->2 and 1<->3 of one base, done on a reshaped view."""
    out = hist.copy()
    for j in range(WEIGHT):
        low = 4 ** (WEIGHT - 1 - j)
        src, dst = hist.reshape(-1, 4, low), out.reshape(-1, 4, low)
        dst[:, 0:2] += src[:, 2:4]
        dst[:, 2:4] += src[:, 0:2]
    return out


def hits_from_histograms(query_hist: np.ndarray, ref_hist: np.ndarray) -> int:
    """Sum over the 13 transition variants m of dot(query_hist[c ^ m], ref_hist[c])."""
    return int(np.dot(query_hist, transition_neighbourhood(ref_hist)))


def hits_by_permutation(query_hist: np.ndarray, ref_hist: np.ndarray) -> int:
    """The same sum, spelled out with one index permutation per variant (slower; a check)."""
    index = np.arange(BINS, dtype=np.int64)
    return int(sum(int(np.dot(query_hist[index ^ m], ref_hist)) for m in VARIANT_MASKS))


@dataclass(frozen=True)
class HitCount:
    """Exact hits of the query's plus and minus strands against the reference."""

    plus: int
    minus: int
    ref_bp: int
    query_bp: int
    ref_seedable: int
    query_seedable: int

    @property
    def bp2(self) -> int:
        return self.ref_bp * self.query_bp

    @property
    def density(self) -> float:
        """Plus-strand hits per bp²."""
        return self.plus / self.bp2

    @property
    def density_both(self) -> float:
        """Both-strand hits per bp²."""
        return (self.plus + self.minus) / self.bp2


def _seqs(records: Records | Iterable[np.ndarray]) -> list[np.ndarray]:
    return [r[1] if isinstance(r, tuple) else getattr(r, "seq", r) for r in records]


def count_hits(reference: Records, query: Records) -> HitCount:
    """Exact hit counts for (name, bytes) records (hspz Records or bare arrays work too)."""
    ref, qry = _seqs(reference), _seqs(query)
    ref_hist = kmer_histogram(ref)
    near = transition_neighbourhood(ref_hist)
    plus_hist = kmer_histogram(qry)
    plus = int(np.dot(plus_hist, near))
    minus = int(np.dot(kmer_histogram(qry, minus=True), near))
    return HitCount(
        plus=plus,
        minus=minus,
        ref_bp=sum(s.size for s in ref),
        query_bp=sum(s.size for s in qry),
        ref_seedable=int(ref_hist.sum()),
        query_seedable=int(plus_hist.sum()),
    )


HOXD70 = np.array(
    [[91, -114, -31, -123], [-114, 100, -125, -31], [-31, -125, 100, -114], [-123, -31, -114, 91]]
)


@dataclass(frozen=True)
class GateEstimate:
    """Hits of sampled query positions (plus strand) and how many reach the score gate."""

    sampled_positions: int
    hits: int
    passed: int

    @property
    def fraction(self) -> float:
        return self.passed / max(1, self.hits)


def _padded(seqs: list[np.ndarray], pad: int) -> tuple[np.ndarray, list[int]]:
    """Scoring codes (ACGT 0..3, anything else 4) of the records, each with `pad` 4s around."""
    parts, starts, at = [np.full(pad, 4, dtype=np.uint8)], [], pad
    for seq in seqs:
        starts.append(at)
        parts += [_CODE[seq], np.full(pad, 4, dtype=np.uint8)]
        at += seq.size + pad
    return np.concatenate(parts), starts


def _indexed(seqs: list[np.ndarray], starts: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(positions in the padded buffer, codes) of every seedable window of the records."""
    pairs = [kmer_codes(s, positions=True) for s in seqs]
    pos = np.concatenate([p + off for (p, _), off in zip(pairs, starts, strict=True)])
    return pos, np.concatenate([c for _, c in pairs])


def _best(
    ref: np.ndarray, qry: np.ndarray, r: np.ndarray, q: np.ndarray, steps: np.ndarray, xdrop: int
):
    """Best x-drop score of walks scoring (r + s, q + s) for s in `steps`; lowercase/N: -1000."""
    table = np.full((5, 5), -1000, dtype=np.int32)
    table[:4, :4] = HOXD70
    score = table.ravel()[ref[r[:, None] + steps] * 5 + qry[q[:, None] + steps]]
    run = np.cumsum(score, axis=1)
    top = np.maximum.accumulate(np.maximum(run, 0), axis=1)
    stop = (top - run) > xdrop
    last = np.where(stop.any(axis=1), stop.argmax(axis=1), steps.size - 1)
    return top[np.arange(r.size), last]


def estimate_gate(
    reference: Records,
    query: Records,
    sample: int = 20000,
    seed: int = 0,
    xdrop: int = 910,
    gate: int = 3000,
    window: int = 256,
) -> GateEstimate:
    """Rough share of plus-strand hits whose ungapped x-drop score (HOXD70; docs/algorithm.md,
    "Scoring" and "Ungapped x-drop": anchor after the seed, right walk + left walk, lowercase
    and N score -1000) reaches `gate`, from all hits of `sample` random seedable query
    positions; walks are cut at `window` bp a side (enough to reach the gate).  Not the
    engine: an estimate for tuning the simulator."""
    ref_seqs, qry_seqs = _seqs(reference), _seqs(query)
    ref_buf, ref_starts = _padded(ref_seqs, window + SPAN)
    qry_buf, qry_starts = _padded(qry_seqs, window + SPAN)
    ref_pos, ref_code = _indexed(ref_seqs, ref_starts)
    order = np.argsort(ref_code, kind="stable")
    ref_code, ref_pos = ref_code[order], ref_pos[order]
    qry_pos, qry_code = _indexed(qry_seqs, qry_starts)
    rng = np.random.default_rng(seed)
    pick = rng.choice(qry_pos.size, min(sample, qry_pos.size), replace=False)
    hits = passed = 0
    for mask in VARIANT_MASKS:
        codes = qry_code[pick] ^ np.uint32(mask)
        lo = np.searchsorted(ref_code, codes, side="left")
        count = np.searchsorted(ref_code, codes, side="right") - lo
        r_all = ref_pos[_ranges(lo, count)] + SPAN
        q_all = np.repeat(qry_pos[pick], count) + SPAN
        hits += r_all.size
        for at in range(0, r_all.size, 8192):
            r, q = r_all[at : at + 8192], q_all[at : at + 8192]
            right = _best(ref_buf, qry_buf, r, q, np.arange(window), xdrop)
            left = _best(ref_buf, qry_buf, r, q, -np.arange(1, window + 1), xdrop)
            passed += int(np.count_nonzero(right + left >= gate))
    return GateEstimate(int(pick.size), hits, passed)


def _ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    counts = counts.astype(np.int64)
    offsets = np.cumsum(counts) - counts
    return np.repeat(starts - offsets, counts) + np.arange(int(counts.sum()), dtype=np.int64)


def lowercase_fraction(records: Records) -> float:
    """Share of bytes that are lowercase (soft-masked)."""
    seqs = _seqs(records)
    lower = sum(int(np.count_nonzero((s >= ord("a")) & (s <= ord("z")))) for s in seqs)
    return lower / max(1, sum(s.size for s in seqs))


def report(result: HitCount) -> str:
    return (
        f"hits_plus={result.plus} hits_minus={result.minus} "
        f"ref_bp={result.ref_bp} query_bp={result.query_bp} bp2={result.bp2:.4g} "
        f"density_plus={result.density:.4g} density_both={result.density_both:.4g} "
        f"seedable_ref={result.ref_seedable / max(1, result.ref_bp):.3f} "
        f"seedable_query={result.query_seedable / max(1, result.query_bp):.3f}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path, help="REF QUERY (FASTA, .gz or 2bit)")
    parser.add_argument("--simulate", nargs=2, type=float, metavar=("REF_MBP", "QUERY_MBP"))
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE")
    parser.add_argument(
        "--gate-sample",
        type=int,
        default=0,
        metavar="N",
        help="also estimate the share of hits reaching the score gate from N query positions",
    )
    args = parser.parse_args(argv)
    start = time.perf_counter()
    if args.simulate:
        from benchmarks.simulate import simulate_pair, spec_from_args

        ref, query = simulate_pair(spec_from_args(*args.simulate, args.set))
    elif len(args.files) == 2:
        from hspz.io.readers import read_records

        ref, query = (read_records(p) for p in args.files)
    else:
        parser.error("give REF QUERY files or --simulate REF_MBP QUERY_MBP")
    loaded = time.perf_counter()
    result = count_hits(ref, query)
    print(report(result))
    print(
        f"lower_ref={lowercase_fraction(ref):.3f} lower_query={lowercase_fraction(query):.3f} "
        f"load_s={loaded - start:.1f} count_s={time.perf_counter() - loaded:.1f}"
    )
    if args.gate_sample:
        est = estimate_gate(ref, query, sample=args.gate_sample)
        print(
            f"gate_estimate: positions={est.sampled_positions} hits={est.hits} "
            f"passed={est.passed} fraction={est.fraction:.3g}"
        )
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.exit(main())
