"""A frozen plan read from either file that holds one: a manifest (`--dump-manifest`) or a
one-job plan file (`hspZ plan`), as `--from-manifest` takes them.  Here, above both formats, so
that neither imports the other."""

from __future__ import annotations

import os

from hspz.core.errors import InputError
from hspz.formats.manifest import FORMAT, Manifest, manifest_body
from hspz.formats.planfile import read_plan_bytes
from hspz.formats.sealed import check_format, read_bytes, unsealed


def parse_manifest(text: str, source: str) -> Manifest:
    """A Manifest from the text of a manifest or a plan file, its checksum checked first;
    InputError names the file (and the line)."""
    return _manifest_of(text.encode("utf-8"), source)


def _manifest_of(data: bytes, source: str) -> Manifest:
    if data.startswith(b"hspz-plan"):  # a plan file: its one job's frozen plan
        pf = read_plan_bytes(data, source)
        if pf.query_list:
            raise InputError(
                f"{source}: a batch plan holds {len(pf.jobs)} jobs' plans; give "
                f"one job's manifest (--dump-manifest writes one per job)"
            )
        return pf.manifest
    check_format(data, source, "hspz-manifest", FORMAT, "manifest")
    return manifest_body(unsealed(data, source, "manifest"), source)


def read_manifest(path: str | os.PathLike) -> Manifest:
    """The manifest of a manifest file or of a plan file, checked (`parse_manifest`)."""
    return _manifest_of(read_bytes(path), os.fspath(path))
