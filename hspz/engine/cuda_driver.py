"""What a plan needs of the GPUs, from the CUDA driver (libcuda, through ctypes): each visible
device's SM count, L2 size, clock, name and memory, and device 0's free memory.  No CuPy: a
plan reads the devices but runs nothing on them, and importing CuPy was a quarter second of
`hspZ plan` on the H200 (issue 25).  Every command takes the devices from here, so a plan and
the run or work jobs it is made for see the same figures.

The free memory is read inside device 0's primary context, the one CuPy's runtime uses too: the
context is retained and never released here, so a later CuPy in the same process finds it
made, and the figure is the one `cupy.cuda.Device(0).mem_info` gives in a fresh process.
The driver honours CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER as the runtime does.
"""

from __future__ import annotations

import ctypes
import functools
import threading
from dataclasses import dataclass

from hspz.core.errors import RunError

# CUdevice_attribute values (cuda.h)
CLOCK_RATE = 13
MULTIPROCESSOR_COUNT = 16
L2_CACHE_SIZE = 38


class DriverError(RunError):
    """A CUDA driver call failed (its error's name in the message), or there is no driver."""


@dataclass(frozen=True)
class Device:
    sm_count: int
    l2_bytes: int
    clock_khz: int
    name: str
    total_bytes: int


@functools.cache
def _lib() -> ctypes.CDLL:
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        raise DriverError(f"no CUDA driver (libcuda.so.1: {exc})") from None


def _call(name: str, *args: object) -> None:
    try:
        entry = getattr(_lib(), name)
    except AttributeError:  # a driver too old for this entry point
        raise DriverError(f"the CUDA driver has no {name}: update the driver") from None
    status = entry(*args)
    if status:
        raise DriverError(f"the CUDA driver's {name} failed: {_error_name(status)}")


def _error_name(status: int) -> str:
    """CUDA_ERROR_... for a CUresult, or its number where the driver cannot name it."""
    text = ctypes.c_char_p()
    try:
        if _lib().cuGetErrorName(status, ctypes.byref(text)) == 0 and text.value:
            return text.value.decode(errors="replace")
    except AttributeError:
        pass
    return f"CUresult {status}"


_lock = threading.Lock()


@functools.cache
def devices() -> tuple[Device, ...]:
    """Every visible device, in CUDA's order; () when the driver sees none."""
    with _lock:
        _call("cuInit", 0)
        count = ctypes.c_int()
        _call("cuDeviceGetCount", ctypes.byref(count))
        return tuple(_device(i) for i in range(count.value))


def _device(ordinal: int) -> Device:
    dev = ctypes.c_int()
    _call("cuDeviceGet", ctypes.byref(dev), ordinal)
    name = ctypes.create_string_buffer(256)
    _call("cuDeviceGetName", name, 256, dev)
    total = ctypes.c_size_t()
    _call("cuDeviceTotalMem_v2", ctypes.byref(total), dev)
    return Device(
        _attribute(MULTIPROCESSOR_COUNT, dev),
        _attribute(L2_CACHE_SIZE, dev),
        _attribute(CLOCK_RATE, dev),
        name.value.decode(errors="replace"),
        total.value,
    )


def _attribute(attribute: int, dev: ctypes.c_int) -> int:
    value = ctypes.c_int()
    _call("cuDeviceGetAttribute", ctypes.byref(value), attribute, dev)
    return value.value


@functools.cache
def _context() -> ctypes.c_void_p:
    """Device 0's primary context, made (by the first caller) and retained for good."""
    devices()  # cuInit
    with _lock:
        dev, ctx = ctypes.c_int(), ctypes.c_void_p()
        _call("cuDeviceGet", ctypes.byref(dev), 0)
        _call("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), dev)
        return ctx


def free_bytes() -> int:
    """Device 0's free memory now, read in its primary context."""
    ctx = _context()
    with _lock:
        _call("cuCtxPushCurrent_v2", ctx)
        try:
            free, total = ctypes.c_size_t(), ctypes.c_size_t()
            _call("cuMemGetInfo_v2", ctypes.byref(free), ctypes.byref(total))
        finally:
            _call("cuCtxPopCurrent_v2", ctypes.byref(ctypes.c_void_p()))
        return free.value


def start() -> None:
    """The driver started and device 0's context made now (a caller's thread: the driver's
    calls hold no GIL); a failure is raised again to whoever asks for the devices."""
    try:
        _context()
    except DriverError:
        pass
