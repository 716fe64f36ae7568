"""Run options: one dataclass, every default in one place, and the value parsers the CLI uses.

Everything downstream (plan, engine, emit, the manifest) reads an `Options`; nothing else holds a
default.  Parsers raise `UsageError` naming the flag, so a bad value is one line and exit status 2.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

from hspz.errors import UsageError

SEED_PATTERNS = {
    "12of19": "TTT0T00TT00T0T0TTTT",
    "14of22": "TTT0T0TT00TT00T0T0TTTT",
}

_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kKmMgG]?)\s*$")
_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9}


@dataclass(frozen=True)
class Options:
    """Every parameter that can change what a run computes or prints."""

    strand: str = "both"
    seed: str = "12of19"
    step: int = 1
    transition: bool = True
    xdrop: int = 910
    hspthresh: int = 3000
    entropy: bool = True
    ambiguous: str | None = None
    scoring: str | None = None
    target_prefix: str = ""
    query_prefix: str = ""
    wga_chunk_size: int = 250_000
    interval_size: int = 10_000_000
    seq_block_size: int = 500_000_000
    query_block_size: int | None = None
    max_hits: int = 16_711_680
    threads: int = 0
    gpus: int = 1
    backend: str = "auto"
    kegalign_bins: bool = False
    diagonal_partition: bool = False
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def pattern(self) -> str:
        return SEED_PATTERNS.get(self.seed, self.seed)

    @property
    def resolved_query_block_size(self) -> int:
        return self.seq_block_size if self.query_block_size is None else self.query_block_size

    def replace(self, **changes) -> Options:
        return dataclasses.replace(self, **changes)


def parse_size(flag: str, text: str, minimum: int = 0) -> int:
    """`5e8`, `500M`, `500000000` -> 500000000; an integral number of bp, at least `minimum`."""
    m = _SIZE.match(str(text))
    if not m:
        raise UsageError(f"{flag}: '{text}' is not a size (examples: 5e8, 500M, 500000000)")
    value = float(m.group(1)) * _UNITS[m.group(2).lower()]
    if value != int(value):
        raise UsageError(f"{flag}: '{text}' is not a whole number of bases")
    if value < minimum:
        raise UsageError(f"{flag}: '{text}' must be at least {minimum}")
    return int(value)


def parse_int(flag: str, text: str, minimum: int | None = None, maximum: int | None = None) -> int:
    """A plain integer within [minimum, maximum]."""
    try:
        value = int(str(text).strip())
    except ValueError:
        raise UsageError(f"{flag}: '{text}' is not an integer") from None
    if minimum is not None and value < minimum:
        raise UsageError(f"{flag}: {value} must be at least {minimum}")
    if maximum is not None and value > maximum:
        raise UsageError(f"{flag}: {value} must be at most {maximum}")
    return value


def parse_pattern(flag: str, text: str) -> str:
    """A named seed or a custom pattern of 1/T (care) and other characters (don't care)."""
    pattern = SEED_PATTERNS.get(text, text)
    if not pattern or any(c.isspace() for c in pattern):
        raise UsageError(f"{flag}: '{text}' is not a seed pattern")
    care = sum(c in "1T" for c in pattern)
    if not 4 <= care <= 15:
        raise UsageError(f"{flag}: '{text}' has {care} care positions; a seed needs 4 to 15")
    return text


def parse_ambiguous(flag: str, text: str) -> str:
    """`n`, `iupac`, or `n,R,P` / `iupac,R,P` with integer reward R and penalty P."""
    parts = text.split(",")
    if parts[0] not in ("n", "iupac") or len(parts) not in (1, 3):
        raise UsageError(f"{flag}: '{text}' must be n, iupac, n,R,P or iupac,R,P")
    for p in parts[1:]:
        parse_int(flag, p)
    return text


def parse_choice(flag: str, text: str, choices: tuple[str, ...]) -> str:
    if text not in choices:
        raise UsageError(f"{flag}: '{text}' must be one of {', '.join(choices)}")
    return text
