"""The catalogue of damaged or mismatched frozen files, workers and the memory preflight.

Each case is one `hspZ` command against files copied into the case's own directory, checked by
`refusal.assert_refused`: one `hspZ:` line naming the problem (and the file), exit status 2, no
traceback, nothing under the directory changed.  `COMMAND` says which command each case runs;
`tests/test_refusals_<command>.py` runs that command's cases.  The classes:

- `manifest-`: a manifest (`--dump-manifest` / `--from-manifest`) edited anywhere, a byte of it
  flipped, cut short, without its checksum line, of an older format, or sealed again after its
  record table was edited (then the replay's record check names the record);
- `plan-`: the same for a plan file (`hspZ plan`), read by `work`, `merge` and `--from-manifest`;
- `results-`: a results file (`hspZ work`) with a bad CRC, truncated, not a zip, empty, a forged
  header (stale or recomputed checksum), a damaged unit image in a valid zip, another plan's,
  given twice, a worker's missing, an older format, a FIFO or a device in its place, and
  (resealed) formatted lines cut short or under another file's name, or the digest of a job
  it does not hold whole;
- `workers-`: a worker number outside the plan;
- `preflight-`: the memory preflight's refusal naming only the flags that apply to the run
  (never --gpus to a run with one worker, --threads only with several threads per worker, -B
  only where bins could still shrink).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest
from multibin import FLAGS, write_pair
from refusal import assert_refused

from hspz.cli import main
from hspz.formats.planfile import PLAN_FORMAT

CPU = ["--backend", "cpu", "-t", "1"]


def sealed(text: str) -> str:
    """`text` and the checksum line the frozen formats end with (written out here, so that the
    format itself is checked): `checksum sha256:<hex of every byte before it>`."""
    return f"{text}checksum sha256:{hashlib.sha256(text.encode()).hexdigest()}\n"


def build(d: Path) -> Path:
    """`d` with the pair, its manifest, a two-worker plan with both workers' results, and a
    three-worker plan of the same pair (another plan): the `frozen` fixture."""
    ref, qry = (str(p) for p in write_pair(d))
    common = ["-r", ref, "-q", qry, *FLAGS, *CPU]
    assert main(["run", *common, "-o", str(d / "out"), "--dump-manifest", str(d / "m.txt")]) == 0
    assert main(["plan", *common, "--gpus", "2", "-o", str(d / "plan.txt")]) == 0
    assert main(["plan", *common, "--gpus", "3", "-o", str(d / "other.txt")]) == 0
    for k in range(2):
        assert (
            main(
                [
                    "work",
                    "--plan",
                    str(d / "plan.txt"),
                    "--worker",
                    str(k),
                    *CPU,
                    "-o",
                    str(d / f"w{k}.npz"),
                ]
            )
            == 0
        )
    return d


def _copy(frozen: Path, root: Path, *names: str) -> list[Path]:
    out = []
    for name in names:
        shutil.copy(frozen / name, root / name)
        out.append(root / name)
    return out


def _edit(path: Path, old: str, new: str, reseal: bool = False) -> None:
    """Replace the first `old` in a text file; `reseal`: recompute the checksum line (a file
    edited by someone who knows the format)."""
    text = path.read_text()
    assert old in text, old
    text = text.replace(old, new, 1)
    path.write_text(sealed(text[: text.rindex("checksum sha256:")]) if reseal else text)


def _flip(path: Path, at: float) -> None:
    """Flip one bit of the byte at fraction `at` of the file."""
    data = bytearray(path.read_bytes())
    data[int(len(data) * at)] ^= 0x04
    path.write_bytes(bytes(data))


def _cut(path: Path, keep: float) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def _first_manifest_line(path: Path, key: str) -> str:
    return next(line for line in path.read_text().splitlines() if line.startswith(key))


# --------------------------------------------------------------------------------------------
# Results files: what a damaged or forged .npz looks like
# --------------------------------------------------------------------------------------------


def _members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as z:
        return {name: z.read(name) for name in z.namelist()}


def _write_members(path: Path, members: dict[str, bytes]) -> None:
    with zipfile.ZipFile(path, "w") as z:  # CRCs computed afresh: a valid zip
        for name, data in members.items():
            z.writestr(name, data)


def _npy(array: np.ndarray) -> bytes:
    import io

    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


def _header(path: Path) -> dict:
    import io

    return json.loads(np.load(io.BytesIO(_members(path)["header.npy"])).tobytes().decode())


def _with_header(path: Path, header: dict, reseal: bool) -> None:
    if reseal:
        rest = {k: v for k, v in header.items() if k != "checksum"}
        header["checksum"] = hashlib.sha256(json.dumps(rest, sort_keys=True).encode()).hexdigest()
    members = _members(path)
    members["header.npy"] = _npy(np.frombuffer(json.dumps(header).encode(), np.uint8))
    _write_members(path, members)
    if reseal:  # the whole-file seal too: a forger who knows the format
        from hspz.formats.results import seal_results

        seal_results(path)


def _reseal(path: Path) -> None:
    """The whole-file seal of a zip written again (its comment, the old seal, dropped)."""
    from hspz.formats.results import SEAL_LEN, seal_results

    data = path.read_bytes()
    if data[-SEAL_LEN - 2 : -SEAL_LEN] == SEAL_LEN.to_bytes(2, "little"):
        data = data[:-SEAL_LEN]
        path.write_bytes(data[:-2] + b"\0\0")
    seal_results(path)


def _bad_crc(path: Path) -> None:
    """Flip a byte inside the first unit's stored data, the zip's CRC left as it was."""
    import struct

    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as z:
        info = next(i for i in z.infolist() if i.filename.startswith("unit"))
    at = info.header_offset  # the local header: 30 bytes, then its name and its extra field
    name_len, extra_len = struct.unpack("<HH", data[at + 26 : at + 30])
    data[at + 30 + name_len + extra_len + info.compress_size // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _point_member(path: Path, prefix: str, target: str) -> None:
    """Point the central directory entry of the first member named `prefix`... at the local
    header of member `target` (each entry's offset is 42 bytes into it)."""
    import struct

    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as z:
        infos = z.infolist()
        start = z.start_dir
    victim = next(i for i in infos if i.filename.startswith(prefix))
    to = next(i for i in infos if i.filename == target).header_offset
    at = start
    while data[at : at + 4] == b"PK\x01\x02":
        name_len, extra_len, comment_len = struct.unpack("<HHH", data[at + 28 : at + 34])
        if data[at + 46 : at + 46 + name_len].decode() == victim.filename:
            data[at + 42 : at + 46] = struct.pack("<I", to)
            break
        at += 46 + name_len + extra_len + comment_len
    else:
        raise AssertionError(f"no directory entry for {victim.filename}")
    path.write_bytes(bytes(data))


def _damaged_image(path: Path) -> None:
    """A unit image with one byte changed, in a zip whose CRCs match (only the header's
    sha256 of the image can tell)."""
    members = _members(path)
    name = next(n for n in members if n.startswith("unit"))
    import io

    image = np.load(io.BytesIO(members[name])).copy()
    image[len(image) // 2] ^= 0x01
    members[name] = _npy(image)
    _write_members(path, members)


# --------------------------------------------------------------------------------------------
# The cases: each returns (argv, status, pattern, env, chatter)
# --------------------------------------------------------------------------------------------


def _replay(root: Path, manifest: Path, query: str = "qry.fa") -> list[str]:
    return [
        "run",
        "-r",
        str(root / "ref.fa"),
        "-q",
        str(root / query),
        "--from-manifest",
        str(manifest),
        *CPU,
        "-o",
        str(root / "out"),
    ]


def manifest_case(kind: str):
    def case(frozen: Path, root: Path):
        _copy(frozen, root, "ref.fa", "qry.fa")
        (m,) = _copy(frozen, root, "m.txt")
        name = re.escape(str(m))
        mismatch = f"^hspZ: {name}: checksum mismatch: the manifest was edited or damaged"
        missing = f"^hspZ: {name}: no checksum line at the end of the manifest"
        if kind == "edited-setting":
            _edit(m, "\nxdrop 910\n", "\nxdrop 800\n")
            return _replay(root, m), 2, mismatch
        if kind == "edited-record-name":
            _edit(m, " chr3\n", " chrX\n")
            return _replay(root, m), 2, mismatch
        if kind == "edited-max-hits":
            _edit(m, "\nmax_hits 16711680\n", "\nmax_hits 1000\n")
            return _replay(root, m), 2, mismatch
        if kind in ("flipped-byte-head", "flipped-byte-middle", "flipped-byte-tail"):
            _flip(m, {"head": 0.1, "middle": 0.5, "tail": 0.97}[kind.rsplit("-", 1)[1]])
            return _replay(root, m), 2, f"{mismatch}|{missing}"
        if kind == "truncated":
            _cut(m, 0.6)
            return _replay(root, m), 2, missing
        if kind == "missing-checksum":
            text = m.read_text()
            m.write_text(text[: text.rindex("checksum sha256:")])
            return _replay(root, m), 2, missing
        if kind == "appended-line":
            with open(m, "a") as fh:
                fh.write("# a note added after the checksum\n")
            return _replay(root, m), 2, missing
        if kind == "old-format":
            text = m.read_text()
            m.write_text(
                text[: text.rindex("checksum sha256:")].replace(
                    "hspz-manifest 2", "hspz-manifest 1", 1
                )
            )
            return (
                _replay(root, m),
                2,
                (
                    f"^hspZ: {name}: manifest format '1' was written by an "
                    f"older hspZ; this one reads format 2"
                ),
            )
        if kind == "resealed-record-name":
            _edit(m, " chr3\n", " chrX\n", reseal=True)
            return (
                _replay(root, m),
                2,
                (
                    f"^hspZ: {name}: reference record 4 is 'chr3' "
                    "\\(2500 bp\\) here, 'chrX' \\(2500 bp\\) "
                    "in the manifest$"
                ),
            )
        if kind == "other-query":
            return _replay(root, m, "ref.fa"), 2, f"^hspZ: {name}: query record 1 is 'chr0'"
        if kind == "not-a-manifest":
            shutil.copy(root / "qry.fa", m)
            return _replay(root, m), 2, f"^hspZ: {name}: not an hspZ manifest$"
        if kind == "empty":
            m.write_bytes(b"")
            return _replay(root, m), 2, f"^hspZ: {name}: not an hspZ manifest$"
        raise AssertionError(kind)

    return case


def plan_case(kind: str):
    def case(frozen: Path, root: Path):
        (p,) = _copy(frozen, root, "plan.txt")
        name = re.escape(str(p))
        work = ["work", "--plan", str(p), "--worker", "0", *CPU, "-o", str(root / "w.npz")]
        mismatch = f"^hspZ: {name}: checksum mismatch: the plan file was edited or damaged"
        missing = f"^hspZ: {name}: no checksum line at the end of the plan file"
        if kind == "edited-schedule":
            visit = _first_manifest_line(p, "visit 0 ")
            _edit(p, visit + "\n", visit.rsplit(" ", 1)[0] + " 1\n")
            return work, 2, mismatch
        if kind == "edited-input-path":
            _edit(p, "reference_path ", "reference_path /elsewhere")
            return work, 2, mismatch
        if kind == "flipped-byte":
            _flip(p, 0.5)
            return work, 2, f"{mismatch}|{missing}"
        if kind == "truncated":
            _cut(p, 0.5)
            return work, 2, missing
        if kind == "old-format":
            text = p.read_text()
            p.write_text(
                text[: text.rindex("checksum sha256:")].replace(
                    f"hspz-plan {PLAN_FORMAT}", "hspz-plan 1", 1
                )
            )
            return work, 2, f"^hspZ: {name}: plan file format '1' was written by an older hspZ"
        if kind == "resealed-record-name":
            _edit(p, " contig2\n", " contigX\n", reseal=True)
            return (
                work,
                2,
                (
                    f"^hspZ: {name}: query record 3 is 'contig2' \\(3000 bp\\) here, "
                    f"'contigX' \\(3000 bp\\) in the manifest$"
                ),
            )
        if kind == "edited-read-by-merge":
            _copy(frozen, root, "w0.npz", "w1.npz")
            _edit(p, "\nhspthresh 150\n", "\nhspthresh 151\n")
            return (
                [
                    "merge",
                    "--plan",
                    str(p),
                    "-o",
                    str(root / "out"),
                    str(root / "w0.npz"),
                    str(root / "w1.npz"),
                ],
                2,
                mismatch,
            )
        if kind == "edited-as-manifest":
            _copy(frozen, root, "ref.fa", "qry.fa")
            _edit(p, "\nxdrop 910\n", "\nxdrop 911\n")
            return _replay(root, p), 2, mismatch
        raise AssertionError(kind)

    return case


def results_case(kind: str):
    def case(frozen: Path, root: Path):
        (p,) = _copy(frozen, root, "plan.txt")
        w0, w1 = _copy(frozen, root, "w0.npz", "w1.npz")
        name = re.escape(str(w0))
        merge = ["merge", "--plan", str(p), "-o", str(root / "out"), str(w0), str(w1)]
        unreadable = f"^hspZ: {name}: not a readable hspZ results file"
        if kind == "bad-crc":
            _bad_crc(w0)
            return merge, 2, f"{unreadable} \\(BadZipFile: Bad CRC-32"
        if kind == "truncated":
            _cut(w0, 0.5)
            return merge, 2, f"{unreadable} \\(BadZipFile"
        if kind == "not-a-zip":
            shutil.copy(p, w0)
            return merge, 2, unreadable
        if kind == "empty":
            w0.write_bytes(b"")
            return merge, 2, unreadable
        if kind == "forged-header":
            header = _header(w0)
            header["worker"] = 1
            _with_header(w0, header, reseal=False)
            return merge, 2, f"^hspZ: {name}: checksum mismatch: the results header was edited"
        if kind == "forged-header-resealed":
            header = _header(w0)
            header["worker"] = 1
            _with_header(w0, header, reseal=True)
            return (
                ["merge", "--plan", str(p), "-o", str(root / "out"), str(w0)],
                2,
                f"^hspZ: {name}: holds units \\[.*\\] but worker 1 of .* runs units \\[",
            )
        if kind == "damaged-unit":
            _damaged_image(w0)
            return merge, 2, f"^hspZ: {name}: unit \\d+ of job \\d+ is damaged"
        if kind == "another-plan":
            (other,) = _copy(frozen, root, "other.txt")
            merge[2] = str(other)
            return merge, 2, f"^hspZ: {name}: these results belong to another plan than"
        if kind == "duplicate":
            merge.append(str(w0))
            return merge, 2, f"the results of worker 0 were given twice \\(also {name}\\)$"
        if kind == "missing-worker":
            return merge[:-1], 2, "^hspZ: no results of worker\\(s\\) 1 of .*plan.txt were given"
        if kind == "fifo":  # np.load opened it and waited for a writer for ever
            w0.unlink()
            os.mkfifo(w0)
            return merge, 2, f"^hspZ: {name}: cannot read it: not a regular file$"
        if kind == "device":
            w0.unlink()
            w0.symlink_to("/dev/zero")
            return merge, 2, f"^hspZ: {name}: cannot read it: not a regular file$"
        if kind in ("text-cut-resealed", "text-renamed-resealed"):
            header = _header(w0)
            files = next(t for t in header["text"] if t)
            if kind == "text-cut-resealed":
                files[0][1] -= 1
                pattern = "the formatted lines of unit \\d+ of job 0 are cut short$"
            else:
                files[0][0] = "tmp99.block0.r0.plus.segments"
                pattern = "work unit \\d+ of job 1: its formatted lines do not match its HSPs"
            _with_header(w0, header, reseal=True)
            return merge, 2, pattern
        if kind in ("text-foreign-lines-resealed", "text-unended-resealed", "text-nul-resealed"):
            # each file still holds one newline a HSP: lines no unit of the job formats (the
            # job's digest raised a RuntimeError: a traceback), a last line without its
            # newline, a NUL byte (the digest's lines hold none)
            header = _header(w0)
            k = next(i for i, t in enumerate(header["text"]) if t)
            j, o = header["units"][k]
            members = _members(w0)
            text = np.load(io.BytesIO(members[f"text{j}_{o}.npy"])).tobytes()
            name, size = header["text"][k][0]
            first = text[:size]
            if kind == "text-foreign-lines-resealed":
                first = b"zzz\tforeign\n" * first.count(b"\n")
            elif kind == "text-unended-resealed":
                first += b"chr0"
            else:
                first = first.replace(b"\t", b"\0", 1)
            header["text"][k][0] = [name, len(first)]
            text = first + text[size:]
            members[f"text{j}_{o}.npy"] = _npy(np.frombuffer(text, np.uint8))
            _write_members(w0, members)
            _with_header(w0, header, reseal=True)
            return merge, 2, f"work unit {o} of job 1: its formatted lines do not match its HSPs"
        if kind == "duplicate-unit-resealed":  # read_results' zip(strict=True): a ValueError
            header = _header(w0)
            members = _members(w0)
            j, o = header["units"][0]
            for key in ("units", "sha256", "text"):
                header[key].append(header[key][0])
            _with_header(w0, header, reseal=True)  # the header, checksummed
            with zipfile.ZipFile(w0, "a") as z, warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "Duplicate name": the forgery
                z.writestr(f"unit{j}_{o}.npy", members[f"unit{j}_{o}.npy"])
                z.writestr(f"text{j}_{o}.npy", members[f"text{j}_{o}.npy"])
            _reseal(w0)
            return merge, 2, f"^hspZ: {name}: the results header does not list the file's units$"
        if kind == "digest-number-resealed":  # 16 digits, but not a string
            header = _header(w0)
            header["digests"] = {"0": 1234567890123456}
            _with_header(w0, header, reseal=True)
            return merge, 2, f"^hspZ: {name}: the results header does not list the file's units$"
        if kind == "deep-header":  # json's RecursionError: a traceback from the numba check
            members = _members(w0)
            members["header.npy"] = _npy(np.frombuffer(b"[" * 100000 + b"]" * 100000, np.uint8))
            _write_members(w0, members)
            return merge, 2, f"^hspZ: {name}: the results header is not a JSON object$"
        if kind in ("huge-header", "huge-unit"):  # numpy allocated 1 TiB first: a MemoryError
            from numpy.lib import format as npy_format

            member = "header.npy"
            buf = io.BytesIO()
            npy_format.write_array_header_1_0(
                buf, {"descr": "|u1", "fortran_order": False, "shape": (1 << 40,)}
            )
            members = _members(w0)
            if kind == "huge-unit":
                member = next(m for m in members if m.startswith("unit"))
            members[member] = buf.getvalue() + b"{}"
            _write_members(w0, members)
            _reseal(w0)
            return merge, 2, f"^hspZ: {name}: member '.*' claims more bytes than it holds"
        if kind == "compressed-member":
            members = _members(w0)
            with zipfile.ZipFile(w0, "w", zipfile.ZIP_DEFLATED) as z:
                for member, data in members.items():
                    z.writestr(member, data)
            _reseal(w0)  # accepted before: a small file inflating to any size (a zip bomb)
            return merge, 2, f"^hspZ: {name}: member '.*' is compressed"
        if kind == "moved-member-resealed":  # a unit's directory entry points at the header's
            _point_member(w0, "unit", "header.npy")
            _reseal(w0)
            return merge, 2, f"{unreadable} \\(BadZipFile: File name in directory"
        if kind == "long-array-resealed":  # an array longer than its data, shorter than its member
            members = _members(w0)
            member = next(m for m in members if m.startswith("unit"))
            body = members[member]
            head = io.BytesIO(body)
            np.lib.format.read_magic(head)
            np.lib.format.read_array_header_1_0(head)
            data = body[head.tell() :]
            buf = io.BytesIO()
            np.lib.format.write_array_header_1_0(
                buf, {"descr": "|u1", "fortran_order": False, "shape": (len(data) + 8,)}
            )
            members[member] = buf.getvalue() + data
            _write_members(w0, members)
            _reseal(w0)
            return merge, 2, f"{unreadable} \\(ValueError: EOF"
        if kind == "digest-not-whole-resealed":  # both workers run units of the one job
            header = _header(w0)
            header["digests"] = {"0": "0123456789abcdef"}
            _with_header(w0, header, reseal=True)
            return merge, 2, f"^hspZ: {name}: gives the digest of a job whose units it does not"
        if kind == "old-format":
            header = _header(w0)
            for key in ("sha256", "checksum"):
                header.pop(key)
            header["format"] = 1
            _with_header(w0, header, reseal=False)
            return merge, 2, f"^hspZ: {name}: results format 1 was written by another hspZ"
        raise AssertionError(kind)

    return case


def workers_case(kind: str):
    def case(frozen: Path, root: Path):
        (p,) = _copy(frozen, root, "plan.txt")
        worker = {"out-of-range": "2", "far-out-of-range": "1000"}[kind]
        return (
            ["work", "--plan", str(p), "--worker", worker, *CPU, "-o", str(root / "w.npz")],
            2,
            f"^hspZ: --worker: {worker} is not a worker of .*plan.txt \\(0..1\\)$",
        )

    return case


def preflight_case(kind: str):
    """HSPZ_HOST_MEMORY_BYTES=1000000: nothing fits; the advice depends on the run."""

    def case(frozen: Path, root: Path):
        _copy(frozen, root, "ref.fa", "qry.fa")
        run = [
            "run",
            "-r",
            str(root / "ref.fa"),
            "-q",
            str(root / "qry.fa"),
            "-s",
            FLAGS[1],
            "--backend",
            "cpu",
            "-o",
            str(root / "out"),
        ]
        head = (
            "^hspZ: memory preflight: the largest unit .* over its 0.00 GiB budget \\(90% of "
            "HSPZ_HOST_MEMORY_BYTES\\)"
        )
        if kind == "cpu-one-thread":  # bins of single records: no flag named would help
            return (run + ["-B", "1000", "-t", "1"], 2, f"{head}; records are never split$")
        if kind == "cpu-small-max-hits":  # below the engine's piece, the hits follow -m
            return (
                run + ["-B", "1000", "-t", "1", "-m", "1000"],
                2,
                f"{head}; records are never split \\(try a smaller --max-hits\\)$",
            )
        if kind == "cpu-threads":
            return (
                run + ["-B", "1000", "-t", "2"],
                2,
                f"{head}; records are never split \\(try fewer --threads\\)$",
            )
        if kind == "cpu-two-workers":
            return (
                run + ["-B", "1000", "-t", "4", "--gpus", "2"],
                2,
                f"{head}; records are never split \\(try fewer --gpus or fewer --threads\\)$",
            )
        if kind == "cpu-kegalign-bins":
            return (
                run + ["-B", "20000", "-t", "1", "--kegalign-bins"],
                2,
                f"{head}; --kegalign-bins never shrinks the blocks \\(try a smaller "
                f"-B/--query-block-size\\)$",
            )
        if kind == "manifest-frozen":
            (m,) = _copy(frozen, root, "m.txt")
            argv = [
                "run",
                "-r",
                str(root / "ref.fa"),
                "-q",
                str(root / "qry.fa"),
                "--from-manifest",
                str(m),
                "--backend",
                "cpu",
                "-t",
                "2",
                "-o",
                str(root / "out"),
            ]
            return (
                argv,
                2,
                f"^hspZ: {re.escape(str(m))}: the largest unit .*; a frozen plan is never "
                f"replanned \\(try fewer --threads\\)$",
            )
        raise AssertionError(kind)

    return case


CASES = {
    **{
        f"manifest-{k}": manifest_case(k)
        for k in (
            "edited-setting",
            "edited-record-name",
            "edited-max-hits",
            "flipped-byte-head",
            "flipped-byte-middle",
            "flipped-byte-tail",
            "truncated",
            "missing-checksum",
            "appended-line",
            "old-format",
            "resealed-record-name",
            "other-query",
            "not-a-manifest",
            "empty",
        )
    },
    **{
        f"plan-{k}": plan_case(k)
        for k in (
            "edited-schedule",
            "edited-input-path",
            "flipped-byte",
            "truncated",
            "old-format",
            "resealed-record-name",
            "edited-read-by-merge",
            "edited-as-manifest",
        )
    },
    **{
        f"results-{k}": results_case(k)
        for k in (
            "bad-crc",
            "truncated",
            "not-a-zip",
            "empty",
            "forged-header",
            "forged-header-resealed",
            "damaged-unit",
            "another-plan",
            "duplicate",
            "missing-worker",
            "old-format",
            "fifo",
            "device",
            "text-cut-resealed",
            "text-renamed-resealed",
            "text-foreign-lines-resealed",
            "text-unended-resealed",
            "text-nul-resealed",
            "duplicate-unit-resealed",
            "digest-number-resealed",
            "deep-header",
            "huge-header",
            "huge-unit",
            "compressed-member",
            "moved-member-resealed",
            "long-array-resealed",
            "digest-not-whole-resealed",
        )
    },
    **{f"workers-{k}": workers_case(k) for k in ("out-of-range", "far-out-of-range")},
    **{
        f"preflight-{k}": preflight_case(k)
        for k in (
            "cpu-one-thread",
            "cpu-small-max-hits",
            "cpu-threads",
            "cpu-two-workers",
            "cpu-kegalign-bins",
            "manifest-frozen",
        )
    },
}


def command(case: str) -> str:
    """The command a case runs: a manifest is replayed by `run`, a plan file read by `work`
    (or `merge`, or `run --from-manifest`), results merged, workers worked."""
    special = {"plan-edited-read-by-merge": "merge", "plan-edited-as-manifest": "run"}
    kind = case.split("-", 1)[0]
    return (
        special.get(case)
        or {
            "manifest": "run",
            "plan": "work",
            "results": "merge",
            "workers": "work",
            "preflight": "run",
        }[kind]
    )


def params(of: str) -> list:
    """The cases `of` runs, as pytest parameters named by the cases' ids."""
    return [pytest.param(c, id=c) for c in CASES if command(c) == of]


def check(case: str, frozen: Path, root: Path, capfd, monkeypatch) -> None:
    """Build one case in `root` from the `frozen` files and check that it is refused."""
    monkeypatch.delenv("HSPZ_HOST_MEMORY_BYTES", raising=False)
    if case.startswith("preflight-"):
        monkeypatch.setenv("HSPZ_HOST_MEMORY_BYTES", "1000000")
    argv, status, pattern = CASES[case](frozen, root)
    assert argv[0] == command(case), (case, argv[0])
    assert_refused(capfd, argv, status, pattern, root, chatter=case.startswith("results-"))
