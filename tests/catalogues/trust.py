"""The catalogue of paths a command may not trust: every name a command derives or reserves (an
index's build folder and lock, a batch's per-job dumps, OUT's lock and stage folders, a work's
unit folder), every report output (`dotplot`, `gapped`, `summarize`) and every foreign or edited
input, aimed at a user's file by the same path, a symbolic link or a hard link, is refused
before any work: exit 2, one `hspZ:` line, nothing under the case's directory changed.

Each case builds its own small directory (`Case`: a tiny reference, two queries, and only the
plan files, results, indexes and batch outputs the case needs) and goes through
`refusal.assert_refused`.  Each case carries its failure class (1: a derived or reserved
name; 2: a job entry no batch wrote; 5: an index against the plan's reference; 6: a list entry
is the file the OS opens; 7: bad tables, one exit status, every byte of a results file);
`command` says which command it runs, and `tests/test_refusals_<command>.py` runs that
command's cases.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from refusal import assert_refused

from hspz.cli import main

REF = (
    b">a\nACGTACGTAGCTAGCTAGCATCGATCGACTAGCTAGCATCGACTGACTGATCGATCGTAGCTAGTCGATCGATCGATGCTAG"
    b"CTAGTCGATCGATGCTAGCTAGCTAGCTAGCTAGCATCGAT\n"
)
Q1 = b">b\nCTAGCATCGATCGACTAGCTAGCATCGACTGACTGATCGATCGTAGCTAGTCGATCG\n"
Q2 = b">c\nGACTGATCGATCGTAGCTAGTCGATCGATCGATGCTAGCTAGTCGATCGA\n"
CPU = ["--backend", "cpu"]


class Case:
    """One case's directory: tr.fa, tq1.fa, tq2.fa, list.txt (both queries), a user's file
    and folder; the rest built on demand (each once)."""

    def __init__(self, d: Path):
        self.d = d
        (d / "tr.fa").write_bytes(REF)
        (d / "tq1.fa").write_bytes(Q1)
        (d / "tq2.fa").write_bytes(Q2)
        (d / "list.txt").write_text("tq1.fa\ntq2.fa\n")
        (d / "notes.txt").write_text("a user's notes\n")
        (d / "mine").mkdir()
        (d / "mine" / "thesis.txt").write_text("a user's folder\n")

    def __getitem__(self, name: str) -> str:
        return str(self.d / name)

    def ok(self, argv: list[str]) -> None:
        assert main(argv) == 0, argv

    def plan(self) -> str:
        """plan.txt: the single query tq1.fa; out1/ its run."""
        if not (self.d / "plan.txt").exists():
            self.ok(
                ["plan", "-r", self["tr.fa"], "-q", self["tq1.fa"], "-o", self["plan.txt"], *CPU]
            )
            self.ok(["run", "-r", self["tr.fa"], "-q", self["tq1.fa"], "-o", self["out1"], *CPU])
        return self["plan.txt"]

    def batch_plan(self) -> str:
        """bplan.txt over list.txt, w0.result its one worker's results, bout/ its batch run."""
        if not (self.d / "bplan.txt").exists():
            self.ok(
                [
                    "plan",
                    "-r",
                    self["tr.fa"],
                    "--query-list",
                    self["list.txt"],
                    "-o",
                    self["bplan.txt"],
                    *CPU,
                ]
            )
            self.ok(
                [
                    "work",
                    "--plan",
                    self["bplan.txt"],
                    "--worker",
                    "0",
                    "-o",
                    self["w0.result"],
                    *CPU,
                ]
            )
            self.ok(
                [
                    "run",
                    "-r",
                    self["tr.fa"],
                    "--query-list",
                    self["list.txt"],
                    "-o",
                    self["bout"],
                    *CPU,
                ]
            )
        return self["bplan.txt"]

    def index(self, name: str = "ix", reference: str = "tr.fa") -> str:
        if not (self.d / name).exists():
            self.ok(["index", "-r", self[reference], "--index", self[name], "-B", "1000", *CPU])
        return self[name]


def _other_reference(c: Case) -> None:
    """tr2.fa: tr.fa with one base changed (the same names and lengths)."""
    (c.d / "tr2.fa").write_bytes(REF.replace(b"ACGTACGTAG", b"ACGTACGTAC", 1))


def _flip_zip_header(path: Path) -> None:
    """Flip the modification-time bits of the first zip member's local header."""
    data = bytearray(path.read_bytes())
    assert data[:4] == b"PK\x03\x04"
    data[10] ^= 0x5A
    path.write_bytes(bytes(data))


def _bad_table(c: Case, name: str, text: bytes) -> str:
    (c.d / name).write_bytes(text)
    return c[name]


# (class, id, setup(case) -> argv, pattern): every one exits 2 with nothing changed
CASES = [
    # 1. derived names: the index's build folder and its lock
    (
        1,
        "index-lock-symlink-to-the-reference",
        lambda c: (
            os.symlink(c["tr.fa"], c["ix.tmp.lock"]),
            ["index", "-r", c["tr.fa"], "--index", c["ix"], *CPU],
        )[1],
        r"^hspZ: --index: .*/ix\.tmp\.lock ",
    ),
    (
        1,
        "index-lock-hard-link-to-a-users-file",
        lambda c: (
            os.link(c["notes.txt"], c["ix.tmp.lock"]),
            ["index", "-r", c["tr.fa"], "--index", c["ix"], *CPU],
        )[1],
        r"^hspZ: --index: .*/ix\.tmp\.lock ",
    ),
    (
        1,
        "index-lock-a-users-file",
        lambda c: (
            shutil.copy(c["notes.txt"], c["ix.tmp.lock"]),
            ["index", "-r", c["tr.fa"], "--index", c["ix"], *CPU],
        )[1],
        r"^hspZ: --index: .*/ix\.tmp\.lock ",
    ),
    (
        1,
        "index-build-folder-a-users-folder",
        lambda c: (
            shutil.copytree(c["mine"], c["ix.tmp"]),
            ["index", "-r", c["tr.fa"], "--index", c["ix"], *CPU],
        )[1],
        r"^hspZ: --index: .*/ix\.tmp ",
    ),
    (
        1,
        "index-build-folder-symlink-to-a-users-folder",
        lambda c: (
            os.symlink(c["mine"], c["ix.tmp"]),
            ["index", "-r", c["tr.fa"], "--index", c["ix"], *CPU],
        )[1],
        r"^hspZ: --index: .*/ix\.tmp ",
    ),
    (
        1,
        "index-build-folder-is-the-reference",
        lambda c: (
            shutil.copy(c["tr.fa"], c["ix.tmp"]),
            ["index", "-r", c["ix.tmp"], "--index", c["ix"], *CPU],
        )[1],
        r"^hspZ: --index: .*/ix\.tmp ",
    ),
    (
        1,
        "index-lock-is-the-reference",
        lambda c: (
            shutil.copy(c["tr.fa"], c["ix.tmp.lock"]),
            ["index", "-r", c["ix.tmp.lock"], "--index", c["ix"], *CPU],
        )[1],
        r"^hspZ: --index: .*/ix\.tmp\.lock ",
    ),
    (
        1,
        "index-folder-is-the-current-folder",
        lambda c: ["index", "-r", c["tr.fa"], "--index", ".", "-B", "1000", *CPU],
        r"^hspZ: --index: \. already exists",
    ),
    # 1. derived names: a batch's per-job dumps
    (
        1,
        "batch-dump-manifest-onto-a-listed-query",
        lambda c: (
            shutil.copy(c["tq2.fa"], c["m.000002"]),
            (c.d / "l2.txt").write_text("tq1.fa\nm.000002\n"),
            [
                "run",
                "-r",
                c["tr.fa"],
                "--query-list",
                c["l2.txt"],
                "-o",
                c["o"],
                "--dump-manifest",
                c["m"],
                *CPU,
            ],
        )[-1],
        r"^hspZ: --dump-manifest: .*/m\.000002 is a query of --query-list",
    ),
    (
        1,
        "batch-dump-plan-onto-a-symlinked-query",
        lambda c: (
            os.symlink(c["tq1.fa"], c["p.000001"]),
            [
                "plan",
                "-r",
                c["tr.fa"],
                "--query-list",
                c["list.txt"],
                "-o",
                c["bp.txt"],
                "--dump-plan",
                c["p"],
                *CPU,
            ],
        )[-1],
        r"^hspZ: --dump-plan: .*/p\.000001 is .*/tq1\.fa, a query of --query-list",
    ),
    (
        1,
        "batch-dump-raw-onto-a-hard-link-of-the-reference",
        lambda c: (
            os.link(c["tr.fa"], c["r.000002"]),
            [
                "run",
                "-r",
                c["tr.fa"],
                "--query-list",
                c["list.txt"],
                "-o",
                c["o"],
                "--dump-raw",
                c["r"],
                *CPU,
            ],
        )[-1],
        r"^hspZ: --dump-raw: .*/r\.000002 is .*/tr\.fa, the --reference input",
    ),
    (
        1,
        "batch-dump-manifest-onto-the-list",
        lambda c: (
            os.symlink(c["list.txt"], c["m.000001"]),
            [
                "run",
                "-r",
                c["tr.fa"],
                "--query-list",
                c["list.txt"],
                "-o",
                c["o"],
                "--dump-manifest",
                c["m"],
                *CPU,
            ],
        )[-1],
        r"^hspZ: --dump-manifest: .*/m\.000001 is .*/list\.txt, the --query-list input",
    ),
    # 1. report outputs onto the plan's reference or queries
    (
        1,
        "dotplot-output-is-the-plans-reference",
        lambda c: ["dotplot", "--plan", c.plan(), "-o", c["tr.fa"], c["out1"]],
        r"^hspZ: --output: .*/tr\.fa is the reference of --plan",
    ),
    (
        1,
        "dotplot-output-hard-link-to-the-plans-query",
        lambda c: (
            c.plan(),
            os.link(c["tq1.fa"], c["q.png"]),
            ["dotplot", "--plan", c["plan.txt"], "-o", c["q.png"], c["out1"]],
        )[-1],
        r"^hspZ: --output: .*/q\.png is .*/tq1\.fa, a query of --plan",
    ),
    (
        1,
        "gapped-output-is-another-jobs-query",
        lambda c: [
            "gapped",
            "--plan",
            c.batch_plan(),
            "--job",
            "1",
            "-o",
            c["tq2.fa"],
            c["bout/000001"],
        ],
        r"^hspZ: --output: .*/tq2\.fa is a query of --plan",
    ),
    (
        1,
        "summarize-output-is-a-query-of-the-batch",
        lambda c: (
            c.batch_plan(),
            (c.d / "names.tsv").write_text("name\tjob\nx\t000001\ny\t000002\n"),
            main(
                [
                    "merge",
                    "--plan",
                    c["bplan.txt"],
                    "-o",
                    c["mout"],
                    "--ledger",
                    c["ledger.tsv"],
                    c["w0.result"],
                ]
            ),
            [
                "summarize",
                "--queries",
                c["bout/queries.tsv"],
                "--names",
                c["names.tsv"],
                "--ledger",
                c["ledger.tsv"],
                "-o",
                c["tq1.fa"],
            ],
        )[-1],
        r"^hspZ: --output: .*/tq1\.fa is a query of --queries",
    ),
    # 1. reserved names in OUT and beside a results file
    (
        1,
        "out-lock-hard-link-to-a-users-file",
        lambda c: (
            (c.d / "o").mkdir(),
            os.link(c["notes.txt"], c["o/.hspz.lock"]),
            ["run", "-r", c["tr.fa"], "-q", c["tq1.fa"], "-o", c["o"], *CPU],
        )[-1],
        r"^hspZ: --output: .*/o/\.hspz\.lock ",
    ),
    (
        1,
        "out-lock-a-users-file",
        lambda c: (
            (c.d / "o").mkdir(),
            shutil.copy(c["notes.txt"], c["o/.hspz.lock"]),
            ["run", "-r", c["tr.fa"], "-q", c["tq1.fa"], "-o", c["o"], *CPU],
        )[-1],
        r"^hspZ: --output: .*/o/\.hspz\.lock ",
    ),
    (
        1,
        "work-units-folder-is-the-plans-query",
        lambda c: [
            "work",
            "--plan",
            c.plan(),
            "--worker",
            "0",
            "-o",
            c["w.result"],
            "--units",
            c["tq1.fa"],
            *CPU,
        ],
        r"^hspZ: --units: .*/tq1\.fa is a query of --plan",
    ),
    (
        1,
        "work-derived-units-folder-is-a-symlink-to-the-reference",
        lambda c: (
            c.plan(),
            os.symlink(c["tr.fa"], c["w.result.units"]),
            ["work", "--plan", c["plan.txt"], "--worker", "0", "-o", c["w.result"], *CPU],
        )[-1],
        r"^hspZ: --units: .*/w\.result\.units is .*/tr\.fa, the reference of --plan",
    ),
    # 1. the other commands that write
    (
        1,
        "compare-keep-file-is-a-hard-link-to-the-query",
        lambda c: (
            (c.d / "keep").mkdir(),
            os.link(c["tq1.fa"], c["keep/hspz.sorted"]),
            ["compare", "-r", c["tr.fa"], "-q", c["tq1.fa"], "--keep", c["keep"], *CPU],
        )[-1],
        r"^hspZ: --keep: .*/keep/hspz\.sorted is .*/tq1\.fa, the --query input",
    ),
    (
        1,
        "benchmark-json-symlink-to-the-query",
        lambda c: (
            os.symlink(c["tq1.fa"], c["b.json"]),
            ["benchmark", "-r", c["tr.fa"], "-q", c["tq1.fa"], "--json", c["b.json"], *CPU],
        )[-1],
        r"^hspZ: --json: .*/b\.json is .*/tq1\.fa, the --query input",
    ),
    (
        1,
        "estimate-dump-plan-hard-link-to-the-reference",
        lambda c: (
            os.link(c["tr.fa"], c["e.tsv"]),
            ["hits-estimate", "-r", c["tr.fa"], "-q", c["tq1.fa"], "--dump-plan", c["e.tsv"], *CPU],
        )[-1],
        r"^hspZ: --dump-plan: .*/e\.tsv is .*/tr\.fa, the --reference input",
    ),
    (
        1,
        "batch-dump-manifest-onto-a-query-with-a-hostile-name",
        lambda c: (
            shutil.copy(c["tq2.fa"], c["-x 'a b';$(touch y).fa"]),
            (c.d / "l3.txt").write_text("tq1.fa\n-x 'a b';$(touch y).fa\n"),
            os.symlink(c["-x 'a b';$(touch y).fa"], c["-m.000002"]),
            [
                "run",
                "-r",
                c["tr.fa"],
                "--query-list",
                c["l3.txt"],
                "-o",
                c["o"],
                "--dump-manifest",
                c["-m"],
                *CPU,
            ],
        )[-1],
        r"^hspZ: --dump-manifest: .*/-m\.000002 is .*/-x 'a b';\$\(touch y\)\.fa, "
        r"a query of --query-list",
    ),
    # 1. a -Z PATH at a name OUT's publish reserves (found by the adversarial pass)
    *[
        (
            1,
            f"tarball-at-outs-reserved-name-{name}",
            lambda c, name=name: [
                "run",
                "-r",
                c["tr.fa"],
                "-q",
                c["tq1.fa"],
                "-o",
                c["o"],
                "-Z",
                c[f"o/{name}"],
                *CPU,
            ],
            rf"^hspZ: --tarball: .*/o/{re.escape(name)} lies in the --output folder",
        )
        for name in (".hspz.lock", ".hspz-journal", ".hspz-stage-x", "tmp1.block0.r0.plus.segments")
    ],
    # 6. a list entry is the file the OS opens
    (
        6,
        "plan-output-onto-a-list-entry-reached-through-a-symlinked-folder",
        lambda c: (
            (c.d / "real" / "sub").mkdir(parents=True),
            shutil.copy(c["tq2.fa"], c["real/q.fa"]),
            shutil.copy(c["tq1.fa"], c["q.fa"]),
            (c.d / "real" / "sub" / "list.txt").write_text("../q.fa\n"),
            os.symlink(c["real/sub"], c["link"]),
            [
                "plan",
                "-r",
                c["tr.fa"],
                "--query-list",
                c["link/list.txt"],
                "-o",
                c["real/q.fa"],
                *CPU,
            ],
        )[-1],
        r"^hspZ: --output: .*/real/q\.fa is a query of --query-list",
    ),
    # 2. a job entry no batch wrote is never replaced or removed
    (
        2,
        "batch-into-an-out-holding-a-foreign-job-archive",
        lambda c: (
            (c.d / "o").mkdir(),
            shutil.copy(c["notes.txt"], c["o/000001.tar.gz"]),
            ["run", "-r", c["tr.fa"], "--query-list", c["list.txt"], "-o", c["o"], "-Z", *CPU],
        )[-1],
        r"^hspZ: --output: .*/o/000001\.tar\.gz is named like a batch job's output",
    ),
    (
        2,
        "merge-into-an-out-holding-a-foreign-job-folder",
        lambda c: (
            c.batch_plan(),
            shutil.copytree(c["mine"], c["mo/000002"]),
            ["merge", "--plan", c["bplan.txt"], "-o", c["mo"], c["w0.result"]],
        )[-1],
        r"^hspZ: --output: .*/mo/000002 is named like a batch job's output",
    ),
    # 2. merge checks every argument before it publishes the first byte
    (
        2,
        "merge-batch-results-given-twice-publishes-nothing",
        lambda c: [
            "merge",
            "--plan",
            c.batch_plan(),
            "-o",
            c["mout"],
            c["w0.result"],
            c["w0.result"],
        ],
        r"the results of worker 0 were given twice",
    ),
    (
        2,
        "merge-batch-results-given-twice-into-an-older-batch",
        lambda c: (
            c.batch_plan(),
            (c.d / "one.txt").write_text("tq2.fa\n"),
            main(["run", "-r", c["tr.fa"], "--query-list", c["one.txt"], "-o", c["old"], *CPU]),
            ["merge", "--plan", c["bplan.txt"], "-o", c["old"], c["w0.result"], c["w0.result"]],
        )[-1],
        r"the results of worker 0 were given twice",
    ),
    (
        2,
        "merge-batch-result-of-another-plan-after-a-good-one",
        lambda c: (
            c.batch_plan(),
            c.plan(),
            main(["work", "--plan", c["plan.txt"], "--worker", "0", "-o", c["s.result"], *CPU]),
            ["merge", "--plan", c["bplan.txt"], "-o", c["mout"], c["w0.result"], c["s.result"]],
        )[-1],
        r"s\.result: these results belong to another plan",
    ),
    # 5. work --index checked against the plan's reference
    (
        5,
        "work-index-of-another-reference-same-names-and-lengths",
        lambda c: (
            _other_reference(c),
            c.index("ix"),
            c.index("ix2", "tr2.fa"),
            main(
                [
                    "plan",
                    "--index",
                    c["ix"],
                    "-q",
                    c["tq1.fa"],
                    "-B",
                    "1000",
                    "-o",
                    c["ip.txt"],
                    *CPU,
                ]
            ),
            [
                "work",
                "--plan",
                c["ip.txt"],
                "--worker",
                "0",
                "--index",
                c["ix2"],
                "-o",
                c["w.result"],
                *CPU,
            ],
        )[-1],
        r"^hspZ: --index: .*/ix2: .*differ",
    ),
    (
        5,
        "work-index-of-another-reference-for-a-plan-made-from-the-fasta",
        lambda c: (
            _other_reference(c),
            c.index("ix2", "tr2.fa"),
            main(
                ["plan", "-r", c["tr.fa"], "-q", c["tq1.fa"], "-B", "1000", "-o", c["rp.txt"], *CPU]
            ),
            [
                "work",
                "--plan",
                c["rp.txt"],
                "--worker",
                "0",
                "--index",
                c["ix2"],
                "-o",
                c["w.result"],
                *CPU,
            ],
        )[-1],
        r"^hspZ: --index: .*/ix2: .*differ",
    ),
    # 7. loose ends: bad tables, one exit status, every byte of a results file
    (
        7,
        "summarize-a-queries-table-without-its-columns",
        lambda c: [
            "summarize",
            "--queries",
            _bad_table(c, "q.tsv", b"a\tb\n1\t2\n"),
            "--names",
            _bad_table(c, "n.tsv", b"name\tjob\nx\t000001\n"),
            "--ledger",
            _bad_table(c, "l.tsv", b"job\tseeds\n000001\t3\n"),
            "-o",
            c["s.tsv"],
        ],
        r"^hspZ: --queries: .*/q\.tsv: ",
    ),
    (
        7,
        "summarize-a-binary-table",
        lambda c: [
            "summarize",
            "--queries",
            _bad_table(c, "q.tsv", b"\x00\xff\xfe\x01PK\x03"),
            "--names",
            _bad_table(c, "n.tsv", b"name\tjob\nx\t000001\n"),
            "--ledger",
            _bad_table(c, "l.tsv", b"job\tseeds\n000001\t3\n"),
            "-o",
            c["s.tsv"],
        ],
        r"^hspZ: --queries: .*/q\.tsv: ",
    ),
    (
        7,
        "summarize-an-empty-ledger",
        lambda c: [
            "summarize",
            "--queries",
            _bad_table(c, "q.tsv", b"job\tpath\n000001\tx\n"),
            "--names",
            _bad_table(c, "n.tsv", b"name\tjob\nx\t000001\n"),
            "--ledger",
            _bad_table(c, "l.tsv", b""),
            "-o",
            c["s.tsv"],
        ],
        r"^hspZ: --ledger: .*/l\.tsv: ",
    ),
    (
        7,
        "dotplot-a-segments-file-with-a-word-for-a-number",
        lambda c: (
            c.plan(),
            (c.d / "seg").mkdir(),
            (c.d / "seg" / "tmp1.block0.r0.plus.segments").write_text(
                "a\tx\t20\tb\t1\t10\t+\t50\n"
            ),
            ["dotplot", "--plan", c["plan.txt"], "-o", c["d.png"], c["seg"]],
        )[-1],
        r"^hspZ: SEGMENTS: ",
    ),
    (
        7,
        "dotplot-a-segments-file-naming-another-record",
        lambda c: (
            c.plan(),
            (c.d / "seg").mkdir(),
            (c.d / "seg" / "tmp1.block0.r0.plus.segments").write_text(
                "zz\t1\t20\tb\t1\t10\t+\t50\n"
            ),
            ["dotplot", "--plan", c["plan.txt"], "-o", c["d.png"], c["seg"]],
        )[-1],
        r"^hspZ: SEGMENTS: ",
    ),
    (
        7,
        "gapped-a-segments-file-with-a-word-for-a-number",
        lambda c: (
            c.plan(),
            (c.d / "seg").mkdir(),
            (c.d / "seg" / "tmp1.block0.r0.plus.segments").write_text(
                "a\tx\t20\tb\t1\t10\t+\t50\n"
            ),
            ["gapped", "--plan", c["plan.txt"], "-o", c["g.maf"], c["seg"]],
        )[-1],
        r"^hspZ: SEGMENTS: ",
    ),
    (
        7,
        "work-an-edited-batch-query-exits-2",
        lambda c: (
            c.batch_plan(),
            (c.d / "tq2.fa").write_bytes(Q2.replace(b"GACTG", b"GACTC")),
            ["work", "--plan", c["bplan.txt"], "--worker", "0", "-o", c["w9.result"], *CPU],
        )[-1],
        r"tq2\.fa.*changed since",
    ),
    (
        7,
        "work-two-edited-batch-queries-name-the-first-job",
        lambda c: (
            c.batch_plan(),
            (c.d / "tq2.fa").write_bytes(Q2.replace(b"GACTG", b"GACTC")),
            (c.d / "tq1.fa").write_bytes(Q1 + Q1.replace(b">b", b">b2")),
            ["work", "--plan", c["bplan.txt"], "--worker", "0", "-o", c["w9.result"], *CPU],
        )[-1],
        r"^hspZ: job 000001 \(.*tq1\.fa\): the file changed since",
    ),
    (
        7,
        "work-a-batch-query-gone-is-named",
        lambda c: (
            c.batch_plan(),
            (c.d / "tq2.fa").unlink(),
            ["work", "--plan", c["bplan.txt"], "--worker", "0", "-o", c["w9.result"], *CPU],
        )[-1],
        r"^hspZ: job 000002 \(.*tq2\.fa\): cannot read it: No such file",
    ),
    (
        7,
        "merge-a-results-file-with-flipped-zip-header-bits",
        lambda c: (
            c.batch_plan(),
            shutil.copy(c["w0.result"], c["wf.result"]),
            _flip_zip_header(c.d / "wf.result"),
            ["merge", "--plan", c["bplan.txt"], "-o", c["mout"], c["wf.result"]],
        )[-1],
        r"wf\.result: .*(checksum|damaged)",
    ),
]


# the command of a case, by the start of its id (checked against the argv it builds)
COMMANDS = (
    ("index-", "index"),
    ("batch-dump-plan-", "plan"),
    ("batch-", "run"),
    ("dotplot-", "dotplot"),
    ("gapped-", "gapped"),
    ("summarize-", "summarize"),
    ("out-lock-", "run"),
    ("tarball-", "run"),
    ("work-", "work"),
    ("plan-", "plan"),
    ("merge-", "merge"),
    ("compare-", "compare"),
    ("benchmark-", "benchmark"),
    ("estimate-", "hits-estimate"),
)


def command(case_id: str) -> str:
    return next(cmd for prefix, cmd in COMMANDS if case_id.startswith(prefix))


def params(of: str) -> list:
    """The cases `of` runs, as pytest parameters (setup, pattern) named `class<N>-<id>`."""
    return [
        pytest.param(setup, pattern, id=f"class{cls}-{case}")
        for cls, case, setup, pattern in CASES
        if command(case) == of
    ]


def check(tmp_path: Path, capfd, monkeypatch, setup, pattern: str, of: str) -> None:
    """Build one case in `tmp_path` and check that `of` refuses it, nothing changed."""
    monkeypatch.chdir(tmp_path)
    argv = setup(Case(tmp_path))
    assert argv[0] == of, argv
    assert_refused(capfd, argv, 2, pattern, tmp_path, chatter=True)
