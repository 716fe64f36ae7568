"""benchmarks/gpu_variants.py's variants (issue 27's trials, timed side by side in one process):
each sets what it names for its passes, and the next starts from the environment as given.  No
pass runs here (CPU only)."""

from __future__ import annotations

import os
import sys

import pytest

from benchmarks import gpu_variants
from hspz.engine import gpu


def test_a_variant_sets_what_it_names_and_the_next_undoes_it(monkeypatch):
    monkeypatch.delenv("HSPZ_GPU_FILTER", raising=False)
    piece, fused, switch = gpu.PIECE, gpu.FUSED, sys.getswitchinterval()
    try:
        gpu_variants.apply(
            "HSPZ_GPU_FILTER=lane+gpu.PIECE=97+gpu.FUSED=0+sys.switchinterval=0.0005"
        )
        assert os.environ["HSPZ_GPU_FILTER"] == "lane"
        assert gpu.PIECE == 97 and gpu.FUSED is False
        assert sys.getswitchinterval() == pytest.approx(0.0005)
        gpu_variants.apply("sys.switchinterval=0.002")
        assert "HSPZ_GPU_FILTER" not in os.environ and gpu.PIECE == piece
        assert gpu.FUSED is fused and sys.getswitchinterval() == pytest.approx(0.002)
        gpu_variants.apply("base")
        assert sys.getswitchinterval() == pytest.approx(switch)
    finally:
        gpu_variants.apply("base")


def test_a_setting_without_a_value_is_refused():
    with pytest.raises(SystemExit, match="not base or NAME=VALUE"):
        gpu_variants.apply("gpu.PIECE")
