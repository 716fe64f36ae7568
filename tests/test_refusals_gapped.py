"""The refusals of `hspZ gapped`: outputs onto the plan's inputs, and segments files that are not
hspZ's.

Every case is one `hspZ:` line, the expected exit status, no traceback and nothing under
the case's directory changed; the cases live in `tests/catalogues/`, by what they spoil.
"""

from __future__ import annotations

import pytest
from catalogues import trust


@pytest.mark.parametrize("setup, pattern", trust.params("gapped"))
def test_a_derived_reserved_or_foreign_path_is_refused_and_nothing_changes(
    tmp_path, capfd, monkeypatch, setup, pattern
):
    trust.check(tmp_path, capfd, monkeypatch, setup, pattern, "gapped")
