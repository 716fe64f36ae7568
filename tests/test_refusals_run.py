"""The refusals of `hspZ run`: bad inputs, numbers and knobs; bad flag values; damaged or
mismatched manifests and plan files given to --from-manifest, and the memory preflight; outputs
that would clobber an input or cannot be written, and an OUT another process holds; derived,
reserved and foreign paths.

Every case is one `hspZ:` line, the expected exit status, no traceback and nothing under
the case's directory changed; the cases live in `tests/catalogues/`, by what they spoil.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from catalogues import flags, frozen, inputs, outputs, trust


@pytest.mark.parametrize("case", inputs.params("run"))
def test_a_bad_input_or_number_is_one_line_and_exit_2_with_nothing_written(
    case, case_dir, capfd, monkeypatch
):
    inputs.check(case, case_dir, capfd, monkeypatch)


@pytest.mark.parametrize("extra, env, message", flags.run_params())
def test_bad_run_values_are_one_line_exit_2_and_write_nothing(
    flag_inputs, capfd, monkeypatch, extra, env, message
):
    flags.check_run(flag_inputs, capfd, monkeypatch, extra, env, message)


@pytest.mark.parametrize("gpus", ["1", "2"])
def test_output_that_cannot_be_written_is_one_line_exit_1(flag_inputs, capfd, gpus):
    """A write that fails while the run publishes its files is one line naming OUT, exit
    status 1, and OUT keeps exactly what was there."""
    flags.unwritable_output_is_one_line_exit_1(flag_inputs, capfd, gpus)


@pytest.mark.parametrize("case", frozen.params("run"))
def test_a_damaged_or_mismatched_frozen_file_is_refused_in_one_line(
    frozen_files, tmp_path, capfd, monkeypatch, case
):
    frozen.check(case, frozen_files, tmp_path, capfd, monkeypatch)


@pytest.mark.parametrize("argv, pattern", outputs.params("run"))
def test_an_output_that_would_clobber_an_input_or_cannot_be_written_is_refused_before_any_work(
    outputs_dir, capfd, monkeypatch, argv, pattern
):
    outputs.check(outputs_dir, capfd, monkeypatch, argv, pattern)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into any folder")
def test_outdir_an_unwritable_out_is_refused_before_any_work(outputs_dir, tmp_path, capfd):
    outputs.unwritable_out_is_refused(outputs_dir, tmp_path, capfd)


def test_lock_an_out_held_in_this_process_is_refused_naming_the_holder(outputs_dir, capfd):
    outputs.out_held_in_this_process_is_refused(outputs_dir, capfd, "run")


def test_lock_an_out_held_by_another_process_is_refused_naming_it(outputs_dir, capfd):
    """Both `run` and `merge` (one holder process for the two)."""
    outputs.out_held_by_another_process_is_refused(outputs_dir, capfd)


@pytest.mark.parametrize("setup, pattern", trust.params("run"))
def test_a_derived_reserved_or_foreign_path_is_refused_and_nothing_changes(
    tmp_path, capfd, monkeypatch, setup, pattern
):
    trust.check(tmp_path, capfd, monkeypatch, setup, pattern, "run")


# the child's prelude: limit_above(extra) sets an address-space limit `extra` bytes above what
# the process holds now
LIMIT_ABOVE = """
import resource, sys
def limit_above(extra):
    with open("/proc/self/status") as status:
        size = next(int(line.split()[1]) for line in status if line.startswith("VmSize:"))
    limit = (size << 10) + extra
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
"""


def _child(code: str, *argv: str):
    """`code` after LIMIT_ABOVE in a fresh Python, given argv."""
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-c", LIMIT_ABOVE + code, *argv], capture_output=True, text=True
    )


def _run_argv(tmp_path, ref: np.ndarray, qry: np.ndarray, threads: str) -> list[str]:
    """`hspZ run` of these sequences into tmp_path/out on the CPU."""
    from helpers import write_fasta

    r = write_fasta(tmp_path / "ref.fa", [("r", ref)])
    q = write_fasta(tmp_path / "qry.fa", [("q", qry)])
    out = str(tmp_path / "out")
    return ["run", "-r", str(r), "-q", str(q), "--backend", "cpu", "-t", threads, "-o", out]


OUT_OF_MEMORY_RUN = """
import hspz.cli
argv = sys.argv[1:]
# the same run first, into another OUT: numba and LLVM take their memory before the limit
# (LLVM aborts the process when it cannot)
assert hspz.cli.main(argv[:-1] + [argv[-1] + "0"]) == 0
limit_above(40 << 20)  # room for threads, not for a 12of19 table's 64 MiB
sys.exit(hspz.cli.main(argv))
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="Linux's VmSize")
def test_a_run_out_of_memory_is_one_line_exit_1_and_leaves_no_out(tmp_path):
    """An allocation that fails (here numpy's, under an address-space limit set 40 MiB above
    what the process holds after the same run) is one `hspZ: out of memory:` line naming
    the array and what needs less, exit status 1, no traceback, and no OUT."""
    rng = np.random.default_rng(24)
    seq = np.frombuffer(b"ACGT", np.uint8)[rng.integers(0, 4, 20_000)]
    got = _child(OUT_OF_MEMORY_RUN, *_run_argv(tmp_path, seq, seq[5_000:9_000], "1"))
    lines = got.stderr.splitlines()
    assert got.returncode == 1, got.stderr
    assert lines[-1].startswith("hspZ: out of memory: Unable to allocate 64.0 MiB"), got.stderr
    assert lines[-1].endswith("(a smaller -B bin, or fewer -t threads on the CPU, needs less)")
    assert "Traceback" not in got.stderr
    assert not (tmp_path / "out").exists()


NO_THREAD_RUN = """
import threading
import hspz.cli
limit_above(1 << 30)
threading.stack_size(1 << 31)  # every new thread's stack: more than the limit leaves
sys.exit(hspz.cli.main(sys.argv[1:]))
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="Linux's VmSize")
def test_a_thread_the_system_refuses_is_one_line_exit_1_and_leaves_no_out(tmp_path):
    """A thread that cannot start (its stack cannot be mapped under an address-space limit)
    is threading's RuntimeError: one `hspZ: out of memory:` line, exit 1, no traceback, no
    OUT.  Any other RuntimeError is a bug and keeps its traceback (the other tests)."""
    seq = np.frombuffer(b"ACGT", np.uint8)[np.random.default_rng(7).integers(0, 4, 5_000)]
    got = _child(NO_THREAD_RUN, *_run_argv(tmp_path, seq, seq, "2"))
    assert got.returncode == 1, got.stderr
    assert got.stderr.splitlines()[-1] == (
        "hspZ: out of memory or of threads: can't start new thread"
        " (a smaller -B bin, or fewer -t threads on the CPU, needs less)"
    ), got.stderr
    assert "Traceback" not in got.stderr
    assert not (tmp_path / "out").exists()


def test_out_of_memory_words_what_the_system_refused_and_nothing_else():
    """The one line of an allocation or a thread the system refused (the CLI's, and a worker
    process's report): numpy's text, CPython's bare MemoryError, ENOMEM, "can't start new
    thread"; None for any other error, whose traceback a bug keeps."""
    import errno

    from hspz.core.errors import out_of_memory

    numpy_says = "Unable to allocate 64.0 MiB for an array with shape (16777216,)"
    assert out_of_memory(MemoryError(numpy_says)) == f"out of memory: {numpy_says}"
    assert out_of_memory(MemoryError()) == "out of memory: an allocation failed"
    assert out_of_memory(OSError(errno.ENOMEM, "Cannot allocate memory")) == "out of memory"
    assert out_of_memory(OSError(errno.ENOMEM, "x", "/dev/shm/a")) == "out of memory: /dev/shm/a"
    assert out_of_memory(RuntimeError("can't start new thread")) == (
        "out of memory or of threads: can't start new thread"
    )
    assert out_of_memory(RuntimeError("dictionary changed size during iteration")) is None
    assert out_of_memory(OSError(errno.ENOSPC, "No space left on device")) is None
    assert out_of_memory(ValueError("x")) is None


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="Linux's VmSize")
def test_k_mers_that_cannot_be_mapped_are_a_memory_error_naming_their_size():
    """`plain_pages` refused by the kernel (an address-space limit) raises MemoryError naming
    the MiB, as numpy's own allocations do, not a bare ENOMEM."""
    code = """
from hspz.stages.seed import plain_pages
limit_above(64 << 20)
assert len(plain_pages(1 << 20)) == 1 << 20
try:
    plain_pages(1 << 26)
except MemoryError as exc:
    print(exc)
"""
    got = _child(code)
    assert got.returncode == 0, got.stderr
    assert got.stdout == "Unable to map 256.0 MiB for the table's k-mers\n"
