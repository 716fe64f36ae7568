"""The refusals of `hspZ plan`: bad flag values; outputs that would clobber an input or cannot be
written; derived per-job dumps and list entries.

Every case is one `hspZ:` line, the expected exit status, no traceback and nothing under
the case's directory changed; the cases live in `tests/catalogues/`, by what they spoil.
"""

from __future__ import annotations

import pytest
from catalogues import flags, outputs, trust


@pytest.mark.parametrize("argv, message", flags.other_params("plan"))
def test_bad_values_are_one_line_exit_2_and_write_nothing(flag_inputs, capfd, argv, message):
    flags.check_other(flag_inputs, capfd, argv, message)


@pytest.mark.parametrize("argv, pattern", outputs.params("plan"))
def test_an_output_that_would_clobber_an_input_or_cannot_be_written_is_refused_before_any_work(
    outputs_dir, capfd, monkeypatch, argv, pattern
):
    outputs.check(outputs_dir, capfd, monkeypatch, argv, pattern)


@pytest.mark.parametrize("setup, pattern", trust.params("plan"))
def test_a_derived_reserved_or_foreign_path_is_refused_and_nothing_changes(
    tmp_path, capfd, monkeypatch, setup, pattern
):
    trust.check(tmp_path, capfd, monkeypatch, setup, pattern, "plan")
