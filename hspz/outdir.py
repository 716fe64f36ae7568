"""The output directory: checked before any work."""

from __future__ import annotations

import os
from pathlib import Path

from hspz.errors import UsageError

DEFAULT_TARBALL = "segments.tar.gz"


def check_output_dir(outdir: str | Path, flag: str = "--output") -> None:
    """Refuse early an OUT that cannot be created or written, before any work."""
    path = Path(outdir).absolute()
    probe = path
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise UsageError(f"{flag}: {probe} is not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise UsageError(f"{flag}: cannot create or write {path} (no write permission on {probe})")
