"""Run options: one dataclass, every default in one place, and the value parsers the CLI uses.

Everything downstream (plan, engine, emit, the manifest) reads an `Options`; nothing else holds a
default.  Parsers raise `UsageError` naming the flag, so a bad value is one line and exit status 2.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from hspz.core.errors import UsageError
from hspz.core.names import name_problem

SEED_PATTERNS = {
    "12of19": "TTT0T00TT00T0T0TTTT",
    "14of22": "TTT0T0TT00TT00T0T0TTTT",
}

# A size: ASCII digits, an optional fraction and exponent, an optional k/M/G (powers of ten).
_SIZE = re.compile(r"^\s*([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?[0-9]+))?\s*([kKmMgG]?)\s*$")
_UNIT_EXPONENT = {"": 0, "k": 3, "m": 6, "g": 9}
_INTEGER = re.compile(r"^\s*[+-]?[0-9]+\s*$")  # ASCII digits only (int() takes any script's)
_MOST_DIGITS = 40  # more digits than any bound below has: refused before int() sees them

# ---- Bounds.  Every integer flag is checked against the width of the type that carries it. ----
INT32_MAX = 2**31 - 1
# Positions and lengths travel as u32 (sequence.MAX_BIN_BP): -e, -C, -I, -B, --query-block-size
# and --stride beyond it would mean no more than this does, or a bin that cannot be packed.
MAX_BP = 4_294_967_295
# Scores.  The CPU backend adds scores in int64, and so do the GPU's sweeps and chain walks
# (finish.cu); the GPU's capped walks (extend.cu `walk`, `bound_walk`) add them in int32 over at
# most WALK_CAP bases a side (engine/gpu.py: CAP = 64, CAP2 = 1024).  With every matrix entry
# within +-SCORE_MAX and the x-drop at most XDROP_MAX:
#  - both sides' maxima together, mr + ml <= 2 * WALK_CAP * SCORE_MAX = 2.048e9 < 2^31;
#  - the separator's score, -10 * xdrop >= -1e8, is an int32 matrix entry;
#  - a walk's drop below its maximum stays within xdrop + 8 * (SCORE_MAX + 10 * xdrop) = 8.18e8
#    (bound_walk tests the x-drop once per 8 bases), so its running sum never leaves int32;
#  - a maximal HSP (two identical records of MAX_BP bases) scores at most MAX_BP * SCORE_MAX =
#    4.3e15 < 2^53: an int64 holds it (hsp.HSP_DTYPE) and float64 takes it exactly (entropy).
# The threshold goes to the capped walks as an int32 (engine/gpu.py), as LASTZ's scores are.
WALK_CAP = 1024
SCORE_MAX = 1_000_000
XDROP_MAX = 10_000_000
HSPTHRESH_MAX = INT32_MAX
# A semantic chunk's H is added to int64 prefix sums of hits (plan.chunk_walks, on the device
# too): below 2^62 it cannot carry them past 2^63.
MAX_HITS = 2**62
# A worker is a process with its own device context, and threads are OS threads: these are far
# above any host (more workers than devices only time-slice them), and keep per-worker and
# per-thread lists, memory estimates and process counts finite.
MAX_WORKERS = 1024
MAX_THREADS = 4096
MAX_PASSES = 1000  # benchmark --warmup / --iterations: each pass is a whole run
MAX_SEED_SPAN = 31  # LASTZ's longest seed pattern


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

    def replace(self, **changes: Any) -> Options:
        return dataclasses.replace(self, **changes)


def shown(text: str, most: int = 40) -> str:
    """A user's value as an error message quotes it: quoted, control characters escaped (the
    message stays one line), cut after `most` characters."""
    text = str(text)
    cut = text[:most] + ("..." if len(text) > most else "")
    return "'" + "".join(c if c.isprintable() else ascii(c)[1:-1] for c in cut) + "'"


def parse_size(flag: str, text: str, minimum: int, maximum: int) -> int:
    """`5e8`, `500M`, `500000000` -> 500000000; a whole number of bases in [minimum, maximum],
    evaluated exactly (no float: `1e-400` is not 0, `1e400` is not infinity)."""
    m = _SIZE.match(str(text))
    whole, frac, exp, unit = m.groups() if m else ("", None, None, "")
    frac = frac or ""
    if not (whole or frac):
        raise UsageError(f"{flag}: {shown(text)} is not a size (examples: 5e8, 500M, 500000000)")
    digits = (whole + frac).rstrip("0")  # the value is int(digits) * 10**power
    power = _exponent(exp or "0") + len(whole) - len(digits) + _UNIT_EXPONENT[unit.lower()]
    digits = digits.lstrip("0")
    if len(digits) > _MOST_DIGITS:
        raise UsageError(f"{flag}: {shown(text)} has too many digits (at most {maximum})")
    mantissa = int(digits or "0")
    if mantissa and power < 0:
        raise UsageError(f"{flag}: {shown(text)} is not a whole number of bases")
    if mantissa and (power > _MOST_DIGITS or mantissa * 10**power > maximum):
        raise UsageError(f"{flag}: {shown(text)} must be at most {maximum}")
    value = mantissa * 10**power if mantissa else 0
    if value < minimum:
        raise UsageError(f"{flag}: {shown(text)} must be at least {minimum}")
    return value


def _exponent(text: str) -> int:
    """An exponent's value; one of more than 12 digits as +-10^13, as good as infinite here."""
    if len(text.lstrip("+-").lstrip("0")) > 12:
        return -(10**13) if text.startswith("-") else 10**13
    return int(text)


def parse_int(flag: str, text: str, minimum: int, maximum: int) -> int:
    """A plain integer (ASCII digits, an optional sign) within [minimum, maximum]."""
    text = str(text)
    if not _INTEGER.match(text):
        raise UsageError(f"{flag}: {shown(text)} is not an integer")
    if len(text.strip().lstrip("+-").lstrip("0")) > _MOST_DIGITS:
        side = f"at least {minimum}" if text.strip().startswith("-") else f"at most {maximum}"
        raise UsageError(f"{flag}: {shown(text)} must be {side}")
    value = int(text)
    if value < minimum:
        raise UsageError(f"{flag}: {value} must be at least {minimum}")
    if value > maximum:
        raise UsageError(f"{flag}: {value} must be at most {maximum}")
    return value


def parse_pattern(flag: str, text: str) -> str:
    """A named seed or a custom pattern of 1/T (care) and other characters (don't care): ASCII
    without spaces, at most MAX_SEED_SPAN long, with 4 to 15 care positions."""
    pattern = SEED_PATTERNS.get(text, text)
    if not pattern or not (pattern.isascii() and pattern.isprintable()) or " " in pattern:
        raise UsageError(f"{flag}: {shown(text)} is not a seed pattern")
    if len(pattern) > MAX_SEED_SPAN:
        raise UsageError(
            f"{flag}: {shown(text)} spans {len(pattern)} bases; a seed spans at "
            f"most {MAX_SEED_SPAN}"
        )
    care = sum(c in "1T" for c in pattern)
    if not 4 <= care <= 15:
        raise UsageError(f"{flag}: {shown(text)} has {care} care positions; a seed needs 4 to 15")
    return text


def parse_ambiguous(flag: str, text: str) -> str:
    """`n`, `iupac`, or `n,R,P` / `iupac,R,P` with integer reward R and penalty P, each within
    +-SCORE_MAX (they become matrix entries R and -P)."""
    parts = text.split(",")
    if parts[0] not in ("n", "iupac") or len(parts) not in (1, 3):
        raise UsageError(f"{flag}: {shown(text)} must be n, iupac, n,R,P or iupac,R,P")
    for p in parts[1:]:
        parse_int(flag, p, -SCORE_MAX, SCORE_MAX)
    return text


def parse_prefix(flag: str, text: str) -> str:
    """A -T/-Q prefix: it starts every name on that side of the output, so it obeys the name
    rule (`names.name_problem`) and must be UTF-8 (an argument can hold any bytes)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError(f"{flag}: {shown(text)} is not valid UTF-8") from None
    problem = name_problem(text)
    if problem:
        raise UsageError(f"{flag}: {shown(text)} {problem}; output names cannot hold it")
    return text


def parse_choice(flag: str, text: str, choices: tuple[str, ...]) -> str:
    if text not in choices:
        raise UsageError(f"{flag}: {shown(text)} must be one of {', '.join(choices)}")
    return text
