"""What a cold `hspZ run --backend gpu` spends before its first seed hit, step by step.

    python benchmarks/cold_start.py REF.fa

Times, in one fresh process: importing numpy, numba (and hspz), cupy; starting CUDA; then each
step of building a reference bin on the device (`gpu.DeviceRef`), synchronised after each, so the
first-use cost of every CuPy operation shows.  Run it twice: the second run has warm disk caches
(CuPy's kernel cache, numba's cache).
"""

from __future__ import annotations

import sys
import time

T0 = time.perf_counter()
_last = [T0]


def mark(label: str) -> None:
    now = time.perf_counter()
    print(f"  {label:42s} {1e3 * (now - _last[0]):8.1f} ms  (at {1e3 * (now - T0):7.1f})")
    _last[0] = now


import numpy as np  # noqa: E402

mark("import numpy")
import numba  # noqa: E402, F401

mark("import numba")
from hspz.engine import Context, prepare_reference  # noqa: E402
from hspz.options import Options  # noqa: E402
from hspz.sequence import read_records  # noqa: E402

mark("import hspz")
import cupy as cp  # noqa: E402

mark("import cupy")
cp.cuda.runtime.getDeviceCount()
mark("CUDA: device count")
cp.zeros(1).sum()
cp.cuda.Device().synchronize()
mark("CUDA: context, first allocation and kernel")
from hspz.engine import gpu  # noqa: E402

mark("import hspz.engine.gpu")
ctx = Context.from_options(Options())
ref = prepare_reference(ctx, 0, read_records(sys.argv[1]))
mark("read and pack the reference (host)")


def step(label, fn):
    out = fn()
    cp.cuda.Device().synchronize()
    mark(label)
    return out


seed_lut, score_lut = step("LUT upload", gpu._luts)
buf = step("sequence upload", lambda: cp.asarray(ref.packed.buf))
codes = step("seed codes (take)", lambda: seed_lut[buf])
score = step("score codes (take)", lambda: score_lut[buf])
step("padded copy", lambda: gpu._padded(score))
shape, step_ = ctx.shape, ctx.options.step
count = len(codes) - shape.size
keys = cp.empty(count, cp.uint64)
step("ref_keys module load + launch", lambda: gpu._kernel(shape, "seed", "ref_keys")(
    gpu._grid(count), (gpu.BLOCK,), (codes, np.int64(0), np.int64(1), np.int64(count), keys)))
step("keys.sort()", keys.sort)
n_valid = step("count_nonzero", lambda: int(count - cp.count_nonzero(keys == np.uint64(2**64 - 1))))
kmers = step("kmers (shift, astype)", lambda: (keys[:n_valid] >> np.uint64(32)).astype(cp.int64))
hist = step("bincount", lambda: cp.bincount(kmers, minlength=shape.n_kmers))
step("cumsum + astype", lambda: cp.cumsum(hist).astype(cp.uint32))
step("pos (and, astype)", lambda: (keys & np.uint64(0xFFFFFFFF)).astype(cp.uint32))
step("whole DeviceRef again (warm)", lambda: gpu.DeviceRef(ctx, ref))
