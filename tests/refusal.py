"""The refusal checker the catalogue tests share (not a test module).

A refusal is one `hspZ: ...` line on stderr, nothing on stdout, the expected exit status, no
traceback (no exception escapes `main`), and the directory the case works in unchanged: every
input keeps its bytes, and nothing was added that could be taken for a result.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from hspz.cli import main


def snapshot(root: Path) -> dict[str, str]:
    """{relative path: sha256 of its bytes, 'dir', a link's target or 'fifo'} of everything
    under `root` (a FIFO is never opened: reading it would wait for a writer)."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_symlink():
            out[rel] = f"link:{p.readlink()}"
        elif p.is_dir():
            out[rel] = "dir"
        elif p.is_fifo():
            out[rel] = "fifo"
        else:
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def assert_refused(
    capfd, argv: list[str], status: int, pattern: str, root: Path, chatter: bool = False
) -> str:
    """Run `hspZ argv` in this process and check that it is a clean refusal; the line.
    `chatter`: report lines (`schedule:`, `note:`, ...) may precede it (a refusal found once the
    run has started); otherwise stderr holds the one line alone."""
    capfd.readouterr()
    before = snapshot(root)
    try:
        code = main(argv)
    except BaseException as exc:  # noqa: BLE001 - any escape is the traceback a user would see
        raise AssertionError(f"{type(exc).__name__} escaped main: {exc}") from exc
    out, err = capfd.readouterr()
    lines = [line for line in err.splitlines() if line.startswith("hspZ: ")]
    assert code == status, (code, err)
    assert out == "", out
    assert len(lines) == 1 and "Traceback" not in err, err
    assert chatter or len(err.splitlines()) == 1, err
    assert re.search(pattern, lines[0]), lines[0]
    assert snapshot(root) == before, "the refusal changed files under the case's directory"
    return lines[0]
