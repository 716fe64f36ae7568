"""Record digests: the sha256 of a side's records (names, lengths, bases and masks) that manifests
and the index record, and records that carry a known digest."""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from hspz.io.records import Record


@dataclass(frozen=True)
class KnownRecord:
    """A record known by its name and length alone (an index's reference, read from its
    MANIFEST): planning and the record tables need no more."""

    name: str
    length: int

    def __len__(self) -> int:
        return self.length


class HashedRecords(list):
    """Records with their `sequence.records_digest`, computed once (a query-list run plans every job
    against one reference)."""

    def __init__(self, records: Iterable[Record | KnownRecord], digest: str | None = None) -> None:
        super().__init__(records)
        self.digest = records_digest(self) if digest is None else digest


class KnownRecords(HashedRecords):
    """KnownRecords with the records hash they were recorded with."""

    def __init__(self, names: list[str], lengths: list[int], digest: str):
        super().__init__((KnownRecord(n, k) for n, k in zip(names, lengths, strict=True)), digest)


def side_digest(records: Sequence[Record]) -> str:
    """`sequence.records_digest` of one side's records, or the hash they carry."""
    return records.digest if isinstance(records, HashedRecords) else records_digest(records)


def records_digest(records: Iterable[Record]) -> str:
    """sha256 hex over (name, length, bytes) of every record in order, length-prefixed so that
    no two different record lists share a byte stream."""
    h = hashlib.sha256()
    for rec in records:
        name = rec.name.encode("utf-8")
        h.update(struct.pack("<Q", len(name)) + name + struct.pack("<Q", len(rec.seq)))
        h.update(np.ascontiguousarray(rec.seq).data)
    return h.hexdigest()
