"""Stand-in backends for tests/test_workers.py (spawned workers import them by their class):
`NumbaProbe` is the CPU backend, except that each unit's result says in `engine_ms` whether
numba was loaded when the unit started (1.0) or not (0.0), and it warms nothing; `NoDevice`
fails as its worker binds its device."""

from hspz.core import jit
from hspz.engine.cpu import CpuBackend


class NumbaProbe(CpuBackend):
    def warm_worker(self, worker):
        pass

    def run_unit(self, ctx, ref, qry, ordinal, progress=None):
        loaded = jit.loaded()
        result = super().run_unit(ctx, ref, qry, ordinal, progress)
        result.engine_ms = 1.0 if loaded else 0.0
        return result


class NoDevice(CpuBackend):
    def use_device(self, device):
        raise RuntimeError(f"device {device} is not there")
