"""What the tests share to make sequences (not a test module): random DNA, the mutation
helpers and the one FASTA writer.

Every random helper takes the caller's `numpy.random.Generator` and draws from it in a fixed
order, so a seeded test gets the same bytes on every run.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

from hspz.core.names import name_problem
from hspz.io.fasta import write_fasta as _product_write_fasta
from hspz.io.records import Record

BASES = np.frombuffer(b"ACGT", np.uint8)
TRANSVERSION = bytes.maketrans(b"ACGT", b"CATG")
TRANSITION = bytes.maketrans(b"ACGT", b"GTAC")

Seq = bytes | bytearray | str | np.ndarray
Records = Iterable[tuple[str | bytes, Seq]] | Mapping[str, Seq]


def random_dna(rng: np.random.Generator, n: int, alphabet: bytes = b"ACGT") -> np.ndarray:
    """`n` bases drawn uniformly from `alphabet` (one `rng.integers` draw), as uint8."""
    return np.frombuffer(alphabet, np.uint8)[rng.integers(0, len(alphabet), n)]


def mutate(rng: np.random.Generator, seq: Seq, rate: float) -> Seq:
    """`seq` with each base replaced, with probability `rate`, by a uniformly drawn ACGT base
    (possibly the same one): one `rng.random` draw per base, then one `rng.integers` draw
    per replaced base.  An array in gives an array out, bytes give bytes; `seq` is not
    changed."""
    out = _array(seq).copy()
    hit = rng.random(len(out)) < rate
    out[hit] = random_dna(rng, int(hit.sum()))
    return out if isinstance(seq, np.ndarray) else out.tobytes()


def evolve(rng: np.random.Generator, seq: bytes) -> bytes:
    """A richer model for the randomized engine cases: substitutions at a random rate up to
    8% (a third of them transitions), up to three small indels, perhaps an N run, a
    lowercase run and an IUPAC code."""
    out = bytearray(seq)
    for i in rng.integers(0, len(out), int(len(out) * rng.uniform(0.0, 0.08))):
        table = TRANSITION if rng.random() < 0.33 else TRANSVERSION
        out[i] = bytes([out[i]]).translate(table)[0]
    for _ in range(int(rng.integers(0, 4))):
        i = int(rng.integers(0, len(out)))
        if rng.random() < 0.5:
            del out[i : i + int(rng.integers(1, 6))]
        else:
            out[i:i] = random_dna(rng, int(rng.integers(1, 6))).tobytes()
    if rng.random() < 0.5:
        i, n = int(rng.integers(0, len(out))), int(rng.integers(1, 40))
        out[i : i + n] = b"N" * len(out[i : i + n])
    if rng.random() < 0.5:
        i = int(rng.integers(0, len(out)))
        out[i : i + 80] = bytes(out[i : i + 80]).lower()
    if rng.random() < 0.2:
        out[int(rng.integers(0, len(out)))] = ord(rng.choice(list("RYKMSWBDHVX")))
    return bytes(out)


def fasta_bytes(records: Records, width: int = 0, description: str = "") -> bytes:
    """FASTA text of `records`, pairs (or a mapping) of name and sequence.  A name is written
    after `>` exactly as given (bytes may hold anything, for the refusal tests), then
    ` description` when one is given; the sequence follows on lines of `width` bases (0: one
    line).  An empty sequence is the header alone."""
    parts = []
    for name, seq in _pairs(records):
        head = name if isinstance(name, bytes) else name.encode()
        parts.append(b">" + head + (b" " + description.encode() if description else b"") + b"\n")
        data = _array(seq).tobytes()
        step = width if width > 0 else max(len(data), 1)
        parts += [data[i : i + step] + b"\n" for i in range(0, len(data), step)]
    return b"".join(parts)


def write_fasta(
    path: str | os.PathLike, records: Records, width: int = 0, description: str = ""
) -> Path:
    """Write `records` as FASTA (see `fasta_bytes`) and return the path.  Plain records
    (names hspZ accepts, no description) go through the product's own
    writer, `hspz.io.fasta.write_fasta`, which gives the same bytes; anything else is written
    as `fasta_bytes` makes it."""
    pairs = _pairs(records)
    path = Path(path)
    if not description and all(isinstance(n, str) and n and not name_problem(n) for n, _ in pairs):
        _product_write_fasta(path, [Record(n, _array(s)) for n, s in pairs], width=width)
    else:
        path.write_bytes(fasta_bytes(pairs, width, description))
    return path


def _pairs(records: Records) -> list[tuple[str | bytes, Seq]]:
    return list(records.items()) if isinstance(records, Mapping) else list(records)


def _array(seq: Seq) -> np.ndarray:
    if isinstance(seq, np.ndarray):
        return seq.astype(np.uint8, copy=False)
    return np.frombuffer(seq.encode() if isinstance(seq, str) else bytes(seq), np.uint8)


def sigterm_after(proc, what: str, wait: float = 2.0) -> str:
    """SIGTERM `proc` (a Popen with stderr=PIPE, text) after `wait` seconds, well into a read
    it is blocked in; its stderr once it has stopped with hspZ's SIGTERM status and line."""
    import signal
    import subprocess
    import time

    time.sleep(wait)
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError(f"SIGTERM did not stop {what}") from None
    assert proc.returncode == 143, err
    assert err.strip().splitlines()[-1] == "hspZ: terminated (SIGTERM)"
    return err
