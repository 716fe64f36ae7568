"""The refusals of `hspZ work`: bad numbers and flag values; damaged plan files and workers outside
the plan; outputs that would clobber an input or cannot be written; unit folders, an index of
another reference, an edited batch query.

Every case is one `hspZ:` line, the expected exit status, no traceback and nothing under
the case's directory changed; the cases live in `tests/catalogues/`, by what they spoil.
"""

from __future__ import annotations

import pytest
from catalogues import flags, frozen, inputs, outputs, trust


@pytest.mark.parametrize("case", inputs.params("work"))
def test_a_bad_input_or_number_is_one_line_and_exit_2_with_nothing_written(
    case, case_dir, capfd, monkeypatch
):
    inputs.check(case, case_dir, capfd, monkeypatch)


@pytest.mark.parametrize("argv, message", flags.other_params("work"))
def test_bad_values_are_one_line_exit_2_and_write_nothing(flag_inputs, capfd, argv, message):
    flags.check_other(flag_inputs, capfd, argv, message)


@pytest.mark.parametrize("case", frozen.params("work"))
def test_a_damaged_or_mismatched_frozen_file_is_refused_in_one_line(
    frozen_files, tmp_path, capfd, monkeypatch, case
):
    frozen.check(case, frozen_files, tmp_path, capfd, monkeypatch)


@pytest.mark.parametrize("argv, pattern", outputs.params("work"))
def test_an_output_that_would_clobber_an_input_or_cannot_be_written_is_refused_before_any_work(
    outputs_dir, capfd, monkeypatch, argv, pattern
):
    outputs.check(outputs_dir, capfd, monkeypatch, argv, pattern)


@pytest.mark.parametrize("setup, pattern", trust.params("work"))
def test_a_derived_reserved_or_foreign_path_is_refused_and_nothing_changes(
    tmp_path, capfd, monkeypatch, setup, pattern
):
    trust.check(tmp_path, capfd, monkeypatch, setup, pattern, "work")
