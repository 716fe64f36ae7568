"""hspz.core.jit: numba loads on the first call of a decorated loop, never on import; the numpy
paths that run while it is not loaded write the same bytes as the numba loops; the GPU path's
host work loads no numba."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from hspz.core import jit
from hspz.io import packing, readers, twobit
from hspz.io.packing import pack_bin, reverse_complement
from hspz.io.records import Record
from hspz.run import digest as emit
from hspz.stages import segments
from hspz.stages.hsp import HSP_DTYPE


def _python(code: str, cwd=None) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=cwd
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def _both_ways(monkeypatch, fn):
    """fn() with numba taken as not loaded (numpy paths), then as loaded (numba loops)."""
    out = []
    for loaded in (False, True):
        monkeypatch.setattr(jit, "loaded", lambda v=loaded: v)
        out.append(fn())
    return out


def _hsps(rng, n: int, ref, qry) -> np.ndarray:
    h = np.zeros(n, HSP_DTYPE)
    h["ref_start"] = rng.integers(0, ref.block_len, n)
    h["query_start"] = rng.integers(0, qry.block_len, n)
    h["len"] = rng.integers(0, 100_000, n)
    h["score"] = rng.integers(-5, 2**31 - 1, n)  # negative too: the writers handle a sign
    return h


@pytest.mark.parametrize("n", [0, 1, 9, 2000])
def test_segments_lines_and_digest_are_the_same_bytes_either_way(monkeypatch, n):
    rng = np.random.default_rng(n)
    zeros = np.zeros
    ref = pack_bin(
        [
            Record("chr1", zeros(999, np.uint8)),
            Record("a_long_name", zeros(5000, np.uint8)),
            Record("x", zeros(10**6, np.uint8)),
        ],
        "r.",
    )
    qry = pack_bin([Record("q", zeros(10**7, np.uint8)), Record("q22", zeros(30, np.uint8))])
    h = _hsps(rng, n, ref, qry)

    def written():
        parts = [segments.format_lines(h, ref, qry, s) for s in ("plus", "minus")]
        parts += [segments.format_raw(h, s) for s in ("plus", "minus")]
        return parts + [emit.digest_of([parts[0], parts[1][: len(parts[1]) // 3]]).encode()]

    numpy_way, numba_way = _both_ways(monkeypatch, written)
    assert numpy_way == numba_way
    assert numpy_way[0].count(b"\n") == n


def test_sequence_codes_are_the_same_either_way(monkeypatch):
    rng = np.random.default_rng(3)
    seq = rng.integers(0, 256, 100_003).astype(np.uint8)
    packed = pack_bin([Record("a", seq[:50_000]), Record("b", seq[50_000:])])

    def coded():
        both = packing.both_codes(seq)
        return [
            packing.seed_codes(seq),
            packing.score_codes(seq),
            *both,
            reverse_complement(packed).buf,
        ]

    numpy_way, numba_way = _both_ways(monkeypatch, coded)
    for a, b in zip(numpy_way, numba_way, strict=True):
        assert a.dtype == b.dtype == np.uint8 and np.array_equal(a, b)


@pytest.mark.parametrize("order", ["<", ">"])
def test_2bit_blocks_read_the_same_either_way(monkeypatch, tmp_path, order):
    """N and mask blocks (overlapping, at both ends, none) set by index arrays or numba loops."""
    rng = np.random.default_rng(11)
    seqs = []
    for n in (1, 50, 3000, 20_000):
        seq = rng.choice(
            np.frombuffer(b"ACGTacgtNn", np.uint8), n, p=[0.2] * 4 + [0.04] * 4 + [0.02] * 2
        )
        seq[: n // 3] = np.frombuffer(b"ACGT", np.uint8)[rng.integers(0, 4, n // 3)]  # no blocks
        seqs.append(seq)
    # blocks at both ends: a masked N first, then N and lowercase runs to the last base
    seqs[2][0], seqs[2][-3:] = ord("n"), np.frombuffer(b"nNN", np.uint8)
    seqs[3][:2], seqs[3][-2:] = np.frombuffer(b"Na", np.uint8), np.frombuffer(b"aa", np.uint8)
    path = tmp_path / "x.2bit"
    twobit.write_2bit(path, [Record(f"r{i}", s) for i, s in enumerate(seqs)], order)
    numpy_way, numba_way = _both_ways(monkeypatch, lambda: readers.read_records(path))
    for a, b, want in zip(numpy_way, numba_way, seqs, strict=True):
        assert a.name == b.name and bytes(a.seq) == bytes(b.seq) == bytes(want)


@pytest.mark.parametrize(
    "kind", ["ordered", "touching", "zero sizes", "unordered", "overlapping", "any"]
)
def test_2bit_block_marks_of_any_blocks_equal_the_numba_loops(kind):
    """`_mark_blocks` (numpy: one bool a base from the runs between blocks, merged first where
    out of order or overlapping) writes what `_set_n` then `_set_lower` write, N blocks inside
    mask blocks included."""
    rng = np.random.default_rng(len(kind))
    length = 5000
    seq = np.frombuffer(b"ACGT", np.uint8)[rng.integers(0, 4, length)]

    def blocks(n: int) -> tuple[np.ndarray, np.ndarray]:
        starts = np.sort(rng.choice(length - 40, n, replace=False)).astype(np.int64)
        sizes = np.minimum(rng.integers(1, 40, n), np.diff(starts, append=length))
        if kind == "touching":
            sizes = np.diff(starts, append=length)
        elif kind == "zero sizes":
            sizes[::3] = 0
        elif kind == "unordered":
            order = rng.permutation(n)
            starts, sizes = starts[order], sizes[order]
        elif kind == "overlapping":
            sizes = sizes + 60
            sizes = np.minimum(sizes, length - starts)
        elif kind == "any":  # repeated starts, nested, zero sizes, any order
            starts = rng.integers(0, length, n)
            sizes = np.minimum(rng.integers(0, 300, n), length - starts)
        return starts, sizes

    n_blocks, m_blocks = blocks(30), blocks(80)
    if kind == "ordered":
        assert not (n_blocks[0][1:] < (n_blocks[0] + n_blocks[1])[:-1]).any()
    by_numpy, by_numba = seq.copy(), seq.copy()
    twobit._mark_blocks(by_numpy, *n_blocks, *m_blocks)
    twobit._set_n(by_numba, *n_blocks)
    twobit._set_lower(by_numba, *m_blocks)
    assert by_numpy.tobytes() == by_numba.tobytes()
    assert (by_numpy == ord("n")).any() or kind == "zero sizes"


def test_2bit_block_marks_drop_zero_size_blocks_before_merging_them():
    """numpy's path is taken while the blocks' bases are few, however many blocks there are:
    a record of a million shuffled blocks of size 0 (and two real ones) was sorted and merged
    in full (2.9 s and 300 MiB for 5 million; numba's loops 0.2 s).  Blocks that cover nothing
    cost a bool each now, and the marks still equal the loops'."""
    import tracemalloc

    rng = np.random.default_rng(9)
    length, n = 100_000, 1_000_000
    seq = np.frombuffer(b"ACGT", np.uint8)[rng.integers(0, 4, length)]
    starts = np.concatenate((rng.integers(0, length + 1, n), [length - 7, 3])).astype(np.int64)
    sizes = np.concatenate((np.zeros(n, np.int64), [7, 11]))
    assert 2 * int(sizes.sum()) < twobit.SMALL_BLOCK_BASES  # the record takes this path
    by_numpy, by_numba = seq.copy(), seq.copy()
    tracemalloc.start()
    try:
        twobit._mark_blocks(by_numpy, starts, sizes, starts[::-1], sizes[::-1])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, f"{peak / 2**20:.0f} MiB for blocks that cover nothing"
    twobit._set_n(by_numba, starts, sizes)
    twobit._set_lower(by_numba, starts[::-1], sizes[::-1])
    assert by_numpy.tobytes() == by_numba.tobytes()
    assert bytes(by_numpy[3:14]) == b"n" * 11 and bytes(by_numpy[-7:]) == b"n" * 7


def test_the_gpu_paths_host_work_loads_no_numba(tmp_path):
    """What the GPU backend's host does for a small run (query bins without host codes, the
    gate from match counts, dedup, the segments lines, the digest, reading 2bit) never imports
    numba; the CPU backend's first loop does."""
    out = _python(
        """
        import sys
        import numpy as np
        from hspz.core import jit
        from hspz.run import digest, execute
        from hspz.stages import hsp, segments
        from hspz.engine.contract import Context, prepare_query, prepare_reference, settle_chunks
        from hspz.core.options import Options
        from hspz.io.records import Record
        ctx = Context.from_options(Options())
        rng = np.random.default_rng(1)
        seq = rng.choice(np.frombuffer(b"ACGTacgtN", np.uint8), 20000)
        ref = prepare_reference(ctx, 0, [Record("r", seq)], host_codes=False)
        qry = prepare_query(ctx, 0, [Record("q", seq[::-1].copy())], host_codes=False)
        n = 50
        total, rs = rng.integers(2000, 9000, n), rng.integers(0, 10000, n)
        ln = rng.integers(1, 200, n)
        counts = rng.integers(0, 30, (n, 4))
        gated, keep = hsp.gate_by_counts(total, rs, rs, ln, counts, 3000, True)
        (_, _, final), = settle_chunks(ctx, gated, np.ones(keep.sum(), np.int64),
                                       np.zeros(keep.sum(), np.int64), 1)
        text = segments.format_lines(final, ref.packed, qry.packed["minus"], "minus")
        print(len(text) > 0, digest.digest_of([text]) != "", "numba" in sys.modules)
        ref.score, qry.seed  # host codes on first use: still numpy below 64 MB
        from hspz.io.readers import read_records
        from hspz.io.twobit import write_2bit
        write_2bit("x.2bit", [Record("m", seq)])
        assert bytes(read_records("x.2bit")[0].seq) == bytes(seq)  # N and mask blocks
        print("numba" in sys.modules, jit.loaded())
        from hspz.stages import xdrop
        z = np.zeros(4, np.uint8)
        xdrop.walk_right(z, z, 4, 4, np.ones(64, np.int32), 10, 0, 0)
        print("numba" in sys.modules, jit.loaded())
    """,
        cwd=tmp_path,
    )
    assert out == ["True", "True", "False", "False", "False", "True", "True"]


def test_decorated_loops_call_compiled_callees(tmp_path):
    """A decorated loop that calls another, in a module of its own (numba caches need a file):
    the first call loads numba, compiles both and points the module's names at dispatchers."""
    (tmp_path / "jitprobe.py").write_text(
        textwrap.dedent("""
        from hspz.core.jit import njit

        @njit(inline="always")
        def twice(x):
            return 2 * x

        @njit
        def total(a):
            s = 0
            for v in a:
                s += twice(v)
            return s
    """)
    )
    out = _python(
        """
        import sys
        import numpy as np
        import jitprobe
        from hspz.core import jit
        print("numba" in sys.modules, jit.loaded(), type(jitprobe.twice).__name__)
        print(jitprobe.total(np.arange(5)), jit.loaded(), type(jitprobe.twice).__name__)
        print(jitprobe.twice(21))
    """,
        cwd=tmp_path,
    )
    assert out == ["False", "False", "_Lazy", "20", "True", "CPUDispatcher", "42"]


def test_prefetch_in_a_decorated_loop_changes_no_result(tmp_path):
    """`jit.prefetch` is a stand-in until numba loads, then the intrinsic a compiled loop calls:
    asking for lines before and past the array's ends (as the walks do near a bin's ends) and
    with an unsigned index neither faults nor changes what the loop computes."""
    (tmp_path / "prefetchprobe.py").write_text(
        textwrap.dedent("""
        import numpy as np
        from hspz.core.jit import njit, prefetch

        @njit
        def total(a):
            s = 0
            for i in range(len(a)):
                prefetch(a, i - 4096)
                prefetch(a, i + 4096)
                prefetch(a, np.uint32(i))
                s += a[i]
            return s
    """)
    )
    out = _python(
        """
        import numpy as np
        import prefetchprobe
        from hspz.core import jit
        print(type(jit.prefetch).__name__, jit.loaded())
        print(prefetchprobe.total(np.arange(1000)), type(prefetchprobe.prefetch).__name__)
    """,
        cwd=tmp_path,
    )
    assert out == ["_Lazy", "False", "499500", "_Intrinsic"]


def test_load_hands_every_decorated_function_to_numba_at_once():
    """`jit.load` (a pooled CPU worker's warm-up): numba loaded, loops compiled on their call."""
    out = _python("""
        import sys
        from hspz.core import jit
        from hspz.stages import xdrop
        from hspz.engine import cpu
        print("numba" in sys.modules, jit.loaded())
        cpu.warm_worker(0)
        print("numba" in sys.modules, jit.loaded(), type(xdrop.walk_right).__name__)
    """)
    assert out == ["False", "False", "True", "True", "CPUDispatcher"]


def test_the_cpu_backend_loads_numba_before_the_run_imports_its_stages_and_reads(tmp_path):
    """`--backend cpu` (issue 24): numba and its code generator are loaded on the main thread
    before the run imports its stages and reads its inputs (`backends.warm`, which returns no
    thread for the CPU backend; on a thread beside them numba's import took twice as long on
    16 cores, and the table build waited for it); -u and a parent of worker processes
    (`numba=False`), which may never call a loop, load none."""
    ref, qry = tmp_path / "r.fa", tmp_path / "q.fa"
    ref.write_text(">r\n" + "ACGTTGCAAGGCTTAC" * 40 + "\n")
    qry.write_text(">q\n" + "ACGTTGCAAGGCTTAC" * 20 + "\n")
    out = _python(f"""
        import sys, threading
        from hspz import cli
        from hspz.core import jit
        from hspz.engine import backends
        from hspz.io import readers

        print(backends.warm("cpu", numba=False), jit.loaded(), threading.active_count())
        print(backends.warm("cpu"), jit.loaded(), threading.active_count())  # loaded on return
        real = readers.read_both
        def spy(*paths):
            print("read", jit.loaded(), threading.current_thread() is threading.main_thread())
            return real(*paths)
        readers.read_both = spy  # before `commands.run` imports it
        print("stages", "hspz.commands.run" in sys.modules)
        print("ran", cli.main(["run", "--backend", "cpu", "-r", "{ref}", "-q", "{qry}",
                               "-o", "{tmp_path}/o"]))
    """)
    digest = out.index("digest:")  # the run's own line
    assert out[:digest] + out[digest + 2 :] == [
        "None", "False", "1",
        "None", "True", "1",
        "stages", "False",
        "read", "True", "True",
        "ran", "0",
    ]  # fmt: skip


@pytest.mark.parametrize("strand", ["both", "minus"])
def test_the_preload_takes_every_loop_a_units_seed_batches_call(strand):
    """Given the run's options, the CPU preload (issue 24) runs a tiny seed batch a strand
    (`cpu.warm_loops`), so that a unit's engine threads take nothing more from numba's cache:
    at -t 16 they otherwise queued on numba's compiler lock at their first piece.  Fails when a
    loop's argument types in the warm-up drift from a real unit's (say a seed array's dtype),
    or when the engine calls a loop the warm-up does not."""
    out = _python(f"""
        import numpy as np
        from numba.core import dispatcher
        from hspz.core.options import Options
        from hspz.engine import cpu
        from hspz.engine.contract import Context, prepare_query, prepare_reference
        from hspz.io.records import Record

        options = Options(backend="cpu", strand="{strand}")
        cpu.preload(options).join()
        loads = []
        inner = dispatcher.Dispatcher.compile

        def compile(self, sig):
            loads.append(self.py_func.__name__)
            return inner(self, sig)

        dispatcher.Dispatcher.compile = compile
        rng = np.random.default_rng(5)
        ref = np.frombuffer(b"ACGT", np.uint8)[rng.integers(0, 4, 30_000)]
        back = np.frombuffer(ref[20_000:24_000][::-1].tobytes().translate(bytes.maketrans(
            b"ACGT", b"TGCA")), np.uint8)  # the reference's reverse complement: minus strand HSPs
        qry = np.concatenate((ref[5_000:9_000], back, ref[:3_000]))
        qry[::17] = np.frombuffer(b"A", np.uint8)  # diverged copies: short HSPs beside long ones
        ctx = Context.from_options(options)
        cpu.set_threads(3)
        r = prepare_reference(ctx, 0, [Record("r", ref)])
        q = prepare_query(ctx, 0, [Record("q", qry.copy())])
        result = cpu.run_unit(ctx, r, q, 0)
        print(result.hsps > 0, result.raw_hsps > result.hsps, len(loads), *loads)
    """)
    assert out == ["True", "True", "0"]


@pytest.mark.parametrize("text", [b"\n", b"a", b"a\n", b"b\na\n\n\n", b"\n\nx\n\nyy", b"zz\n" * 3])
def test_digest_rows_are_the_same_either_way(monkeypatch, text):
    """The digest's lines of a chunk: split in Python, or copied into rows by numba; interior
    empty lines kept, trailing newlines dropped, a last line without one kept."""
    numpy_way, numba_way = _both_ways(monkeypatch, lambda: emit._rows_of(text))
    assert numpy_way.dtype == numba_way.dtype and numpy_way.tolist() == numba_way.tolist()
