"""The refusals of `hspZ hits-estimate`: bad numbers and flag values; a --dump-plan onto an input.

Every case is one `hspZ:` line, the expected exit status, no traceback and nothing under
the case's directory changed; the cases live in `tests/catalogues/`, by what they spoil.
"""

from __future__ import annotations

import pytest
from catalogues import flags, inputs, outputs, trust


@pytest.mark.parametrize("case", inputs.params("hits-estimate"))
def test_a_bad_input_or_number_is_one_line_and_exit_2_with_nothing_written(
    case, case_dir, capfd, monkeypatch
):
    inputs.check(case, case_dir, capfd, monkeypatch)


@pytest.mark.parametrize("argv, message", flags.other_params("hits-estimate"))
def test_bad_values_are_one_line_exit_2_and_write_nothing(flag_inputs, capfd, argv, message):
    flags.check_other(flag_inputs, capfd, argv, message)


@pytest.mark.parametrize("argv, pattern", outputs.params("hits-estimate"))
def test_an_output_that_would_clobber_an_input_or_cannot_be_written_is_refused_before_any_work(
    outputs_dir, capfd, monkeypatch, argv, pattern
):
    outputs.check(outputs_dir, capfd, monkeypatch, argv, pattern)


@pytest.mark.parametrize("setup, pattern", trust.params("hits-estimate"))
def test_a_derived_reserved_or_foreign_path_is_refused_and_nothing_changes(
    tmp_path, capfd, monkeypatch, setup, pattern
):
    trust.check(tmp_path, capfd, monkeypatch, setup, pattern, "hits-estimate")
