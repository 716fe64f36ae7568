"""The refusals of `hspZ index`: its build folder and lock when a user's file or folder holds the
name, and what a killed or failed build leaves.

Every case is one `hspZ:` line, the expected exit status, no traceback and nothing under
the case's directory changed; the cases live in `tests/catalogues/`, by what they spoil.
"""

from __future__ import annotations

import os
import re
import shutil

import pytest
from catalogues import trust
from catalogues.trust import CPU, Case
from refusal import assert_refused

from hspz.cli import main


@pytest.mark.parametrize("setup, pattern", trust.params("index"))
def test_a_derived_reserved_or_foreign_path_is_refused_and_nothing_changes(
    tmp_path, capfd, monkeypatch, setup, pattern
):
    trust.check(tmp_path, capfd, monkeypatch, setup, pattern, "index")


def test_a_killed_index_build_is_removed_by_the_next_build_and_a_users_folder_is_not(tmp_path):
    """A build killed before its rename leaves DIR.tmp (marked) and DIR.tmp.lock (an hspZ
    lock record): the next build removes both and succeeds.  The same names made by a user are
    refused and kept (the catalogue above)."""
    import subprocess
    import sys

    c = Case(tmp_path)
    argv = ["index", "-r", c["tr.fa"], "--index", c["ix"], "-B", "1000", *CPU]
    env = {**os.environ, "HSPZ_FAULT": "index-built"}
    assert (
        subprocess.run(
            [sys.executable, "-m", "hspz", *argv], env=env, capture_output=True
        ).returncode
        == -9
    )
    assert (tmp_path / "ix.tmp" / ".hspz-made").is_file() and (tmp_path / "ix.tmp.lock").exists()
    assert main(argv) == 0
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("ix")) == ["ix"]
    assert not (tmp_path / "ix" / ".hspz-made").exists()


@pytest.mark.parametrize("mark", [None, b"", b"hspZ made"], ids=["no-mark", "empty", "short"])
def test_a_build_killed_while_its_folder_was_made_is_removed_by_the_next_build(tmp_path, mark):
    """A SIGKILL between DIR.tmp's mkdir and its mark's last byte (`durable.make_marked`)
    leaves DIR.tmp holding no mark or part of one, and nothing else: the next build removes it
    (it holds nothing to lose) and succeeds."""
    from hspz.core import durable

    c = Case(tmp_path)
    (tmp_path / "ix.tmp").mkdir()
    if mark is not None:
        (tmp_path / "ix.tmp" / durable.MARK).write_bytes(mark)
    assert main(["index", "-r", c["tr.fa"], "--index", c["ix"], "-B", "1000", *CPU]) == 0
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("ix")) == ["ix"]


def test_a_killed_build_folder_holding_the_reference_is_kept(tmp_path, capfd):
    """The next build removes a killed build's DIR.tmp, but never when the reference it is
    asked to read lies inside it (found by the adversarial pass: the input was removed)."""
    import subprocess
    import sys

    c = Case(tmp_path)
    argv = ["index", "-r", c["tr.fa"], "--index", c["ix"], "-B", "1000", *CPU]
    env = {**os.environ, "HSPZ_FAULT": "index-built"}
    assert (
        subprocess.run(
            [sys.executable, "-m", "hspz", *argv], env=env, capture_output=True
        ).returncode
        == -9
    )
    shutil.copy(c["tr.fa"], c["ix.tmp/ref.fa"])
    assert_refused(
        capfd,
        ["index", "-r", c["ix.tmp/ref.fa"], "--index", c["ix"], "-B", "1000", *CPU],
        2,
        r"^hspZ: .*/ix\.tmp holds .*ref\.fa",
        tmp_path,
    )


def test_an_index_build_past_a_file_size_limit_is_one_line_naming_the_file(tmp_path):
    """`ulimit -f`: the build fails in one line that names the file it was writing (it said
    only '16777216 requested and 256 written') and leaves neither DIR nor DIR.tmp."""
    import resource
    import subprocess
    import sys

    c = Case(tmp_path)
    limit = lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))  # noqa: E731
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "hspz",
            "index",
            "-r",
            c["tr.fa"],
            "--index",
            c["ix"],
            "-B",
            "1000",
            *CPU,
        ],
        capture_output=True,
        text=True,
        preexec_fn=limit,
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr  # the run failed: 1
    assert re.match(r"^hspZ: .*/ix\.tmp/000/\w+: cannot write it", lines[0]), lines
    assert not (tmp_path / "ix").exists() and not (tmp_path / "ix.tmp").exists()
