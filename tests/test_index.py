"""The reference index (docs/workers.md, "Reusing a reference across runs"): `hspZ index`
builds what the engines build, `run --index` writes the bytes of a run without it at every
worker count, with or without --reference, and nothing damaged or mismatched is ever used."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import sigterm_after
from multibin import FLAGS, outputs, write_pair
from refusal import assert_refused, snapshot

from hspz.cli import main
from hspz.core import hashing
from hspz.core.errors import UsageError
from hspz.core.options import Options
from hspz.engine.contract import Context, prepare_reference
from hspz.formats import index as ix
from hspz.formats.sealed import sealed
from hspz.io import readers
from hspz.io.readers import read_records
from hspz.io.twobit import write_2bit
from hspz.planning import bins as planning

# the index takes the flags that decide the reference's bins and tables
INDEX_FLAGS = ["-s", "111011001011", "-B", "4000"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The multibin pair, its index, and the segments of a run without the index."""
    d = tmp_path_factory.mktemp("index")
    ref, qry = write_pair(d)
    assert (
        main(["index", "-r", str(ref), "--index", str(d / "ix"), *INDEX_FLAGS, "--backend", "cpu"])
        == 0
    )
    assert (
        main(
            [
                "run",
                "-r",
                str(ref),
                "-q",
                str(qry),
                "-o",
                str(d / "plain"),
                *FLAGS,
                "--backend",
                "cpu",
            ]
        )
        == 0
    )
    return d, ref, qry, outputs(d / "plain")


def copy_index(src: Path, dst: Path) -> Path:
    subprocess.run(["cp", "-a", str(src), str(dst)], check=True)
    return dst


def test_index_layout_has_manifest_ready_and_one_folder_per_bin(built):
    d = built[0]
    idx = ix.open_index(d / "ix")
    assert sorted(p.name for p in (d / "ix").iterdir()) == [
        "000",
        "001",
        "002",
        "003",
        "004",
        ix.MANIFEST,
        ix.READY,
    ]
    for b in range(len(idx.bins)):
        assert sorted(p.name for p in (d / "ix" / ix.bin_folder(b)).iterdir()) == [
            "enc",
            "index_table",
            "pos_table",
        ]
    assert not (d / "ix.tmp").exists() and not (d / "ix.tmp.lock").exists()


def test_indexed_arrays_are_the_tables_and_codes_the_engine_builds(built):
    d, ref, _, _ = built
    idx = ix.open_index(d / "ix")
    records = read_records(ref)
    ctx = Context.from_options(Options(seed="111011001011"))
    for b, members in enumerate(idx.bins):
        own = prepare_reference(ctx, b, [records[k] for k in members])
        loaded = idx.load_host(b)
        assert np.array_equal(loaded.index_table, own.table.index_table)
        assert np.array_equal(loaded.pos_table, own.table.pos_table)
        assert np.array_equal(loaded.enc, own.score)
        assert np.array_equal(
            ix.seed_codes_of(loaded.enc)[:-1], np.where(own.score < 4, own.score, 4)[:-1]
        )


@pytest.mark.parametrize("gpus", ["1", "3"])
@pytest.mark.parametrize("with_reference", [False, True])
def test_run_with_the_index_writes_the_bytes_of_a_run_without(
    built, tmp_path, capsys, gpus, with_reference
):
    d, ref, qry, plain = built
    before = snapshot(d / "ix")
    argv = [
        "run",
        "--index",
        str(d / "ix"),
        "-q",
        str(qry),
        "-o",
        str(tmp_path / "out"),
        *FLAGS,
        "--backend",
        "cpu",
        "--gpus",
        gpus,
        "--time",
    ]
    if with_reference:
        argv += ["-r", str(ref)]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert outputs(tmp_path / "out") == plain
    assert snapshot(d / "ix") == before  # the index is read-only to run
    visits = int(re.search(r"^schedule: policy=\S+ W=\d+ visits=(\d+)", err, re.M).group(1))
    assert "index: using " in err and f"index: loaded {visits} bin(s)" in err
    assert f"0 builds, {visits} loads, {visits} uploads" in err
    assert ("input.reference (background)" in err) == with_reference
    assert ("index.verify wait (emitter)" in err) == with_reference


def test_hits_estimate_with_the_index_counts_what_it_counts_without(built, capsys):
    d, ref, qry, _ = built
    common = ["hits-estimate", "-q", str(qry), *FLAGS]
    assert main(common + ["-r", str(ref)]) == 0
    without = capsys.readouterr().out
    assert main(common + ["--index", str(d / "ix")]) == 0
    assert capsys.readouterr().out == without
    assert len(without.splitlines()) == 10


def test_every_indexed_bin_built_on_a_cpu_equals_a_second_build(built, tmp_path):
    """Building is deterministic: a second build's MANIFEST (every checksum) is the first's."""
    d, ref, _, _ = built
    assert (
        main(
            [
                "index",
                "-r",
                str(ref),
                "--index",
                str(tmp_path / "again"),
                *INDEX_FLAGS,
                "--backend",
                "cpu",
                "-t",
                "1",
            ]
        )
        == 0
    )
    assert (tmp_path / "again" / ix.MANIFEST).read_bytes() == (d / "ix" / ix.MANIFEST).read_bytes()


# --------------------------------------------------------------------------------------------
# Damage and mismatches: one line, exit 2, no output
# --------------------------------------------------------------------------------------------


def flip_byte(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


def run_argv(index: Path, qry: Path, out: Path, *extra: str) -> list[str]:
    return [
        "run",
        "--index",
        str(index),
        "-q",
        str(qry),
        "-o",
        str(out),
        *FLAGS,
        "--backend",
        "cpu",
        *extra,
    ]


@pytest.mark.parametrize("array", ["index_table", "pos_table", "enc"])
def test_a_flipped_byte_in_an_array_stops_the_run_before_it_is_used(built, tmp_path, capfd, array):
    d, _, qry, _ = built
    damaged = copy_index(d / "ix", tmp_path / "ix")
    path = damaged / "002" / array
    flip_byte(path, os.path.getsize(path) // 2)
    assert_refused(
        capfd,
        run_argv(damaged, qry, tmp_path / "out"),
        2,
        rf"bin 002 {array}: bytes .* fail their checksum",
        tmp_path,
        chatter=True,
    )


def test_a_truncated_array_stops_the_run(built, tmp_path, capfd):
    d, _, qry, _ = built
    damaged = copy_index(d / "ix", tmp_path / "ix")
    path = damaged / "001" / "pos_table"
    os.truncate(path, os.path.getsize(path) - 4)
    assert_refused(
        capfd,
        run_argv(damaged, qry, tmp_path / "out"),
        2,
        r"bin 001 pos_table: \d+ bytes, the MANIFEST records \d+",
        tmp_path,
        chatter=True,
    )


def test_a_flipped_byte_in_the_manifest_is_refused(built, tmp_path, capfd):
    d, _, qry, _ = built
    damaged = copy_index(d / "ix", tmp_path / "ix")
    text = (damaged / ix.MANIFEST).read_text()
    at = text.index("record 0 ") + len("record 0 ")
    flip_byte(damaged / ix.MANIFEST, at)  # a record length changes by one
    assert_refused(
        capfd, run_argv(damaged, qry, tmp_path / "out"), 2, r"MANIFEST fails its checksum", tmp_path
    )


def test_an_index_without_ready_is_refused(built, tmp_path, capfd):
    d, _, qry, _ = built
    damaged = copy_index(d / "ix", tmp_path / "ix")
    (damaged / ix.READY).unlink()
    assert_refused(
        capfd, run_argv(damaged, qry, tmp_path / "out"), 2, r"has no READY marker", tmp_path
    )


def test_an_index_of_another_format_is_refused(built, tmp_path, capfd):
    d, _, qry, _ = built
    damaged = copy_index(d / "ix", tmp_path / "ix")
    m = ix.open_index(damaged).manifest
    body = "".join(f"{line}\n" for line in m.lines()).replace(
        f"hspz-index {ix.FORMAT}\n", "hspz-index 99\n"
    )
    (damaged / ix.MANIFEST).write_text(sealed(body))
    assert_refused(
        capfd,
        run_argv(damaged, qry, tmp_path / "out"),
        2,
        r"index format 99; this hspZ reads format 1",
        tmp_path,
    )


def test_a_same_size_edit_of_the_reference_is_caught_and_nothing_is_published(
    built, tmp_path, capfd
):
    d, ref, qry, _ = built
    records = read_records(ref)
    seq = records[3].seq.copy()
    seq[1000] = ord("A") if seq[1000] != ord("A") else ord("C")  # one base, same length
    records[3] = type(records[3])(records[3].name, seq)
    edited = tmp_path / "edited.2bit"
    write_2bit(edited, records)
    assert_refused(
        capfd,
        run_argv(d / "ix", qry, tmp_path / "out", "-r", str(edited)),
        2,
        r"edited\.2bit: the bases differ from those the index .* was built from",
        tmp_path,
        chatter=True,
    )
    assert not (tmp_path / "out").exists()


def planned(d: Path, qry: Path, plan: Path, reference: Path) -> None:
    """`hspZ plan --index` naming `reference`, which the plan must not read."""
    argv = ["plan", "--index", str(d / "ix"), "-r", str(reference), "-q", str(qry)]
    assert main([*argv, *FLAGS, "--backend", "cpu", "-o", str(plan)]) == 0


def work_argv(plan: Path, result: Path) -> list[str]:
    return ["work", "--plan", str(plan), "--worker", "0", "-o", str(result), "--backend", "cpu"]


def _refusing(path: Path):
    """`readers._read_file` that fails the test when asked for `path`'s bytes."""
    inner = readers._read_file

    def read(p, *args, **kwargs):
        assert os.path.realpath(p) != os.path.realpath(path), f"{path} was read"
        return inner(p, *args, **kwargs)

    return read


def test_a_plan_names_the_reference_and_its_work_job_verifies_it(
    built, tmp_path, capfd, monkeypatch
):
    """`hspZ plan --index I -r R` reads no record of R (the workflow's plan waited for its
    hash); the work job verifies R in the background and writes its results once R matches:
    merged, the bytes of a run without the index."""
    d, ref, qry, plain = built
    with monkeypatch.context() as m:
        m.setattr(ix, "Verification", None)  # no check started by the plan
        m.setattr(readers, "_read_file", _refusing(ref))  # nor a byte of R read
        planned(d, qry, tmp_path / "plan.txt", ref)
    capfd.readouterr()
    assert main(work_argv(tmp_path / "plan.txt", tmp_path / "w0.result")) == 0
    assert f"work: {ref} matches the index (records hash" in capfd.readouterr().err
    merged = ["merge", "--plan", str(tmp_path / "plan.txt"), "-o", str(tmp_path / "out")]
    assert main([*merged, str(tmp_path / "w0.result")]) == 0
    assert outputs(tmp_path / "out") == plain


def fewer_records(ref: Path, folder: Path) -> Path:
    """The reference without its last record, as 2bit (another size)."""
    write_2bit(folder / "fewer.2bit", read_records(ref)[:-1])
    return folder / "fewer.2bit"


def renamed_record(ref: Path, folder: Path) -> Path:
    """The reference with its second record renamed: the file keeps its size."""
    text = ref.read_bytes()
    at = text.index(b">", 1) + 1
    (folder / "renamed.fa").write_bytes(text[:at] + b"X" + text[at + 1 :])
    assert (folder / "renamed.fa").stat().st_size == ref.stat().st_size
    return folder / "renamed.fa"


@pytest.mark.parametrize(
    "make, message",
    [
        (fewer_records, r"fewer\.2bit: its records \(5\) differ from those of the index"),
        (renamed_record, r"renamed\.fa: its records \(6\) differ from those of the index"),
    ],
)
def test_a_work_job_refuses_a_reference_of_other_records_before_any_unit(
    built, tmp_path, capfd, make, message
):
    """Other names or lengths are refused before any unit runs, nothing written; a renamed
    record keeps the file's size, so the hash of a file of the source's size is waited for."""
    d, ref, qry, _ = built
    planned(d, qry, tmp_path / "plan.txt", make(ref, tmp_path))
    assert_refused(
        capfd, work_argv(tmp_path / "plan.txt", tmp_path / "w0.result"), 2, message, tmp_path
    )


def test_a_work_job_refuses_a_fifo_put_in_place_of_the_planned_reference(built, tmp_path):
    """The plan refuses a FIFO; one put in the reference's place afterwards is refused by the
    work job at once, not opened and waited on for a writer."""
    d, ref, qry, _ = built
    reference = tmp_path / "R.fa"
    reference.write_bytes(ref.read_bytes())
    planned(d, qry, tmp_path / "plan.txt", reference)
    reference.unlink()
    os.mkfifo(reference)
    argv = work_argv(tmp_path / "plan.txt", tmp_path / "w0.result")
    done = subprocess.run(
        [sys.executable, "-m", "hspz", *argv], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr
    assert re.fullmatch(
        r"hspZ: the reference of .*plan\.txt: .*R\.fa: cannot read it: not a regular file\n",
        done.stderr,
    ), done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["R.fa", "plan.txt"]


def test_a_work_job_given_an_index_of_other_names_says_which_record_differs(built, tmp_path, capfd):
    """`work --index` of another reference whose records keep their count and lengths: the
    refusal names the first record that differs (the counts alone read alike)."""
    d, ref, qry, _ = built
    other = renamed_record(ref, tmp_path)
    argv = ["index", "-r", str(other), "--index", str(tmp_path / "ix2"), *INDEX_FLAGS]
    assert main([*argv, "--backend", "cpu"]) == 0
    plan = ["plan", "--index", str(d / "ix"), "-q", str(qry), *FLAGS, "--backend", "cpu"]
    assert main([*plan, "-o", str(tmp_path / "plan.txt")]) == 0
    work = work_argv(tmp_path / "plan.txt", tmp_path / "w0.result")
    assert_refused(
        capfd,
        [*work, "--index", str(tmp_path / "ix2")],
        2,
        r"--index: .*ix2: its records differ from the reference .*plan\.txt was planned with: "
        r"record 2 is 'X\S*' \(\d+ bp\) in the index, '\S+' \(\d+ bp\) planned$",
        tmp_path,
    )


def test_a_plan_refuses_an_input_path_that_is_not_utf8(built, tmp_path, capfd):
    """A path whose bytes are not UTF-8 cannot be written into the plan file's text: one line,
    not the traceback of its encoding."""
    _, ref, qry, _ = built
    odd = os.fsdecode(bytes(tmp_path) + b"/bad\xffname.fa")
    Path(odd).write_bytes(ref.read_bytes())
    argv = ["plan", "-r", odd, "-q", str(qry), *FLAGS, "--backend", "cpu"]
    assert_refused(
        capfd,
        [*argv, "-o", str(tmp_path / "plan.txt")],
        2,
        r"an input path is not UTF-8 text: .*bad\\udcffname\.fa",
        tmp_path,
        chatter=True,
    )


def test_the_engine_waits_for_the_hash_of_a_file_of_the_source_size(built, monkeypatch):
    """`wait_shape` (the wait before any engine) does not take a file of the source's size for
    the source: it waits for its hash (a renamed record keeps the size)."""
    import threading

    d, ref, _, _ = built
    hashing_may_end = threading.Event()
    real = ix.same_file

    def slow_same_file(*args):
        assert hashing_may_end.wait(30)
        return real(*args)

    monkeypatch.setattr(ix, "same_file", slow_same_file)
    v = ix.Verification(str(ref), ix.open_index(d / "ix"))
    try:
        shaped = threading.Thread(target=v.wait_shape, args=("test",), daemon=True)
        shaped.start()
        shaped.join(1.0)
        assert shaped.is_alive(), "wait_shape did not wait for the hash"
        hashing_may_end.set()
        shaped.join(30)
        assert not shaped.is_alive()
        assert v.wait("test") == v.idx.manifest.records_digest
    finally:
        hashing_may_end.set()
        v.close()


def test_a_work_job_writes_no_results_for_a_same_size_edit_of_the_reference(built, tmp_path, capfd):
    """The records' names and lengths match, so the units run while the bases are hashed;
    the edit is refused before the results file is written."""
    d, ref, qry, _ = built
    text = ref.read_bytes()
    at = text.index(b"\n", text.index(b">", 1)) + 1
    edited = tmp_path / "edited.fa"
    edited.write_bytes(text[:at] + (b"C" if text[at : at + 1] != b"C" else b"A") + text[at + 1 :])
    planned(d, qry, tmp_path / "plan.txt", edited)
    capfd.readouterr()
    assert main(work_argv(tmp_path / "plan.txt", tmp_path / "w0.result")) == 2
    err = capfd.readouterr().err
    assert re.search(r"hspZ: .*edited\.fa: the bases differ from those the index", err), err
    assert not (tmp_path / "w0.result").exists()


@pytest.mark.parametrize(
    "name, why",
    [
        ("gone.fa", "No such file or directory"),
        ("/dev/zero", "not a regular file"),
        ("adir", "not a regular file"),
    ],
)
def test_a_plan_refuses_a_reference_no_work_job_could_read(built, tmp_path, capfd, name, why):
    """The plan names the reference without reading it: one that is missing, a device (read
    for ever) or a folder is refused by the plan, before anything is written."""
    d, _, qry, _ = built
    (tmp_path / "adir").mkdir()
    reference = name if name.startswith("/") else str(tmp_path / name)
    argv = ["plan", "--index", str(d / "ix"), "-r", reference, "-q", str(qry)]
    assert_refused(
        capfd,
        [*argv, *FLAGS, "--backend", "cpu", "-o", str(tmp_path / "plan.txt")],
        2,
        rf"--reference: .*: cannot read it: {why}",
        tmp_path,
    )


def verified(reference: Path, index: Path) -> ix.Verification:
    """The Verification of `reference` against `index`, waited for (its verdict raised)."""
    v = ix.Verification(str(reference), ix.open_index(index))
    try:
        assert v.wait("test") == v.idx.manifest.records_digest
    finally:
        v.close()
    return v


def no_records_read(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_):
        raise AssertionError("the reference's records were read")

    monkeypatch.setattr("hspz.io.readers.read_side", refuse)


def test_the_indexed_file_is_verified_by_its_size_and_sha256_alone(built, monkeypatch):
    d, ref, _, _ = built
    no_records_read(monkeypatch)
    v = verified(ref, d / "ix")
    assert v.by_file
    v.wait_shape("test")


def test_other_bytes_of_the_same_records_are_verified_by_the_records(built, tmp_path):
    d, ref, _, _ = built
    same = tmp_path / "same.2bit"  # the FASTA-built index's genome, as 2bit
    write_2bit(same, read_records(ref))
    assert not verified(same, d / "ix").by_file


def test_an_index_recording_another_source_file_verifies_by_the_records(built, tmp_path):
    """As an index whose recorded size and sha256 are not the reference's (another file's,
    or none) verifies: by names, lengths and the records hash, as before the file check."""
    d, ref, _, _ = built
    other = copy_index(d / "ix", tmp_path / "ix")
    m = ix.open_index(other).manifest
    body = "".join(f"{line}\n" for line in m.lines())
    body = body.replace(f"source_sha256 {m.source_sha256}\n", f"source_sha256 {'0' * 64}\n")
    pieces = ",".join(m.source_pieces)
    assert pieces and pieces in body
    body = body.replace(pieces, ",".join("0" * 64 for _ in m.source_pieces))
    (other / ix.MANIFEST).write_text(sealed(body))
    assert not verified(ref, other).by_file


def older_index(built, tmp_path, sha256: str | None = None):
    """The built index as an hspZ before `source_pieces` wrote it (no pieces line)."""
    d, ref, _, _ = built
    tmp_path.mkdir()
    other = copy_index(d / "ix", tmp_path / "ix")
    m = ix.open_index(other).manifest
    lines = [line for line in m.lines() if not line.startswith("source_pieces ")]
    body = "".join(f"{line}\n" for line in lines)
    if sha256 is not None:
        body = body.replace(f"source_sha256 {m.source_sha256}\n", f"source_sha256 {sha256}\n")
    (other / ix.MANIFEST).write_text(sealed(body))
    assert ix.open_index(other).manifest.source_pieces == ()
    return other


def test_an_older_index_without_piece_hashes_verifies_by_the_files_sha256(
    built, tmp_path, monkeypatch
):
    _, ref, _, _ = built
    wrong = older_index(built, tmp_path / "a", "0" * 64)
    assert not verified(ref, wrong).by_file
    no_records_read(monkeypatch)
    assert verified(ref, older_index(built, tmp_path / "b")).by_file


def test_the_source_files_pieces_are_the_sha256_of_each_slice(tmp_path):
    data = np.random.default_rng(3).integers(0, 256, 5 * 1000 + 17, dtype=np.uint8).tobytes()
    f = tmp_path / "f"
    f.write_bytes(data)
    want = tuple(hashlib.sha256(data[a : a + 1000]).hexdigest() for a in range(0, len(data), 1000))
    for threads in (1, 4):
        assert ix.file_pieces(f, 1000, threads) == (len(data), want)
    (tmp_path / "empty").write_bytes(b"")
    assert ix.file_pieces(tmp_path / "empty") == (0, (hashlib.sha256(b"").hexdigest(),))


def test_an_index_records_its_source_files_sha256_and_pieces(built):
    d, ref, _, _ = built
    m = ix.open_index(d / "ix").manifest
    data = ref.read_bytes()
    assert (m.source_size, m.source_sha256) == (len(data), hashlib.sha256(data).hexdigest())
    assert m.source_pieces == ix.file_pieces(ref)[1]


def test_a_changed_byte_of_the_indexed_file_that_keeps_its_size_is_refused(built, tmp_path, capfd):
    d, ref, qry, _ = built
    text = ref.read_bytes()
    at = text.index(b"\n", text.index(b">", 1)) + 1  # the second record's first base
    edited = tmp_path / "edited.fa"
    edited.write_bytes(text[:at] + (b"C" if text[at : at + 1] != b"C" else b"A") + text[at + 1 :])
    assert edited.stat().st_size == ref.stat().st_size
    assert_refused(
        capfd,
        run_argv(d / "ix", qry, tmp_path / "out", "-r", str(edited)),
        2,
        r"edited\.fa: the bases differ from those the index .* was built from",
        tmp_path,
        chatter=True,
    )


def test_a_reference_with_other_records_is_caught(built, tmp_path, capfd):
    d, ref, qry, _ = built
    records = read_records(ref)[:-1]
    fewer = tmp_path / "fewer.2bit"
    write_2bit(fewer, records)
    assert_refused(
        capfd,
        run_argv(d / "ix", qry, tmp_path / "out", "-r", str(fewer)),
        2,
        r"fewer\.2bit: its records \(5\) differ from those of the index",
        tmp_path,
        chatter=True,
    )


@pytest.mark.parametrize(
    "flags, pattern",
    [
        (["-s", "12of19"], r"--seed is TTT0T00TT00T0T0TTTT here but the index .* was built with"),
        (["-e", "2"], r"--step is 2 here but the index"),
        (["-B", "5000"], r"--seq-block-size is 5000 here but the index .* built with 4000"),
        (["--kegalign-bins"], r"--kegalign-bins is on here but the index .* built with off"),
    ],
)
def test_run_flags_that_differ_from_the_index_are_refused(built, tmp_path, capfd, flags, pattern):
    d, _, qry, _ = built
    assert_refused(capfd, run_argv(d / "ix", qry, tmp_path / "out", *flags), 2, pattern, tmp_path)


def test_a_plan_with_other_bins_than_the_index_is_refused(built):
    """What a run does once the memory preflight has halved -B (`commands.run`): the plan's
    bins must be the index's."""
    d, ref, _, _ = built
    idx = ix.open_index(d / "ix")
    ix.check_plan(idx, idx.bins)
    halved = planning.make_bins(idx.manifest.lengths, 2000, False)
    with pytest.raises(
        UsageError,
        match=r"this run's plan has 6 reference bin\(s\) where the "
        r"index .* has 5 \(the memory preflight shrank -B",
    ):
        ix.check_plan(idx, halved)


@pytest.mark.parametrize(
    "argv, pattern",
    [
        (
            ["index", "-r", "{ref}", "--index", "{d}/new", "-T", "ref."],
            r"--target-prefix belongs to run",
        ),
        (["index", "-r", "{ref}", "--index", "{d}/new", "-B", "0"], r"-B 0 .* cannot build"),
        (["index", "-r", "{ref}", "--index", "{d}/ix"], r"already exists; an index is never "),
        (
            ["run", "--index", "{d}/ix", "-q", "{qry}", "-o", "{d}/o", "-B", "0"],
            r"-B 0 .* cannot be combined with --index",
        ),
        (
            ["run", "--index", "{d}/ix", "-q", "{qry}", "-o", "{d}/o", "--cpu-only"],
            r"--cpu-only cannot be combined with --index",
        ),
        (
            ["benchmark", "--index", "{d}/ix", "-r", "{ref}", "-q", "{qry}"],
            r"benchmark cannot use --index",
        ),
        (
            ["run", "--index", "{d}/missing", "-q", "{qry}", "-o", "{d}/o"],
            r"missing is not an index folder",
        ),
        (["run", "--index", "{d}/ix", "-o", "{d}/o"], r"--query is required"),
        (["run", "-q", "{qry}", "-o", "{d}/o"], r"--reference is required"),
    ],
)
def test_index_refusals(built, tmp_path, capfd, argv, pattern):
    d, ref, qry, _ = built
    work = copy_index(d / "ix", tmp_path / "ix")
    args = [a.format(d=tmp_path, ref=ref, qry=qry) for a in argv]
    del work
    assert_refused(capfd, args, 2, pattern, tmp_path)


def test_index_refuses_record_names_with_whitespace(tmp_path, capfd):
    rng = np.random.default_rng(3)
    seq = np.frombuffer(b"ACGT", np.uint8)[rng.integers(0, 4, 3000)]
    from hspz.io.records import Record

    write_2bit(tmp_path / "ref.2bit", [Record("chr 1", seq)])
    assert_refused(
        capfd,
        ["index", "-r", str(tmp_path / "ref.2bit"), "--index", str(tmp_path / "ix")],
        2,
        r"record name 'chr 1' holds ' '",
        tmp_path,
    )


def test_bins_too_large_for_u32_positions_are_refused_before_building():
    with pytest.raises(Exception, match=r"bin 0 would hold 4294967296 bases"):
        ix.check_bin_sizes(((0, 1),), [4_000_000_000, 294_967_295])
    ix.check_bin_sizes(((0,), (1,)), [4_000_000_000, 294_967_295])


def test_a_killed_build_leaves_no_index_and_the_next_build_starts_clean(built, tmp_path):
    """SIGKILL while bins are written: no DIR, and DIR.tmp (whose lock died with the builder)
    is removed by the next build, which succeeds."""
    d, ref, _, _ = built
    dest = tmp_path / "ix"
    code = (
        f"import os, signal\nfrom hspz.formats import index as ix\nreal = ix.write_bin\n"
        f"def dying(*a, **k):\n    real(*a, **k)\n    os.kill(os.getpid(), signal.SIGKILL)\n"
        f"ix.write_bin = dying\nfrom hspz.cli import main\n"
        f"main(['index', '-r', {str(ref)!r}, '--index', {str(dest)!r}, '-s', "
        f"'111011001011', '-B', '4000', '--backend', 'cpu'])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == -9, done.stderr
    assert not dest.exists() and (tmp_path / "ix.tmp").is_dir()
    assert (
        main(["index", "-r", str(ref), "--index", str(dest), *INDEX_FLAGS, "--backend", "cpu"]) == 0
    )
    assert not (tmp_path / "ix.tmp").exists()
    assert (dest / ix.MANIFEST).read_bytes() == (d / "ix" / ix.MANIFEST).read_bytes()


def test_a_slow_bin_load_warns(built, tmp_path, capsys, monkeypatch):
    """A load above LOAD_WARN_S (10 s) says to keep the index on local storage; here the bound
    is lowered so that every load is slow."""
    from hspz.run import worker as workers

    d, _, qry, plain = built
    monkeypatch.setattr(workers, "LOAD_WARN_S", 0.0)
    assert main(run_argv(d / "ix", qry, tmp_path / "out")) == 0
    err = capsys.readouterr().err
    assert (
        len(
            re.findall(
                r"^warning: loading reference bin \d of the index .* took [\d.]+ s; "
                r"keep the index on local storage$",
                err,
                re.M,
            )
        )
        == 5
    )
    assert outputs(tmp_path / "out") == plain


# --------------------------------------------------------------------------------------------
# Hostile pass 5: a reference that changes, is not a file, or a forged source_pieces line
# --------------------------------------------------------------------------------------------

SMALL = [("a", "ACGTTGCA" * 300), ("b", "TTGACCAG" * 250)]


def _index_argv(ref: Path, dest: Path) -> list[str]:
    return ["index", "-r", str(ref), "--index", str(dest), *INDEX_FLAGS, "--backend", "cpu"]


def test_a_reference_appended_to_while_it_is_indexed_is_hashed_as_it_was_decoded(
    tmp_path, monkeypatch
):
    """A record appended after the file was hashed but before it was decoded was indexed under
    the sha256 and pieces of the file without it (three readers of one file), so that file
    would later be taken for the indexed one.  The bytes are read once now."""
    import time

    from hspz.io import readers
    from tests.helpers import write_fasta

    ref = write_fasta(tmp_path / "r.fa", SMALL)
    real = readers._read_file

    def appended_then_read(path, size=-1, regular=False):
        if size == -1 and Path(path) == ref:
            time.sleep(0.3)  # the hashing threads are done with a small file by now
            with open(ref, "a") as fh:
                fh.write(">c\n" + "GATTACA" * 200 + "\n")
        return real(path, size, regular)

    monkeypatch.setattr(readers, "_read_file", appended_then_read)
    assert main(_index_argv(ref, tmp_path / "ix")) == 0
    m = ix.open_index(tmp_path / "ix").manifest
    data = ref.read_bytes()
    assert m.names == ["a", "b", "c"]
    assert (m.source_size, m.source_sha256) == (len(data), hashlib.sha256(data).hexdigest())
    assert m.source_pieces == ix.file_pieces(ref)[1]


def _hspz(argv: list[str], **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "hspz", *argv], stderr=subprocess.PIPE, text=True, **kw
    )


def test_indexing_a_device_is_refused_at_once(tmp_path):
    """`hspZ index -r /dev/zero` hashed /dev/zero for ever on a thread the exit waited for."""
    proc = _hspz(_index_argv(Path("/dev/zero"), tmp_path / "ix"))
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError("hspZ index -r /dev/zero hung") from None
    assert proc.returncode == 2
    assert err.strip().splitlines() == ["hspZ: /dev/zero: a device, not a sequence file"]
    assert not list(tmp_path.iterdir())


def test_an_index_of_a_pipe_reads_it_once(tmp_path):
    """A FIFO given to `hspZ index` (`-r <(zcat ...)`) was opened by three readers, which
    split its bytes between them or waited for ever; it is read once, as `run` reads one."""
    import threading

    from tests.helpers import write_fasta

    ref = write_fasta(tmp_path / "r.fa", SMALL)
    fifo = tmp_path / "r.fifo"
    os.mkfifo(fifo)

    def feed() -> None:
        with open(fifo, "wb") as fh:
            fh.write(ref.read_bytes())

    threading.Thread(target=feed, daemon=True).start()
    proc = _hspz(_index_argv(fifo, tmp_path / "ix"))
    try:
        _, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
        raise AssertionError("hspZ index -r FIFO hung") from None
    assert proc.returncode == 0, err
    m = ix.open_index(tmp_path / "ix").manifest
    data = ref.read_bytes()
    assert (m.names, m.source_size) == (["a", "b"], len(data))
    assert m.source_sha256 == hashlib.sha256(data).hexdigest()


def test_an_index_build_blocked_on_a_fifo_stops_on_sigterm(tmp_path):
    """It waited for its hashing threads, blocked in the FIFO's open for ever: SIGTERM was
    ignored.  Now it exits 143 at once and leaves no build folder."""
    fifo = tmp_path / "r.fifo"
    os.mkfifo(fifo)
    (tmp_path / "link").symlink_to(fifo)
    proc = _hspz(_index_argv(tmp_path / "link", tmp_path / "ix"))
    sigterm_after(proc, "an index build blocked on a FIFO")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "r.fifo"]


def test_same_file_never_opens_a_fifo_nor_takes_a_device_for_the_indexed_file(tmp_path):
    """An index recording an empty source (a forged MANIFEST, resealed) made `same_file` open a
    FIFO (waiting for ever) and take /dev/zero (size 0 to stat) for the indexed file."""
    import threading

    empty = hashlib.sha256(b"").hexdigest()
    fifo = tmp_path / "f.fifo"
    os.mkfifo(fifo)
    got: dict[str, bool] = {}

    def check() -> None:
        for p in (str(fifo), "/dev/zero", str(tmp_path)):
            got[p] = ix.same_file(p, 0, empty, (empty,)) or ix.same_file(p, 0, empty)

    t = threading.Thread(target=check, daemon=True)
    t.start()
    t.join(10)
    if t.is_alive():
        os.close(os.open(fifo, os.O_RDWR))
        raise AssertionError("same_file waited on a FIFO")
    assert got == {str(fifo): False, "/dev/zero": False, str(tmp_path): False}


@pytest.mark.parametrize("change", ["grows", "shrinks"])
def test_file_pieces_of_a_file_that_changes_size_while_hashed_raise(tmp_path, monkeypatch, change):
    """A file cut while hashed was hashed short (its missing bytes skipped), one appended to
    hashed as it was at open: pieces of bytes the file never held at once."""
    f = tmp_path / "f"
    f.write_bytes(b"x" * 5000)
    pieces = ix.file_pieces(f)[1]
    assert ix.same_file(f, 5000, "", pieces)  # unchanged: the same
    real, done = os.preadv, []

    def changing(fd, buffers, offset):
        if not done:
            done.append(1)
            with open(f, "r+b") as fh:
                fh.truncate(6000 if change == "grows" else 1500)
        return real(fd, buffers, offset)

    monkeypatch.setattr(os, "preadv", changing)
    with pytest.raises(hashing.ChangedWhileRead):
        ix.file_pieces(f, 1000, 1)
    f.write_bytes(b"x" * 5000)  # the recorded size again: the change comes while it is hashed
    done.clear()
    assert not ix.same_file(f, 5000, "", pieces)
    assert done  # the file changed during same_file's hashing, past its size check


@pytest.mark.parametrize(
    "forged, why",
    [
        ("{size} {h},{h}", r"2 source piece hash\(es\) for a file of"),
        ("{size} ", r"not 64 hex digits"),
        ("{size}", r"source_pieces is not"),
        ("{size} zz", r"not 64 hex digits"),
        ("{size} " + "a" * 64, r"one piece hash is not its sha256"),
        ("1048576 {h}", r"source_pieces is not"),
    ],
)
def test_a_forged_source_pieces_line_is_refused(built, tmp_path, capfd, forged, why):
    """A source_pieces line with a wrong count of hashes, none, non-hex ones or one that
    contradicts the sha256 (the MANIFEST resealed: its checksum is a plain sha256 of its
    lines) was accepted and quietly never matched; it is a malformed MANIFEST now."""
    d, ref, qry, _ = built
    other = copy_index(d / "ix", tmp_path / "ix")
    m = ix.open_index(other).manifest
    line = f"source_pieces {forged.format(size=ix.SOURCE_PIECE, h=m.source_pieces[0])}"
    lines = [line if x.startswith("source_pieces ") else x for x in m.lines()]
    (other / ix.MANIFEST).write_text(sealed("".join(f"{x}\n" for x in lines)))
    with pytest.raises(ix.InputError, match="malformed index MANIFEST .*" + why):
        ix.open_index(other)
    unsealed = copy_index(d / "ix", tmp_path / "ix2")
    text = (
        (unsealed / ix.MANIFEST)
        .read_text()
        .replace(f"source_pieces {ix.SOURCE_PIECE} {','.join(m.source_pieces)}", line)
    )
    (unsealed / ix.MANIFEST).write_text(text)
    with pytest.raises(ix.InputError, match="fails its checksum"):
        ix.open_index(unsealed)
