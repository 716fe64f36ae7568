"""numba for hspz's CPU loops: `njit`, numba's decorator with hspz's settings.

Every compiled loop is cached on disk and releases the GIL (the GPU backend runs the host halves
on threads).  numba's array maths is loaded here, without its scipy probe (`hspz.lean`).
"""

from __future__ import annotations

import functools

import numba

from hspz import lean

lean.import_without("scipy.linalg.cython_blas", "numba.np.arraymath")

njit = functools.partial(numba.njit, cache=True, nogil=True)
