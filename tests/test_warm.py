"""`hspZ warm` without a GPU (one line, exit 2) and its warm-up pair; the warm-up itself runs in
tests/test_gpu.py, on a device."""

from __future__ import annotations

import pytest

from hspz.cli import main
from hspz.commands.warm import PATHS, warm_pair
from hspz.engine import backends


@pytest.mark.skipif(backends.gpu_available(), reason="a GPU is visible: warm would run")
def test_warm_without_a_gpu_is_one_line_and_status_2(capsys):
    assert main(["warm"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["hspZ: warm: no CUDA device is visible (is CuPy installed?)"]


def test_warm_pair_takes_the_paths_it_is_meant_to():
    ref, qry = warm_pair()
    assert ref.count(b">") == 2 and qry.count(b">") == 1
    body = b"".join(ref.split(b"\n")[1::2])
    assert b"NNNN" in body and any(c in body for c in b"acgt")  # N runs and soft-masking
    q = qry.split(b"\n")[1]
    assert body.find(q[:30_000]) >= 0  # the long identical stretch
    assert warm_pair() == (ref, qry)  # deterministic
    assert {k for p in PATHS for k in p} >= {"FEW_LATE", "PIECE", "DEVICE_STEPS", "CHAIN_CAP"}
