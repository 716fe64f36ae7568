"""The catalogue of bad inputs and numbers: each case is a bad input file, flag value or
environment knob that `hspZ` must refuse with one `hspZ:` line, exit status 2, no traceback,
its inputs unchanged and nothing written (`refusal.assert_refused`).  Each case names the
command it runs; `tests/test_refusals_<command>.py` runs that command's cases.

Classes (the id prefix): `fasta-` files no sequence can be read from, or whose records cannot be
told apart; `2bit-` the same for 2bit; `names-` record names and -T/-Q prefixes that would break
a segments line; `protein-` files that are not DNA; `numbers-` integer and size flags beyond what
the engine's types carry (options.py gives each bound's reason); `scoring-` score-set files LASTZ
refuses, or whose entries break the int32 bounds; `knobs-` environment knobs.

What LASTZ 1.04.22 (the installed `lastz`) does with the same inputs, tried one by one:
  - a file of headers only: "FAILURE: target file ... contains no sequence";
  - a protein FASTA: "FAILURE: bad fasta character ... (uppercase M)";
  - duplicate names, or names sharing their first word (FASTA or 2bit): read, giving lines that
    cannot be told apart; a \\x01 in a FASTA name is printed as is, a NUL ends the name; a 2bit
    name is cut at a TAB and printed with its newline (a line broken in two);
  - a 2bit file whose records are all empty: "FAILURE: bad 2bit length";
  - score files: missing row "row scores are for quantum DNA, but target is not", missing
    column or lowercase labels "missing bottleneck alphabet", no labels "invalid character
    code", repeated row or column "duplicate ... character code", an unknown or repeated
    setting "invalid name in assignment"; entries beyond int32 wrap (9999999999 became
    1410065407) and a 3 kbp identical pair scoring 3e9 loses its HSP to the overflow;
    hsp_thresh in the file changes its HSPs (hspZ refuses the line, naming --hspthresh);
  - seed patterns longer than 31: "cannot have length exceeding 31";
  - --xdrop 300000000 and --ambiguous=iupac,99999999999,2 run (its scores are int32 too).
The inputs LASTZ reads and hspZ now reads the same way (CR-only, CRLF, blanks before '>') and
the one it refuses that hspZ reads (a UTF-8 byte-order mark) are in test_readers.py.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from helpers import fasta_bytes, random_dna
from refusal import assert_refused
from scorefiles import HOXD70

from hspz.io.records import Record
from hspz.io.twobit import write_2bit

INSULIN = (
    "MALWMRLLPLLALLALWGPDPAAAFVNQHLCGSHLVEALYLVCGERGFFYTPKTRREAEDLQVGQVELGGGPGAGSLQPLAL"
    "EGSLQKRGIVEQCCTSICSLYQLENYCN"
)


def _dna(seed: int, n: int) -> bytes:
    return random_dna(np.random.default_rng(seed), n).tobytes()


def _fasta(records: list[tuple[bytes, bytes]]) -> bytes:
    return fasta_bytes(records)


GOOD = _fasta([(b"chr1 the first", _dna(1, 600)), (b"chr2", _dna(2, 400))])


def _run(d: Path, ref: str = "ref.fa", qry: str = "qry.fa") -> list[str]:
    return ["run", "-r", str(d / ref), "-q", str(d / qry), "-o", str(d / "out"), "--backend", "cpu"]


def _file(name: str, data: bytes | str, side: str = "ref") -> Callable[[Path], list[str]]:
    """A case whose reference (or query) is `data`, under `name`."""

    def make(d: Path) -> list[str]:
        raw = data.encode() if isinstance(data, str) else data
        (d / name).write_bytes(raw)
        return _run(d, ref=name) if side == "ref" else _run(d, qry=name)

    return make


def _twobit(names: list[str], seqs: list[bytes] | None = None) -> Callable[[Path], list[str]]:
    def make(d: Path) -> list[str]:
        bases = seqs or [_dna(i, 300) for i in range(len(names))]
        write_2bit(d / "ref.2bit", [Record(n, s) for n, s in zip(names, bases, strict=True)])
        return _run(d, ref="ref.2bit")

    return make


def _flags(*flags: str, command: str = "run") -> Callable[[Path], list[str]]:
    def make(d: Path) -> list[str]:
        if command == "run":
            return _run(d) + list(flags)
        return [command, "-r", str(d / "ref.fa"), "-q", str(d / "qry.fa"), *flags]

    return make


def _scoring(text: str) -> Callable[[Path], list[str]]:
    def make(d: Path) -> list[str]:
        (d / "scores.txt").write_text(text)
        return _run(d) + ["--scoring", str(d / "scores.txt")]

    return make


@dataclass
class Case:
    id: str
    make: Callable[[Path], list[str]]
    pattern: str
    env: dict = field(default_factory=dict)
    status: int = 2
    command: str = "run"


CASES = [
    # ---- fasta ------------------------------------------------------------------------------
    Case("fasta-headers-only", _file("ref.fa", ">a\n>b desc\n"), r"no sequence bases"),
    Case(
        "fasta-headers-only-query",
        _file("hq.fa", ">q1\n\n>q2\n", "qry"),
        r"hq\.fa: no sequence bases",
    ),
    Case("fasta-headers-only-crlf", _file("ref.fa", ">a\r\n>b\r\n"), r"no sequence bases"),
    Case(
        "fasta-headers-only-gzip",
        _file("ref.fa.gz", gzip.compress(b">a\n>b\n")),
        r"ref\.fa\.gz: no sequence bases",
    ),
    Case(
        "fasta-duplicate-name",
        _file("ref.fa", _fasta([(b"chr1", b"ACGT" * 20)] * 2)),
        r"record name 'chr1' is used twice \(records 1 and 2\)",
    ),
    Case(
        "fasta-duplicate-first-word",
        _file(
            "qry.fa",
            _fasta([(b"chrX a", b"ACGT" * 9), (b"chrY", b"AC"), (b"chrX b", b"GT")]),
            "qry",
        ),
        r"record name 'chrX' is used twice \(records 1 and 3\)",
    ),
    Case(
        "fasta-duplicate-name-bgzip",
        _file("ref.fa.gz", gzip.compress(b">a\nACGT\n") + gzip.compress(b">a\nGGCC\n")),
        r"ref\.fa\.gz: record name 'a' is used twice",
    ),
    Case(
        "fasta-duplicate-name-cr-only",
        _file("ref.fa", b">a x\rACGT\r>a\rACGT\r"),
        r"record name 'a' is used twice",
    ),
    Case("fasta-utf16", _file("ref.fa", ">a\nACGT\n".encode("utf-16")), r"UTF-16"),
    # ---- 2bit -------------------------------------------------------------------------------
    Case(
        "2bit-duplicate-name",
        _twobit(["chr1", "chr2", "chr1"]),
        r"ref\.2bit: record name 'chr1' is used twice \(records 1 and 3\)",
    ),
    Case("2bit-name-with-tab", _twobit(["chr1", "chr\t2"]), r"entry 2: record name 'chr\\t2'"),
    Case("2bit-name-with-space", _twobit(["chr 1"]), r"record name 'chr 1' holds ' '"),
    Case("2bit-name-with-newline", _twobit(["a\nb"]), r"record name 'a\\nb' holds '\\n'"),
    Case("2bit-name-with-nul", _twobit(["a\x00"]), r"holds '\\x00'"),
    Case("2bit-name-with-c1-control", _twobit(["a\x85b"]), r"holds '\\x85'"),
    Case("2bit-no-bases", _twobit(["a", "b"], [b"", b""]), r"no sequence bases"),
    # ---- names and prefixes -----------------------------------------------------------------
    Case(
        "names-fasta-nul",
        _file("ref.fa", b">b\x00x\nACGTACGT\n"),
        r"line 1: record name 'b\\x00x' holds '\\x00' at character 2",
    ),
    Case(
        "names-fasta-control-a",
        _file("ref.fa", b">ok\nACGT\n>b\x01x\nACGT\n"),
        r"line 3: record name 'b\\x01x'",
    ),
    Case("names-fasta-escape", _file("ref.fa", b">a\x1b[31mred\nACGT\n"), r"holds '\\x1b'"),
    Case("names-fasta-line-separator", _file("ref.fa", ">a\u2028b\nACGT\n"), r"holds '\\u2028'"),
    Case("names-fasta-no-break-space", _file("ref.fa", ">a\u00a0b\nACGT\n"), r"holds '\\xa0'"),
    Case("names-target-prefix-tab", _flags("-T", "ref\t"), r"--target-prefix: 'ref\\t' holds"),
    Case("names-target-prefix-space", _flags("--target-prefix", "my ref."), r"holds ' '"),
    Case("names-query-prefix-newline", _flags("-Q", "q\n"), r"--query-prefix: 'q\\n' holds"),
    Case("names-query-prefix-control", _flags("-Q", "\x01"), r"holds '\\x01'"),
    Case("names-query-prefix-nul", _flags("-Q", "q\x00"), r"--query-prefix: 'q\\x00' holds"),
    Case("names-prefix-not-utf8", _flags("-T", "ref\udcff"), r"--target-prefix: .* not valid UTF"),
    # ---- protein ----------------------------------------------------------------------------
    Case(
        "protein-reference",
        _file("ref.fa", f">sp|P01308|INS_HUMAN\n{INSULIN}\n"),
        r"ref\.fa: \d+% of the bases are not nucleotides",
    ),
    Case(
        "protein-query",
        _file("prot.fa", f">p1\n{INSULIN}\n>p2\n{INSULIN[::-1]}\n", "qry"),
        r"prot\.fa: .* not nucleotides",
    ),
    Case(
        "protein-lowercase-gzip",
        _file("ref.fa.gz", gzip.compress(f">p\n{INSULIN.lower()}\n".encode())),
        r"not nucleotides",
    ),
    # ---- numbers ----------------------------------------------------------------------------
    Case(
        "numbers-xdrop-past-int32-separator",
        _flags("-x", "300000000"),
        r"--xdrop: 300000000 must be at most 10000000",
    ),
    Case("numbers-xdrop-1e400", _flags("--xdrop", "1e400"), r"--xdrop: '1e400' is not an int"),
    Case("numbers-xdrop-non-ascii-digit", _flags("-x", "\u0663"), r"--xdrop: .* not an integer"),
    Case(
        "numbers-hspthresh-beyond-64-bits",
        _flags("-H", "99999999999999999999999"),
        r"--hspthresh: 99999999999999999999999 must be at most 2147483647",
    ),
    Case("numbers-hspthresh-past-int32", _flags("-H", "3000000000"), r"at most 2147483647"),
    Case(
        "numbers-step-beyond-64-bits",
        _flags("-e", "99999999999999999999999"),
        r"--step: .* must be at most 4294967295",
    ),
    Case("numbers-step-negative", _flags("--step", "-3"), r"--step: -3 must be at least 1"),
    Case(
        "numbers-chunk-1e400", _flags("-C", "1e400"), r"--wga-chunk-size: '1e400' must be at most"
    ),
    Case("numbers-chunk-inf", _flags("-C", "inf"), r"--wga-chunk-size: 'inf' is not a size"),
    Case("numbers-chunk-nan", _flags("-C", "nan"), r"'nan' is not a size"),
    Case("numbers-chunk-minus-zero", _flags("-C", "-0"), r"'-0' is not a size"),
    Case(
        "numbers-block-1e-400-is-not-zero",
        _flags("-B", "1e-400"),
        r"--seq-block-size: '1e-400' is not a whole number",
    ),
    Case("numbers-block-past-bin-limit", _flags("-B", "1e30"), r"must be at most 4294967295"),
    Case(
        "numbers-query-block-absurd",
        _flags("--query-block-size", "9" * 60),
        r"--query-block-size: .* too many digits",
    ),
    Case(
        "numbers-interval-past-positions",
        _flags("-I", "5G"),
        r"--lastz-interval-size: '5G' must be at most 4294967295",
    ),
    Case("numbers-max-hits-1e400", _flags("-m", "1e400"), r"--max-hits: '1e400' must be at most"),
    Case(
        "numbers-ambiguous-reward-past-int32",
        _flags("-a", "iupac,99999999999,2"),
        r"--ambiguous: 99999999999 must be at most 1000000",
    ),
    Case("numbers-ambiguous-penalty-float", _flags("-a", "n,1,2.5"), r"'2\.5' is not an integer"),
    Case("numbers-gpus-absurd", _flags("-G", "99999999999999999999"), r"--gpus: .* at most 1024"),
    Case("numbers-threads-absurd", _flags("-t", "99999999999"), r"--threads: .* at most 4096"),
    Case(
        "numbers-seed-longer-than-lastz",
        _flags("-s", "1111" + "0" * 30 + "1111"),
        r"--seed: .* spans 38 bases; a seed spans at most 31",
    ),
    Case("numbers-seed-control-character", _flags("-s", "1111\x0111111"), r"not a seed pattern"),
    Case(
        "numbers-estimate-stride-absurd",
        _flags("--stride", "99999999999999999999999", command="hits-estimate"),
        r"--stride: .* at most 4294967295",
        command="hits-estimate",
    ),
    Case(
        "numbers-benchmark-iterations-absurd",
        _flags("--iterations", "1" + "0" * 50, command="benchmark"),
        r"--iterations: .* at most 1000",
        command="benchmark",
    ),
    Case(
        "numbers-work-worker-absurd",
        lambda d: [
            "work",
            "--plan",
            str(d / "plan.txt"),
            "--worker",
            "9" * 30,
            "-o",
            str(d / "r.npz"),
        ],
        r"--worker: .* at most 1023",
        command="work",
    ),
    # ---- scoring ----------------------------------------------------------------------------
    Case(
        "scoring-missing-row",
        _scoring(HOXD70.rsplit("T", 1)[0]),
        r"the rows are 'A C G'; a DNA score set has A, C, G, T",
    ),
    Case(
        "scoring-missing-column",
        _scoring("   A C G\nA 91 -114 -31\nC -114 100 -125\nG -31 -125 100\n"),
        r"the columns are 'A C G'",
    ),
    Case(
        "scoring-no-labels",
        _scoring("91 -114 -31 -123\n-114 100 -125 -31\n-31 -125 100 -114\n-123 -31 -114 91\n"),
        r"line 1: '-114' is not a column label",
    ),
    Case(
        "scoring-duplicate-row",
        _scoring(HOXD70 + "G -31 -125 100 -114\n"),
        r"line 6: row 'G' appears twice",
    ),
    Case(
        "scoring-duplicate-column",
        _scoring(HOXD70.replace("T\n", "G\n", 1)),
        r"line 1: column 'G' appears twice",
    ),
    Case(
        "scoring-too-many-unlabelled-rows",
        _scoring("A C G T\n" + "1 2 3 4\n" * 5),
        r"line 6: more rows than columns",
    ),
    Case(
        "scoring-ragged-row", _scoring(HOXD70.replace("-123\n", "-123 7\n", 1)), r"line 2: 6 fields"
    ),
    Case(
        "scoring-entry-near-int32",
        _scoring(HOXD70.replace("91\n", "2147483600\n")),
        r"line 5: score '2147483600' is outside \+-1000000",
    ),
    Case(
        "scoring-entry-beyond-int32",
        _scoring(HOXD70.replace("A   91", "A 9999999999")),
        r"line 2: score '9999999999' is outside",
    ),
    Case(
        "scoring-float-entry",
        _scoring(HOXD70.replace("A   91", "A 91.5")),
        r"line 2: score '91\.5' is not an integer",
    ),
    Case("scoring-lowercase-labels", _scoring(HOXD70.lower()), r"the columns are 'a c g t'"),
    Case(
        "scoring-unknown-setting",
        _scoring("gap_opne = 400\n" + HOXD70),
        r"line 1: an unknown setting 'gap_opne'",
    ),
    Case(
        "scoring-repeated-setting",
        _scoring("fill = -100\nfill_score = -50\n" + HOXD70),
        r"line 2: a second setting 'fill_score'",
    ),
    Case(
        "scoring-hsp-threshold-setting",
        _scoring("hsp_thresh = 2000\n" + HOXD70),
        r"sets hsp_thresh, which LASTZ applies to the HSPs; give --hspthresh instead",
    ),
    Case(
        "scoring-bad-score-label-is-a-column",
        _scoring("bad_score = A:-5\n" + HOXD70),
        r"bad_score's label is also a matrix label",
    ),
    # ---- knobs ------------------------------------------------------------------------------
    Case(
        "knobs-unit-partition-2",
        _flags(),
        r"HSPZ_UNIT_PARTITION=2 is not one of",
        env={"HSPZ_UNIT_PARTITION": "2"},
    ),
    Case(
        "knobs-unit-partition-newline",
        _flags(),
        r"HSPZ_UNIT_PARTITION=1\\n0 is not one",
        env={"HSPZ_UNIT_PARTITION": "1\n0"},
    ),
    Case(
        "knobs-ref-buckets-word", _flags(), r"HSPZ_REF_BUCKETS=yes", env={"HSPZ_REF_BUCKETS": "yes"}
    ),
    Case(
        "knobs-bucket-shift-thousands-of-digits",
        _flags(),
        r"HSPZ_REF_BUCKET_SHIFT=.* 16 to 31",
        env={"HSPZ_REF_BUCKET_SHIFT": "1" * 5000},
    ),
    Case(
        "knobs-bucket-shift-newline",
        _flags(),
        r"HSPZ_REF_BUCKET_SHIFT=16\\n must be",
        env={"HSPZ_REF_BUCKET_SHIFT": "16\n"},
    ),
]


def make_case_dir(root: Path) -> Path:
    """`root` with a valid reference and query, for a case to spoil."""
    (root / "ref.fa").write_bytes(GOOD)
    (root / "qry.fa").write_bytes(GOOD.replace(b"chr", b"ctg"))
    return root


def params(command: str) -> list:
    """`command`'s cases, as pytest parameters with the cases' ids."""
    return [pytest.param(c, id=c.id) for c in CASES if c.command == command]


def check(case: Case, case_dir: Path, capfd, monkeypatch) -> None:
    """Run one case in `case_dir` (`make_case_dir`) and check that it is a clean refusal."""
    for name in ("HSPZ_UNIT_PARTITION", "HSPZ_REF_BUCKETS", "HSPZ_REF_BUCKET_SHIFT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in case.env.items():
        monkeypatch.setenv(name, value)
    argv = case.make(case_dir)
    assert argv[0] == case.command, (case.id, argv[0])
    assert_refused(capfd, argv, case.status, case.pattern, case_dir)
