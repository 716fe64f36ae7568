"""Command line: argument parsing and validation only; each command calls into the stages.

Every value is checked before any work; a bad one is a single `hspZ: ...` line and exit status 2,
and nothing is written.  No traceback reaches the user unless HSPZ_DEBUG=1.

    hspZ run            reference x query (or a --query-list) -> segments files
    hspZ index          a reference's seed tables, built once into a folder
    hspZ plan           freeze the plan(s) and the schedule for --gpus workers into a plan file
    hspZ work           run worker K of a plan file into one results file, resumable
    hspZ merge          replay results files into the outputs, byte-identical to `run`
    hspZ hits-estimate  exact seed hits per work unit, on the CPU, before any GPU work
    hspZ dotplot        a PNG of one job's HSPs        (the workflow's report)
    hspZ summarize      a table of a query list    (the workflow's report)
    hspZ gapped         lastz's gapped extension of one job's segments files
    hspZ compare        lastz --nogapped beside hspZ, and the parity verdict
    hspZ benchmark      cold + warm timed passes of one single-bin pair
    hspZ warm           compile the GPU kernels into CuPy's on-disk cache, once per machine
"""

from __future__ import annotations

import argparse
import functools
import os
import shlex
import signal
import sys
import threading
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from hspz import __version__
from hspz.core.errors import (
    HspzError,
    Terminated,
    UsageError,
    on_sigterm,
    out_of_memory,
    resending_hook,
)
from hspz.core.options import (
    HSPTHRESH_MAX,
    MAX_BP,
    MAX_HITS,
    MAX_PASSES,
    MAX_THREADS,
    MAX_WORKERS,
    XDROP_MAX,
    Options,
    parse_ambiguous,
    parse_choice,
    parse_int,
    parse_pattern,
    parse_prefix,
    parse_size,
    shown,
)

if TYPE_CHECKING:
    from hspz.planning import pricing
    from hspz.run.request import Request

# argparse dest -> Options field, for the flags that decide what is computed
FIELDS = {
    "notransition": "transition",
    "noentropy": "entropy",
    "lastz_interval_size": "interval_size",
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2, via the common handler
        raise UsageError(message)


def _add_run_options(p: argparse.ArgumentParser) -> None:
    """Flags that decide what is computed (shared by run, plan, hits-estimate, compare,
    benchmark).  Defaults are applied in `options_from_args`, so a flag given explicitly can be
    told from a default (a manifest replay checks the explicit ones)."""
    d = Options()
    a = p.add_argument
    a("-r", "--reference", help="reference FASTA, FASTA.gz or 2bit")
    a("-q", "--query", help="query FASTA, FASTA.gz or 2bit")
    a("-S", "--strand", help=f"plus, minus or both ({d.strand})")
    a("-s", "--seed", help=f"12of19, 14of22 or a pattern of 1/T and 0 ({d.seed})")
    a("-e", "--step", help=f"reference seed step ({d.step})")
    a("-n", "--notransition", action="store_true", default=None, help="no transition seeds")
    a("-x", "--xdrop", help=f"x-drop ({d.xdrop})")
    a("-H", "--hspthresh", help=f"score threshold ({d.hspthresh})")
    a("-E", "--noentropy", action="store_true", default=None, help="no entropy adjustment")
    a("-a", "--ambiguous", help="n, iupac, n,R,P or iupac,R,P")
    a("-c", "--scoring", help="LASTZ score-set file")
    a("-T", "--target-prefix", help="prefix for reference names in the output")
    a("-Q", "--query-prefix", help="prefix for query names in the output")
    a("-C", "--wga-chunk-size", help=f"bases per seed batch ({d.wga_chunk_size})")
    a("-I", "--lastz-interval-size", help=f"bases per output interval ({d.interval_size})")
    a(
        "-B",
        "--seq-block-size",
        help=f"reference bin target; 0 = automatic layout ({d.seq_block_size})",
    )
    a("--query-block-size", help="query bin target (= --seq-block-size)")
    a(
        "-m",
        "--max-hits",
        help=f"hits per semantic chunk; 0 = KegAlign's 4194304 x device GiB, "
        f"the CPU backend assuming a 16 GiB device ({d.max_hits})",
    )
    a("-t", "--threads", help="host threads, shared by the workers; 0 = all cores (0)")
    a("-G", "--gpus", help="workers, one device each where there are enough (1)")
    a("--backend", help="auto, gpu or cpu (auto: the GPU when one is visible)")
    a(
        "--kegalign-bins",
        action="store_true",
        default=None,
        help="KegAlign's sequential bins (never shrunk by the memory preflight)",
    )


def _given(ns: argparse.Namespace, name: str, default: Any) -> Any:
    value = getattr(ns, name, None)
    return default if value is None else value


def _text(ns: argparse.Namespace, name: str, default: object) -> str:
    return str(_given(ns, name, default))


def options_from_args(ns: argparse.Namespace) -> Options:
    """Validate every flag value into an Options (UsageError names the flag)."""
    d = Options()
    g = functools.partial(_text, ns)  # g(name, default): the flag's text, or the default's
    qbs = getattr(ns, "query_block_size", None)
    amb = getattr(ns, "ambiguous", None)
    bp = functools.partial(parse_size, minimum=1, maximum=MAX_BP)
    options = Options(
        strand=parse_choice("--strand", g("strand", d.strand), ("plus", "minus", "both")),
        seed=parse_pattern("--seed", g("seed", d.seed)),
        step=parse_int("--step", g("step", d.step), 1, MAX_BP),
        transition=not getattr(ns, "notransition", None),
        xdrop=parse_int("--xdrop", g("xdrop", d.xdrop), 1, XDROP_MAX),
        hspthresh=parse_int("--hspthresh", g("hspthresh", d.hspthresh), 1, HSPTHRESH_MAX),
        entropy=not getattr(ns, "noentropy", None),
        ambiguous=None if amb is None else parse_ambiguous("--ambiguous", amb),
        scoring=getattr(ns, "scoring", None),
        target_prefix=parse_prefix("--target-prefix", _given(ns, "target_prefix", "")),
        query_prefix=parse_prefix("--query-prefix", _given(ns, "query_prefix", "")),
        wga_chunk_size=bp("--wga-chunk-size", g("wga_chunk_size", d.wga_chunk_size)),
        interval_size=bp("--lastz-interval-size", g("lastz_interval_size", d.interval_size)),
        seq_block_size=parse_size(
            "--seq-block-size", g("seq_block_size", d.seq_block_size), 0, MAX_BP
        ),
        query_block_size=None if qbs is None else bp("--query-block-size", qbs),
        max_hits=parse_size("--max-hits", g("max_hits", d.max_hits), 0, MAX_HITS),
        threads=parse_int("--threads", g("threads", d.threads), 0, MAX_THREADS),
        gpus=parse_int("--gpus", g("gpus", d.gpus), 1, MAX_WORKERS),
        backend=parse_choice("--backend", g("backend", d.backend), ("auto", "gpu", "cpu")),
        kegalign_bins=bool(getattr(ns, "kegalign_bins", None)),
        diagonal_partition=bool(getattr(ns, "diagonal_partition", False)),
    )
    if options.scoring is not None:  # its scores are numbers too: checked before any work
        from hspz.core.scoring import read_score_file

        read_score_file(options.scoring)
    return options


def explicit_flags(ns: argparse.Namespace) -> set[str]:
    """Options fields whose flags were given on the command line."""
    names = {f for f in vars(ns) if getattr(ns, f) is not None}
    return {FIELDS.get(n, n) for n in names}


DEFAULT_TARBALL = object()  # -Z given without a PATH


def _add_outputs(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-D",
        "--diagonal-partition",
        action="store_true",
        help="split each segments file as KegAlign's diagonal_partition.py",
    )
    p.add_argument(
        "-Z",
        "--tarball",
        nargs="?",
        const=DEFAULT_TARBALL,
        metavar="PATH",
        help="one byte-reproducible .tar.gz instead of files (default OUT/segments.tar.gz)",
    )
    p.add_argument(
        "--wait",
        action="store_true",
        help="wait while another run or merge holds OUT, instead of refusing",
    )


def _add_manifest_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dump-plan", metavar="F", help="record -> bin table")
    p.add_argument("--dump-manifest", metavar="F", help="write the frozen plan")
    p.add_argument("--from-manifest", metavar="F", help="replay a frozen plan (validated)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="hspZ", description="Exact high-scoring segment pairs, LASTZ-style.")
    parser.add_argument("--version", action="version", version=f"hspZ {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = sub.add_parser("run", help="one reference against one query; writes segments files")
    _add_run_options(run)
    run.add_argument("-o", "--output", help="output directory (required, but with -u)")
    run.add_argument(
        "-y",
        "--time",
        action="store_true",
        help="phase times, lifecycle, peak RSS and the unit ledger",
    )
    run.add_argument("-d", "--hit-stats", action="store_true", help="hits-per-seed histogram")
    run.add_argument(
        "-u",
        "--cpu-only",
        action="store_true",
        help="stop after CPU preprocessing; print seed and hit counts",
    )
    run.add_argument("--dump-raw", metavar="F", help="every pre-dedup HSP")
    run.add_argument(
        "--query-list",
        metavar="FILE",
        help="a file of query paths (one a line): each is a job, written to "
        "OUT/000001/, ... with OUT/queries.tsv",
    )
    run.add_argument(
        "--index",
        metavar="DIR",
        help="load the reference bins from an index (`hspZ index`); "
        "--reference is then optional and verified in the background",
    )
    _add_manifest_flags(run)
    _add_outputs(run)

    plan = sub.add_parser("plan", help="freeze the plan and schedule for --gpus workers")
    _add_run_options(plan)
    plan.add_argument("-o", "--output", required=True, help="the plan file to write")
    plan.add_argument(
        "--query-list",
        metavar="FILE",
        help="plan every listed query as run --query-list does (a batch)",
    )
    plan.add_argument("--index", metavar="DIR", help="plan from an index (`hspZ index`)")
    plan.add_argument(
        "--sizes",
        metavar="FILE",
        help="also write each work job's memory (a TSV for a scheduler; hspz/commands/sizing.py)",
    )
    plan.add_argument(
        "--sizes-hits",
        action="store_true",
        help="--sizes counts every unit's seed hits for an expected runtime "
        "(hits-estimate's histograms: seconds and ~800 MB a query)",
    )
    _add_manifest_flags(plan)

    work = sub.add_parser("work", help="run one worker of a plan file")
    work.add_argument("--plan", required=True)
    work.add_argument("--worker", required=True)
    work.add_argument("-o", "--output", required=True, help="the results file to write")
    work.add_argument("--backend", default="auto")
    work.add_argument("-t", "--threads", default="0")
    work.add_argument("--device", help="device to use (default: worker mod visible devices)")
    work.add_argument(
        "--device-lock",
        metavar="DIR",
        help="take the first free device, one lock file per device in DIR "
        "(several work jobs on one machine)",
    )
    work.add_argument(
        "--index",
        metavar="DIR",
        help="load the reference bins from this index (default: the plan's)",
    )
    work.add_argument(
        "--units",
        metavar="DIR",
        help="where each finished unit is kept, so a rerun computes only the "
        "missing ones (default: RESULT.units)",
    )

    merge = sub.add_parser("merge", help="emit a plan's results files, as run would")
    merge.add_argument("--plan", required=True)
    merge.add_argument("-o", "--output", default=".")
    merge.add_argument("--ledger", metavar="F", help="write every unit's ledger row as a TSV")
    _add_outputs(merge)
    merge.add_argument("results", nargs="+", metavar="RESULT")

    est = sub.add_parser("hits-estimate", help="exact seed hits per work unit (CPU only)")
    _add_run_options(est)
    est.add_argument("--stride", default="1", help="count every N-th query window, scale by N")
    est.add_argument("--dump-plan", metavar="F")
    est.add_argument("--from-manifest", metavar="F")
    est.add_argument("--index", metavar="DIR", help="the reference's seed tables from an index")
    est.add_argument(
        "--ns-per-hit",
        metavar="NS",
        help="project each unit's GPU wall at this measured ns per seed hit (a "
        "6th column), and the wall at --gpus W from the run's partition",
    )
    est.add_argument(
        "--unit-ms", metavar="MS", help="with --ns-per-hit: a fixed cost per unit, in ms"
    )
    est.add_argument(
        "--worker-ms",
        metavar="MS",
        help="with --ns-per-hit: a fixed cost per worker (on its first unit), in ms",
    )
    est.add_argument(
        "--ref-ms-per-mbp",
        metavar="MS",
        help="with --ns-per-hit: ms per Mbp of reference bin, on each unit that "
        "starts a visit of that bin (its build and upload)",
    )
    est.add_argument(
        "--query-ms-per-mbp",
        metavar="MS",
        help="with --ns-per-hit: ms per Mbp of query bin, on every unit (its seed stream)",
    )
    est.add_argument(
        "--ns-per-hit-per-ref-gbp",
        metavar="NS",
        help="with --ns-per-hit: ns more per seed hit per Gbp of the unit's reference bin",
    )
    est.add_argument(
        "--pricing",
        metavar="FILE",
        help="the projection's coefficients as JSON (ns_per_hit, unit_ms, "
        "worker_ms, ref_ms_per_mbp, query_ms_per_mbp, "
        "ns_per_hit_per_ref_gbp; "
        "benchmarks/projection_fit.py writes one); flags given override it",
    )

    warm = sub.add_parser(
        "warm",
        help="compile the GPU kernels into CuPy's on-disk cache "
        "(once per machine and seed), so that a first run "
        "compiles none",
    )
    warm.add_argument(
        "-s",
        "--seed",
        help="the seed the runs will use: 12of19, 14of22 or a "
        f"pattern of 1/T and 0 ({Options().seed})",
    )

    idx = sub.add_parser("index", help="build a reference's seed tables once, into a folder")
    idx.add_argument("-r", "--reference", required=True, help="reference FASTA, FASTA.gz or 2bit")
    idx.add_argument("--index", required=True, help="the index folder to create (must not exist)")
    d = Options()
    idx.add_argument("-s", "--seed", help=f"12of19, 14of22 or a pattern of 1/T and 0 ({d.seed})")
    idx.add_argument("-e", "--step", help=f"reference seed step ({d.step})")
    idx.add_argument("-B", "--seq-block-size", help=f"reference bin target ({d.seq_block_size})")
    idx.add_argument(
        "--kegalign-bins", action="store_true", default=None, help="KegAlign's sequential bins"
    )
    idx.add_argument("-t", "--threads", help="host threads; 0 = all cores (0)")
    idx.add_argument("--backend", help="auto, gpu or cpu (the GPU builds the tables when chosen)")
    idx.add_argument("-y", "--time", action="store_true", help="phase times")
    idx.add_argument("-T", "--target-prefix", help=argparse.SUPPRESS)  # refused with a reason

    dot = sub.add_parser("dotplot", help="a PNG of one job's HSPs (the workflow's report)")
    dot.add_argument("--plan", required=True, help="the plan file the job belongs to")
    dot.add_argument("--job", default="1", help="the job's number in a batch plan (1)")
    dot.add_argument("--names", help="names.tsv: title the plots by the job's sheet name")
    dot.add_argument(
        "--distribution", help="also a PNG of the HSPs' score and length distributions"
    )
    dot.add_argument("-o", "--output", required=True, help="the PNG to write")
    dot.add_argument("segments", metavar="SEGMENTS", help="the job's folder or -Z archive")

    summ = sub.add_parser("summarize", help="one table of a batch: names, queries.tsv, ledger")
    summ.add_argument("--queries", required=True, help="the batch's queries.tsv")
    summ.add_argument("--names", required=True, help="names.tsv (sheet name -> job)")
    summ.add_argument("--ledger", required=True, help="merge --ledger's TSV")
    summ.add_argument(
        "--gapped",
        nargs="+",
        default=[],
        help="the jobs' gapped outputs, in job order (their alignments counted)",
    )
    summ.add_argument("--html", help="also the table as an HTML page (the report's)")
    summ.add_argument("--title", default="", help="the HTML page's heading")
    summ.add_argument("-o", "--output", required=True, help="the TSV to write")

    gap = sub.add_parser("gapped", help="lastz's gapped extension of one job's segments files")
    gap.add_argument("--plan", required=True, help="the plan file the job belongs to")
    gap.add_argument("--job", default="1", help="the job's number in a batch plan (1)")
    gap.add_argument(
        "--stage",
        default="all",
        choices=("all", "reference", "split", "extend"),
        help="all: every file into -o; reference: the plan's reference as the "
        "2bit lastz reads; split: the job's files in groups of at most "
        "--group-bytes into the groups file -o; extend: group --group of "
        "--groups into -o (all)",
    )
    gap.add_argument(
        "--format", default="maf", help="lastz --format: maf, maf-, axt, general, general- (maf)"
    )
    gap.add_argument("--lastz", default="lastz", help="the lastz program (lastz)")
    gap.add_argument("--lastz-flags", default="", help="more lastz flags, one string")
    gap.add_argument(
        "--group-bytes",
        default="1000000",
        help="split: a group's segments bytes at most, unless one file is larger (1000000)",
    )
    gap.add_argument("--groups", help="extend: the groups file --stage split wrote")
    gap.add_argument("--group", default="0", help="extend: the group's number, from 0 (0)")
    gap.add_argument("--reference-2bit", help="extend: the 2bit --stage reference wrote")
    gap.add_argument("-o", "--output", required=True, help="the alignments (or file) to write")
    gap.add_argument(
        "segments",
        metavar="SEGMENTS",
        nargs="?",
        help="the job's segments folder (not for --stage reference)",
    )

    cmp = sub.add_parser("compare", help="run lastz --nogapped beside hspZ and report parity")
    _add_run_options(cmp)
    cmp.add_argument("--lastz", default="lastz")
    cmp.add_argument("--keep", help="keep both sorted line sets in this directory")
    bench = sub.add_parser("benchmark", help="cold + warm timed passes of one single-bin pair")
    _add_run_options(bench)
    bench.add_argument("--warmup", default="1")
    bench.add_argument("--iterations", default="3")
    bench.add_argument("--json", help="append one JSON record per pass to this file")
    bench.add_argument("--index", help=argparse.SUPPRESS)  # refused with a reason
    bench.add_argument("--query-list", help=argparse.SUPPRESS)  # refused with a reason
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from hspz.core import durable

    before = _raise_on_sigterm()
    unraisable = sys.unraisablehook
    if before is not None:  # the main thread: an interrupt that C code discarded is sent again
        sys.unraisablehook = resending_hook(unraisable)
    durable.reset_inputs()  # each command registers its own (`outdir.check_disjoint`)
    if "hspz.planning.joblist" in sys.modules:  # a list is read once per command
        sys.modules["hspz.planning.joblist"].forget_lists()
    command = ""  # the command parsed: run, work and benchmark name -B and -t when memory is short
    try:
        argv = list(sys.argv[1:] if argv is None else argv)
        ns = build_parser().parse_args(argv)
        command = ns.command
        ns.command_line = shlex.join(["hspZ", *argv])  # the OUT lock's holder record
        return COMMANDS[command](ns)
    # an OSError: one the stages did not word themselves; a MemoryError: numpy's, under a ulimit
    # or an overcommit limit; a RuntimeError: a thread that could not start (no other)
    except (HspzError, OSError, MemoryError, RuntimeError) as exc:
        refused = out_of_memory(exc)
        if isinstance(exc, RuntimeError) and refused is None:
            raise  # a bug: its traceback
        if os.environ.get("HSPZ_DEBUG") == "1":
            traceback.print_exc()
        hint = LESS_MEMORY if refused and command in ("run", "work", "benchmark") else ""
        print(f"hspZ: {_one_line(exc)}{hint}", file=sys.stderr)
        return getattr(exc, "status", 1)
    except KeyboardInterrupt:
        print("hspZ: interrupted", file=sys.stderr)
        return 130
    except Terminated:
        print("hspZ: terminated (SIGTERM)", file=sys.stderr)
        return 143
    finally:
        durable.reset_inputs()
        sys.unraisablehook = unraisable
        if before is not None:
            signal.signal(signal.SIGTERM, before)


LESS_MEMORY = " (a smaller -B bin, or fewer -t threads on the CPU, needs less)"


def _one_line(exc: Exception) -> str:
    """The message (`out_of_memory`'s line for a refused resource), kept to one line whatever
    it quotes (a path or value with a newline)."""
    if (refused := out_of_memory(exc)) is not None:
        text = refused
    elif isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        text = f"{where}{exc.strerror or exc}"
    else:  # an HspzError (an HspzError is never an OSError or a MemoryError)
        text = str(exc)
    return shown(text, len(text))[1:-1]


def _raise_on_sigterm():
    """SIGTERM raises `Terminated` in the main thread, so the staged files and the worker
    processes are cleaned up as after Ctrl-C (the default action would leave the stage in OUT
    and the workers running on their devices).  The handler it replaced, or None."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, on_sigterm)


def entry() -> None:
    """The `hspZ` command: `main`, then exit without tearing the interpreter down.

    Before `main` returns every output is written and renamed and every worker process joined;
    what an ordinary exit adds is finalising the interpreter and, on the GPU, destroying the
    CUDA context: 0.24-0.29 s of a 2.3 s E. coli run on the H200."""
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # a closed pipe: what was printed is lost, so the exit says so
        code = code or 1
    os._exit(code)


def _need(ns: argparse.Namespace, *flags: str) -> None:
    for flag in flags:
        if not getattr(ns, flag.lstrip("-").replace("-", "_")):
            raise UsageError(f"{flag} is required")


def _writable_file(flag: str, path: str | None, make_folders: bool = False) -> None:
    """A file an output flag names can be written there (checked before any work)."""
    from hspz.run.outdir import check_output_file

    if path is not None:
        check_output_file(flag, path, make_folders)


def _inputs(ns: argparse.Namespace) -> dict[str, str | list[str] | None]:
    """The input paths a planning command reads, by flag (for `outdir.check_disjoint`): a
    query list's listed files too."""
    paths = {
        flag: getattr(ns, flag[2:].replace("-", "_"), None)
        for flag in (
            "--reference",
            "--query",
            "--scoring",
            "--from-manifest",
            "--index",
            "--query-list",
        )
    }
    if paths["--query-list"]:
        from hspz.planning.joblist import read_query_list

        paths["a query of --query-list"] = [
            q.path for q in read_query_list(paths["--query-list"])[0]
        ]
    return paths


def _dumps(ns: argparse.Namespace, inputs: dict, *flags: str) -> dict[str, list[str] | None]:
    """Each dump flag's files: its path, or in query-list mode every per-job name derived from it
    (`PATH.000001`, ...: `commands.query_list.suffixed`)."""
    from hspz.planning.joblist import job_name

    jobs = len(inputs.get("a query of --query-list") or [])
    out = {}
    for flag in flags:
        path = getattr(ns, flag[2:].replace("-", "_"), None)
        out[flag] = (
            None
            if path is None
            else [f"{path}.{job_name(k)}" for k in range(1, jobs + 1)]
            if jobs
            else [path]
        )
    return out


def _request(ns: argparse.Namespace, options: Options) -> Request:
    """Cross-flag checks shared by run and plan, then the command's request."""
    from hspz.core import knobs
    from hspz.run.request import Request

    _need_inputs(ns, options)
    knobs.read()  # a knob value docs/knobs.md calls an error stops the run before any work
    return Request(
        options,
        explicit_flags(ns),
        ns.reference,
        ns.query,
        ns.output,
        from_manifest=ns.from_manifest,
        dump_manifest=ns.dump_manifest,
        dump_plan=ns.dump_plan,
        index=getattr(ns, "index", None),
        query_list=getattr(ns, "query_list", None),
    )


def _query_list_flags(ns: argparse.Namespace, options: Options) -> None:
    """What query-list mode refuses (docs/workers.md, "Many queries against one reference")."""
    if ns.query is not None:
        raise UsageError("--query and --query-list cannot be combined: list every query")
    if not ns.query_list:
        raise UsageError("--query-list: an empty path")
    if not getattr(ns, "index", None):
        _need(ns, "--reference")
    for given, flag, why in (
        (options.seq_block_size == 0, "-B 0", "every job must plan to the same bins"),
        (options.kegalign_bins, "--kegalign-bins", "every job must plan to the same bins"),
        (
            getattr(ns, "from_manifest", None),
            "--from-manifest",
            "each job freezes its own plan; use --dump-manifest per job",
        ),
        (getattr(ns, "cpu_only", False), "--cpu-only", "it stops before any job runs"),
    ):
        if given:
            raise UsageError(f"{flag} cannot be combined with --query-list: {why}")


def _need_inputs(ns: argparse.Namespace, options: Options) -> None:
    """--query, and --reference unless an index gives the reference; the flags -B 0 and
    --index refuse."""
    index = getattr(ns, "index", None)
    query_list = getattr(ns, "query_list", None)
    if query_list is not None:
        _query_list_flags(ns, options)
    else:
        _need(ns, *(("--query",) if index else ("--reference", "--query")))
    if options.seq_block_size == 0 and options.kegalign_bins:
        raise UsageError("-B 0 (automatic layout) cannot be combined with --kegalign-bins")
    if index is not None:
        if not index:
            raise UsageError("--index: an empty path")
        if options.seq_block_size == 0:
            raise UsageError(
                "-B 0 (automatic layout) cannot be combined with --index: an "
                "index has its bins; give the -B it was built with"
            )
        if getattr(ns, "cpu_only", False):
            raise UsageError("--cpu-only cannot be combined with --index")


def _tarball(ns: argparse.Namespace) -> str | None:
    """The -Z archive's path; a PATH given is proven writable (OUT's default one is proven by
    OUT's lock)."""
    from hspz.run import outdir

    if ns.tarball is DEFAULT_TARBALL:
        return os.path.join(ns.output, outdir.DEFAULT_TARBALL)
    _writable_file("--tarball", ns.tarball, make_folders=True)
    return ns.tarball


def _own(tarball: str | None) -> tuple[str, ...]:
    return () if tarball is None else (tarball,)


def cmd_run(ns: argparse.Namespace) -> int:
    from hspz.commands.out_lock import warming

    options = options_from_args(ns)
    # numba loaded only where the engine runs in this process: one worker (a parent of worker
    # processes stays without it: its memory estimate has no numba), and not for -u
    with warming(
        "cpu" if ns.cpu_only else options.backend,
        numba=options.gpus == 1 and not ns.cpu_only,
        options=options,
    ):
        return _run(ns, options)


def _run(ns: argparse.Namespace, options: Options) -> int:
    """Every output path checked against every input; the request handed to `run_in_out`,
    with the checks of the output files that may lie in OUT (run once OUT is locked)."""
    from hspz.commands.out_lock import run_in_out
    from hspz.engine import backends
    from hspz.run import outdir

    if ns.output is None:
        if not ns.cpu_only:
            raise UsageError(
                "--output: give the folder the segments files go to (-o OUT); "
                "hspZ run never writes into the current folder unasked"
            )
        ns.output = "."  # -u writes nothing there
    req = _request(ns, options)
    req.tarball = _tarball(ns)
    inputs = _inputs(ns)
    outdir.check_disjoint(
        inputs,
        {
            "--tarball": req.tarball,
            **_dumps(ns, inputs, "--dump-manifest", "--dump-plan", "--dump-raw"),
        },
        {
            "--output": outdir.Tree(
                ns.output,
                writes=_own(req.tarball),
                claims=outdir.query_list_claims if req.query_list else outdir.publish_claims,
            )
        },
    )
    req.dump_raw, req.time, req.hit_stats, req.cpu_only = (
        ns.dump_raw,
        ns.time,
        ns.hit_stats,
        ns.cpu_only,
    )
    dumps = ("--dump-plan", "--dump-manifest") + (() if ns.cpu_only else ("--dump-raw",))
    return run_in_out(
        req,
        ns.wait,
        ns.command_line,
        lambda: backends.select(options),
        lambda: _writable_files(ns, *dumps),
    )


def _writable_files(ns: argparse.Namespace, *flags: str) -> None:
    for flag in flags:
        _writable_file(flag, getattr(ns, flag[2:].replace("-", "_")))


def cmd_plan(ns: argparse.Namespace) -> int:
    from hspz.commands.out_lock import warming
    from hspz.commands.plan import plan_command
    from hspz.engine import backends
    from hspz.run import outdir

    options = options_from_args(ns)
    req = _request(ns, options)
    inputs = _inputs(ns)
    outdir.check_disjoint(
        inputs,
        {
            "--output": ns.output,
            "--sizes": ns.sizes,
            **_dumps(ns, inputs, "--dump-manifest", "--dump-plan"),
        },
    )
    _writable_files(ns, "--output", "--dump-plan", "--dump-manifest", "--sizes")
    # the CUDA driver starts while the inputs are read (the plan reads the devices and their
    # free memory, not through CuPy: `engine.cuda_driver`); no numba: a plan runs no engine loop
    with warming(options.backend, numba=False, engine=False):
        return plan_command(
            req, lambda: backends.select(options, engine=False), ns.sizes, ns.sizes_hits
        )


def cmd_work(ns: argparse.Namespace) -> int:
    from hspz.commands.out_lock import warming
    from hspz.commands.work import work_command
    from hspz.engine import backends

    worker = parse_int("--worker", ns.worker, 0, MAX_WORKERS - 1)
    threads = parse_int("--threads", ns.threads, 0, MAX_THREADS)
    backend = parse_choice("--backend", ns.backend, ("auto", "gpu", "cpu"))
    device = None if ns.device is None else parse_int("--device", ns.device, 0, MAX_WORKERS - 1)
    _writable_file("--output", ns.output)
    for flag in ("--index", "--units", "--device-lock"):
        if getattr(ns, flag[2:].replace("-", "_")) == "":
            raise UsageError(f"{flag}: an empty path")
    options = Options(backend=backend, threads=threads)
    with warming(backend):
        return work_command(
            ns.plan,
            worker,
            ns.output,
            lambda: backends.select(options),
            threads,
            device,
            ns.index,
            ns.units,
            ns.device_lock,
        )


def cmd_merge(ns: argparse.Namespace) -> int:
    from hspz.commands.merge import merge_command

    tarball = _tarball(ns)
    if ns.ledger is not None:
        _writable_file("--ledger", ns.ledger, make_folders=True)
    return merge_command(
        ns.plan,
        ns.output,
        tarball,
        ns.diagonal_partition,
        ns.results,
        ns.wait,
        ns.command_line,
        ns.ledger,
    )


def cmd_estimate(ns: argparse.Namespace) -> int:
    from hspz.commands.estimate import estimate_command
    from hspz.run import outdir
    from hspz.run.request import Request

    options = options_from_args(ns)
    _need_inputs(ns, options)
    stride = parse_int("--stride", ns.stride, 1, MAX_BP)
    outdir.check_disjoint(_inputs(ns), {"--dump-plan": ns.dump_plan})
    _writable_file("--dump-plan", ns.dump_plan)
    req = Request(
        options,
        explicit_flags(ns),
        ns.reference,
        ns.query,
        from_manifest=ns.from_manifest,
        dump_plan=ns.dump_plan,
        index=ns.index,
    )
    pricing = pricing_from_args(ns)
    return estimate_command(req, stride, pricing)


PRICING_FLAGS = {
    "--ns-per-hit": "ns_per_hit",
    "--unit-ms": "unit_ms",
    "--worker-ms": "worker_ms",
    "--ref-ms-per-mbp": "ref_ms_per_mbp",
    "--query-ms-per-mbp": "query_ms_per_mbp",
    "--ns-per-hit-per-ref-gbp": "ns_per_hit_per_ref_gbp",
}


def pricing_from_args(ns: argparse.Namespace) -> pricing.Pricing | None:
    """hits-estimate's Pricing: --pricing FILE's coefficients, each flag given overriding its
    term; None when neither prices a projection.  --ns-per-hit must be above 0, a file's
    ns_per_hit may be 0 (a fit that found no per-hit cost), every other cost at least 0."""
    from hspz.planning.pricing import Pricing, read_file

    values = read_file(ns.pricing) if ns.pricing else {}
    given = []
    for flag, term in PRICING_FLAGS.items():
        text = getattr(ns, term)
        if text is not None:
            values[term] = parse_cost(flag, text, 0 if term == "ns_per_hit" else None)
            given.append(flag)
    if "ns_per_hit" not in values:
        if ns.pricing:
            raise UsageError(f"--pricing {ns.pricing} has no ns_per_hit: give --ns-per-hit too")
        if given:
            raise UsageError(f"{given[0]} prices a projection: give --ns-per-hit too")
        return None
    return Pricing(**values)


def parse_cost(flag: str, text: str, floor: float | None) -> float:
    """A projection's cost: a finite number below 1e9, above `floor` (at least 0 without)."""
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{flag}: {shown(text)} is not a number") from None
    if floor is not None and not floor < value < 1e9:
        raise UsageError(f"{flag}: {shown(text)} must be above {floor:g} and below 1e9")
    if floor is None and not 0 <= value < 1e9:
        raise UsageError(f"{flag}: {shown(text)} must be at least 0 and below 1e9")
    return value


def cmd_warm(ns: argparse.Namespace) -> int:
    from hspz.commands.warm import warm_command

    return warm_command(main, ns.seed)


def cmd_index(ns: argparse.Namespace) -> int:
    from hspz.commands.index import index_command
    from hspz.engine import backends

    if ns.target_prefix is not None:
        raise UsageError(
            "index: --target-prefix belongs to run; an index stores record names without a prefix"
        )
    options = options_from_args(ns)
    if options.seq_block_size == 0:
        raise UsageError("index: -B 0 (automatic layout) cannot build an index; give -B")
    if not ns.index:
        raise UsageError("--index: an empty path")
    from hspz.formats.index import build_names
    from hspz.run import outdir

    if os.path.lexists(ns.index) or Path(ns.index).name in ("", os.curdir, os.pardir):
        raise UsageError(
            f"--index: {ns.index} already exists; an index is never overwritten "
            f"(remove it or name another folder)"
        )
    outdir.check_disjoint(
        {"--reference": ns.reference},
        {"--index": [ns.index, *map(str, build_names(Path(ns.index)))]},
    )
    return index_command(options, ns.reference, ns.index, lambda: backends.select(options), ns.time)


def cmd_dotplot(ns: argparse.Namespace) -> int:
    from hspz.commands.dotplot import dotplot_command

    return dotplot_command(ns)


def cmd_summarize(ns: argparse.Namespace) -> int:
    from hspz.commands.summarize import summarize_command

    return summarize_command(ns)


def cmd_gapped(ns: argparse.Namespace) -> int:
    from hspz.commands.gapped import gapped_command

    return gapped_command(ns)


def cmd_compare(ns: argparse.Namespace) -> int:
    from hspz.run import outdir
    from hspz.tools import compare

    options = options_from_args(ns)
    _need(ns, "--reference", "--query")
    files = None if ns.keep is None else [os.path.join(ns.keep, n) for n in compare.KEPT]
    keeps = (
        outdir.Tree(ns.keep, lambda name: name in compare.KEPT, writes=tuple(files))
        if files is not None
        else None
    )
    outdir.check_disjoint(_inputs(ns), {"--keep": files}, {"--keep": keeps})
    return compare.main(options, ns.reference, ns.query, ns.lastz, ns.keep)


def cmd_benchmark(ns: argparse.Namespace) -> int:
    from hspz.run import outdir
    from hspz.tools import bench

    options = options_from_args(ns)
    if ns.index is not None:
        raise UsageError(
            "benchmark cannot use --index: it times building the reference bin "
            "too; use run --index --time"
        )
    if ns.query_list is not None:
        raise UsageError(
            "benchmark cannot use --query-list: it times one pair; use run --query-list --time"
        )
    _need(ns, "--reference", "--query")
    outdir.check_disjoint(_inputs(ns), {"--json": ns.json})
    _writable_file("--json", ns.json)
    warmup = parse_int("--warmup", ns.warmup, 0, MAX_PASSES)
    iterations = parse_int("--iterations", ns.iterations, 1, MAX_PASSES)
    return bench.main(options, ns.reference, ns.query, warmup, iterations, ns.json)


COMMANDS = {
    "run": cmd_run,
    "plan": cmd_plan,
    "work": cmd_work,
    "merge": cmd_merge,
    "hits-estimate": cmd_estimate,
    "index": cmd_index,
    "dotplot": cmd_dotplot,
    "summarize": cmd_summarize,
    "gapped": cmd_gapped,
    "compare": cmd_compare,
    "benchmark": cmd_benchmark,
    "warm": cmd_warm,
}
