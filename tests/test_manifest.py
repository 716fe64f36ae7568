"""Frozen plans: `--dump-manifest` / `--from-manifest` replay the same bytes and refuse every
mismatch with one line; `hspZ plan` -> `work` (every worker) -> `merge` writes exactly what
`hspZ run` writes, `-D` and `-Z` included; merge refuses missing, duplicate and foreign results."""

from __future__ import annotations

import hashlib
import re
import shutil

import pytest
from multibin import FLAGS, outputs, write_pair

from hspz.cli import main
from hspz.formats.frozen import parse_manifest, read_manifest
from hspz.formats.planfile import read_plan


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """The pair, a manifest of it and the one-worker run's outputs."""
    d = tmp_path_factory.mktemp("job")
    ref, qry = (str(p) for p in write_pair(d))
    common = ["run", "-r", ref, "-q", qry, *FLAGS, "--backend", "cpu"]
    assert main(common + ["-o", str(d / "out"), "--dump-manifest", str(d / "m.txt")]) == 0
    assert main(common + ["-o", str(d / "dz"), "-D", "-Z", str(d / "dz.tar.gz")]) == 0
    return dict(
        dir=d,
        ref=ref,
        qry=qry,
        manifest=str(d / "m.txt"),
        files=outputs(d / "out"),
        tar=(d / "dz.tar.gz").read_bytes(),
    )


def run(capsys, args) -> tuple[int, str, str]:
    status = main([str(a) for a in args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def one_line_error(err: str) -> str:
    lines = [line for line in err.splitlines() if not line.startswith("note:")]
    assert len(lines) == 1 and lines[0].startswith("hspZ: "), err
    return lines[0]


def test_manifest_text_round_trips(job):
    text = open(job["manifest"]).read()
    m = parse_manifest(text, "m")
    assert m.to_text() == text
    assert re.search(r"^hspz-manifest 2$", text, re.M)
    assert re.search(r"\nchecksum sha256:[0-9a-f]{64}\n\Z", text)
    assert re.search(r"^records R 6 [0-9a-f]{64}$", text, re.M)
    assert re.search(r"^matrix (-?\d+,){63}-?\d+$", text, re.M)
    assert len(m.plan.ref_bins) == 5 and len(m.plan.query_bins) == 2


def test_replay_writes_the_same_bytes_on_any_worker_count(job, tmp_path, capsys):
    for gpus in ("1", "2"):
        out = tmp_path / f"out{gpus}"
        status, _, err = run(
            capsys,
            [
                "run",
                "-r",
                job["ref"],
                "-q",
                job["qry"],
                "--from-manifest",
                job["manifest"],
                "--gpus",
                gpus,
                "-o",
                out,
            ],
        )
        assert status == 0, err
        assert outputs(out) == job["files"]


def test_replay_accepts_flags_that_agree_with_the_manifest(job, tmp_path, capsys):
    args = [
        "run",
        "-r",
        job["ref"],
        "-q",
        job["qry"],
        *FLAGS,
        "--from-manifest",
        job["manifest"],
        "-o",
        tmp_path / "out",
        "--dump-manifest",
        tmp_path / "again.txt",
    ]
    status, _, err = run(capsys, args)
    assert status == 0, err
    assert outputs(tmp_path / "out") == job["files"]
    assert (tmp_path / "again.txt").read_text() == open(job["manifest"]).read()


def _edited_query(job, tmp_path):
    path = tmp_path / "qry.fa"
    data = bytearray(open(job["qry"], "rb").read())
    at = data.index(b"\n", data.index(b"contig1")) + 10
    data[at] = ord("A") if data[at] != ord("A") else ord("C")  # same size, one base differs
    path.write_bytes(bytes(data))
    return path


def sealed(text: str) -> str:
    """`text` and the checksum line the frozen formats end with (written out here, so that the
    format itself is checked): `checksum sha256:<hex of every byte before it>`."""
    return f"{text}checksum sha256:{hashlib.sha256(text.encode()).hexdigest()}\n"


def resealed(text: str) -> str:
    """A sealed text edited as `hspZ` itself would have written it: the checksum line
    recomputed (to reach the checks behind the checksum)."""
    return sealed(text[: text.rindex("checksum sha256:")])


def _version_changed(job, tmp_path):
    path = tmp_path / "m.txt"
    path.write_text(
        resealed(
            re.sub(
                r"^hspz_version .*$", "hspz_version 0.0.0", open(job["manifest"]).read(), flags=re.M
            )
        )
    )
    return path


def _truncated(job, tmp_path):
    path = tmp_path / "m.txt"
    path.write_text(open(job["manifest"]).read()[:900])
    return path


def _scores(tmp_path):
    path = tmp_path / "scores.txt"
    path.write_text(
        "   A    C    G    T\nA  91 -114  -31 -123\nC -114  100 -125  -31\n"
        "G  -31 -125  100 -114\nT -123  -31 -114   90\n"
    )
    return path


@pytest.mark.parametrize(
    "case, message",
    [
        ("flag -x", "--xdrop .800. differs from the frozen value .910."),
        ("flag -B", "--seq-block-size .5000. differs"),
        ("flag --seed", "--seed .12of19. differs"),
        ("flag -m", "--max-hits .1000. differs"),
        ("scores", "scoring matrix differs"),
        ("query", "query records differ from the planned ones"),
        ("version", "made by hspZ 0.0.0"),
        ("truncated", "no checksum line at the end of the manifest"),
        (
            "swapped",
            "reference record 1 is 'contig0' .3000 bp. here, 'chr0' .3800 bp. in the manifest",
        ),
    ],
)
def test_replay_refuses_every_mismatch_with_one_line(job, tmp_path, capsys, case, message):
    ref, qry, manifest, extra = job["ref"], job["qry"], job["manifest"], []
    if case.startswith("flag"):
        extra = {
            "flag -x": ["-x", "800"],
            "flag -B": ["-B", "5000"],
            "flag --seed": ["--seed", "12of19"],
            "flag -m": ["-m", "1000"],
        }[case]
    elif case == "scores":
        extra = ["--scoring", _scores(tmp_path)]
    elif case == "query":
        qry = _edited_query(job, tmp_path)
    elif case == "version":
        manifest = _version_changed(job, tmp_path)
    elif case == "truncated":
        manifest = _truncated(job, tmp_path)
    else:
        ref, qry = qry, ref
    out = tmp_path / "out"
    status, stdout, err = run(
        capsys, ["run", "-r", ref, "-q", qry, "--from-manifest", manifest, "-o", out, *extra]
    )
    assert status == 2
    assert re.search(message, one_line_error(err))
    assert not out.exists() and stdout == ""


def plan_work(job, tmp_path, capsys, gpus: int, env: str | None = None) -> tuple[str, list]:
    plan = tmp_path / f"plan{gpus}.txt"
    status, _, err = run(
        capsys,
        [
            "plan",
            "-r",
            job["ref"],
            "-q",
            job["qry"],
            *FLAGS,
            "--backend",
            "cpu",
            "--gpus",
            gpus,
            "-o",
            plan,
        ],
    )
    assert status == 0, err
    assert [line for line in err.splitlines() if line.startswith("schedule:")] == [
        line for line in plan.read_text().splitlines() if line.startswith("schedule:")
    ]
    results = []
    for k in range(read_plan(plan).schedule.workers):
        result = tmp_path / f"w{gpus}_{k}.result"
        status, _, err = run(
            capsys,
            ["work", "--plan", plan, "--worker", k, "--backend", "cpu", "-t", "1", "-o", result],
        )
        assert status == 0, err
        results.append(result)
    return str(plan), results


@pytest.mark.parametrize("gpus", [1, 3])
def test_plan_work_merge_writes_the_bytes_of_run(job, tmp_path, capsys, gpus):
    plan, results = plan_work(job, tmp_path, capsys, gpus)
    status, out, err = run(
        capsys, ["merge", "--plan", plan, "-o", tmp_path / "out", *reversed(results)]
    )
    assert status == 0, err
    assert outputs(tmp_path / "out") == job["files"]
    assert re.fullmatch(r"digest: [0-9a-f]{16}\n", out)
    status, _, err = run(
        capsys,
        [
            "merge",
            "--plan",
            plan,
            "-o",
            tmp_path / "dz",
            "-D",
            *results,
            "-Z",
            tmp_path / "dz.tar.gz",
        ],
    )
    assert status == 0, err
    assert (tmp_path / "dz.tar.gz").read_bytes() == job["tar"]


def test_merge_refuses_missing_duplicate_and_foreign_results(job, tmp_path, capsys):
    plan, results = plan_work(job, tmp_path, capsys, 2)
    other = tmp_path / "other.txt"  # another plan of the same pair: three workers
    assert (
        run(
            capsys,
            [
                "plan",
                "-r",
                job["ref"],
                "-q",
                job["qry"],
                *FLAGS,
                "--backend",
                "cpu",
                "--gpus",
                "3",
                "-o",
                other,
            ],
        )[0]
        == 0
    )
    cases = [
        (plan, results[:1], "no results of worker.s. 1 of"),
        (plan, results + results[:1], "the results of worker 0 were given twice"),
        (other, results, "these results belong to another plan than"),
    ]
    for p, args, message in cases:
        out = tmp_path / "out"
        got, _, err = run(capsys, ["merge", "--plan", p, "-o", out, *args])
        assert got == 2 and re.search(message, one_line_error(err)), err
        assert not out.exists()


def test_work_refuses_a_worker_outside_the_plan_and_changed_inputs(job, tmp_path, capsys):
    ref, qry = tmp_path / "ref.fa", tmp_path / "qry.fa"
    shutil.copy(job["ref"], ref)
    shutil.copy(job["qry"], qry)
    plan = tmp_path / "plan.txt"
    assert (
        run(
            capsys,
            ["plan", "-r", ref, "-q", qry, *FLAGS, "--backend", "cpu", "--gpus", "2", "-o", plan],
        )[0]
        == 0
    )
    status, _, err = run(capsys, ["work", "--plan", plan, "--worker", "2", "-o", tmp_path / "r"])
    assert status == 2 and "--worker: 2 is not a worker" in one_line_error(err)
    assert _edited_query(job, tmp_path) == qry  # the planned file, one base edited
    status, _, err = run(capsys, ["work", "--plan", plan, "--worker", "0", "-o", tmp_path / "r"])
    assert status == 2 and "query records differ" in one_line_error(err)
    assert not (tmp_path / "r").exists()


def test_a_plan_file_is_a_manifest_too(job, tmp_path, capsys):
    plan, _ = plan_work(job, tmp_path, capsys, 1)
    assert read_manifest(plan).to_text() == read_manifest(job["manifest"]).to_text()
