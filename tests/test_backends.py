"""--backend: auto falls back to the CPU backend with one note line; gpu without a device is one
error line and exit status 2 (the device is hidden here, so this runs alike with or without
one)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from multibin import write_pair

from hspz.cli import main
from hspz.engine import backends


def test_backend_choice_without_a_device(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(backends, "gpu_available", lambda engine=True: False)
    ref, qry = write_pair(tmp_path)
    run = ["run", "-r", str(ref), "-q", str(qry), "--backend"]
    assert main([*run, "gpu", "-o", str(tmp_path / "gpu")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["hspZ: --backend gpu: no CUDA device is visible (is CuPy installed?)"]
    assert not (tmp_path / "gpu").exists()
    assert main([*run, "auto", "-o", str(tmp_path / "auto")]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err.count("note: no GPU visible; using the CPU backend") == 1
    assert any((tmp_path / "auto").iterdir())


def test_a_plan_for_the_gpu_without_a_driver_is_refused_in_one_line(tmp_path, capsys):
    """Where libcuda cannot be loaded (CI, the dev machine), the driver's probe says so, a
    plan's GPU check (`gpu_available(engine=False)`) is False, and `hspZ plan --backend gpu`
    is one line and exit 2, with no plan written."""
    import ctypes.util

    from hspz.engine import cuda_driver

    if ctypes.util.find_library("cuda"):
        pytest.skip("a CUDA driver is installed here")
    with pytest.raises(cuda_driver.DriverError, match="no CUDA driver"):
        cuda_driver.devices()
    assert backends.gpu_available(engine=False) is False
    ref, qry = write_pair(tmp_path)
    plan = tmp_path / "plan.txt"
    code = main(["plan", "-r", str(ref), "-q", str(qry), "--backend", "gpu", "-o", str(plan)])
    assert code == 2 and not plan.exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["hspZ: --backend gpu: no CUDA device is visible (is CuPy installed?)"]


def _backend_members() -> list[str]:
    from hspz.engine.contract import Backend

    return sorted(n for n in vars(Backend) if not n.startswith("_")) + ["capabilities", "name"]


def test_both_backends_are_one_object_each_that_satisfies_the_protocol():
    """`engine.cpu.BACKEND` and `engine.gpu.BACKEND` implement every member of `Backend`, with
    the protocol's parameters (making the GPU one needs no CuPy: it runs here without it)."""
    import inspect

    from hspz.engine import cpu, gpu
    from hspz.engine.contract import Backend, Capabilities

    for backend, name, on_device in ((cpu.BACKEND, "cpu", False), (gpu.BACKEND, "gpu", True)):
        assert isinstance(backend, Backend)
        assert backend.name == name and backends.by_name(name) is backend
        assert isinstance(backend.capabilities, Capabilities)
        assert backend.capabilities.on_device is on_device
        for member in _backend_members():
            assert hasattr(backend, member), (name, member)
            want = getattr(Backend, member, None)
            if callable(want):
                got = inspect.signature(getattr(type(backend), member))
                assert list(got.parameters) == list(inspect.signature(want).parameters), member
    assert cpu.BACKEND.capabilities.host_codes and not gpu.BACKEND.capabilities.host_codes
    with pytest.raises(ValueError, match="no backend named 'hspz.engine.cpu'"):
        backends.by_name("hspz.engine.cpu")


def test_the_gpu_backend_is_made_and_read_without_importing_cupy():
    """Importing `hspz.engine.gpu`, making its object and reading its capabilities import no
    CuPy: with `import cupy` made to fail, all of it still works; the first use of a CuPy name
    is what imports it (and then fails here)."""
    code = textwrap.dedent("""
        import pickle, sys
        sys.modules["cupy"] = None  # any `import cupy` raises ImportError
        from hspz.engine import gpu
        from hspz.engine.backends import by_name
        from hspz.engine.contract import Backend
        b = by_name("gpu")
        again = pickle.loads(pickle.dumps(b))  # how a worker process receives it
        print(isinstance(b, Backend), b.capabilities.on_device, type(again).__name__)
        try:
            gpu.use_device(0)
        except ImportError:
            print("first-use-imports")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "GpuBackend", "first-use-imports"]


def test_the_backend_a_worker_receives_is_the_same_backend():
    """Worker jobs carry the backend object itself (pickled by its class, as spawned worker
    processes receive it), never a module name to import."""
    import pickle

    from hspz.engine import cpu

    again = pickle.loads(pickle.dumps(cpu.BACKEND))
    assert type(again) is cpu.CpuBackend and again.name == "cpu"
