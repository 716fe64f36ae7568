"""Backend choice: `--backend auto|gpu|cpu`.

auto takes the GPU when CuPy imports and sees a device, else the CPU backend with a one-line note.
The GPU module is imported only here and only when chosen, so a machine without CUDA never loads
CuPy.
"""

from __future__ import annotations

import sys

from hspz.errors import UsageError
from hspz.options import Options


def gpu_available() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no CuPy, no driver, no device: all mean "no GPU"
        return False


def select(options: Options):
    """The engine module (with `run_unit`) this run uses."""
    if options.backend == "gpu" or (options.backend == "auto" and gpu_available()):
        if not gpu_available():
            raise UsageError("--backend gpu: no CUDA device is visible (is CuPy installed?)")
        from hspz.engine import gpu

        gpu.set_threads(options.threads)
        return gpu
    if options.backend == "auto":
        print("note: no GPU visible; using the CPU backend", file=sys.stderr)
    from hspz.engine import cpu

    cpu.set_threads(options.threads)
    return cpu
