"""Imports of numba's and CuPy's parts that probe for scipy, without scipy.

numba's array maths imports `scipy.linalg.cython_blas` only to learn whether BLAS is there, and
`cupyx` imports `scipy.sparse` only to convert its sparse matrices; hspz uses neither.  With
scipy installed the two imports took 0.35 s and 0.26 s of every `hspZ run` on the H200 machine
(`python -X importtime` of an E. coli run).  A process that loaded the scipy module
before keeps it.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType


def import_without(blocked: str, module: str) -> ModuleType:
    """`module`, imported while `blocked` cannot be (unless either is loaded already)."""
    if module in sys.modules or blocked in sys.modules:
        return importlib.import_module(module)
    # None makes `import blocked` raise ImportError at once (typeshed's sys.modules has no None)
    sys.modules[blocked] = None  # type: ignore[assignment]
    try:
        return importlib.import_module(module)
    finally:
        if sys.modules.get(blocked, 0) is None:
            del sys.modules[blocked]
