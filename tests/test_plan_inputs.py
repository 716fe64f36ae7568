"""`hspZ plan`'s inputs and its backend's start: a reference or query the work jobs cannot read
again (a FIFO, `-q <(zcat q.fa.gz)`) is refused at once, and an error or interrupt while the
backend starts (`out_lock.warming`) is not held until the start ends."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import write_fasta

from hspz.commands import out_lock
from hspz.core.errors import InputError
from hspz.engine import backends

ROOT = Path(__file__).resolve().parent.parent
SMALL = [("a", "ACGTTGCA" * 300), ("b", "TTGACCAG" * 250)]


def _plan(argv: list[str], env_path: list[str] | None = None, timeout: float = 15, libs: str = ""):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*(env_path or []), str(ROOT)])
    if libs:
        env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [libs, env.get("LD_LIBRARY_PATH")]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "hspz", "plan", *argv],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    start = time.monotonic()
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError(f"hspZ plan {' '.join(argv)} still ran after {timeout} s") from None
    return proc.returncode, err, time.monotonic() - start


@pytest.mark.parametrize("side", ["-r", "-q"])
@pytest.mark.parametrize("fed", [False, True])
def test_plan_refuses_a_fifo_reference_or_query_at_once(tmp_path, side, fed):
    """A FIFO nobody writes to held `hspZ plan -q FIFO` (or -r) for ever, and one that was fed
    (`-q <(cat q.fa)`) was read whole, then refused when hashed (-q) or written into the plan
    as /dev/fd/63, which no work job can read (-r).  The work jobs read both again: a FIFO is
    refused before anything is read, as a query list's entries are."""
    fa = write_fasta(tmp_path / "r.fa", SMALL)
    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)
    if fed:

        def feed() -> None:
            try:
                with open(fifo, "wb") as fh:
                    fh.write(fa.read_bytes())
            except OSError:
                pass

        threading.Thread(target=feed, daemon=True).start()
        time.sleep(0.2)
    inputs = {"-r": str(fa), "-q": str(fa), side: str(fifo)}
    plan = tmp_path / "plan.txt"
    argv = [*(x for kv in inputs.items() for x in kv), "-o", str(plan), "--backend", "cpu"]
    try:
        rc, err, _ = _plan(argv)
    finally:
        os.close(os.open(fifo, os.O_RDWR))  # a feeder still waiting for a reader is let go
    flag = "--reference" if side == "-r" else "--query"
    assert rc == 2, err
    assert err.strip().splitlines() == [
        f"hspZ: {flag}: {fifo} is a pipe: the work jobs read it again (give a regular file)"
    ]
    assert not plan.exists()


def test_an_error_while_the_backend_starts_is_not_held_until_it_has_started(monkeypatch):
    """`warming` joined the backend's starting thread however its block ended: an input error,
    Ctrl-C or SIGTERM waited until CUDA had started (a slow or hung driver held `hspZ plan`,
    run and work for as long).  An error leaves it to the exit; a block that ends normally still
    joins it."""
    release = threading.Event()
    started: list[threading.Thread] = []

    def warm(
        backend: str, numba: bool = True, engine: bool = True, options: object = None
    ) -> threading.Thread:
        thread = threading.Thread(target=release.wait, daemon=True)
        thread.start()
        started.append(thread)
        return thread

    monkeypatch.setattr(backends, "warm", warm)
    timer = threading.Timer(8, release.set)  # a start that ends after 8 s
    timer.start()
    try:
        for error in (InputError("bad input"), KeyboardInterrupt()):
            t = time.monotonic()
            with pytest.raises(type(error)), out_lock.warming("gpu"):
                raise error
            assert time.monotonic() - t < 4, "the error waited for the backend's start"
            assert started[-1].is_alive()
    finally:
        release.set()
        timer.cancel()
    with out_lock.warming("gpu"):
        pass
    assert not started[-1].is_alive()


def test_plan_reports_a_bad_input_without_waiting_for_cuda_to_start(tmp_path):
    """A CUDA driver whose start takes a minute (a slow or hung driver: a libcuda.so.1 whose
    cuInit sleeps, found by the loader as the real one would be) and an installed CuPy: a bad
    input is one line and exit 2 at once, not after the start."""
    py, lib = _fake_machine(
        tmp_path / "slow",
        "#include <unistd.h>\nint cuInit(unsigned f) { sleep(60); return 0; }\n",
        "",  # installed: a plan never imports it
    )
    bad = tmp_path / "empty.fa"
    bad.write_bytes(b"")
    q = write_fasta(tmp_path / "q.fa", SMALL)
    plan = tmp_path / "plan.txt"
    argv = ["-r", str(bad), "-q", str(q), "-o", str(plan), "--backend", "auto"]
    rc, err, took = _plan(argv, [py], timeout=30, libs=lib)
    assert rc == 2, err
    assert len(err.strip().splitlines()) == 1 and err.startswith(f"hspZ: {bad}"), err
    assert took < 20
    assert not plan.exists()


FAKE_DRIVER = r"""
#include <stddef.h>
#include <string.h>
static int ctx_made = 0;
int cuInit(unsigned f) { return INIT_STATUS; }
int cuDeviceGetCount(int *n) { *n = 1; return 0; }
int cuDeviceGet(int *d, int i) { *d = i; return 0; }
int cuDeviceGetName(char *s, int len, int d) { strncpy(s, "Fake GPU", len); return 0; }
int cuDeviceTotalMem_v2(size_t *b, int d) { *b = (size_t)80 << 30; return 0; }
int cuDeviceGetAttribute(int *v, int a, int d) {
  *v = a == 16 ? 132 : a == 38 ? 50 << 20 : a == 13 ? 1980000 : 0; return 0; }
int cuDevicePrimaryCtxRetain(void **c, int d) { ctx_made = 1; *c = &ctx_made; return 0; }
int cuCtxPushCurrent_v2(void *c) { return 0; }
int cuCtxPopCurrent_v2(void **c) { return 0; }
int cuMemGetInfo_v2(size_t *f, size_t *t) {
  *f = (size_t)70 << 30; *t = (size_t)80 << 30; return MEMINFO_STATUS; }
int cuGetErrorName(int e, const char **s) {
  *s = e == 2 ? "CUDA_ERROR_OUT_OF_MEMORY" : e == 100 ? "CUDA_ERROR_NO_DEVICE" : "?"; return 0; }
"""


def _fake_gpu(tmp_path: Path, init: int = 0, meminfo: int = 0) -> tuple[str, str]:
    """(PYTHONPATH entry, LD_LIBRARY_PATH entry) of a fake GPU machine: a libcuda.so.1 whose
    one device has H200-like attributes (cuInit and cuMemGetInfo returning `init` and
    `meminfo`), and a CuPy that is installed but fails when imported, leaving `imported` in
    the machine's folder first (`_cupy_tried`), so that an import that is tried and caught is
    still seen."""
    src = FAKE_DRIVER.replace("INIT_STATUS", str(init)).replace("MEMINFO_STATUS", str(meminfo))
    base = tmp_path / f"fake-{init}-{meminfo}"
    cupy = f"open({str(base / 'imported')!r}, 'a').close()\nraise ImportError('not here')\n"
    return _fake_machine(base, src, cupy)


def _cupy_tried(tmp_path: Path, init: int = 0, meminfo: int = 0) -> bool:
    """Whether a process imported `_fake_gpu`'s CuPy."""
    return (tmp_path / f"fake-{init}-{meminfo}" / "imported").exists()


def _fake_machine(base: Path, driver: str, cupy: str) -> tuple[str, str]:
    """(PYTHONPATH entry, LD_LIBRARY_PATH entry) under `base`: a libcuda.so.1 built from the C
    source `driver` (skipped without a C compiler), and a `cupy` package whose __init__ is
    `cupy`."""
    import shutil

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build a fake CUDA driver")
    (base / "py" / "cupy").mkdir(parents=True)
    (base / "py" / "cupy" / "__init__.py").write_text(cupy)
    (base / "lib").mkdir()
    (base / "cuda.c").write_text(driver)
    subprocess.run(
        [cc, "-shared", "-fPIC", "-o", str(base / "lib" / "libcuda.so.1"), str(base / "cuda.c")],
        check=True,
    )
    return str(base / "py"), str(base / "lib")


def test_a_gpu_plan_reads_the_driver_and_never_imports_cupy(tmp_path):
    """`hspZ plan --backend gpu` on a machine whose CuPy cannot even be imported: the devices
    and the free memory come from the CUDA driver (`engine.cuda_driver`, here a fake libcuda
    with one device), and the plan is written for one GPU worker."""
    py, lib = _fake_gpu(tmp_path)
    r = write_fasta(tmp_path / "r.fa", SMALL)
    q = write_fasta(tmp_path / "q.fa", SMALL[:1])
    plan = tmp_path / "plan.txt"
    rc, err, _ = _plan(
        ["-r", str(r), "-q", str(q), "-o", str(plan), "--backend", "gpu"], [py], libs=lib
    )
    assert rc == 0, err
    text = plan.read_text()
    assert "schedule: device mapping: worker0->device0" in text, text[:800]
    assert not _cupy_tried(tmp_path)


@pytest.mark.parametrize(
    "init, meminfo, status, line",
    [
        (100, 0, 2, "hspZ: --backend gpu: no CUDA device is visible (is CuPy installed?)"),
        (0, 2, 1, "hspZ: the CUDA driver's cuMemGetInfo_v2 failed: CUDA_ERROR_OUT_OF_MEMORY"),
    ],
)
def test_a_driver_that_fails_is_one_line(tmp_path, init, meminfo, status, line):
    """A driver that sees no device (cuInit's CUDA_ERROR_NO_DEVICE), or fails to read the free
    memory: one line naming it, no traceback, no plan."""
    py, lib = _fake_gpu(tmp_path, init, meminfo)
    r = write_fasta(tmp_path / "r.fa", SMALL)
    plan = tmp_path / "plan.txt"
    rc, err, _ = _plan(
        ["-r", str(r), "-q", str(r), "-o", str(plan), "--backend", "gpu"], [py], libs=lib
    )
    assert (rc, err.strip().splitlines()) == (status, [line])
    assert not plan.exists()
