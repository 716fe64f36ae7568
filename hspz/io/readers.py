"""Reading a sequence file: format detection (FASTA, gzip, 2bit by their first bytes),
decompression, and one side's records with the refusal of an empty side."""

from __future__ import annotations

import gzip
import os
import stat
import zlib
from concurrent.futures import ThreadPoolExecutor

from hspz.core import durable
from hspz.core.errors import InputError, in_flight
from hspz.io.fasta import read_fasta_bytes
from hspz.io.records import PathLike, Record
from hspz.io.twobit import TWOBIT_MAGIC, read_2bit_bytes

GZIP_MAGIC = b"\x1f\x8b"


def _format_of(head: bytes) -> str:
    if head[:4] in TWOBIT_MAGIC:
        return "2bit"
    if head[:2] == GZIP_MAGIC:
        return "gzip"
    return "fasta"


def _read_file(path: PathLike, size: int = -1, regular: bool = False) -> bytes:
    """The file's bytes (the first `size`); a device (/dev/zero, a terminal) is refused, never
    read: it would be read into memory for ever.  With `regular`, anything but a regular file
    is refused before a byte is read (`durable.open_regular`: a FIFO is not waited on)."""
    try:
        with open(durable.open_regular(path) if regular else path, "rb") as fh:
            if stat.S_ISCHR(mode := os.fstat(fh.fileno()).st_mode) or stat.S_ISBLK(mode):
                raise InputError(f"{os.fspath(path)}: a device, not a sequence file")
            return fh.read(size)
    except OSError as exc:
        raise InputError(f"cannot read {os.fspath(path)}: {exc.strerror or exc}") from exc


def detect_format(path: PathLike) -> str:
    """'2bit', 'gzip' or 'fasta', decided by the file's magic bytes (never its extension)."""
    return _format_of(_read_file(path, 4))


def read_records(path: PathLike) -> list[Record]:
    """Every record of a FASTA, gzip (FASTA or 2bit inside) or 2bit file, in file order."""
    return records_of(_read_file(path), os.fspath(path))


def records_of(data: bytes, source: str) -> list[Record]:
    """Every record of a sequence file's bytes (FASTA, gzip or 2bit), in file order."""
    kind = _format_of(data)
    if kind == "gzip":
        data = _gunzip(data, source)
        kind = "2bit" if _format_of(data) == "2bit" else "fasta"
    if kind == "2bit":
        return read_2bit_bytes(data, source)
    return read_fasta_bytes(data, source)


def _gunzip(data: bytes, source: str) -> bytes:
    # gzip.decompress reads every member, so bgzip and `cat a.gz b.gz` both work.
    try:
        return gzip.decompress(data)
    except EOFError as exc:
        raise InputError(f"{source}: truncated gzip stream ({exc})") from exc
    except (OSError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
        raise InputError(f"{source}: corrupt gzip data ({exc})") from exc


def read_side(path: str, side: str) -> list[Record]:
    return _one_side(read_records(path), path, side)


def read_bytes(path: str, regular: bool = False) -> bytes:
    """A sequence file's bytes, read once (a device refused; with `regular`, a FIFO too): for
    `side_of` and for hashing the very bytes the records come from (`hspZ index`, a query-list
    plan's queries, which the work jobs read again)."""
    return _read_file(path, regular=regular)


def side_of(data: bytes, path: str, side: str) -> list[Record]:
    """One side's records decoded from the bytes of `path` (`read_bytes`); none is refused."""
    return _one_side(records_of(data, path), path, side)


def _one_side(records: list[Record], path: str, side: str) -> list[Record]:
    if not records:
        raise InputError(f"{path}: no {side} records")
    return records


def read_both(reference: str, query: str) -> tuple[list[Record], list[Record]]:
    """Both sides, read at once on two threads (the decoding loops release the GIL); a bad
    reference is reported before a bad query, as when read one after the other."""
    pool = ThreadPoolExecutor(max_workers=2)
    try:
        ref = pool.submit(read_side, reference, "reference")
        qry = pool.submit(read_side, query, "query")
        return ref.result(), qry.result()
    finally:  # not waited for on an interrupt: a thread may block in a FIFO's open for ever
        pool.shutdown(wait=not in_flight(), cancel_futures=True)
