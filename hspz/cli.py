"""Command line: argument parsing and validation only; each command calls into the stages.

Every value is checked before any work; a bad one is a single `hspZ: ...` line and exit status 2.
No traceback reaches the user unless HSPZ_DEBUG=1.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from collections.abc import Sequence

from hspz import __version__
from hspz.errors import HspzError, UsageError
from hspz.options import (
    Options,
    parse_ambiguous,
    parse_choice,
    parse_int,
    parse_pattern,
    parse_size,
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2, via the common handler
        raise UsageError(message)


def _add_run_options(p: argparse.ArgumentParser) -> None:
    """Flags that decide what is computed (shared by run, compare, hits-estimate, plan)."""
    d = Options()
    a = p.add_argument
    a("-r", "--reference")
    a("-q", "--query")
    a("-S", "--strand", default=d.strand)
    a("-s", "--seed", default=d.seed)
    a("-e", "--step", default=str(d.step))
    a("-n", "--notransition", action="store_true")
    a("-x", "--xdrop", default=str(d.xdrop))
    a("-H", "--hspthresh", default=str(d.hspthresh))
    a("-E", "--noentropy", action="store_true")
    a("-a", "--ambiguous")
    a("-c", "--scoring")
    a("-T", "--target-prefix", default="")
    a("-Q", "--query-prefix", default="")
    a("-C", "--wga-chunk-size", default=str(d.wga_chunk_size))
    a("-I", "--lastz-interval-size", default=str(d.interval_size))
    a("-B", "--seq-block-size", default=str(d.seq_block_size))
    a("--query-block-size")
    a("-m", "--max-hits", default=str(d.max_hits))
    a("-t", "--threads", default=str(d.threads))
    a("-G", "--gpus", default=str(d.gpus))
    a("--backend", default=d.backend)
    a("--kegalign-bins", action="store_true")


def options_from_args(ns: argparse.Namespace) -> Options:
    """Validate every flag value into an Options (UsageError names the flag)."""
    qbs = ns.query_block_size
    return Options(
        strand=parse_choice("--strand", ns.strand, ("plus", "minus", "both")),
        seed=parse_pattern("--seed", ns.seed),
        step=parse_int("--step", ns.step, 1),
        transition=not ns.notransition,
        xdrop=parse_int("--xdrop", ns.xdrop, 1),
        hspthresh=parse_int("--hspthresh", ns.hspthresh, 1),
        entropy=not ns.noentropy,
        ambiguous=None if ns.ambiguous is None else parse_ambiguous("--ambiguous", ns.ambiguous),
        scoring=ns.scoring,
        target_prefix=ns.target_prefix,
        query_prefix=ns.query_prefix,
        wga_chunk_size=parse_size("--wga-chunk-size", ns.wga_chunk_size, 1),
        interval_size=parse_size("--lastz-interval-size", ns.lastz_interval_size, 1),
        seq_block_size=parse_size("--seq-block-size", ns.seq_block_size, 0),
        query_block_size=None if qbs is None else parse_size("--query-block-size", qbs, 1),
        max_hits=parse_size("--max-hits", ns.max_hits, 0),
        threads=parse_int("--threads", ns.threads, 0),
        gpus=parse_int("--gpus", ns.gpus, 1),
        backend=parse_choice("--backend", ns.backend, ("auto", "gpu", "cpu")),
        kegalign_bins=ns.kegalign_bins,
        diagonal_partition=getattr(ns, "diagonal_partition", False),
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="hspZ", description="Exact high-scoring segment pairs, LASTZ-style.")
    parser.add_argument("--version", action="version", version=f"hspZ {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = sub.add_parser("run", help="one reference against one query; writes segments files")
    _add_run_options(run)
    run.add_argument("-o", "--output", default=".")
    run.add_argument("-y", "--time", action="store_true")
    run.add_argument("-u", "--cpu-only", action="store_true")
    run.add_argument("-Z", "--tarball", nargs="?", const="")
    run.add_argument("--dump-raw")
    run.add_argument("--dump-plan")
    run.add_argument("-D", "--diagonal-partition", action="store_true")

    cmp = sub.add_parser("compare", help="run lastz --nogapped beside hspZ and report parity")
    _add_run_options(cmp)
    cmp.add_argument("--lastz", default="lastz")
    cmp.add_argument("--keep", help="keep both sorted line sets in this directory")
    bench = sub.add_parser("benchmark", help="cold + warm timed passes of one single-bin pair")
    _add_run_options(bench)
    bench.add_argument("--warmup", default="1")
    bench.add_argument("--iterations", default="3")
    bench.add_argument("--json", help="append one JSON record per pass to this file")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        ns = build_parser().parse_args(argv)
        return COMMANDS[ns.command](ns)
    except HspzError as exc:
        if os.environ.get("HSPZ_DEBUG") == "1":
            traceback.print_exc()
        print(f"hspZ: {exc}", file=sys.stderr)
        return exc.status
    except KeyboardInterrupt:
        print("hspZ: interrupted", file=sys.stderr)
        return 130


def _need(ns: argparse.Namespace, *flags: str) -> None:
    for flag in flags:
        if not getattr(ns, flag.lstrip("-").replace("-", "_")):
            raise UsageError(f"{flag} is required")


def cmd_run(ns: argparse.Namespace) -> int:
    from hspz import backends, pipeline, report

    options = options_from_args(ns)
    _need(ns, "--reference", "--query")
    pipeline.check_output_dir(ns.output)
    engine = backends.select(options)
    t0 = time.perf_counter()
    inputs = pipeline.read_inputs(options, ns.reference, ns.query)
    if ns.dump_plan:
        report.write_plan(ns.dump_plan, inputs, options)
    if ns.cpu_only:
        return report.cpu_only(options, inputs)
    tarball = None
    if ns.tarball is not None:
        tarball = ns.tarball or os.path.join(ns.output, pipeline.DEFAULT_TARBALL)
    summary = pipeline.run(options, inputs, ns.output, engine, tarball,
                           progress=report.progress_printer())
    pipeline.print_counts(summary)
    if ns.dump_raw:
        report.write_raw(ns.dump_raw, summary)
    if ns.time:
        report.print_time(summary, time.perf_counter() - t0)
    print(f"digest: {summary.digest}")
    return 0


def cmd_compare(ns: argparse.Namespace) -> int:
    from hspz import compare

    options = options_from_args(ns)
    _need(ns, "--reference", "--query")
    return compare.main(options, ns.reference, ns.query, ns.lastz, ns.keep)


def cmd_benchmark(ns: argparse.Namespace) -> int:
    from hspz import bench

    options = options_from_args(ns)
    _need(ns, "--reference", "--query")
    warmup = parse_int("--warmup", ns.warmup, 0)
    iterations = parse_int("--iterations", ns.iterations, 1)
    return bench.main(options, ns.reference, ns.query, warmup, iterations, ns.json)


COMMANDS = {"run": cmd_run, "compare": cmd_compare, "benchmark": cmd_benchmark}
