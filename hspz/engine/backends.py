"""Backend choice: `--backend auto|gpu|cpu`.

auto takes the GPU when CuPy imports and sees a device, else the CPU backend with a one-line note.
A backend is one object (`hspz.engine.contract.Backend`); `by_name` gives it from the name that
travels to worker processes.  The GPU module imports CuPy only on first use, and is chosen only
when a device is seen, so a machine without CUDA never loads CuPy.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from types import ModuleType

from hspz.core import lean
from hspz.core.errors import UsageError, interrupts_held
from hspz.core.options import Options
from hspz.engine.contract import Backend

NAMES = ("cpu", "gpu")


def gpu_available(engine: bool = True) -> bool:
    """Whether CuPy imports and sees a device.  Without `engine` (a plan, which runs nothing on
    the devices): whether the CUDA driver sees one and CuPy is installed, imported by neither.
    (Where CuPy is installed but cannot be imported, a plan is then made for the GPU and its
    `--backend auto` work jobs run it on the CPU: the plan's bytes, the CPU's speed.)"""
    if not engine:
        import importlib.util

        from hspz.engine import cuda_driver

        try:
            return importlib.util.find_spec("cupy") is not None and bool(cuda_driver.devices())
        except (cuda_driver.DriverError, ImportError, ValueError):
            return False
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no CuPy, no driver, no device: all mean "no GPU"
        return False


def warm(
    backend: str, numba: bool = True, engine: bool = True, options: Options | None = None
) -> threading.Thread | None:
    """Unless the CPU backend is asked for, import CuPy (and cupyx, `hspz.core.lean`) now, then
    start CUDA on a thread: device 0's context, which the memory preflight reads first.  The
    caller meanwhile imports the stages and reads the inputs.  Only CUDA's start runs beside
    them: it waits in the driver without the GIL, whereas importing CuPy on the thread slowed
    the caller's imports more than it saved (every file an import reads hands the GIL over;
    E. coli on the H200).  With the CPU backend asked for (and `numba`), numba is loaded and its
    code generator started here instead, on the caller's thread, and nothing is returned
    (`engine.cpu.preload`): on a thread beside the caller's imports and reads, numba's import
    took twice as long, and the table build waited for it (16 cores, BENCHMARKS.md); given the
    run's `options`, a daemon thread that nothing waits for then takes the engine's loops from
    numba's cache (`engine.cpu.warm_loops`).  Without `engine` (a plan), the CUDA driver and
    device 0's context are started on the thread instead, and CuPy is not imported at all
    (`engine.cuda_driver`)."""
    if backend == "cpu":
        if numba:
            _start_numba(options)
        return None
    if not engine:
        from hspz.engine import cuda_driver

        return _thread(cuda_driver.start)
    try:
        import cupy

        lean.import_without("scipy.sparse", "cupyx")
    except Exception:  # no usable CuPy: `select` says so
        return None
    return _thread(_start_cuda, cupy)


def _thread(target: Callable[..., None], *args: object) -> threading.Thread:
    thread = threading.Thread(target=target, args=args, daemon=True)
    thread.start()
    return thread


def _start_numba(options: Options | None) -> None:
    try:
        from hspz.engine import cpu

        with interrupts_held():  # a Ctrl-C or SIGTERM inside numba's load was ignored
            cpu.preload(options)
    except Exception:  # the engine's own first loop reports what is wrong
        pass


def _start_cuda(cupy: ModuleType) -> None:
    try:
        if cupy.cuda.runtime.getDeviceCount() > 0:
            cupy.cuda.Device(0).mem_info  # noqa: B018 (creates the context)
    except Exception:  # no driver or no device: `select` says so on the main thread
        pass


def by_name(name: str) -> Backend:
    """The backend called `name` ("cpu" or "gpu"; `Backend.name`)."""
    if name == "gpu":
        from hspz.engine import gpu

        return gpu.BACKEND
    if name == "cpu":
        from hspz.engine import cpu

        return cpu.BACKEND
    raise ValueError(f"no backend named {name!r} (one of {', '.join(NAMES)})")


def select(options: Options, engine: bool = True) -> Backend:
    """The backend this run uses, told its threads (without `engine`: for a plan, which reads
    the devices and runs nothing on them, `gpu_available`'s check without CuPy)."""
    use_gpu = options.backend != "cpu" and gpu_available(engine)
    if options.backend == "gpu" and not use_gpu:
        raise UsageError("--backend gpu: no CUDA device is visible (is CuPy installed?)")
    if not use_gpu and options.backend == "auto":
        print("note: no GPU visible; using the CPU backend", file=sys.stderr)
    backend = by_name("gpu" if use_gpu else "cpu")
    backend.set_threads(options.threads)
    return backend
