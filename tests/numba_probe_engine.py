"""A stand-in engine for tests/test_workers.py: the CPU engine, except that each unit's result
says in `gpu_ms` whether numba was loaded when the unit started (1.0) or not (0.0)."""

from hspz.core import jit
from hspz.engine import cpu


def run_unit(ctx, ref, qry, ordinal, progress=None):
    loaded = jit.loaded()
    result = cpu.run_unit(ctx, ref, qry, ordinal, progress)
    result.gpu_ms = 1.0 if loaded else 0.0
    return result
