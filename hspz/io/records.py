"""A sequence record (name, bases, mask blocks) and what both file formats share: the u32 size
limit, the bin separator, duplicate-name refusal and the atomic writer of a sequence file."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np

from hspz.core.errors import InputError

PathLike = str | os.PathLike[str]


MAX_BIN_BP = 4_294_967_295  # records and bins must stay below this (u32 positions)


SEPARATOR = ord("&")


@dataclass(frozen=True)
class Record:
    """One sequence: its unprefixed name and its bytes (1-D uint8, case kept).  `unseedable`,
    where the reader knows it (2bit: the N and mask blocks), is (starts, sizes) of blocks
    covering exactly the bases that are not uppercase A, C, G or T, so that the memory preflight
    counts seedable bases without a pass over the bases (`planning.seedable`)."""

    name: str
    seq: np.ndarray
    unseedable: tuple[np.ndarray, np.ndarray] | None = None

    def __post_init__(self) -> None:
        seq = self.seq
        if type(seq) is np.ndarray and seq.dtype == np.uint8 and seq.ndim == 1:
            return  # the common case, kept cheap: readers build one Record per sequence
        if isinstance(seq, bytes | bytearray | memoryview):
            seq = np.frombuffer(seq, dtype=np.uint8)
        seq = np.asarray(seq)
        if seq.dtype != np.uint8 or seq.ndim != 1:
            raise ValueError(f"Record {self.name!r}: seq must be a 1-D uint8 array")
        object.__setattr__(self, "seq", seq)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Record):
            return NotImplemented
        return self.name == other.name and np.array_equal(self.seq, other.seq)

    def __hash__(self) -> int:
        return hash((self.name, len(self.seq)))

    def __len__(self) -> int:
        return len(self.seq)


def refuse_duplicates(names: Sequence[str], source: str) -> None:
    """One file's record names must differ: two equal names give output lines that cannot be
    told apart."""
    first: dict[str, int] = {}
    for i, name in enumerate(names):
        j = first.setdefault(name, i)
        if j != i:
            raise InputError(
                f"{source}: record name {ascii(name)} is used twice (records {j + 1} and {i + 1})"
            )


def write_atomic(path: PathLike, chunks: Iterable[bytes | np.ndarray]) -> None:
    """Write to a temporary sibling, rename when complete: nothing half-written looks done."""
    from hspz.core import durable

    def write(fh: BinaryIO) -> None:
        for chunk in chunks:
            fh.write(chunk)  # type: ignore[arg-type]  # numpy's stubs: no Buffer before 3.12

    durable.write_file(path, write)
