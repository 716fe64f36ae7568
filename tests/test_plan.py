"""The plan (hspz/planning/memory.py) against direct transcriptions of docs/algorithm.md ("Bins" to
"Hits and the `--max-hits` walk") and KegAlign.

Bins, intervals, wga chunks and the minus-strand mirror are recomputed with plain loops; the
semantic chunk walk is checked against a line-by-line transcription of KegAlign's `SeedAndFilter`
loop in u32 arithmetic; the digest against `LC_ALL=C sort | sha256sum`.
"""

from __future__ import annotations

import hashlib
import os
import random
import subprocess
from bisect import bisect_left

import numpy as np
import pytest

from hspz.planning.bins import balanced_bins, kegalign_bins
from hspz.run.digest import digest_of
from hspz.stages.chunks import chunk_walk, intervals, minus_interval, seed_batches, wga_chunks

U32 = 0xFFFFFFFF

# --------------------------------------------------------------------------------------------
# Bins
# --------------------------------------------------------------------------------------------


def _brute_balanced(lengths, target):
    n = len(lengths)
    if n == 0:
        return ()
    total = sum(lengths)
    n_bins = min(max(-(-total // target), 1), n)
    loads = [0] * n_bins
    members = [[] for _ in range(n_bins)]
    for i in sorted(range(n), key=lambda i: (-lengths[i], i)):
        b = min(range(n_bins), key=lambda b: (loads[b], b))  # lightest, ties lowest index
        members[b].append(i)
        loads[b] += lengths[i]
    bins = [tuple(sorted(m)) for m in members if m]
    return tuple(sorted(bins, key=lambda b: b[0]))


def _brute_kegalign(lengths, target):
    bins, cur, total = [], [], 0
    for i, n in enumerate(lengths):
        cur.append(i)
        total += n
        if total > target:
            bins.append(tuple(cur))
            cur, total = [], 0
    return tuple(bins + ([tuple(cur)] if cur else []))


def test_balanced_bins_match_a_longest_first_lightest_bin_simulation_on_random_inputs():
    rng = random.Random(5)
    for _ in range(400):
        n = rng.randint(1, 14)
        lengths = [rng.choice([rng.randint(1, 50), rng.randint(1, 5) * 10, 1000]) for _ in range(n)]
        target = rng.randint(1, sum(lengths) + 10)
        assert balanced_bins(lengths, target) == _brute_balanced(lengths, target), (lengths, target)


def test_balanced_bins_break_load_ties_towards_the_lowest_bin_and_order_bins_by_first_record():
    # 3 bins; records 0 and 1 (length 10) fill bins 0 and 1, record 2 (length 9) bin 2, then
    # record 3 (length 9) goes to bin 2 (load 9, the lightest), record 4 (length 1) to bin 0.
    got = balanced_bins([10, 10, 9, 9, 1], 16)  # ceil(39 / 16) = 3 bins
    assert got == ((0, 4), (1,), (2, 3))


def test_balanced_bins_clamp_the_bin_count_to_the_record_count_and_never_split_a_record():
    assert balanced_bins([5, 7, 3], 1) == ((0,), (1,), (2,))
    assert balanced_bins([100], 1) == ((0,),)
    assert balanced_bins([5, 7, 3], 10**9) == ((0, 1, 2),)


def test_balanced_bins_drop_bins_left_empty_by_zero_length_records():
    # 4 bins: record 3 fills bin 0; the empty records all go to bin 1 (load 0, lowest index)
    assert balanced_bins([0, 0, 0, 5], 1) == ((0, 1, 2), (3,))


def test_balanced_bins_keep_input_order_inside_a_bin():
    got = balanced_bins([1, 50, 2, 49, 3], 40)  # 3 bins
    assert all(list(b) == sorted(b) for b in got)
    assert sorted(i for b in got for i in b) == list(range(5))
    assert [b[0] for b in got] == sorted(b[0] for b in got)
    assert got == _brute_balanced([1, 50, 2, 49, 3], 40)


def test_kegalign_bins_close_only_when_the_total_is_greater_than_the_target():
    assert kegalign_bins([5, 5, 5, 5], 10) == ((0, 1, 2), (3,))  # 10 is not > 10
    assert kegalign_bins([11, 1, 10, 1], 10) == ((0,), (1, 2), (3,))
    rng = random.Random(9)
    for _ in range(300):
        lengths = [rng.randint(1, 30) for _ in range(rng.randint(1, 12))]
        target = rng.randint(1, 80)
        assert kegalign_bins(lengths, target) == _brute_kegalign(lengths, target)


# --------------------------------------------------------------------------------------------
# Intervals and wga chunks
# --------------------------------------------------------------------------------------------


def _brute_intervals(block_len, size, interval):
    end_pos = block_len - size
    out, s = [], 0
    while s < end_pos:
        out.append((s, min(end_pos, s + interval)))
        s += interval
    return out


def _brute_chunks(s, e, chunk):
    out, i = [], s
    while i < e:
        out.append((i, min(i + chunk, e + 1)))
        i += chunk
    return out


def test_intervals_and_chunks_match_the_spec_loops_on_random_sizes():
    rng = random.Random(3)
    for _ in range(500):
        block_len, size = rng.randint(0, 400), rng.choice([4, 19, 22])
        interval, chunk = rng.randint(1, 120), rng.randint(1, 60)
        ivs = intervals(block_len, size, interval)
        assert ivs == _brute_intervals(block_len, size, interval)
        for s, e in ivs:
            assert wga_chunks((s, e), chunk) == _brute_chunks(s, e, chunk)


def test_the_window_on_an_interval_boundary_is_seeded_by_both_intervals():
    ivs = intervals(1019, 19, 300)  # end_pos = 1000
    assert ivs == [(0, 300), (300, 600), (600, 900), (900, 1000)]
    windows = [j for iv in ivs for c in wga_chunks(iv, 128) for j in range(*c)]
    assert windows.count(300) == windows.count(600) == windows.count(900) == 2
    assert windows.count(299) == 1


def test_the_last_window_is_never_seeded_when_the_chunk_size_divides_the_interval():
    ivs = intervals(119, 19, 1000)  # end_pos = 100, one interval (0, 100)
    assert ivs == [(0, 100)]
    chunks = wga_chunks(ivs[0], 25)
    assert chunks == [(0, 25), (25, 50), (50, 75), (75, 100)]
    assert 100 not in {j for c in chunks for j in range(*c)}
    # when it does not divide, the last chunk ends at e + 1 and the window e is seeded
    assert wga_chunks((0, 100), 30)[-1] == (90, 101)


def test_minus_interval_mirrors_on_block_len_minus_seed_size():
    assert minus_interval((0, 300), 1019, 19) == (700, 1000)
    assert minus_interval((900, 1000), 1019, 19) == (0, 100)
    rng = random.Random(1)
    for _ in range(100):
        bl, size = rng.randint(30, 500), rng.choice([4, 19])
        s = rng.randint(0, bl - size)
        e = rng.randint(s, bl - size)
        m = minus_interval((s, e), bl, size)
        assert m == (bl - size - e, bl - size - s)
        assert minus_interval(m, bl, size) == (s, e)


def test_seed_batches_are_plus_chunks_then_minus_chunks_per_interval():
    got = seed_batches(1019, 19, 300, 128, ("plus", "minus"))
    expected = []
    for n, (s, e) in enumerate(_brute_intervals(1019, 19, 300), 1):
        expected += [(n, "plus", c) for c in _brute_chunks(s, e, 128)]
        expected += [(n, "minus", c) for c in _brute_chunks(1000 - e, 1000 - s, 128)]
    assert got == expected


# --------------------------------------------------------------------------------------------
# The semantic chunk walk
# --------------------------------------------------------------------------------------------


def _kegalign_walk(cum: list[int], max_hits: int) -> list[tuple[int, int]]:
    """KegAlign's SeedAndFilter loop, u32 arithmetic; d_hit_num_vec[-1] (pos = 0xFFFFFFFF) reads
    as 0; a chunk of zero seeds is skipped."""
    num_seeds = len(cum)

    def at(pos):
        return 0 if pos == U32 else cum[pos]

    num_hits = cum[-1]
    num_iter = num_hits // max_hits + 1
    iter_hit_limit = max_hits
    limit_pos = [0] * num_iter
    for i in range(num_iter - 1):
        result_end = bisect_left(cum, iter_hit_limit)
        pos = (result_end - 1) & U32
        iter_hit_limit = (at(pos) + max_hits) & U32
        limit_pos[i] = pos
    limit_pos[num_iter - 1] = num_seeds - 1
    out, start_seed_index = [], 0
    for i in range(num_iter):
        iter_num_seeds = (limit_pos[i] + 1 - start_seed_index) & U32
        if iter_num_seeds > 0:
            out.append((start_seed_index, limit_pos[i]))
        start_seed_index = (limit_pos[i] + 1) & U32
    return out


def _random_counts(rng: random.Random, max_hits: int) -> list[int]:
    n = rng.randint(1, 60)
    kinds = [0, 0, 1, 2, 3, max_hits - 1, max_hits, max_hits + 1, 3 * max_hits + 2]
    return [
        rng.choice(kinds) if rng.random() < 0.7 else rng.randint(0, 2 * max_hits) for _ in range(n)
    ]


def test_chunk_walk_equals_kegalign_loop_on_random_counts_with_giant_seeds():
    rng = random.Random(17)
    giant_first = 0
    for _ in range(3000):
        max_hits = rng.randint(1, 25)
        counts = _random_counts(rng, max_hits)
        cum = list(np.cumsum(counts))
        expected = _kegalign_walk([int(c) for c in cum], max_hits)
        got = chunk_walk(np.array(cum, dtype=np.int64), max_hits)
        assert got == expected, (counts, max_hits)
        giant_first += counts[0] > max_hits
    assert giant_first > 100


def test_chunk_walk_keeps_a_giant_first_seed_and_everything_after_it_in_one_chunk():
    # cum[0] >= H: lower_bound - 1 is -1 every time, cum[-1] reads 0, so the limit never moves
    counts = [50, 1, 1, 1, 1, 1, 1, 1]
    assert chunk_walk(np.cumsum(counts), 4) == [(0, 7)]
    assert _kegalign_walk(list(np.cumsum(counts)), 4) == [(0, 7)]


def test_chunk_walk_covers_every_seed_once_in_order_and_only_the_last_chunk_reaches_h():
    rng = random.Random(23)
    for _ in range(500):
        max_hits = rng.randint(1, 10)
        counts = _random_counts(rng, max_hits)
        chunks = chunk_walk(np.cumsum(counts), max_hits)
        seeds = [s for a, b in chunks for s in range(a, b + 1)]
        assert seeds == list(range(len(counts)))  # never splits a seed, never repeats one
        for a, b in chunks[:-1]:
            assert sum(counts[a : b + 1]) < max_hits


def _walk_batch(cum: np.ndarray, s_a: int, s_b: int, max_hits: int) -> list[tuple[int, int]]:
    """One batch's semantic chunks as group hit ranges, by `chunk_walk` over its own sum."""
    h_a = int(cum[s_a - 1]) if s_a else 0
    local = cum[s_a:s_b] - h_a
    return [
        (h_a + (int(local[a - 1]) if a else 0), h_a + int(local[b]))
        for a, b in chunk_walk(local, max_hits)
    ]


def test_chunk_walks_of_a_group_equal_chunk_walk_of_each_batch():
    """Random groups (empty batches, batches of zero hits, giant seeds first and inside) cut
    into random batches: every batch's chunks as hit ranges, equal to chunk_walk's."""
    from hspz.stages.chunks import chunk_walks

    rng = random.Random(29)
    walked = left = 0
    for _ in range(600):
        max_hits = rng.randint(1, 25)
        counts = _random_counts(rng, max_hits) + [0] * rng.randint(0, 3)
        cum = np.cumsum(np.array(counts, np.int64))
        cuts = sorted(rng.randint(0, len(counts)) for _ in range(rng.randint(0, 6)))
        slots = np.array([0, *cuts, len(counts)], np.int64)
        edges = np.array([int(cum[s - 1]) if s else 0 for s in slots], np.int64)
        got = chunk_walks(np, cum, slots, edges, max_hits)
        expected = [
            _walk_batch(cum, int(a), int(b), max_hits)
            for a, b in zip(slots[:-1], slots[1:], strict=True)
        ]
        assert got == expected, (counts, max_hits, slots)
        walked += sum(len(c) > 1 for c in got)
        most = rng.randint(0, 3)  # longer walks left to the caller, the rest unchanged
        searches = (edges[1:] - edges[:-1]) // max_hits * (slots[1:] > slots[:-1])
        assert chunk_walks(np, cum, slots, edges, max_hits, most) == [
            c if k <= most else None for c, k in zip(expected, searches, strict=True)
        ]
        left += int((searches > most).sum())
    assert walked > 300 and left > 300


def test_chunk_walk_splits_exactly_at_lower_bound_minus_one():
    # cum = 3 6 9 12; H = 7: lower_bound(7) = 2 -> pos 1 (cum 6); limit 13 -> lb 4 -> pos 3
    assert chunk_walk(np.array([3, 6, 9, 12]), 7) == [(0, 1), (2, 3)]
    # H = 6: lb(6) = 1 -> pos 0 (cum 3); limit 9: lb 2 -> pos 1 (cum 6); then the last seed
    assert chunk_walk(np.array([3, 6, 9, 12]), 6) == [(0, 0), (1, 1), (2, 3)]


# --------------------------------------------------------------------------------------------
# The digest
# --------------------------------------------------------------------------------------------


def _sort_sha(tmp_path, data: bytes) -> str:
    path = tmp_path / "all.segments"
    path.write_bytes(data)
    out = subprocess.run(
        f"LC_ALL=C sort {path} | sha256sum",
        shell=True,
        check=True,
        capture_output=True,
        env={**os.environ, "LC_ALL": "C"},
    )
    return out.stdout.decode().split()[0][:16]


def _segment_lines(seed: int, n: int) -> list[bytes]:
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        r0 = rng.randint(1, 10 ** rng.randint(1, 9))
        q0 = rng.randint(1, 10 ** rng.randint(1, 9))
        ln = rng.randint(0, 500)
        lines.append(
            f"{rng.choice(['chr1', 'chr10', 'chr1_a', 'Chr2'])}\t{r0}\t{r0 + ln}\t"
            f"{rng.choice(['q', 'q1', 'qq'])}\t{q0}\t{q0 + ln}\t{rng.choice('+-')}\t"
            f"{rng.randint(3000, 40000)}\n".encode()
        )
    lines += lines[: n // 10]  # duplicate lines count
    rng.shuffle(lines)
    return lines


@pytest.mark.parametrize("n", [0, 1, 300])
def test_digest_of_equals_lc_all_c_sort_sha256sum(tmp_path, n):
    lines = _segment_lines(n, n)
    data = b"".join(lines)
    expected = _sort_sha(tmp_path, data)
    assert digest_of([data]) == expected
    parts = [b"".join(lines[: n // 2]), b"".join(lines[n // 2 :])]
    assert digest_of(parts) == expected  # one chunk per file, each newline-terminated
    cuts = sorted(random.Random(n).sample(range(len(lines) + 1), min(n, 9)))
    many = [b"".join(lines[a:b]) for a, b in zip([0, *cuts], [*cuts, len(lines)], strict=True)]
    assert digest_of(many) == expected  # sorted runs of different widths, merged


def test_digest_of_sorts_a_line_before_its_extensions_like_sort(tmp_path):
    data = b"a\tb\nab\na\na b\n"
    assert digest_of([data]) == _sort_sha(tmp_path, data)


@pytest.mark.parametrize("ranges", [1, 2, 7, 60])
def test_digest_merged_in_key_ranges_on_threads_equals_sort(tmp_path, ranges):
    """The final merge cut into key ranges (sampled splitters, each run cut alike), merged on
    threads and hashed in order: the bytes `LC_ALL=C sort | sha256sum` sees, for runs of many
    widths, duplicates across runs and lines that extend others."""
    from hspz.run.digest import LineDigest

    lines = _segment_lines(ranges, 4000) + [b"chr1\t5\n", b"chr1\t5\t\n", b"chr1\t50\n"] * 30
    random.Random(ranges).shuffle(lines)
    cuts = sorted(random.Random(7).sample(range(len(lines)), 11))
    d = LineDigest(threads=3, ranges=ranges)
    for a, b in zip([0, *cuts], [*cuts, len(lines)], strict=True):
        d.add(b"".join(lines[a:b]))
    assert d.hexdigest() == _sort_sha(tmp_path, b"".join(lines))


NAMES = [
    "chr1",
    "chr10",
    "chr1_random",
    "chr2",
    "chrX",
    "a",
    "a\x01b",
    "ab",
    "scaffold_1",
    "scaffold_10",
    "scaffold_100",
    "z" * 70,
]


@pytest.mark.parametrize("seed", range(6))
def test_digest_by_groups_sealed_in_any_order_equals_sort(tmp_path, seed):
    """Reference bins as groups (names that extend others, one below TAB, one wider than every
    line of another group, one in two groups, a group without lines), chunks of groups
    interleaved, each group sealed after its last chunk, in random orders: the digest
    `LC_ALL=C sort | sha256sum` gives."""
    from hspz.run.digest import LineDigest

    rng = random.Random(seed)
    names = NAMES[:]
    rng.shuffle(names)
    groups = {g: [n.encode() for n in names[g::4]] for g in range(4)}
    groups[4] = [groups[0][0]]  # a name in two groups
    groups[5] = [b"never"]  # no lines
    chunks = []
    for g, members in groups.items():
        lines = [
            f"{rng.choice(members).decode()}\t{rng.randint(1, 10 ** rng.randint(1, 9))}\t+\t"
            f"{rng.randint(0, 99)}\n".encode()
            for _ in range(rng.randint(0, 900))
        ]
        lines += [members[0] + b"\t5\n", members[0] + b"\t5\t\n"] * (g != 5)
        cuts = sorted(rng.sample(range(len(lines) + 1), 3))
        chunks += [
            (g, b"".join(lines[a:b])) for a, b in zip([0, *cuts], [*cuts, len(lines)], strict=True)
        ]
    rng.shuffle(chunks)
    d = LineDigest(groups, threads=2, ranges=rng.choice([0, 1, 3]))
    left = {g: sum(c == g for c, _ in chunks) for g in groups}
    for g in [g for g in groups if not left[g]]:
        d.seal(g)
    for g, data in chunks:
        d.add(data, g)
        left[g] -= 1
        if not left[g]:
            d.seal(g)
    assert d.hexdigest() == _sort_sha(tmp_path, b"".join(data for _, data in chunks))


def test_digest_by_groups_hashes_a_sealed_group_below_every_open_one_at_once():
    """Groups sealed in key order: each group's lines are merged and hashed at its seal, so only
    the last group's are left for the end; a line outside its group's names is refused."""
    from hspz.run.digest import LineDigest

    d = LineDigest({0: [b"chr1", b"chr2"], 1: [b"chr3"], 2: [b"chr4", b"chr5"]}, threads=2)
    d.add(b"chr2\t9\nchr1\t7\n", 0)
    d.add(b"chr3\t1\n", 1)
    d.seal(0)  # chr1-2 hashed; the ranges between and after the open spans final, empty
    assert d.frontier == b"chr3\t" and not any(texts for _, _, texts in d.pieces)
    d.add(b"chr5\t1\n", 2)
    d.seal(2)  # chr4-5 joined, waiting for chr3
    assert d.frontier == b"chr3\t" and [p[0] for p in d.pieces] == [b"chr3\n", b"chr4\t", b"chr5\n"]
    assert b"".join(t for _, _, texts in d.pieces for t in texts) == b"chr5\t1\n"
    assert not d.runs and [len(r) for r in d.pending[1]] == [1]  # chr3's, its group open
    with pytest.raises(RuntimeError, match="outside group 1"):
        d.add(b"chr4\t1\n", 1)
    d.seal(1)
    assert d.frontier is None
    expected = hashlib.sha256(b"chr1\t7\nchr2\t9\nchr3\t1\nchr5\t1\n").hexdigest()[:16]
    assert d.hexdigest() == expected


@pytest.mark.parametrize(
    "max_bases, first_bases",
    [(1, None), (700, None), (1500, None), (10**9, None), (10**9, 1500), (1500, 1)],
)
def test_batch_groups_cover_every_batch_once_in_order_and_only_join_contiguous_chunks(
    max_bases, first_bases
):
    from hspz.engine.contract import seed_batch_groups

    jobs = [(n, s, c) for n, s, c in seed_batches(20_000, 19, 6_000, 700, ("plus", "minus"))]
    groups = seed_batch_groups(jobs, max_bases, first_bases)
    assert [i for g in groups for i in g] == list(range(len(jobs)))
    for k, g in enumerate(groups):
        (n, strand, _), width = jobs[g[0]], sum(jobs[i][2][1] - jobs[i][2][0] for i in g)
        cap = first_bases if k == 0 and first_bases is not None else max_bases
        assert len(g) == 1 or width <= cap
        for a, b in zip(g[:-1], g[1:], strict=True):
            assert jobs[a][:2] == jobs[b][:2] == (n, strand)
            assert jobs[a][2][1] == jobs[b][2][0]
    if max_bases == 10**9 and first_bases is None:  # one group per (interval, strand)
        assert len(groups) == len({j[:2] for j in jobs})
    if max_bases == 10**9 and first_bases is not None:  # the first split after 1500 bases
        assert len(groups) == len({j[:2] for j in jobs}) + 1 and len(groups[0]) == 2
        assert groups[1][0] == 2 and jobs[2][:2] == jobs[0][:2]
    if max_bases == 1:
        assert len(groups) == len(jobs)
    if first_bases == 1:  # a first group of one seed batch, then groups of two
        assert len(groups[0]) == 1 and len(groups[1]) == 2
