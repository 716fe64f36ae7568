"""hspz.core.lean: a module imported without the optional module it probes for; numba's array maths
loads without scipy's linear algebra, and a process that has it keeps it."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from hspz.core import lean

PROBE = "try:\n    import {0}\n    FOUND = True\nexcept ImportError:\n    FOUND = False\n"


@pytest.fixture
def probe(tmp_path, monkeypatch):
    """(prober, optional): `prober` imports `optional` (a real module here) if it can."""
    name = tmp_path.name.replace("-", "_")
    prober, optional = f"prober_{name}", f"optional_{name}"
    (tmp_path / f"{optional}.py").write_text("")
    (tmp_path / f"{prober}.py").write_text(PROBE.format(optional))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield prober, optional
    for module in (prober, optional):
        sys.modules.pop(module, None)


def test_import_without_hides_the_probed_module_then_restores_it(probe):
    prober, optional = probe
    assert lean.import_without(optional, prober).FOUND is False
    assert optional not in sys.modules
    assert importlib.import_module(optional).__name__ == optional


def test_import_without_keeps_a_module_already_loaded(probe):
    prober, optional = probe
    importlib.import_module(optional)
    assert lean.import_without(optional, prober).FOUND is True


def _needs_scipy():
    pytest.importorskip("scipy")  # the numba probe matters only where scipy is installed


def _python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.split()


def test_hspz_loads_numba_without_scipy_linalg():
    _needs_scipy()
    out = _python(
        "import sys, numpy as np\n"
        "from hspz.stages import xdrop\n"
        "print('scipy.linalg' in sys.modules)\n"
        "z = np.zeros(4, np.uint8)\n"
        "print(list(xdrop.walk_right(z, z, 4, 4, np.ones(64, np.int32), 10, 0, 0)))\n"
        "print('scipy.linalg' in sys.modules)\n"
        "import scipy.linalg.cython_blas\n"  # later imports still work
        "print('scipy.linalg' in sys.modules)\n"
    )
    assert out == ["False", "[4,", "3]", "False", "True"]


def test_scipy_blas_imported_first_is_kept():
    _needs_scipy()
    out = _python(
        "import scipy.linalg.cython_blas\n"
        "from hspz.stages import hsp\n"
        "from numba.np import arraymath\n"
        "print(arraymath._HAVE_BLAS)\n"
    )
    assert out == ["True"]
