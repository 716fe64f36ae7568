"""The catalogue of outputs that may not be written: every output flag of run, plan, work, merge
(and hits-estimate, benchmark, compare) aimed at an input, by the same path, a symlink or a hard
link, or at a name in OUT that the publish would replace or remove, is refused before any work
(exit 2, one line naming both flags, nothing written, every input intact); so is an OUT or an
output file that cannot be created or written (a file, /proc, a dangling symlink, "", a folder
that is not there), and an OUT another hspZ process holds.

Each case goes through `refusal.assert_refused`, which runs the command in this process and
compares every file under the case directory before and after.  The cases run in that
directory, so a command that wrongly writes into its working directory (`-o ""`) writes there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from multibin import FLAGS, write_pair
from refusal import assert_refused
from scorefiles import HOXD70

from hspz.cli import main


def build(d: Path) -> Path:
    """`d` as the case directory (the `outputs_dir` fixture): the pair, a score file, a plan
    file, its manifest and one worker's results, links to them, and an OUT (`full/`) holding
    copies of inputs under names a publish replaces or removes."""
    ref, qry = write_pair(d)
    (d / "scores.txt").write_text(HOXD70)
    common = ["-r", str(ref), "-q", str(qry), *FLAGS, "--backend", "cpu"]
    assert (
        main(["plan", *common, "-o", str(d / "plan.txt"), "--dump-manifest", str(d / "m.txt")]) == 0
    )
    assert (
        main(
            [
                "work",
                "--plan",
                str(d / "plan.txt"),
                "--worker",
                "0",
                "--backend",
                "cpu",
                "-o",
                str(d / "w0.result"),
            ]
        )
        == 0
    )
    for name, target in (("ref.link", "ref.fa"), ("qry.link", "qry.fa"), ("dangling", "gone")):
        (d / name).symlink_to(d / target)
    for name, target in (("qry.hard", "qry.fa"), ("ref.hard", "ref.fa"), ("w0.hard", "w0.result")):
        os.link(d / target, d / name)
    (d / "a_file").write_text("not a directory\n")
    (d / "a_dir").mkdir()
    full = d / "full"
    (full / ".hspz-stage-0123").mkdir(parents=True)
    for name, source in (
        ("tmp1.block0.r0.plus.segments", qry),
        ("tmp2.block1.r3.minus.split2.segments", ref),
        ("segments.tar.gz", qry),
        (".hspz-stage-0123/ref.fa", ref),
        ("tmp1.block1.r0.plus.segments.result", d / "w0.result"),
        ("tmp1.block1.r0.plus.segments", d / "w0.result"),
    ):
        shutil.copy(source, full / name)
    (d / "full.link").symlink_to(full)
    (d / "keep").mkdir()
    shutil.copy(ref, d / "keep" / "hspz.sorted")
    return d


RUN = ["run", "-r", "{d}/ref.fa", "-q", "{d}/qry.fa", *FLAGS, "--backend", "cpu"]
RUN_OUT = RUN + ["-o", "{d}/out"]
PLAN = ["plan", "-r", "{d}/ref.fa", "-q", "{d}/qry.fa", *FLAGS, "--backend", "cpu"]
WORK = ["work", "--plan", "{d}/plan.txt", "--worker", "0", "--backend", "cpu"]
MERGE = ["merge", "--plan", "{d}/plan.txt"]
NEVER = "; an input is never written$"

CASES = [
    # run: each output flag at an input, by path, link and hard link
    (
        "collision-run-dump-manifest-is-reference",
        RUN_OUT + ["--dump-manifest", "{d}/ref.fa"],
        r"^hspZ: --dump-manifest: .*/ref\.fa is the --reference input" + NEVER,
    ),
    (
        "collision-run-dump-plan-is-query",
        RUN_OUT + ["--dump-plan", "{d}/qry.fa"],
        r"--dump-plan: .*/qry\.fa is the --query input" + NEVER,
    ),
    (
        "collision-run-dump-raw-is-reference",
        RUN_OUT + ["--dump-raw", "{d}/ref.fa"],
        r"--dump-raw: .*/ref\.fa is the --reference input" + NEVER,
    ),
    (
        "collision-run-tarball-is-query",
        RUN_OUT + ["-Z", "{d}/qry.fa"],
        r"--tarball: .*/qry\.fa is the --query input" + NEVER,
    ),
    (
        "collision-run-tarball-is-scoring",
        RUN_OUT + ["-c", "{d}/scores.txt", "-Z", "{d}/scores.txt"],
        r"--tarball: .*/scores\.txt is the --scoring input" + NEVER,
    ),
    (
        "collision-run-dump-manifest-is-from-manifest",
        RUN_OUT + ["--from-manifest", "{d}/m.txt", "--dump-manifest", "{d}/m.txt"],
        r"--dump-manifest: .*/m\.txt is the --from-manifest input" + NEVER,
    ),
    (
        "collision-run-dump-manifest-via-symlink",
        RUN_OUT + ["--dump-manifest", "{d}/ref.link"],
        r"--dump-manifest: .*/ref\.link is .*/ref\.fa, the --reference input" + NEVER,
    ),
    (
        "collision-run-dump-plan-via-hard-link",
        RUN_OUT + ["--dump-plan", "{d}/qry.hard"],
        r"--dump-plan: .*/qry\.hard is .*/qry\.fa, the --query input" + NEVER,
    ),
    (
        "collision-run-reference-given-as-symlink",
        [
            "run",
            "-r",
            "{d}/ref.link",
            "-q",
            "{d}/qry.fa",
            "-o",
            "{d}/out",
            "--dump-raw",
            "{d}/ref.fa",
        ],
        r"--dump-raw: .*/ref\.fa is .*/ref\.link, the --reference input" + NEVER,
    ),
    (
        "collision-run-dump-raw-through-dotdot",
        RUN_OUT + ["--dump-raw", "{d}/a_dir/../qry.fa"],
        r"--dump-raw: .*/a_dir/\.\./qry\.fa is .*/qry\.fa, the --query input" + NEVER,
    ),
    (
        "collision-run-relative-and-absolute",
        RUN_OUT + ["--dump-plan", "qry.fa"],
        r"--dump-plan: qry\.fa is .*/qry\.fa, the --query input" + NEVER,
    ),
    # run: an input inside OUT under a name the publish replaces or removes
    (
        "collision-run-query-named-like-a-segments-file-in-out",
        [
            "run",
            "-r",
            "{d}/ref.fa",
            "-q",
            "{d}/full/tmp1.block0.r0.plus.segments",
            "-o",
            "{d}/full",
        ],
        r"--output: publishing into .*/full would replace or remove "
        r".*/full/tmp1\.block0\.r0\.plus\.segments, the --query input" + NEVER,
    ),
    (
        "collision-run-reference-named-like-a-split-in-out",
        [
            "run",
            "-r",
            "{d}/full/tmp2.block1.r3.minus.split2.segments",
            "-q",
            "{d}/qry.fa",
            "-o",
            "{d}/full",
        ],
        r"--output: publishing .*/full/tmp2\.block1\.r3\.minus\.split2\.segments, the "
        r"--reference input" + NEVER,
    ),
    (
        "collision-run-query-is-the-default-archive",
        ["run", "-r", "{d}/ref.fa", "-q", "{d}/full/segments.tar.gz", "-o", "{d}/full", "-Z"],
        r"--output: publishing .*/full/segments\.tar\.gz, the --query input" + NEVER,
    ),
    (
        "collision-run-reference-inside-a-stage-folder",
        ["run", "-r", "{d}/full/.hspz-stage-0123/ref.fa", "-q", "{d}/qry.fa", "-o", "{d}/full"],
        r"--output: publishing .*/full/\.hspz-stage-0123, the --reference input" + NEVER,
    ),
    (
        "collision-run-out-given-as-symlink",
        [
            "run",
            "-r",
            "{d}/ref.fa",
            "-q",
            "{d}/full/tmp1.block0.r0.plus.segments",
            "-o",
            "{d}/full.link",
        ],
        r"--output: publishing into .*/full\.link would replace .*, the --query input" + NEVER,
    ),
    # run: two outputs naming one file; an output the publish itself would remove
    (
        "collision-run-two-outputs-one-file",
        RUN_OUT + ["--dump-plan", "{d}/x.txt", "--dump-manifest", "{d}/x.txt"],
        r"--dump-plan: .*/x\.txt is also the --dump-manifest output$",
    ),
    (
        "collision-run-dump-raw-named-like-a-segments-file-in-out",
        RUN_OUT + ["--dump-raw", "{d}/out/tmp1.block0.r0.plus.segments"],
        r"--dump-raw: .*/out/tmp1\.block0\.r0\.plus\.segments lies in the --output folder under "
        r"a name its publish replaces or removes",
    ),
    (
        "collision-run-dump-raw-is-the-default-archive",
        RUN_OUT + ["-Z", "--dump-raw", "{d}/out/segments.tar.gz"],
        r"--dump-raw: .*/out/segments\.tar\.gz is also the --tarball output$",
    ),
    # plan
    (
        "collision-plan-output-is-reference",
        PLAN + ["-o", "{d}/ref.fa"],
        r"--output: .*/ref\.fa is the --reference input" + NEVER,
    ),
    (
        "collision-plan-output-is-scoring",
        PLAN + ["-c", "{d}/scores.txt", "-o", "{d}/scores.txt"],
        r"--output: .*/scores\.txt is the --scoring input" + NEVER,
    ),
    (
        "collision-plan-dump-manifest-is-from-manifest",
        PLAN + ["-o", "{d}/p2.txt", "--from-manifest", "{d}/m.txt", "--dump-manifest", "{d}/m.txt"],
        r"--dump-manifest: .*/m\.txt is the --from-manifest input" + NEVER,
    ),
    (
        "collision-plan-output-via-symlink",
        PLAN + ["-o", "{d}/qry.link"],
        r"--output: .*/qry\.link is .*/qry\.fa, the --query input" + NEVER,
    ),
    # work: its plan file and the inputs the plan names
    (
        "collision-work-output-is-plan",
        WORK + ["-o", "{d}/plan.txt"],
        r"--output: .*/plan\.txt is the --plan input" + NEVER,
    ),
    (
        "collision-work-output-is-the-plans-query",
        WORK + ["-o", "{d}/qry.fa"],
        r"--output: .*/qry\.fa is a query of --plan" + NEVER,
    ),
    (
        "collision-work-output-via-hard-link-to-the-plans-reference",
        WORK + ["-o", "{d}/ref.hard"],
        r"--output: .*/ref\.hard is .*/ref\.fa, the reference of --plan" + NEVER,
    ),
    # merge: its plan, its results files, the plan's inputs
    (
        "collision-merge-tarball-is-plan",
        MERGE + ["-o", "{d}/out", "-Z", "{d}/plan.txt", "{d}/w0.result"],
        r"--tarball: .*/plan\.txt is the --plan input" + NEVER,
    ),
    (
        "collision-merge-tarball-via-hard-link-to-a-result",
        MERGE + ["-o", "{d}/out", "-Z", "{d}/w0.hard", "{d}/w0.result"],
        r"--tarball: .*/w0\.hard is .*/w0\.result, the RESULT input" + NEVER,
    ),
    (
        "collision-merge-tarball-is-the-plans-reference",
        MERGE + ["-o", "{d}/out", "-Z", "{d}/ref.fa", "{d}/w0.result"],
        r"--tarball: .*/ref\.fa is the reference of --plan" + NEVER,
    ),
    (
        "collision-merge-result-named-like-a-segments-file-in-out",
        MERGE + ["-o", "{d}/full", "{d}/full/tmp1.block1.r0.plus.segments"],
        r"--output: publishing .*/full/tmp1\.block1\.r0\.plus\.segments, the RESULT input" + NEVER,
    ),
    # the other commands that write a file
    (
        "collision-estimate-dump-plan-is-query",
        ["hits-estimate", "-r", "{d}/ref.fa", "-q", "{d}/qry.fa", "--dump-plan", "{d}/qry.fa"],
        r"--dump-plan: .*/qry\.fa is the --query input" + NEVER,
    ),
    (
        "collision-benchmark-json-is-reference",
        ["benchmark", "-r", "{d}/ref.fa", "-q", "{d}/qry.fa", "--json", "{d}/ref.fa"],
        r"--json: .*/ref\.fa is the --reference input" + NEVER,
    ),
    (
        "collision-compare-keep-would-replace-an-input",
        ["compare", "-r", "{d}/keep/hspz.sorted", "-q", "{d}/qry.fa", "--keep", "{d}/keep"],
        r"--keep: publishing into .*/keep would replace or remove .*/keep/hspz\.sorted, the "
        r"--reference input" + NEVER,
    ),
    # OUT that cannot be created or written, found before any work
    (
        "outdir-run-out-is-a-file",
        RUN + ["-o", "{d}/a_file"],
        r"--output: .*/a_file is not a "
        r"directory$",
    ),
    (
        "outdir-run-out-through-a-file",
        RUN + ["-o", "{d}/a_file/sub"],
        r"--output: .*/a_file is not a directory$",
    ),
    (
        "outdir-run-out-in-proc",
        RUN + ["-o", "/proc/hspz-no-such-dir"],
        r"--output: cannot create /proc/hspz-no-such-dir: ",
    ),
    ("outdir-run-out-is-proc-itself", RUN + ["-o", "/proc"], r"--output: cannot write in /proc: "),
    (
        "outdir-run-out-dangling-symlink",
        RUN + ["-o", "{d}/dangling"],
        r"--output: .*/dangling is a symbolic link to .*/gone, which does not exist$",
    ),
    ("outdir-run-out-empty", RUN + ["-o", ""], r"^hspZ: --output: an empty path$"),
    (
        "outdir-run-tarball-is-a-directory",
        RUN_OUT + ["-Z", "{d}/a_dir"],
        r"--tarball: .*/a_dir is a directory$",
    ),
    ("outdir-run-tarball-empty", RUN_OUT + ["-Z", ""], r"^hspZ: --tarball: an empty path$"),
    (
        "outdir-run-tarball-in-proc",
        RUN_OUT + ["-Z", "/proc/hspz-x/a.tar.gz"],
        r"--tarball: cannot write /proc/hspz-x/a\.tar\.gz: .* \(in /proc\)$",
    ),
    (
        "outdir-run-dump-raw-folder-missing",
        RUN_OUT + ["--dump-raw", "{d}/nowhere/raw.txt"],
        r"--dump-raw: cannot write .*/nowhere/raw\.txt: the folder .*/nowhere does not exist$",
    ),
    (
        "outdir-run-dump-raw-in-proc",
        RUN_OUT + ["--dump-raw", "/proc/hspz-raw.txt"],
        r"--dump-raw: cannot write /proc/hspz-raw\.txt: ",
    ),
    (
        "outdir-run-dump-manifest-empty",
        RUN_OUT + ["--dump-manifest", ""],
        r"^hspZ: --dump-manifest: an empty path$",
    ),
    (
        "outdir-run-dump-plan-is-a-directory",
        RUN_OUT + ["--dump-plan", "{d}/a_dir"],
        r"--dump-plan: .*/a_dir is a directory$",
    ),
    ("outdir-plan-output-empty", PLAN + ["-o", ""], r"^hspZ: --output: an empty path$"),
    (
        "outdir-plan-output-is-a-directory",
        PLAN + ["-o", "{d}/a_dir"],
        r"--output: .*/a_dir is a directory$",
    ),
    (
        "outdir-work-output-in-proc",
        WORK + ["-o", "/proc/hspz-w.result"],
        r"--output: cannot write /proc/hspz-w\.result: ",
    ),
    (
        "outdir-merge-out-empty",
        MERGE + ["-o", "", "{d}/w0.result"],
        r"^hspZ: --output: an empty path$",
    ),
    (
        "outdir-merge-out-dangling-symlink",
        MERGE + ["-o", "{d}/dangling", "{d}/w0.result"],
        r"--output: .*/dangling is a symbolic link to .*/gone, which does not exist$",
    ),
    (
        "outdir-merge-out-in-proc",
        MERGE + ["-o", "/proc/hspz-m", "{d}/w0.result"],
        r"--output: cannot create /proc/hspz-m: ",
    ),
]


def params(command: str) -> list:
    """`command`'s cases (the first word of their argv), as pytest parameters (argv,
    pattern) named by the cases' ids."""
    return [
        pytest.param(argv, pattern, id=case) for case, argv, pattern in CASES if argv[0] == command
    ]


def check(d: Path, capfd, monkeypatch, argv: list[str], pattern: str) -> None:
    """Run one case in the case directory `d` and check that it is refused before any work."""
    monkeypatch.chdir(d)
    assert_refused(capfd, [a.format(d=d) for a in argv], 2, pattern, d)


def unwritable_out_is_refused(d: Path, tmp_path: Path, capfd) -> None:
    out = tmp_path / "locked"
    out.mkdir(mode=0o555)
    assert_refused(
        capfd,
        [a.format(d=d) for a in RUN] + ["-o", str(out)],
        2,
        r"--output: cannot write in .*/locked: Permission denied$",
        tmp_path,
    )


def out_held_in_this_process_is_refused(d: Path, capfd, command: str) -> None:
    """`command` (run or merge) into an OUT whose lock this process holds: refused, naming
    the holder; the holder made OUT and leaves nothing."""
    from hspz.run.outdir import OutLock

    argv = RUN if command == "run" else MERGE + ["{d}/w0.result"]
    out = d / f"held-{command}"
    with OutLock(out, command="hspZ the-holder", keep_empty=False):
        assert_refused(
            capfd,
            [a.format(d=d) for a in argv] + ["-o", str(out)],
            2,
            rf"^hspZ: --output: .*/held-{command} is in use by pid {os.getpid()} on "
            rf"\S+ since .* UTC \(hspZ the-holder\); wait for it to finish, or pass "
            rf"--wait$",
            d,
        )
    assert not out.exists()


def out_held_by_another_process_is_refused(d: Path, capfd) -> None:
    """`run` and `merge` into an OUT another process holds: refused, naming it."""
    out = d / "held-elsewhere"
    code = (
        "import sys, time\nfrom hspz.run.outdir import OutLock\n"
        "with OutLock(sys.argv[1], command='hspZ run -o elsewhere'):\n"
        "    print('held', flush=True)\n    time.sleep(120)\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(out)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline() == "held\n"
        for argv in (RUN, MERGE + ["{d}/w0.result"]):
            assert_refused(
                capfd,
                [a.format(d=d) for a in argv] + ["-o", str(out)],
                2,
                rf"--output: .*/held-elsewhere is in use by pid {holder.pid} on \S+ "
                rf"since .* \(hspZ run -o elsewhere\)",
                d,
            )
    finally:
        holder.kill()
        holder.wait()
    shutil.rmtree(out)
