"""What a record name or a -T/-Q prefix may hold: the one rule the readers and the flag parser
apply.

A segments line is tab-separated and newline-terminated, and LASTZ reads it back by splitting on
whitespace, so a name may not hold whitespace (ASCII or Unicode: a TAB adds a column, a newline a
line, U+0085 and U+2028 are line breaks to `str.splitlines`) or a control character (C0, DEL,
C1: a NUL ends the name for C tools, LASTZ among them).  FASTA names never hold ASCII whitespace
(the name is the header's first word) but can hold the rest; 2bit names can hold any byte.
"""

from __future__ import annotations

import re

_FORBIDDEN = re.compile(r"[\s\x00-\x1f\x7f-\x9f]")


def name_problem(name: str) -> str | None:
    """Why `name` cannot appear in a segments line (the first bad character, escaped), or None."""
    bad = _FORBIDDEN.search(name)
    if bad is None:
        return None
    return f"holds {ascii(bad.group())} at character {bad.start() + 1}"
