"""An independent, slow, plain-Python implementation of docs/algorithm.md (the test oracle).

Written from the text of docs/algorithm.md only; it imports nothing from hspz, so a shared
misreading of that text is the only way hspZ and this module can agree on a wrong answer. It
reads plain FASTA, packs bins, seeds, walks the semantic chunks, extends every hit with the
ungapped x-drop rule, applies the entropy gate, deduplicates, and returns the segments files
as ``{file name: bytes}``.

Speed is not a goal: a per-hit Python loop is fine here (tests use inputs of a few kbp). The only
concession is that long x-drop extensions switch from a plain loop to numpy blocks that compute the
same running sum, running maximum and stop index (``_scan``).
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field, fields
from itertools import accumulate
from pathlib import Path

import numpy as np

# §3 Seeds: the two named patterns.
NAMED_SEEDS = {"12of19": "TTT0T00TT00T0T0TTTT", "14of22": "TTT0T0TT00TT00T0T0TTTT"}
# §3 Scoring: HOXD70, rows = reference base, columns = query base, order A C G T.
HOXD70 = [
    [91, -114, -31, -123],
    [-114, 100, -125, -31],
    [-31, -125, 100, -114],
    [-123, -31, -114, 91],
]
# §2 scoring alphabet.
A, C, G, T, L, N, X, E = range(8)
# §3 Entropy: ln 4 as float32, widened to double.
LN4 = float(np.float32(math.log(4)))
U32 = 0xFFFFFFFF
PLAIN_STEPS = 32  # x-drop steps done by the plain loop before numpy blocks take over


@dataclass(frozen=True)
class Options:
    """The `run` flags this oracle honours (docs/commands.md), named like the long CLI flags."""

    strand: str = "both"
    seed: str = "12of19"
    step: int = 1
    notransition: bool = False
    xdrop: int = 910
    hspthresh: int = 3000
    noentropy: bool = False
    ambiguous: str | None = None
    scoring: str | None = None
    target_prefix: str = ""
    query_prefix: str = ""
    wga_chunk_size: int = 250_000
    lastz_interval_size: int = 10_000_000
    seq_block_size: int = 500_000_000
    query_block_size: int | None = None
    max_hits: int = 16_711_680
    kegalign_bins: bool = False


def cli_args(**options) -> list[str]:
    """The `hspZ run` flags that ask for the same settings as ``oracle_run(**options)``."""
    opts = Options(**options)
    args: list[str] = []
    for f in fields(Options):
        value = getattr(opts, f.name)
        if value == f.default:
            continue
        flag = "--" + f.name.replace("_", "-")
        if isinstance(value, bool):
            args.append(flag)
        else:
            args += [flag, str(value)]
    return args


# ---------------------------------------------------------------- §2 input and packing


def read_fasta(path: str | Path) -> list[tuple[str, bytes]]:
    """§2: name = first token after '>'; lines before the first header ignored; whitespace and a
    trailing CR inside sequence lines dropped; case and every other byte kept."""
    records: list[tuple[str, list[bytes]]] = []
    for line in Path(path).read_bytes().split(b"\n"):
        if line.startswith(b">"):
            tokens = line[1:].split()
            records.append((tokens[0].decode() if tokens else "", []))
        elif records:
            records[-1][1].append(b"".join(line.split()))
    return [(name, b"".join(parts)) for name, parts in records]


def balanced_bins(lengths: list[int], target: int) -> list[list[int]]:
    """§2 Bins (default): longest record first into the lightest bin; bins by first record."""
    n_bins = min(max(-(-sum(lengths) // target), 1), len(lengths))
    loads = [0] * n_bins
    members: list[list[int]] = [[] for _ in range(n_bins)]
    for i in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        lightest = min(range(n_bins), key=lambda b: (loads[b], b))
        loads[lightest] += lengths[i]
        members[lightest].append(i)
    return sorted((sorted(m) for m in members if m), key=lambda m: m[0])


def kegalign_bins(lengths: list[int], target: int) -> list[list[int]]:
    """§2 Bins (--kegalign-bins): fill in input order; close a bin once its total exceeds target."""
    bins: list[list[int]] = []
    current: list[int] = []
    total = 0
    for i, length in enumerate(lengths):
        current.append(i)
        total += length
        if total > target:
            bins.append(current)
            current, total = [], 0
    if current:
        bins.append(current)
    return bins


@dataclass
class Bin:
    """A packed bin (§2 Packing): ``buf`` holds every record followed by '&'."""

    buf: bytes
    block_len: int
    records: list[tuple[str, int, int]]  # (prefixed name, start, length), ascending start
    starts: list[int] = field(default_factory=list)

    def __post_init__(self):
        self.starts = [start for _, start, _ in self.records]

    def record_at(self, offset: int) -> tuple[str, int, int]:
        """The record whose [start, start + length) holds ``offset``."""
        return self.records[bisect_right(self.starts, offset) - 1]


def pack_bin(records: list[tuple[str, bytes]], prefix: str) -> Bin:
    """§2 Packing: records in input order, each followed by '&'; block_len excludes the last '&'."""
    table, start = [], 0
    for name, seq in records:
        table.append((prefix + name, start, len(seq)))
        start += len(seq) + 1
    buf = b"".join(seq + b"&" for _, seq in records)
    return Bin(buf, len(buf) - 1, table)


def _complement_table() -> bytes:
    """§2: IUPAC codes complemented with case kept, '&'->'&', 'X'->'N', 'U'->'A', else 'N'."""
    table = bytearray(b"N" * 256)
    pairs = {
        "A": "T",
        "C": "G",
        "R": "Y",
        "K": "M",
        "S": "S",
        "W": "W",
        "B": "V",
        "D": "H",
        "N": "N",
    }
    for a, b in pairs.items():
        for x, y in ((a, b), (b, a)):
            table[ord(x)] = ord(y)
            table[ord(x.lower())] = ord(y.lower())
    table[ord("&")] = ord("&")
    table[ord("X")] = ord("N")
    table[ord("x")] = ord("n")  # case kept; 'n' and 'N' seed and score alike anyway
    table[ord("U")] = ord("A")
    table[ord("u")] = ord("a")
    return bytes(table)


COMPLEMENT = _complement_table()


def reverse_complement(b: Bin) -> Bin:
    """§2: the minus strand of a whole bin; record starts map to block_len - start - len,
    in reversed record order."""
    rc = b.buf[: b.block_len].translate(COMPLEMENT)[::-1] + b"&"
    table = [(name, b.block_len - start - length, length) for name, start, length in b.records]
    return Bin(rc, b.block_len, table[::-1])


def score_symbols(buf: bytes) -> bytes:
    """§2 scoring alphabet: ACGT 0..3, acgt L, Nn N, '&' E, anything else X."""
    table = bytearray([X] * 256)
    for code, base in enumerate(b"ACGT"):
        table[base] = code
        table[base | 0x20] = L
    table[ord("N")] = table[ord("n")] = N
    table[ord("&")] = E
    return buf.translate(bytes(table))


# ---------------------------------------------------------------- §3 scoring


def read_score_file(path: str | Path) -> list[list[int]]:
    """§3: the ACGT block of a LASTZ score-set file; undefined pairs get fill_score."""
    settings: dict[str, int] = {}
    header: list[str] | None = None
    defined: dict[tuple[str, str], int] = {}
    rows: list[str] = []
    for raw in Path(path).read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if "=" in line:
            name, value = (part.strip() for part in line.split("=", 1))
            settings[name] = int(value)
        elif header is None:
            header = line.split()
        else:  # a row without its label takes the next column label (LASTZ, blastz files)
            fields = line.split()
            row, values = (
                (header[len(rows)], fields)
                if len(fields) == len(header)
                else (fields[0], fields[1:])
            )
            rows.append(row)
            for col, value in zip(header, values, strict=True):
                defined[(row, col)] = int(value)
    fill = settings.get("fill_score")
    block = [[defined.get((r, c), fill) for c in "ACGT"] for r in "ACGT"]
    if any(v is None for row in block for v in row):
        raise ValueError("score file leaves an ACGT pair undefined and sets no fill_score")
    return block


def score_matrix(opts: Options) -> list[list[int]]:
    """§3 Scoring: the 8x8 matrix over A C G T L N X E, rows = reference symbol."""
    acgt = read_score_file(opts.scoring) if opts.scoring else HOXD70
    m = [[-1000] * 8 for _ in range(8)]  # L against anything; N and X against L/N
    for r in range(4):
        for q in range(4):
            m[r][q] = acgt[r][q]
    for s in (A, C, G, T, X):
        m[X][s] = m[s][X] = -100
    if opts.ambiguous:
        kind, *values = opts.ambiguous.split(",")
        reward, penalty = (int(values[0]), -int(values[1])) if values else (0, 0)
        for s in (A, C, G, T, L):
            m[N][s] = m[s][N] = penalty
        m[N][N] = reward
        if kind == "iupac":
            for s in range(7):
                m[X][s] = m[s][X] = penalty
            m[X][X] = reward
    for s in range(8):
        m[E][s] = m[s][E] = -10 * opts.xdrop
    return m


# ---------------------------------------------------------------- §3 seeds


@dataclass(frozen=True)
class Seed:
    """A spaced seed: its size and its care positions (§3 Seeds)."""

    size: int
    care: tuple[int, ...]

    @classmethod
    def parse(cls, text: str) -> Seed:
        pattern = NAMED_SEEDS.get(text, text)
        care = tuple(i for i, ch in enumerate(pattern) if ch in "1T")
        assert 4 <= len(care) <= 15, pattern
        return cls(len(pattern), care)


def window_kmers(buf: bytes, seed: Seed, n_windows: int) -> list[int]:
    """k-mer of each window start 0..n_windows-1, or -1 where a byte is not uppercase ACGT."""
    codes = np.frombuffer(buf, dtype=np.uint8)
    value = np.full(256, -1, dtype=np.int64)
    value[list(b"ACGT")] = np.arange(4)
    v = value[codes]
    bad = np.concatenate([[0], np.cumsum(v < 0)])
    kmers = []
    for j in range(max(n_windows, 0)):
        if bad[j + seed.size] - bad[j]:
            kmers.append(-1)
            continue
        k = 0
        for c in seed.care:
            k = (k << 2) | int(v[j + c])
        kmers.append(k)
    return kmers


def reference_table(b: Bin, seed: Seed, step: int) -> dict[int, list[int]]:
    """§3 Reference table: positions start_offset + i*step, i < (len + offset - size) / step,
    grouped by k-mer, ascending inside a group (its group size is the index_table count)."""
    offset = (seed.size + 1) % step
    start_offset = step - offset
    count = max((b.block_len + offset - seed.size) // step, 0)
    kmers = window_kmers(b.buf, seed, b.block_len - seed.size + 1)
    table: dict[int, list[int]] = {}
    for i in range(count):
        pos = start_offset + i * step
        if kmers[pos] >= 0:
            table.setdefault(kmers[pos], []).append(pos)
    return table


def query_seeds(kmers: list[int], lo: int, hi: int, n_care: int, transition: bool):
    """§3 Query seeds of the chunk [lo, hi), in stream order: (kmer, j), then its transitions."""
    seeds = []
    for j in range(lo, hi):
        k = kmers[j]
        if k < 0:
            continue
        seeds.append((k, j))
        if transition:
            seeds.extend((k ^ (2 << (2 * t)), j) for t in range(n_care))
    return seeds


# ---------------------------------------------------------------- §2 intervals and chunks


def intervals(block_len: int, size: int, interval: int) -> list[tuple[int, int]]:
    """§2: (s, min(end_pos, s + I)) for s = 0, I, ... < end_pos; end inclusive."""
    end_pos = block_len - size
    return [(s, min(end_pos, s + interval)) for s in range(0, max(end_pos, 0), interval)]


def wga_chunks(s: int, e: int, chunk: int) -> list[tuple[int, int]]:
    """§2: [i, min(i + C, e + 1)) for i = s, s + C, ... < e (quirks kept on purpose)."""
    return [(i, min(i + chunk, e + 1)) for i in range(s, e, chunk)]


def semantic_chunks(counts: list[int], max_hits: int) -> list[range]:
    """§3 semantic chunk walk: seed-index ranges; a position before the first seed reads 0 hits."""
    if not counts:
        return []
    cum = list(accumulate(counts))
    ends, limit = [], max_hits
    for _ in range(cum[-1] // max_hits):  # num_iter - 1
        pos = bisect_left(cum, limit) - 1
        ends.append(pos)
        limit = (cum[pos] if pos >= 0 else 0) + max_hits
    ends.append(len(counts) - 1)
    chunks, prev = [], -1
    for end in ends:
        if end > prev:
            chunks.append(range(prev + 1, end + 1))
            prev = end
    return chunks


# ---------------------------------------------------------------- §3 x-drop, entropy, dedup


@dataclass(frozen=True)
class Hsp:
    ref_start: int
    query_start: int
    length: int  # closed interval start ..= start + length
    score: int


def _scan(pairs, n: int, sub, sub_np, xdrop: int, pos: int, base: int):
    """The x-drop loop of §3 over n steps; step i scores pairs(i) and is reported as base + i.
    Returns (M, pos). Plain loop first, then numpy blocks computing the same S, M and stop."""
    s = m = 0
    for i, (r, q) in enumerate(zip(*pairs(0, min(n, PLAIN_STEPS)), strict=True)):
        s += sub[r][q]
        if s > m:
            m, pos = s, base + i
        if m - s > xdrop:
            return m, pos
    i, block = min(n, PLAIN_STEPS), 64
    while i < n:
        hi = min(n, i + block)
        r, q = pairs(i, hi)
        run_s = s + np.cumsum(sub_np[np.frombuffer(r, np.uint8), np.frombuffer(q, np.uint8)])
        run_m = np.maximum(np.maximum.accumulate(run_s), m)
        stops = np.flatnonzero(run_m - run_s > xdrop)
        upto = stops[0] + 1 if len(stops) else hi - i
        best = int(run_s[:upto].max())
        if best > m:
            m, pos = best, base + i + int(np.argmax(run_s[:upto]))
        if len(stops):
            return m, pos
        s, i, block = int(run_s[-1]), hi, block * 2
    return m, pos


def extend(
    rs: bytes, qs: bytes, ref_len: int, qry_len: int, R: int, Q: int, sub, sub_np, xdrop: int
) -> tuple[int, Hsp]:
    """§3 Ungapped x-drop from anchor (R, Q): right from k = 0 (pos = -1), left from k = 1
    (pos = 0). Returns (total, unscored Hsp)."""
    n_right = min(ref_len - R, qry_len - Q)
    m_right, pos_right = _scan(
        lambda a, b: (rs[R + a : R + b], qs[Q + a : Q + b]), n_right, sub, sub_np, xdrop, -1, 0
    )
    n_left = min(R, Q)
    m_left, pos_left = _scan(
        lambda a, b: (rs[R - b : R - a][::-1], qs[Q - b : Q - a][::-1]),
        n_left,
        sub,
        sub_np,
        xdrop,
        0,
        1,
    )
    hsp = Hsp(R - pos_left, Q - pos_left, pos_right + pos_left, 0)
    return m_right + m_left, hsp


def extend_plain(
    rs: bytes, qs: bytes, ref_len: int, qry_len: int, R: int, Q: int, sub, xdrop: int
) -> tuple[int, Hsp]:
    """``extend`` as the literal per-base loops of §3 (used to check ``_scan``)."""
    s = m_right = 0
    pos_right, k = -1, 0
    while R + k < ref_len and Q + k < qry_len:
        s += sub[rs[R + k]][qs[Q + k]]
        if s > m_right:
            m_right, pos_right = s, k
        if m_right - s > xdrop:
            break
        k += 1
    s = m_left = 0
    pos_left, k = 0, 1
    while k <= min(R, Q):
        s += sub[rs[R - k]][qs[Q - k]]
        if s > m_left:
            m_left, pos_left = s, k
        if m_left - s > xdrop:
            break
        k += 1
    hsp = Hsp(R - pos_left, Q - pos_left, pos_right + pos_left, 0)
    return m_right + m_left, hsp


def entropy(rs: bytes, qs: bytes, h: Hsp) -> float:
    """§3 Entropy: counts of exact ACGT matches over the len+1 positions; 1 under 20 matches."""
    counts = [0, 0, 0, 0]
    for i in range(h.length + 1):
        r = rs[h.ref_start + i]
        if r < 4 and r == qs[h.query_start + i]:
            counts[r] += 1
    if sum(counts) < 20:
        return 1.0
    total = 0.0
    for c in counts:
        if c > 0:
            p = c / (h.length + 1)
            total += p * math.log(p)
    return -total / LN4


def gate(total: int, rs: bytes, qs: bytes, h: Hsp, opts: Options) -> Hsp | None:
    """§3 threshold and entropy gate: the scored Hsp, or None when dropped."""
    k = opts.hspthresh
    if total < k:
        return None
    if opts.noentropy or total > 3 * k:
        return Hsp(h.ref_start, h.query_start, h.length, total)
    ent = entropy(rs, qs, h)
    if int(float(np.float32(total)) * ent) < k:
        return None
    return Hsp(h.ref_start, h.query_start, h.length, int(total * ent))


def _contains(a: Hsp, b: Hsp) -> bool:
    """§3 Dedup step 2: same diagonal and one [ref_start, ref_start+len] inside the other."""
    if a.ref_start - a.query_start != b.ref_start - b.query_start:
        return False
    a_end, b_end = a.ref_start + a.length, b.ref_start + b.length
    return (a.ref_start <= b.ref_start and b_end <= a_end) or (
        b.ref_start <= a.ref_start and a_end <= b_end
    )


def dedup(hsps: list[Hsp]) -> list[Hsp]:
    """§3 Dedup and order of one semantic chunk."""
    by_diag = sorted(
        hsps, key=lambda h: ((h.ref_start - h.query_start) & U32, h.ref_start, h.length, -h.score)
    )
    kept = [h for i, h in enumerate(by_diag) if i == 0 or not _contains(h, by_diag[i - 1])]
    return sorted(kept, key=lambda h: (h.query_start, h.ref_start, h.length, -h.score))


# ---------------------------------------------------------------- the run


@dataclass
class Context:
    """Per-run constants shared by every unit."""

    opts: Options
    seed: Seed
    sub: list[list[int]]
    sub_np: np.ndarray


def run_seed_batch(
    ctx: Context, ref: Bin, table, rs: bytes, qry: Bin, qs: bytes, seeds
) -> list[Hsp]:
    """One seed batch (one wga chunk): semantic chunks, hits, x-drop, gate, dedup (§3)."""
    size = ctx.seed.size
    counts = [len(table.get(k, ())) for k, _ in seeds]
    out: list[Hsp] = []
    for chunk in semantic_chunks(counts, ctx.opts.max_hits):
        found = []
        for k, j in (seeds[i] for i in chunk):
            for p in table.get(k, ()):
                total, h = extend(
                    rs,
                    qs,
                    ref.block_len,
                    qry.block_len,
                    p + size,
                    j + size,
                    ctx.sub,
                    ctx.sub_np,
                    ctx.opts.xdrop,
                )
                scored = gate(total, rs, qs, h, ctx.opts)
                if scored is not None:
                    found.append(scored)
        out += dedup(found)
    return out


def segment_line(h: Hsp, ref: Bin, qry: Bin, strand: str) -> bytes:
    """§4 line: 1-based inclusive coordinates relative to each record."""
    rname, rstart, _ = ref.record_at(h.ref_start)
    qname, qstart, _ = qry.record_at(h.query_start)
    cols = [
        rname,
        h.ref_start + 1 - rstart,
        h.ref_start + h.length + 1 - rstart,
        qname,
        h.query_start + 1 - qstart,
        h.query_start + h.length + 1 - qstart,
        strand,
        h.score,
    ]
    return ("\t".join(map(str, cols)) + "\n").encode()


def run_unit(ctx: Context, r: int, ref: Bin, q: int, qry: Bin) -> dict[str, bytes]:
    """One work unit (§2): per interval all plus chunks, then all minus chunks; §4 file names."""
    opts, seed = ctx.opts, ctx.seed
    table = reference_table(ref, seed, opts.step)
    rs = score_symbols(ref.buf)
    strands = {"plus": ["+"], "minus": ["-"], "both": ["+", "-"]}[opts.strand]
    qbl = qry.block_len - seed.size
    views = {"+": qry, "-": reverse_complement(qry)}
    kmers = {s: window_kmers(views[s].buf, seed, qbl + 1) for s in strands}
    syms = {s: score_symbols(views[s].buf) for s in strands}
    files = {}
    for n, (s, e) in enumerate(intervals(qry.block_len, seed.size, opts.lastz_interval_size), 1):
        for strand in strands:
            lo, hi = (s, e) if strand == "+" else (qbl - e, qbl - s)
            hsps = []
            for a, b in wga_chunks(lo, hi, opts.wga_chunk_size):
                seeds = query_seeds(kmers[strand], a, b, len(seed.care), not opts.notransition)
                hsps += run_seed_batch(ctx, ref, table, rs, views[strand], syms[strand], seeds)
            lines = [segment_line(h, ref, views[strand], strand) for h in hsps]
            if strand == "-":
                lines.reverse()
            if lines:
                name = "plus" if strand == "+" else "minus"
                files[f"tmp{n}.block{q}.r{r}.{name}.segments"] = b"".join(lines)
    return files


def make_bins(records: list[tuple[str, bytes]], target: int, opts: Options, prefix: str):
    """§2 Bins: the packed bins of one input, in bin order."""
    lengths = [len(seq) for _, seq in records]
    groups = (kegalign_bins if opts.kegalign_bins else balanced_bins)(lengths, target)
    return [pack_bin([records[i] for i in g], prefix) for g in groups]


def oracle_run(ref_fasta_path, query_fasta_path, **options) -> dict[str, bytes]:
    """Every non-empty segments file of `hspZ run` for these inputs and options (§2–§4)."""
    opts = Options(**options)
    seed = Seed.parse(opts.seed)
    sub = score_matrix(opts)
    ctx = Context(opts, seed, sub, np.array(sub, dtype=np.int64))
    ref_bins = make_bins(read_fasta(ref_fasta_path), opts.seq_block_size, opts, opts.target_prefix)
    qry_target = opts.query_block_size or opts.seq_block_size
    qry_bins = make_bins(read_fasta(query_fasta_path), qry_target, opts, opts.query_prefix)
    files: dict[str, bytes] = {}
    for r, ref in enumerate(ref_bins):  # ordinal = r * Q + q
        for q, qry in enumerate(qry_bins):
            files.update(run_unit(ctx, r, ref, q, qry))
    return files
