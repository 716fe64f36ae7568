"""hspz/run/outdir.py's API as later commands reuse it (`hspZ index --index DIR` writes a folder,
`run --index DIR` reads one): `check_disjoint` over files, folders and trees, `make_folder`,
and the lock's record and release."""

from __future__ import annotations

import json
import os

import pytest

from hspz.core.errors import UsageError


def test_an_output_file_or_tree_inside_an_input_folder_is_refused(tmp_path):
    from hspz.run.outdir import Tree, check_disjoint

    index = tmp_path / "index"
    (index / "000").mkdir(parents=True)
    with pytest.raises(
        UsageError,
        match=r"^--dump-raw: .*/index/000/raw lies in .*/index, the "
        r"--index input folder; an input is never written$",
    ):
        check_disjoint({"--index": index}, {"--dump-raw": index / "000" / "raw"})
    with pytest.raises(
        UsageError,
        match=r"^--output: .*/index lies in .*/index, the --index "
        r"input folder",
    ):
        check_disjoint({"--index": index}, {}, {"--output": Tree(index)})
    check_disjoint(
        {"--index": index}, {"--dump-raw": tmp_path / "raw"}, {"--output": Tree(tmp_path / "out")}
    )


def test_a_tree_that_claims_everything_refuses_any_input_inside_it(tmp_path):
    """`hspZ index --index DIR` owns all of DIR."""
    from hspz.run.outdir import Tree, check_disjoint

    (tmp_path / "idx").mkdir()
    (tmp_path / "idx" / "notes.fa").write_text(">a\nACGT\n")
    everything = Tree(tmp_path / "idx", lambda name: True)
    with pytest.raises(
        UsageError,
        match=r"^--index: publishing into .*/idx would replace or "
        r"remove .*/idx/notes\.fa, the --reference input",
    ):
        check_disjoint({"--reference": tmp_path / "idx" / "notes.fa"}, {}, {"--index": everything})


def test_inputs_and_outputs_of_several_paths_and_unset_flags(tmp_path):
    from hspz.run.outdir import check_disjoint

    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    for p in (a, b):
        p.write_bytes(b"x")
    check_disjoint({"RESULT": [a, b], "--scoring": None}, {"-Z": None, "--out": tmp_path / "c"})
    with pytest.raises(UsageError, match=r"^-Z: .*/b\.npz is the RESULT input; an input"):
        check_disjoint({"RESULT": [a, b]}, {"-Z": b})


def test_same_file_sees_through_symlinks_and_hard_links_but_not_copies(tmp_path):
    from hspz.run.outdir import same_file

    f = tmp_path / "f"
    f.write_text("x")
    (tmp_path / "link").symlink_to(f)
    os.link(f, tmp_path / "hard")
    (tmp_path / "copy").write_text("x")
    assert same_file(f, tmp_path / "link") and same_file(tmp_path / "hard", f)
    assert same_file(f, tmp_path / "sub" / ".." / "f")
    assert not same_file(f, tmp_path / "copy") and not same_file(f, tmp_path / "missing")


def test_make_folder_makes_the_missing_folders_and_names_them(tmp_path):
    from hspz.run.outdir import make_folder

    made = make_folder(tmp_path / "a" / "b" / "c", "--output")
    assert made == [tmp_path / "a", tmp_path / "a" / "b", tmp_path / "a" / "b" / "c"]
    assert make_folder(tmp_path / "a" / "b", "--output") == []


def test_the_lock_records_its_holder_and_leaves_nothing(tmp_path):
    from hspz.run.outdir import OutLock, read_holder

    out = tmp_path / "out"
    with OutLock(out, command="hspZ run -o out") as lock:
        record = json.loads((out / ".hspz.lock").read_text())
        assert record["pid"] == os.getpid() and record["command"] == "hspZ run -o out"
        assert read_holder(lock.lock_path).startswith(f"pid {os.getpid()} on ")
    assert list(out.iterdir()) == []


def test_a_failure_inside_the_lock_removes_the_folders_it_made(tmp_path):
    from hspz.run.outdir import OutLock

    with pytest.raises(RuntimeError), OutLock(tmp_path / "new" / "out"):
        raise RuntimeError("the run failed")
    assert list(tmp_path.iterdir()) == []


def test_a_removal_stopped_half_way_leaves_the_mark(tmp_path, monkeypatch):
    """`remove_marked` stopped by a second Ctrl-C after its first file: the folder keeps its
    MARK (removed last), so the next command still removes it as hspZ's."""
    from hspz.core import durable

    stage = tmp_path / ".hspz-stage-x"
    durable.make_marked(stage)
    for k in range(3):
        (stage / f"tmp{k}.segments").write_text("x\n")
    unlink, calls = os.unlink, []

    def interrupted(path, *args, **kwargs):
        calls.append(path)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return unlink(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", interrupted)
    with pytest.raises(KeyboardInterrupt):
        durable.remove_marked(stage)
    monkeypatch.setattr(os, "unlink", unlink)
    assert durable.is_marked(stage)
    assert durable.remove_marked(stage) and not stage.exists()


@pytest.mark.parametrize(
    ("sig", "raised"), [("SIGTERM", "Terminated"), ("SIGINT", "KeyboardInterrupt")]
)
@pytest.mark.parametrize("where", ["make_folder", "open_lock"])
def test_a_signal_while_the_lock_is_taken_leaves_no_out(tmp_path, monkeypatch, sig, raised, where):
    """A SIGTERM or Ctrl-C that arrives just after OUT's mkdir, or just after the lock file's
    creation, is held until both are recorded, then stops the command: OUT (made here) is
    gone.  Before, one of 84 killed runs left `.hspz.lock`, and one of 32 an empty OUT."""
    import signal

    from hspz.core import durable, errors
    from hspz.run import outdir

    real = getattr(outdir, where) if where == "make_folder" else durable.open_lock

    def then_signal(*args):
        got = real(*args)
        os.kill(os.getpid(), getattr(signal, sig))  # its handler runs at the next line
        return got

    if where == "make_folder":
        monkeypatch.setattr(outdir, "make_folder", then_signal)
    else:
        monkeypatch.setattr(outdir.durable, "open_lock", then_signal)
    before = signal.signal(signal.SIGTERM, errors.on_sigterm)
    try:
        with pytest.raises(BaseException) as caught, outdir.OutLock(tmp_path / "a" / "out"):
            pass
    finally:
        signal.signal(signal.SIGTERM, before)
    assert type(caught.value).__name__ == raised
    assert not (tmp_path / "a").exists()
