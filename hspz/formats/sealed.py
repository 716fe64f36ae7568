"""Sealed text files (manifests, plan files, the index MANIFEST): one checksum line at the end,
`checksum sha256:<hex of every byte before it>`, written by `sealed` and checked by `unsealed`;
the format line every sealed file starts with; and the reader of their `key rest` lines."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

from hspz.core.errors import InputError

SEAL = "checksum sha256:"


def checksum_line(body: bytes) -> bytes:
    """`checksum sha256:<hex of body>`, without its newline: the last line of a sealed file."""
    return SEAL.encode() + hashlib.sha256(body).hexdigest().encode()


def sealed(text: str) -> str:
    """`text` (whole lines) followed by `checksum sha256:<hex of text's UTF-8 bytes>`."""
    return f"{text}{checksum_line(text.encode('utf-8')).decode()}\n"


def unsealed(data: bytes, source: str, what: str) -> str:
    """The text before the checksum line of `data`, once the checksum matches; InputError
    (naming `source`) when the line is missing or anything before or after it changed."""
    head, _, last = data[:-1].rpartition(b"\n") if data.endswith(b"\n") else (b"", b"", b"")
    body = head + b"\n" if head else b""
    if not last.startswith(SEAL.encode()):
        raise InputError(
            f"{source}: no checksum line at the end of the {what} (truncated, or "
            f"not written by this hspZ)"
        )
    if last != checksum_line(body):
        raise InputError(
            f"{source}: checksum mismatch: the {what} was edited or damaged after "
            f"hspZ wrote it (re-create it rather than edit it)"
        )
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:  # sealed, so written this way: not by hspZ
        raise InputError(f"{source}: not UTF-8 text ({exc.reason})") from None


def check_format(data: bytes, source: str, key: str, current: int, what: str) -> None:
    """The first line must be `key <current>`; an older or newer version is refused before
    the checksum is (an older file has none)."""
    first = data.partition(b"\n")[0].decode("utf-8", "replace").split(" ")
    if first[0] != key or len(first) != 2:
        raise InputError(f"{source}: not an hspZ {what}")
    if first[1] != str(current):
        age = "an older" if first[1].isdigit() and int(first[1]) < current else "another"
        raise InputError(
            f"{source}: {what} format {first[1]!r} was written by {age} hspZ; this "
            f"one reads format {current} (re-create the {what} with this hspZ)"
        )


class Lines:
    """`key rest` pairs of a text file, with line numbers for error messages."""

    def __init__(self, text: str, source: str):
        self.source = source
        self.items: list[tuple[int, str, str]] = []
        for n, raw in enumerate(text.split("\n"), 1):
            if not raw.strip() or raw.startswith("#"):
                continue
            key, _, rest = raw.partition(" ")
            self.items.append((n, key, rest))

    def error(self, n: int, what: str) -> InputError:
        return InputError(f"{self.source} line {n}: {what}")

    def scalars(self, keys: Iterable[str]) -> dict[str, tuple[int, str]]:
        wanted, out = set(keys), {}
        for n, key, rest in self.items:
            if key in wanted:
                if key in out:
                    raise self.error(n, f"duplicate {key}")
                out[key] = (n, rest)
        missing = [k for k in keys if k not in out]
        if missing:
            raise InputError(f"{self.source}: not a complete hspZ manifest (missing {missing[0]})")
        return out


def int_at(lines: Lines, at: tuple[int, str], name: str) -> int:
    try:
        return int(at[1])
    except ValueError:
        raise lines.error(at[0], f"bad {name} {at[1]!r}") from None


def read_bytes(path: str | os.PathLike) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {os.fspath(path)}: {exc.strerror or exc}") from exc
