"""numba for hspz's CPU loops: `njit`, numba's decorator with hspz's settings.

Every compiled loop is cached on disk and releases the GIL (the GPU backend runs the host halves
on threads).  Importing this module also loads numba's array maths once, without the scipy
import numba makes there only to learn whether BLAS is present (`numba.np.arraymath`): hspz's
loops call no BLAS, and with scipy installed that import cost 0.35 s of every run on the H200
machine (python -X importtime, BENCHMARKS.md "Session 4").  A process that imported scipy's
BLAS before hspz keeps it.
"""

from __future__ import annotations

import functools
import sys

import numba


def _load_array_maths() -> None:
    name = "scipy.linalg.cython_blas"
    if name in sys.modules:
        import numba.np.arraymath  # noqa: F401
        return
    sys.modules[name] = None  # makes `import scipy.linalg.cython_blas` fail at once
    try:
        import numba.np.arraymath  # noqa: F401
    finally:
        del sys.modules[name]


_load_array_maths()

njit = functools.partial(numba.njit, cache=True, nogil=True)
