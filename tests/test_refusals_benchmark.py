"""The refusals of `hspZ benchmark`: bad numbers; a --json onto an input.

Every case is one `hspZ:` line, the expected exit status, no traceback and nothing under
the case's directory changed; the cases live in `tests/catalogues/`, by what they spoil.
"""

from __future__ import annotations

import pytest
from catalogues import inputs, outputs, trust


@pytest.mark.parametrize("case", inputs.params("benchmark"))
def test_a_bad_input_or_number_is_one_line_and_exit_2_with_nothing_written(
    case, case_dir, capfd, monkeypatch
):
    inputs.check(case, case_dir, capfd, monkeypatch)


@pytest.mark.parametrize("argv, pattern", outputs.params("benchmark"))
def test_an_output_that_would_clobber_an_input_or_cannot_be_written_is_refused_before_any_work(
    outputs_dir, capfd, monkeypatch, argv, pattern
):
    outputs.check(outputs_dir, capfd, monkeypatch, argv, pattern)


@pytest.mark.parametrize("setup, pattern", trust.params("benchmark"))
def test_a_derived_reserved_or_foreign_path_is_refused_and_nothing_changes(
    tmp_path, capfd, monkeypatch, setup, pattern
):
    trust.check(tmp_path, capfd, monkeypatch, setup, pattern, "benchmark")
