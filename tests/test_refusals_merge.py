"""The refusals of `hspZ merge`: bad flag values; damaged, forged, missing or repeated results
files and edited plan files; outputs that would clobber an input or cannot be written, and an
OUT held by this process; foreign job entries and results checked before the first byte is
published.

Every case is one `hspZ:` line, the expected exit status, no traceback and nothing under
the case's directory changed; the cases live in `tests/catalogues/`, by what they spoil.
"""

from __future__ import annotations

import pytest
from catalogues import flags, frozen, outputs, trust


@pytest.mark.parametrize("argv, message", flags.other_params("merge"))
def test_bad_values_are_one_line_exit_2_and_write_nothing(flag_inputs, capfd, argv, message):
    flags.check_other(flag_inputs, capfd, argv, message)


@pytest.mark.parametrize("case", frozen.params("merge"))
def test_a_damaged_or_mismatched_frozen_file_is_refused_in_one_line(
    frozen_files, tmp_path, capfd, monkeypatch, case
):
    frozen.check(case, frozen_files, tmp_path, capfd, monkeypatch)


@pytest.mark.parametrize("argv, pattern", outputs.params("merge"))
def test_an_output_that_would_clobber_an_input_or_cannot_be_written_is_refused_before_any_work(
    outputs_dir, capfd, monkeypatch, argv, pattern
):
    outputs.check(outputs_dir, capfd, monkeypatch, argv, pattern)


def test_lock_an_out_held_in_this_process_is_refused_naming_the_holder(outputs_dir, capfd):
    outputs.out_held_in_this_process_is_refused(outputs_dir, capfd, "merge")


@pytest.mark.parametrize("setup, pattern", trust.params("merge"))
def test_a_derived_reserved_or_foreign_path_is_refused_and_nothing_changes(
    tmp_path, capfd, monkeypatch, setup, pattern
):
    trust.check(tmp_path, capfd, monkeypatch, setup, pattern, "merge")
