"""hspz/core/options.py's parsers: sizes evaluated exactly, integers of ASCII digits, and each
flag's largest legal value accepted where one more is refused (the bounds' reasons are in
options.py)."""

from __future__ import annotations

import pytest

from hspz.core import options
from hspz.core.errors import UsageError
from hspz.core.options import parse_int, parse_prefix, parse_size


@pytest.mark.parametrize(
    "text, value",
    [
        ("5e8", 500_000_000),
        ("500M", 500_000_000),
        ("500000000", 500_000_000),
        ("1.5k", 1500),
        (".5k", 500),
        ("5.", 5),
        ("120.00e-1", 12),
        ("0.001k", 1),
        ("0e99999999999999", 0),
        ("5" + "0" * 50 + "e-50", 5),
        ("4.294967295G", 4_294_967_295),
        (" 7 ", 7),
        ("0", 0),
    ],
)
def test_sizes_are_evaluated_exactly(text, value):
    assert parse_size("-C", text, 0, options.MAX_BP) == value


@pytest.mark.parametrize(
    "text, message",
    [
        ("1e-400", "not a whole number"),
        ("2.5", "not a whole number"),
        ("1e400", "at most"),
        ("4294967296", "at most"),
        ("1e-99999999999999", "not a whole number"),
        ("inf", "not a size"),
        ("nan", "not a size"),
        ("-0", "not a size"),
        ("1_000", "not a size"),
        ("\u0663", "not a size"),
        ("9" * 60, "too many digits"),
        ("", "not a size"),
        ("1e" + "9" * 5000, "at most"),
    ],
)
def test_sizes_that_are_not_whole_in_range_numbers_are_refused(text, message):
    with pytest.raises(UsageError, match=message):
        parse_size("-C", text, 0, options.MAX_BP)


@pytest.mark.parametrize("text", ["٣", "1e3", "0x10", "5.0", "", "1_0", "--5"])
def test_integers_take_ascii_digits_and_a_sign_only(text):
    with pytest.raises(UsageError, match="not an integer"):
        parse_int("-x", text, 1, 10)


@pytest.mark.parametrize(
    "name, maximum",
    [
        ("--xdrop", options.XDROP_MAX),
        ("--hspthresh", options.HSPTHRESH_MAX),
        ("--step", options.MAX_BP),
        ("--gpus", options.MAX_WORKERS),
        ("--threads", options.MAX_THREADS),
        ("--iterations", options.MAX_PASSES),
    ],
)
def test_the_largest_value_is_taken_and_one_more_is_refused(name, maximum):
    assert parse_int(name, str(maximum), 1, maximum) == maximum
    with pytest.raises(UsageError, match=rf"{name}: {maximum + 1} must be at most {maximum}"):
        parse_int(name, str(maximum + 1), 1, maximum)
    with pytest.raises(UsageError, match=r"must be at most"):
        parse_int(name, "9" * 5000, 1, maximum)  # never reaches int()'s digit limit


@pytest.mark.parametrize("prefix", ["", "ref.", "hg38#1#", "\u00e9t\u00e9_"])
def test_prefixes_without_whitespace_or_control_characters_are_taken(prefix):
    assert parse_prefix("-T", prefix) == prefix
