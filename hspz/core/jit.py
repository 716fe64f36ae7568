"""numba for hspz's CPU loops: `njit`, numba's decorator with hspz's settings, loaded lazily.

Every compiled loop is cached on disk and releases the GIL (the GPU backend runs host work on
threads).  numba itself is imported only when the first such loop is called: importing it and
loading its typing registries costs 0.46 s of a process with a bytecode cache and 0.83 s without
one (an E. coli run on the H200), more than a small GPU run does in all.  The GPU path calls no
numba loop on small inputs, so it never pays that.  When numba is loaded, every decorated
function is handed to `numba.njit` at once, and the names of the stand-ins in the modules that
define them are pointed at the dispatchers, so compiled loops that call each other see compiled
callees (a decorated loop calls only loops of its own module, or `prefetch`).
numba's array maths is loaded without its scipy probe (`hspz.core.lean`).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

_OPTIONS = {"cache": True, "nogil": True}
_lazy: list[_Lazy] = []
_lock = threading.Lock()
_state = {"loaded": False}


class _Lazy:
    """A function that becomes `numba.njit(fn)` when anything decorated here is first called
    (or, given `make`, whatever `make()` returns then: a numba intrinsic)."""

    def __init__(
        self, fn: Callable[..., Any], options: dict, make: Callable[[], Any] | None = None
    ) -> None:
        functools.update_wrapper(self, fn)
        self.py_func = fn
        self.options = {**_OPTIONS, **options}
        self.make = make or (lambda: _numba().njit(**self.options)(fn))
        self.compiled = None
        _lazy.append(self)

    def __call__(self, *args: Any) -> Any:
        return (self.compiled or _load(self))(*args)


def njit(fn: Callable[..., Any] | None = None, **options: Any) -> Any:
    """`numba.njit(cache=True, nogil=True, **options)`, applied when numba is first needed."""
    if fn is None:
        return lambda f: _Lazy(f, options)
    return _Lazy(fn, options)


def _numba():
    import numba

    return numba


def _make_prefetch():
    """`prefetch(array, index)` in a compiled loop: LLVM's prefetch of the cache line holding
    array[index] (read, keep in all levels), which never faults and never waits.  A walk over
    random positions asks for its next hits' bases while it scores the current one: the walks
    were waiting on cache misses about half of their time (BENCHMARKS.md)."""
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic

    @intrinsic
    def prefetch(typingctx, array, index):
        def codegen(context, builder, signature, args):
            aryty = signature.args[0]
            ary = context.make_array(aryty)(context, builder, args[0])
            at = context.cast(builder, args[1], signature.args[1], types.intp)
            ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [at], wraparound=False)
            i8p, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
            fn = cgutils.get_or_insert_function(
                builder.module,
                ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
                "llvm.prefetch.p0i8",
            )
            builder.call(
                fn,
                [
                    builder.bitcast(ptr, i8p),
                    ir.Constant(i32, 0),
                    ir.Constant(i32, 3),
                    ir.Constant(i32, 1),
                ],
            )
            return context.get_dummy_value()

        return types.void(array, index), codegen

    return prefetch


def _prefetch_stand_in(array, index):
    """Prefetch the cache line of array[index] (compiled loops only)."""


prefetch = _Lazy(_prefetch_stand_in, {}, _make_prefetch)


def loaded() -> bool:
    """Whether numba has been loaded (`load`, or a call of a decorated function)."""
    return _state["loaded"]


def numpy_first(n: int, limit: int) -> bool:
    """Whether work over n items takes its numpy path rather than its numba loop: below `limit`
    and while numba is not loaded, numpy's slower path costs less than loading numba."""
    return n < limit and not loaded()


def expect(n: int, limit: int) -> None:
    """n items of work are coming, in calls each of which may be under `limit` (so that
    `numpy_first` would send every one to numpy's path): from `limit` items on, and while numba
    is not loaded, load it now on a daemon thread, beside the caller's reading (`hspZ merge`
    of many units' lines)."""
    if n >= limit and not loaded():
        threading.Thread(target=load, daemon=True, name="hspz-numba").start()


def load() -> None:
    """Load numba now and hand it every function decorated so far (a CPU worker process does,
    while its parent reads the inputs)."""
    with _lock:
        _load_locked()


def _load(wanted: _Lazy) -> Any:
    with _lock:
        if wanted.compiled is None:
            _load_locked()
    return wanted.compiled


def _load_locked() -> None:
    import numba  # noqa: F401

    from hspz.core import lean

    lean.import_without("scipy.linalg.cython_blas", "numba.np.arraymath")
    for lazy in _lazy:
        if lazy.compiled is None:
            lazy.compiled = lazy.make()
    spaces = {id(lazy.py_func.__globals__): lazy.py_func.__globals__ for lazy in _lazy}
    for space in spaces.values():  # where compiled loops look their callees up
        for key, value in list(space.items()):
            if isinstance(value, _Lazy) and value.compiled is not None:
                space[key] = value.compiled
    _state["loaded"] = True
