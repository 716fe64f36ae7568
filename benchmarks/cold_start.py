"""What a cold `hspZ run --backend gpu` spends before its first seed hit, step by step.

    python benchmarks/cold_start.py REF.fa

Times, in one fresh process: importing numpy, numba (and hspz), cupy; starting CUDA; then each
step of building a reference bin on the device (`gpu.DeviceRef`), synchronised after each, so
each kernel's first-use cost (module load) shows.  Run it twice: the second run has warm disk caches
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


import numpy  # noqa: E402, F401

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
cp.cuda.Device(0).mem_info  # noqa: B018
cp.empty(1)
mark("CUDA: context and first allocation")
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


codes, score = step("codes on the device (codes_of: module load + launch)",
                   lambda: gpu._codes(ctx.shape, ref.packed.buf))
shape, step_ = ctx.shape, ctx.options.step
step("seed table (ref_keys, sort, table_index, table_positions)",
     lambda: gpu.build_table(shape, step_, codes, ref.packed.block_len))
step("whole DeviceRef again (warm)", lambda: gpu.DeviceRef(ctx, ref))
