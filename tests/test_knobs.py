"""Environment knobs (hspz/core/knobs.py, docs/knobs.md): errors are UsageErrors
(and one `hspZ:` line with exit status 2 from `hspZ run`), ignored values are ignored."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hspz.cli import main
from hspz.core import knobs
from hspz.core.errors import UsageError

KNOBS = (
    "HSPZ_UNIT_PARTITION",
    "HSPZ_DEVICE_SEEDS",
    "HSPZ_REF_BUCKETS",
    "HSPZ_REF_BUCKET_SHIFT",
    "HSPZ_CHUNK_WALK",
    "HSPZ_LAYOUT_FORCE_WORKERS",
    "HSPZ_GPU_FILTER",
)

BAD = (
    [("HSPZ_UNIT_PARTITION", v) for v in ("2", "-1", "01", "true", "yes", "auto", " 1", "1 ", "on")]
    + [
        ("HSPZ_REF_BUCKETS", v)
        for v in ("2", "-1", "yes", "AUTO", "Auto", "true", " 0", "00", "off")
    ]
    + [
        ("HSPZ_REF_BUCKET_SHIFT", v)
        for v in (
            "15",
            "32",
            "0",
            "1",
            "-16",
            "+16",
            " 16",
            "16 ",
            "16.0",
            "1e1",
            "0x10",
            "abc",
            "99999999999999999999",
        )
    ]
    + [("HSPZ_GPU_FILTER", v) for v in ("hits3", "Lane", "pass ", "1", "filter_pass")]
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for k in KNOBS:
        monkeypatch.delenv(k, raising=False)


@pytest.mark.parametrize("name, value", BAD, ids=[f"{n}={v!r}" for n, v in BAD])
def test_every_error_value_of_a_strict_knob_raises_usage_error_naming_it(monkeypatch, name, value):
    with pytest.raises(UsageError, match=name):
        knobs.read({name: value})
    monkeypatch.setenv(name, value)
    with pytest.raises(UsageError, match=name):
        knobs.read()


@pytest.mark.parametrize(
    "name, value, field, expected",
    [
        ("HSPZ_UNIT_PARTITION", "0", "unit_partition", False),
        ("HSPZ_UNIT_PARTITION", "1", "unit_partition", True),
        ("HSPZ_REF_BUCKETS", "0", "ref_buckets", False),
        ("HSPZ_REF_BUCKETS", "1", "ref_buckets", True),
        ("HSPZ_REF_BUCKETS", "auto", "ref_buckets", None),
    ]
    + [("HSPZ_REF_BUCKET_SHIFT", str(s), "bucket_shift", s) for s in range(16, 32)]
    + [("HSPZ_GPU_FILTER", f, "gpu_filter", f) for f in knobs.GPU_FILTERS],
)
def test_every_accepted_strict_knob_value_is_read(name, value, field, expected):
    assert getattr(knobs.read({name: value}), field) == expected


def test_unset_knobs_read_as_their_defaults():
    k = knobs.read({})
    assert (
        k.unit_partition,
        k.device_seeds,
        k.ref_buckets,
        k.chunk_walk_full,
        k.layout_force_workers,
    ) == (None, None, None, False, None)
    assert k.bucket_shift == knobs.DEFAULT_BUCKET_SHIFT
    assert k.gpu_filter is None


@pytest.mark.parametrize(
    "value, expected",
    [
        ("1", True),
        ("0", False),
        ("2", None),
        ("yes", None),
        ("true", None),
        ("", None),
        (" 1", None),
        ("01", None),
        ("-1", None),
    ],
)
def test_device_seeds_takes_0_and_1_and_ignores_everything_else(value, expected):
    assert knobs.read({"HSPZ_DEVICE_SEEDS": value}).device_seeds is expected


@pytest.mark.parametrize(
    "value, expected",
    [
        ("full", True),
        ("FULL", False),
        ("Full", False),
        ("simple", False),
        ("", False),
        ("full ", False),
        ("1", False),
    ],
)
def test_chunk_walk_takes_full_and_ignores_everything_else(value, expected):
    assert knobs.read({"HSPZ_CHUNK_WALK": value}).chunk_walk_full is expected


@pytest.mark.parametrize(
    "value, expected",
    [
        ("1", 1),
        ("3", 3),
        ("64", 64),
        ("0", None),
        ("-2", None),
        ("abc", None),
        ("1.5", None),
        ("", None),
        (" 2", None),
        ("2x", None),
    ],
)
def test_layout_force_workers_takes_positive_integers_and_ignores_invalid_values(value, expected):
    assert knobs.read({"HSPZ_LAYOUT_FORCE_WORKERS": value}).layout_force_workers == expected


def test_layout_force_workers_ignores_a_superscript_digit():
    assert knobs.read({"HSPZ_LAYOUT_FORCE_WORKERS": "²"}).layout_force_workers is None


def test_bucket_shift_superscript_digit_is_a_usage_error():
    with pytest.raises(UsageError):
        knobs.read({"HSPZ_REF_BUCKET_SHIFT": "2²"})


def test_bucket_shift_fullwidth_digits_are_a_usage_error():
    with pytest.raises(UsageError):
        knobs.read({"HSPZ_REF_BUCKET_SHIFT": "１６"})


# --------------------------------------------------------------------------------------------
# buckets_on
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "env, expected",
    [
        ({}, False),  # auto: off (measured slower)
        ({"HSPZ_REF_BUCKETS": "auto"}, False),
        ({"HSPZ_REF_BUCKET_SHIFT": "18"}, True),  # a shift alone turns bucketing on
        ({"HSPZ_REF_BUCKET_SHIFT": "31", "HSPZ_REF_BUCKETS": "auto"}, True),
        ({"HSPZ_REF_BUCKET_SHIFT": "18", "HSPZ_REF_BUCKETS": "0"}, False),  # ...unless buckets=0
        ({"HSPZ_REF_BUCKET_SHIFT": "16", "HSPZ_REF_BUCKETS": "1"}, True),
        ({"HSPZ_REF_BUCKETS": "1"}, True),
        ({"HSPZ_REF_BUCKETS": "0"}, False),
        ({"HSPZ_REF_BUCKET_SHIFT": "", "HSPZ_REF_BUCKETS": "0"}, False),
    ],
)
def test_buckets_on_follows_the_knobs(monkeypatch, env, expected):
    monkeypatch.delenv("HSPZ_REF_BUCKETS", raising=False)
    monkeypatch.delenv("HSPZ_REF_BUCKET_SHIFT", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    k = knobs.read()
    for ref_len in (1000, 10**9):
        assert knobs.buckets_on(k, ref_len) is expected


def test_an_explicit_shift_is_the_one_used_when_bucketing_turns_on(monkeypatch):
    monkeypatch.setenv("HSPZ_REF_BUCKET_SHIFT", "23")
    k = knobs.read()
    assert knobs.buckets_on(k, 5000) and k.bucket_shift == 23


# --------------------------------------------------------------------------------------------
# Through the CLI
# --------------------------------------------------------------------------------------------


@pytest.fixture
def pair(tmp_path) -> Path:
    (tmp_path / "ref.fa").write_text(">r1\n" + "ACGTTGCAAGGCTTAC" * 8 + "\n")
    (tmp_path / "qry.fa").write_text(">q1\n" + "ACGTTGCAAGGCTTAC" * 6 + "\n")
    return tmp_path


CLI_BAD = [
    ("HSPZ_REF_BUCKET_SHIFT", "15"),
    ("HSPZ_REF_BUCKET_SHIFT", "abc"),
    ("HSPZ_REF_BUCKETS", "2"),
    ("HSPZ_UNIT_PARTITION", "auto"),
]


@pytest.mark.parametrize("name, value", CLI_BAD)
def test_run_with_a_bad_knob_exits_2_with_one_line_and_writes_nothing(
    pair, capfd, monkeypatch, name, value
):
    monkeypatch.setenv(name, value)
    argv = [
        "run",
        "-r",
        str(pair / "ref.fa"),
        "-q",
        str(pair / "qry.fa"),
        "-o",
        str(pair / "out"),
        "--backend",
        "cpu",
        "-s",
        "1111",
        "-H",
        "100",
    ]
    assert main(argv) == 2
    out, err = capfd.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and err.startswith(f"hspZ: {name}={value}"), err
    assert not (pair / "out").exists()


def test_the_hspz_command_exits_2_with_one_line_for_a_bad_bucket_shift(pair):
    env = {**os.environ, "HSPZ_REF_BUCKET_SHIFT": "40"}
    env.pop("HSPZ_DEBUG", None)
    script = Path(sys.executable).with_name("hspZ")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "hspz"]
    proc = subprocess.run(
        cmd
        + [
            "run",
            "-r",
            str(pair / "ref.fa"),
            "-q",
            str(pair / "qry.fa"),
            "-o",
            str(pair / "out"),
            "--backend",
            "cpu",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [
        "hspZ: HSPZ_REF_BUCKET_SHIFT=40 must be an integer from 16 to 31"
    ]
    assert not (pair / "out").exists()
