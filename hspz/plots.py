"""Looking at results: a dot plot of one query's HSPs and a summary table of a batch (the
workflow's report; `hspZ dotplot`, `hspZ summarize`).

The segments lines are read back with numpy; matplotlib (headless, Agg) and pandas are the
workflow extra's and are imported only here.
"""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from hspz.durable import replaced
from hspz.errors import InputError

COLUMNS = ("ref_name", "ref_start", "ref_end", "query_name", "query_start", "query_end",
           "strand", "score")


def segments_texts(source: str | os.PathLike) -> list[bytes]:
    """The bytes of every segments file of one job: a folder of them, or its -Z archive."""
    path = Path(source)
    if path.is_dir():
        files = sorted(path.glob("*.segments"))
        if odd := [p for p in files if not p.is_file()]:
            raise InputError(f"SEGMENTS: {odd[0]} is not a regular file")
        return [p.read_bytes() for p in files]
    archive = path if path.is_file() else Path(f"{path}.tar.gz")
    try:
        with tarfile.open(archive, "r:gz") as tar:
            return [tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()]
    except (OSError, tarfile.TarError) as exc:
        raise InputError(f"{source}: no segments files or archive ({exc})") from None


def read_segments(texts: Sequence[bytes]) -> dict[str, np.ndarray]:
    """Every HSP line as columns (names as str arrays, coordinates and scores int64)."""
    data = b"".join(t if t.endswith(b"\n") or not t else t + b"\n" for t in texts)
    if not data:
        return {c: np.empty(0, np.int64 if c not in ("ref_name", "query_name", "strand") else
                            "U1") for c in COLUMNS}
    try:
        rows = np.loadtxt(io.BytesIO(data), dtype=str, delimiter="\t", ndmin=2,
                          encoding="utf-8", comments=None)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"SEGMENTS: not segments lines ({exc})") from None
    if rows.shape[1] != len(COLUMNS):
        raise InputError(f"SEGMENTS: segments lines have {rows.shape[1]} columns, not "
                         f"{len(COLUMNS)}")
    out = {c: rows[:, i] for i, c in enumerate(COLUMNS)}
    for c in ("ref_start", "ref_end", "query_start", "query_end", "score"):
        try:
            out[c] = out[c].astype(np.int64)
        except (ValueError, OverflowError):
            bad = next(v for v in out[c] if not v.lstrip("-").isdigit())
            raise InputError(f"SEGMENTS: the {c} column holds {bad!r}, not a whole "
                             f"number") from None
    if not np.isin(out["strand"], ("+", "-")).all():
        raise InputError("SEGMENTS: a strand other than + or -")
    return out


def check_names(h: dict[str, np.ndarray], ref: list[str], qry: list[str]) -> None:
    """Every HSP names records of the plan's job (a segments file of another job is not)."""
    for column, names, side in (("ref_name", ref, "reference"), ("query_name", qry, "query")):
        unknown = np.setdiff1d(np.unique(h[column]), np.array(names, dtype=str))
        if len(unknown):
            raise InputError(f"SEGMENTS: {unknown[0]!r} is not a {side} record of the plan's "
                             f"job")


def dotplot(texts: Sequence[bytes], ref: tuple[list[str], list[int]],
            qry: tuple[list[str], list[int]], output: str | os.PathLike, title: str) -> int:
    """Draw the HSPs (reference across, query up, records end to end; minus-strand HSPs on the
    query's forward coordinates, in another colour) into a PNG; the number of HSPs."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    from matplotlib.collections import LineCollection

    h = read_segments(texts)
    check_names(h, ref[0], qry[0])
    r_off = _offsets(*ref)
    q_off = _offsets(*qry)
    q_len = dict(zip(*qry, strict=True))
    rx0 = np.array([r_off[n] for n in h["ref_name"]], np.int64) + h["ref_start"]
    rx1 = rx0 + (h["ref_end"] - h["ref_start"])
    base = np.array([q_off[n] for n in h["query_name"]], np.int64)
    minus = h["strand"] == "-"
    lengths = np.array([q_len[n] for n in h["query_name"]], np.int64)
    # minus coordinates count on the reverse complement: back onto the forward strand
    qy0 = np.where(minus, lengths - h["query_start"] + 1, h["query_start"]) + base
    qy1 = np.where(minus, lengths - h["query_end"] + 1, h["query_end"]) + base
    fig, ax = plt.subplots(figsize=(7, 7), dpi=100)
    for strand, colour, name in ((~minus, "tab:blue", "+"), (minus, "tab:red", "-")):
        lines = np.stack([np.stack([rx0[strand], qy0[strand]], 1),
                          np.stack([rx1[strand], qy1[strand]], 1)], 1)
        ax.add_collection(LineCollection(lines, colors=colour, linewidths=1.2,
                                         label=f"{name} strand ({int(strand.sum())})"))
    for edges, line in ((r_off, ax.axvline), (q_off, ax.axhline)):
        for at in list(edges.values())[1:]:
            line(at, color="0.8", linewidth=0.6)
    ax.set_xlim(0, sum(ref[1]))
    ax.set_ylim(0, sum(qry[1]))
    ax.set_xlabel(f"reference ({len(ref[0])} records, {sum(ref[1]):,} bp)")
    ax.set_ylabel(f"query ({len(qry[0])} records, {sum(qry[1]):,} bp)")
    ax.set_title(title)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    with replaced(output, "--output") as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)
    return len(h["score"])


def _offsets(names: list[str], lengths: list[int]) -> dict[str, int]:
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
    return dict(zip(names, starts.tolist(), strict=True))


def read_table(flag: str, path: str, columns: Sequence[str]):
    """A TSV as a DataFrame (job as text), with these columns; one InputError line naming the
    flag and the file for anything else (not text, not a table, a column missing)."""
    import pandas as pd

    if not Path(path).is_file():  # a FIFO or /dev/zero would be read for ever
        raise InputError(f"{flag}: {path}: not a regular file")
    try:
        table = pd.read_csv(path, sep="\t", dtype={"job": str}, encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{flag}: {path}: no such file") from None
    except (OSError, ValueError, UnicodeDecodeError, pd.errors.ParserError,
            pd.errors.EmptyDataError) as exc:
        raise InputError(f"{flag}: {path}: not a tab-separated table "
                         f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") \
            from None
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise InputError(f"{flag}: {path}: no {', '.join(missing)} column(s)")
    return table


def listed_queries(queries: str) -> list[str]:
    """The query paths a batch's queries.tsv lists (none when it cannot be read: summarize
    then reports why)."""
    if not Path(queries).is_file():
        return []
    try:
        lines = Path(queries).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    head = lines[0].split("\t") if lines else []
    if "path" not in head:
        return []
    k = head.index("path")
    return [row.split("\t")[k] for row in lines[1:] if len(row.split("\t")) > k]


def summarize(queries: str, names: str, ledger: str, output: str) -> None:
    """One row per job: names.tsv's sheet name, queries.tsv's columns and the ledger's seeds,
    hits, raw HSPs and engine seconds summed over the job's units."""
    table = read_table("--queries", queries, ("job",))
    sheet = read_table("--names", names, ("name", "job"))[["name", "job"]]
    units = read_table("--ledger", ledger, ("job", "seeds", "hits", "raw_hsps", "gpu_ms"))
    for column in ("seeds", "hits", "raw_hsps", "gpu_ms"):
        if not np.issubdtype(units[column].dtype, np.number):
            raise InputError(f"--ledger: {ledger}: the {column} column holds a value that is "
                             f"not a number")
    work = units.groupby("job").agg(seeds=("seeds", "sum"), hits=("hits", "sum"),
                                    raw_hsps=("raw_hsps", "sum"), engine_ms=("gpu_ms", "sum"))
    work["engine_s"] = (work.pop("engine_ms") / 1e3).round(3)
    out = sheet.merge(table, on="job", how="right").merge(work, on="job", how="left")
    with replaced(output, "--output") as tmp:
        out.to_csv(tmp, sep="\t", index=False)
