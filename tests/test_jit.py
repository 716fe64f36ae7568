"""hspz.jit: numba's array maths loads without importing scipy's linear algebra, and a process
that has it keeps it."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("scipy")  # the guard matters only where scipy is installed


def _python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    return done.stdout.split()


def test_hspz_loads_numba_without_scipy_linalg():
    out = _python(
        "import sys, numpy as np\n"
        "from hspz import hsp\n"
        "print('scipy.linalg' in sys.modules)\n"
        "(total, rs, qs, ln), count = hsp.collapse(*[np.array([5, 5, 7])] * 4)\n"
        "print(rs.tolist(), count.tolist())\n"  # a cached numba loop runs
        "print('scipy.linalg' in sys.modules)\n"
        "import scipy.linalg.cython_blas\n"  # later imports still work
        "print('scipy.linalg' in sys.modules)\n"
    )
    assert out == ["False", "[5,", "7]", "[2,", "1]", "False", "True"]


def test_scipy_blas_imported_first_is_kept():
    out = _python(
        "import scipy.linalg.cython_blas\n"
        "from hspz import hsp\n"
        "from numba.np import arraymath\n"
        "print(arraymath._HAVE_BLAS)\n"
    )
    assert out == ["True"]
