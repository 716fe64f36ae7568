"""The refusal catalogues as a whole (`tests/catalogues/`): ids unique, every class of bad
input covered, and every case run by the test file of its command."""

from __future__ import annotations

from pathlib import Path

from catalogues import flags, frozen, inputs, outputs, trust


def _commands() -> dict[str, set[str]]:
    """catalogue -> the commands its cases run."""
    return {
        "inputs": {c.command for c in inputs.CASES},
        "frozen": {frozen.command(c) for c in frozen.CASES},
        "outputs": {argv[0] for _, argv, _ in outputs.CASES},
        "trust": {trust.command(case) for _, case, _, _ in trust.CASES},
        "flags": {"run"} | {argv[0] for argv, _ in flags.OTHER_CASES},
    }


def test_the_catalogue_covers_every_class_with_unique_ids():
    ids = [c.id for c in inputs.CASES]
    assert len(ids) == len(set(ids)) and len(ids) >= 35
    classes = {i.split("-")[0] for i in ids}
    assert classes == {"fasta", "2bit", "names", "protein", "numbers", "scoring", "knobs"}
    for others in ([c[0] for c in outputs.CASES], [c[1] for c in trust.CASES]):
        assert len(others) == len(set(others))
    here = Path(__file__).parent
    for catalogue, commands in _commands().items():
        for command in commands:  # the command's file runs this catalogue's cases for it
            text = (here / f"test_refusals_{command.replace('-', '_')}.py").read_text()
            assert "from catalogues import" in text and f"{catalogue}." in text, (
                catalogue,
                command,
            )
