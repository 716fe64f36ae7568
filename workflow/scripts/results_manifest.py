"""The checksummed manifest of a batch's results/<job>/ folder, which the workflow's `all`
depends on: `hspz_merge` writes it last (`write`), and the workflow checks it when it is parsed
(`damage`), so that a job folder or archive deleted, added or changed since the merge makes
the merge run again.  Standard library only: the merge's shell runs it with the job's Python.

A line per file under the folder, sorted by path: `sha256 TAB size TAB mtime_ns TAB path`.
The check is cheap: every file's size and mtime against its line, and the sha256 of the two
files Snakemake touches after the job (queries.tsv, names.tsv).

    python results_manifest.py write RESULTS_DIR MANIFEST
    python results_manifest.py prune RESULTS BATCH COUNT

`prune` (run by hspz_merge before it merges) removes the dot plots and gapped alignments of
job numbers above COUNT that a smaller batch no longer has: only files that Snakemake's
metadata (.snakemake/metadata/, in the working directory) records as written by this
workflow's report or gapped rules, never a file matched by name alone.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

HASH_THREADS = 8  # files hashed at once by `write`
TOUCHED = ("queries.tsv", "names.tsv")  # Snakemake resets their mtimes after the job


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def files(folder: Path) -> list[Path]:
    """Every file under `folder` (symlinks not followed), by relative path, but Snakemake's
    directory timestamps and a nested group's folder (results/<job>/g1/ is a batch of its own
    only when the job has groups, and then results/<job>/ holds nothing else)."""
    found = []
    for root, dirs, names in os.walk(folder):
        dirs.sort()
        for name in sorted(names):
            if name != ".snakemake_timestamp":
                found.append((Path(root) / name).relative_to(folder))
    return found


def write(folder: str, manifest: str) -> None:
    """The manifest of `folder`, written to a temporary name, fsynced and renamed."""
    from concurrent.futures import ThreadPoolExecutor

    base = Path(folder)

    def line(rel: Path) -> str:
        st = (base / rel).lstat()
        return f"{_sha256(base / rel)}\t{st.st_size}\t{st.st_mtime_ns}\t{rel.as_posix()}\n"

    # hashed on threads (hashlib lets go of the GIL): a batch's folder is the size of its results
    with ThreadPoolExecutor(min(HASH_THREADS, os.cpu_count() or 1)) as pool:
        lines = list(pool.map(line, files(base)))
    write_atomically(manifest, lines)


def write_atomically(path: str, lines: list[str]) -> None:
    """`lines` into `path` through a fresh temporary file beside it (never an existing file,
    never through a symlink), fsynced, then renamed over `path`."""
    import tempfile

    fd, tmp = tempfile.mkstemp(
        dir=os.path.dirname(os.path.abspath(path)), prefix=f".{os.path.basename(path)}."
    )
    try:
        with os.fdopen(fd, "w") as out:
            out.writelines(lines)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def damage(folder: str, manifest: str) -> str | None:
    """What differs between `folder` and its manifest (one phrase), or None when they agree
    or there is no manifest yet."""
    try:
        text = Path(manifest).read_text()
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    recorded = {}
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) != 4:
            return "the manifest is damaged"
        recorded[parts[3]] = parts
    base = Path(folder)
    present = {rel.as_posix() for rel in files(base)} if base.is_dir() else set()
    if missing := sorted(set(recorded) - present):
        return f"{missing[0]} is missing" + (
            f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        )
    if extra := sorted(present - set(recorded)):
        return f"{extra[0]} was not written by the merge"
    for rel, (sha, size, mtime, _) in recorded.items():
        st = (base / rel).lstat()
        if str(st.st_size) != size:
            return f"{rel} changed size"
        if Path(rel).name in TOUCHED and Path(rel).parent == Path("."):
            if _sha256(base / rel) != sha:
                return f"{rel} changed"
        elif str(st.st_mtime_ns) != mtime:
            return f"{rel} changed"
    return None


REPORT_RULES = {"reports": ("hspz_dotplot",), "gapped": ("hspz_gapped", "hspz_gapped_gather")}


def written_by_workflow(path: Path, rules: tuple[str, ...]) -> bool:
    """Whether Snakemake's metadata says one of `rules` wrote `path`."""
    import base64
    import json

    record = Path(".snakemake/metadata") / base64.urlsafe_b64encode(str(path).encode()).decode()
    try:
        return json.loads(record.read_text()).get("rule") in rules
    except (OSError, ValueError):
        return False


def prune(results: str, batch: str, count: int) -> list[Path]:
    """Remove the report and gapped files of job numbers above `count` (see above)."""
    removed = []
    for kind, rules in REPORT_RULES.items():
        folder = Path(results) / kind / batch
        if not folder.is_dir():
            continue
        for path in sorted(folder.iterdir()):
            number = path.name[:6]
            if not (
                number.isdigit()
                and path.name[6:7] == "."
                and path.is_file()
                and not path.is_symlink()
            ):
                continue
            if int(number) > count and written_by_workflow(path, rules):
                path.unlink()
                removed.append(path)
                print(
                    f"hspZ workflow: {path}: job {number} is no longer in the batch: removed",
                    file=sys.stderr,
                )
    return removed


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "write":
        write(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 5 and sys.argv[1] == "prune" and sys.argv[4].isdigit():
        prune(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        sys.exit(
            "usage: results_manifest.py write RESULTS_DIR MANIFEST | prune RESULTS BATCH COUNT"
        )
