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
def test_parse_int_takes_the_largest_value_and_refuses_one_more(name, maximum):
    assert parse_int(name, str(maximum), 1, maximum) == maximum
    with pytest.raises(UsageError, match=rf"{name}: {maximum + 1} must be at most {maximum}"):
        parse_int(name, str(maximum + 1), 1, maximum)
    with pytest.raises(UsageError, match=r"must be at most"):
        parse_int(name, "9" * 5000, 1, maximum)  # never reaches int()'s digit limit


@pytest.mark.parametrize("prefix", ["", "ref.", "hg38#1#", "\u00e9t\u00e9_"])
def test_prefixes_without_whitespace_or_control_characters_are_taken(prefix):
    assert parse_prefix("-T", prefix) == prefix


@pytest.mark.parametrize(
    "flag, maximum, field",
    [
        ("--xdrop", options.XDROP_MAX, "xdrop"),
        ("--hspthresh", options.HSPTHRESH_MAX, "hspthresh"),
        ("--step", options.MAX_BP, "step"),
        ("--gpus", options.MAX_WORKERS, "gpus"),
        ("--threads", options.MAX_THREADS, "threads"),
    ],
)
def test_a_run_takes_each_flags_largest_value_and_refuses_one_more(flag, maximum, field):
    """Through the command line as `hspZ run` reads it (`cli.options_from_args`), and the
    scoring's own checks (`Context.from_options`): the bounds the flags really have."""
    from hspz.cli import build_parser, options_from_args
    from hspz.engine.contract import Context

    def read(value: int):
        ns = build_parser().parse_args(["run", "-r", "r.fa", "-q", "q.fa", flag, str(value)])
        got = options_from_args(ns)
        Context.from_options(got)
        return got

    assert getattr(read(maximum), field) == maximum
    with pytest.raises(UsageError, match=rf"{flag}: {maximum + 1} must be at most {maximum}"):
        read(maximum + 1)


@pytest.mark.parametrize(
    "argv, flag, maximum",
    [
        (["hits-estimate", "-r", "R", "-q", "Q"], "--threads", options.MAX_THREADS),
        (["work", "--plan", "P", "--worker", "0", "-o", "O"], "--threads", options.MAX_THREADS),
        (["benchmark", "-r", "R", "-q", "Q"], "--iterations", options.MAX_PASSES),
        (["benchmark", "-r", "R", "-q", "Q"], "--warmup", options.MAX_PASSES),
    ],
)
def test_other_commands_refuse_one_more_than_a_flags_largest_value(
    tmp_path, capsys, argv, flag, maximum
):
    """Commands that read a flag themselves: one line and exit 2 before any work (the inputs
    named here do not exist)."""
    from hspz.cli import main

    args = [a if a not in ("R", "Q", "P", "O") else str(tmp_path / a) for a in argv]
    assert main([*args, flag, str(maximum + 1)]) == 2
    assert f"{flag}: {maximum + 1} must be at most {maximum}" in capsys.readouterr().err
