"""Looking at results: a dot plot of one query's HSPs and a summary table of a query-list run (the
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
from typing import TYPE_CHECKING, cast

import numpy as np

from hspz.core.durable import replaced
from hspz.core.errors import InputError

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

COLUMNS = (
    "ref_name",
    "ref_start",
    "ref_end",
    "query_name",
    "query_start",
    "query_end",
    "strand",
    "score",
)


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
            members = (tar.extractfile(m) for m in tar.getmembers() if m.isfile())
            return [f.read() for f in members if f is not None]  # None only for a non-file
    except (OSError, tarfile.TarError) as exc:
        raise InputError(f"{source}: no segments files or archive ({exc})") from None


def read_segments(texts: Sequence[bytes]) -> dict[str, np.ndarray]:
    """Every HSP line as columns (names as str arrays, coordinates and scores int64)."""
    data = b"".join(t if t.endswith(b"\n") or not t else t + b"\n" for t in texts)
    if not data:
        return {
            c: np.empty(0, np.int64 if c not in ("ref_name", "query_name", "strand") else "U1")
            for c in COLUMNS
        }
    try:
        rows = np.loadtxt(
            io.BytesIO(data), dtype=str, delimiter="\t", ndmin=2, encoding="utf-8", comments=None
        )
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"SEGMENTS: not segments lines ({exc})") from None
    if rows.shape[1] != len(COLUMNS):
        raise InputError(
            f"SEGMENTS: segments lines have {rows.shape[1]} columns, not {len(COLUMNS)}"
        )
    out = {c: rows[:, i] for i, c in enumerate(COLUMNS)}
    for c in ("ref_start", "ref_end", "query_start", "query_end", "score"):
        try:
            out[c] = out[c].astype(np.int64)
        except (ValueError, OverflowError):
            bad = next(v for v in out[c] if not v.lstrip("-").isdigit())
            raise InputError(
                f"SEGMENTS: the {c} column holds {bad!r}, not a whole number"
            ) from None
    if not np.isin(out["strand"], ("+", "-")).all():
        raise InputError("SEGMENTS: a strand other than + or -")
    return out


def check_names(h: dict[str, np.ndarray], ref: list[str], qry: list[str]) -> None:
    """Every HSP names records of the plan's job (a segments file of another job is not)."""
    for column, names, side in (("ref_name", ref, "reference"), ("query_name", qry, "query")):
        unknown = np.setdiff1d(np.unique(h[column]), np.array(names, dtype=str))
        if len(unknown):
            raise InputError(f"SEGMENTS: {unknown[0]!r} is not a {side} record of the plan's job")


def job_title(job: str, path: str, names: str | os.PathLike | None) -> str:
    """A job's plot title: its sheet name from names.tsv (name, job, path) when given."""
    if names is not None:
        try:
            rows = [line.split("\t") for line in Path(names).read_text().splitlines()[1:]]
        except OSError as exc:
            raise InputError(f"--names: cannot read {names}: {exc.strerror or exc}") from None
        for row in rows:
            if len(row) >= 2 and row[1] == job:
                return f"{row[0]} (job {job})"
        raise InputError(f"--names: {names} has no row for job {job}")
    return f"job {job}: {os.path.basename(path)}"


# a record axis shows record names as ticks with at most this many records, each named only
# when it spans this share of the axis; separator lines are all drawn up to SEPARATORS records,
# beyond that only around records spanning WIDE of the axis (a 767-contig assembly's hundreds
# of lines would grey the plot out)
NAMED, NAME_SHARE, SEPARATORS, WIDE = 40, 0.03, 100, 0.02


def record_index(names: np.ndarray, table: Sequence[str]) -> np.ndarray:
    """Each HSP's record as its index in `table` (one dict lookup per distinct name)."""
    where = {n: k for k, n in enumerate(table)}
    unique, inverse = np.unique(names, return_inverse=True)
    try:
        codes = np.array([where[n] for n in unique.tolist()], np.int64)
    except KeyError as exc:
        raise InputError(f"segments name a record the plan does not have: {exc}") from None
    return codes[inverse].reshape(-1) if len(names) else np.empty(0, np.int64)


def query_order(
    qidx: np.ndarray, score: np.ndarray, ref_pos: np.ndarray, n_records: int
) -> np.ndarray:
    """Query records ordered by the reference position of their best (highest-scoring) HSP,
    as mummerplot's and D-GENIES's layouts order contigs; ties by file order, records without
    HSPs last in file order.  The record indices, in plot order."""
    pos = np.full(n_records, np.inf)
    if len(qidx):
        best = np.lexsort((ref_pos, -score, qidx))
        first = np.unique(qidx[best], return_index=True)[1]
        pos[qidx[best][first]] = ref_pos[best][first]
    return np.lexsort((np.arange(n_records), pos))


def starts_of(lengths: Sequence[int], order: np.ndarray) -> np.ndarray:
    """Each record's start on an axis where the records lie end to end in `order`."""
    sizes = np.asarray(lengths, np.int64)
    starts = np.empty(len(sizes), np.int64)
    starts[order] = np.concatenate(([0], np.cumsum(sizes[order])[:-1]))
    return starts


def separators(lengths: Sequence[int], order: np.ndarray) -> np.ndarray:
    """The record boundaries worth a line (bp on the axis): every one between up to SEPARATORS
    records, else only those of records spanning at least WIDE of the axis."""
    span = np.asarray(lengths, np.int64)[order]
    ends = np.cumsum(span)
    inner = ends[:-1]
    if len(span) <= SEPARATORS:
        return inner
    wide = span >= WIDE * ends[-1]
    return inner[wide[:-1] | wide[1:]]


def named_ticks(
    names: Sequence[str], lengths: Sequence[int], order: np.ndarray
) -> tuple[np.ndarray, list[str]]:
    """Midpoints (bp) and names of the records wide enough to name, when there are few."""
    if not 1 < len(names) <= NAMED:
        return np.empty(0), []
    span = np.asarray(lengths, np.int64)[order]
    mid = np.cumsum(span) - span / 2
    keep = span >= NAME_SHARE * span.sum()
    shown = [_short(names[k]) for k in order[keep]]
    return mid[keep], shown


def _short(name: str, most: int = 18) -> str:
    return name if len(name) <= most else name[: most - 1] + "…"


def _axis_label(
    side: str, label: str, names: Sequence[str], lengths: Sequence[int], lines: int
) -> str:
    total = sum(lengths)
    what = f"{_short(names[0], 40)}, " if len(names) == 1 else f"{len(names):,} records, "
    note = (
        ""
        if len(names) < 2 or lines == len(names) - 1
        else f"; lines around records >= {WIDE:.0%} only"
    )
    return f"{side}: {label} ({what}{total / 1e6:,.2f} Mbp{note}), Mbp"


def dotplot(
    texts: Sequence[bytes],
    ref: tuple[list[str], list[int]],
    qry: tuple[list[str], list[int]],
    output: str | os.PathLike,
    title: str,
    labels: tuple[str, str] = ("reference", "query"),
) -> int:
    """Draw the HSPs into a PNG, reference across and query up, in Mbp, each side's records
    end to end (the reference in file order, the query's ordered by `query_order`), minus-strand
    HSPs on the query's forward coordinates in another colour; the number of HSPs."""
    from matplotlib.collections import LineCollection
    from matplotlib.ticker import FuncFormatter

    plt = _pyplot()
    h = read_segments(texts)
    check_names(h, ref[0], qry[0])
    ridx = record_index(h["ref_name"], ref[0])
    qidx = record_index(h["query_name"], qry[0])
    r_start = starts_of(ref[1], np.arange(len(ref[0])))
    rx0 = r_start[ridx] + h["ref_start"]
    rx1 = rx0 + (h["ref_end"] - h["ref_start"])
    q_order = query_order(qidx, h["score"], rx0, len(qry[0]))
    base = starts_of(qry[1], q_order)[qidx]
    minus = h["strand"] == "-"
    lengths = np.asarray(qry[1], np.int64)[qidx]
    # minus coordinates count on the reverse complement: back onto the forward strand
    qy0 = np.where(minus, lengths - h["query_start"] + 1, h["query_start"]) + base
    qy1 = np.where(minus, lengths - h["query_end"] + 1, h["query_end"]) + base
    fig, ax = plt.subplots(figsize=(8, 8), dpi=100)
    mbp = FuncFormatter(lambda x, _: f"{x / 1e6:g}")
    ax.xaxis.set_major_formatter(mbp)
    ax.yaxis.set_major_formatter(mbp)
    for strand, colour, name in ((~minus, "tab:blue", "+"), (minus, "tab:red", "-")):
        lines = np.stack(
            [np.stack([rx0[strand], qy0[strand]], 1), np.stack([rx1[strand], qy1[strand]], 1)], 1
        )
        # the (N, 2, 2) array LineCollection documents, which its stub types as a Sequence
        segments = cast("Sequence[np.ndarray]", lines)
        ax.add_collection(
            LineCollection(
                segments,
                colors=colour,
                linewidths=1.2,
                label=f"{name} strand ({int(strand.sum()):,} HSPs)",
            )
        )
    r_lines = separators(ref[1], np.arange(len(ref[0])))
    q_lines = separators(qry[1], q_order)
    for at, line in ((r_lines, ax.axvline), (q_lines, ax.axhline)):
        for x in at.tolist():  # a line per record boundary kept (at most a few hundred)
            line(x, color="0.82", linewidth=0.5, zorder=0)
    ax.set_xlim(0, max(sum(ref[1]), 1))
    ax.set_ylim(0, max(sum(qry[1]), 1))
    ax.set_xlabel(_axis_label("reference", labels[0], ref[0], ref[1], len(r_lines)))
    ax.set_ylabel(_axis_label("query", labels[1], qry[0], qry[1], len(q_lines)))
    for names, lens, order, make, rot in (
        (ref[0], ref[1], np.arange(len(ref[0])), ax.secondary_xaxis, 90),
        (qry[0], qry[1], q_order, ax.secondary_yaxis, 0),
    ):
        at, shown = named_ticks(names, lens, order)
        if shown:
            side = make("top" if make == ax.secondary_xaxis else "right")
            side.set_ticks(at, shown, fontsize=7, rotation=rot)
    ax.set_title(title)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    _save(fig, output)
    return len(h["score"])


def distribution(texts: Sequence[bytes], output: str | os.PathLike, title: str) -> int:
    """Histograms of the HSPs' scores and lengths (ref_end - ref_start), log-spaced bins, plus
    and minus strand stacked, into a PNG; the number of HSPs."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    plt = _pyplot()
    h = read_segments(texts)
    minus = h["strand"] == "-"
    length = h["ref_end"] - h["ref_start"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), dpi=100)
    for ax, values, what in (
        (axes[0], h["score"], "HSP score"),
        (axes[1], length, "HSP length (bp)"),
    ):
        if len(values):
            low, high = max(int(values.min()), 1), max(int(values.max()), 2)
            bins = np.geomspace(low, high * 1.0001, 41)
            ax.hist(
                [values[~minus], values[minus]],
                bins=bins,
                stacked=True,
                color=["tab:blue", "tab:red"],
                label=["+ strand", "- strand"],
            )
            ax.set_xscale("log")
            ax.set_yscale("log")
            subs = (1.0, 2.0, 5.0) if high / low <= 1e3 else (1.0,)
            ax.xaxis.set_major_locator(LogLocator(base=10, subs=subs))
            ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: _compact(x)))
            ax.xaxis.set_minor_formatter(NullFormatter())
            median = float(np.median(values))
            ax.axvline(
                median, color="0.3", linestyle="--", linewidth=0.8, label=f"median {median:,.0f}"
            )
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, "no HSPs", ha="center", va="center", transform=ax.transAxes)
        ax.set_xlabel(what)
        ax.set_ylabel("HSPs")
    fig.suptitle(f"{title}: {len(h['score']):,} HSPs")
    fig.tight_layout()
    _save(fig, output)
    return len(h["score"])


def _compact(x: float) -> str:
    """A tick value in few characters: 500, 20k, 1.5M."""
    for scale, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if x >= scale:
            return f"{x / scale:g}{unit}"
    return f"{x:g}"


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    return plt


def _save(fig: Figure, output: str | os.PathLike) -> None:
    from matplotlib import pyplot as plt

    with replaced(output, "--output") as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)


def read_table(flag: str, path: str, columns: Sequence[str]) -> pd.DataFrame:
    """A TSV as a DataFrame (job as text), with these columns; one InputError line naming the
    flag and the file for anything else (not text, not a table, a column missing)."""
    import pandas as pd

    if not Path(path).is_file():  # a FIFO or /dev/zero would be read for ever
        raise InputError(f"{flag}: {path}: not a regular file")
    try:
        table = pd.read_csv(path, sep="\t", dtype={"job": str}, encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{flag}: {path}: no such file") from None
    except (
        OSError,
        ValueError,
        UnicodeDecodeError,
        pd.errors.ParserError,
        pd.errors.EmptyDataError,
    ) as exc:
        raise InputError(
            f"{flag}: {path}: not a tab-separated table "
            f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
        ) from None
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise InputError(f"{flag}: {path}: no {', '.join(missing)} column(s)")
    return table


def listed_queries(queries: str) -> list[str]:
    """The query paths a query-list run's queries.tsv lists (none when it cannot be read: summarize
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


def summarize(
    queries: str,
    names: str,
    ledger: str,
    output: str,
    html: str | None = None,
    gapped: Sequence[str] = (),
    title: str = "",
) -> None:
    """One row per job: names.tsv's sheet name, queries.tsv's columns and the ledger's seeds,
    hits, raw HSPs and engine seconds summed over the job's units; with `gapped` (one file
    per job, in job order) its gapped alignments counted.  `html`: the same table as an HTML
    page, with a totals row, for the report."""
    table = read_table("--queries", queries, ("job",))
    sheet = read_table("--names", names, ("name", "job"))[["name", "job"]]
    units = read_table("--ledger", ledger, ("job", "seeds", "hits", "raw_hsps", "gpu_ms"))
    for column in ("seeds", "hits", "raw_hsps", "gpu_ms"):
        if not np.issubdtype(units[column].dtype, np.number):
            raise InputError(
                f"--ledger: {ledger}: the {column} column holds a value that is not a number"
            )
    work = units.groupby("job").agg(
        seeds=("seeds", "sum"),
        hits=("hits", "sum"),
        raw_hsps=("raw_hsps", "sum"),
        engine_ms=("gpu_ms", "sum"),
    )
    work["engine_s"] = (work.pop("engine_ms") / 1e3).round(3)
    out = sheet.merge(table, on="job", how="right").merge(work, on="job", how="left")
    if gapped:
        if len(gapped) != len(out):
            raise InputError(f"--gapped: {len(gapped)} file(s) for {len(out)} job(s)")
        out["gapped_alignments"] = [alignments(p) for p in gapped]
    with replaced(output, "--output") as tmp:
        out.to_csv(tmp, sep="\t", index=False)
    if html is not None:
        with replaced(html, "--html") as tmp:
            tmp.write_text(summary_html(out, title), encoding="utf-8")


def alignments(path: str | os.PathLike) -> int:
    """The alignments in a gapped output, by its suffix: MAF's `a` lines, AXT's blocks (a
    header, two sequence lines and a blank line), general's rows (past `#` lines)."""
    data = Path(path).read_bytes()
    fmt = Path(path).suffix.lstrip(".").rstrip("-")
    if fmt == "maf":
        return data.count(b"\na ") + data.startswith(b"a ")
    if fmt == "axt":
        return data.count(b"\n\n")
    lines = data.count(b"\n") + (bool(data) and not data.endswith(b"\n"))
    return lines - data.count(b"\n#") - data.startswith(b"#")


# the HTML summary's columns: (queries.tsv / ledger column, heading, what it holds)
SHOWN = (
    ("name", "name", "the sheet's name"),
    ("job", "job", "the job's number"),
    ("path", "file", "the query file"),
    ("bytes", "bytes", "the file's size"),
    ("blocks", "query bins", "query bins of the frozen plan"),
    ("units", "units", "work units (reference bins x query bins)"),
    ("seeds", "seeds", "query seed positions looked up"),
    ("hits", "hits", "seed hits extended"),
    ("hsps", "HSPs", "HSPs written"),
    ("gapped_alignments", "gapped", "gapped alignments lastz wrote"),
    ("engine_s", "engine s", "engine time of the job's units"),
    ("digest", "digest", "sha256 of the sorted segments lines, first 16 hex digits"),
    ("completion", "completion", "complete, or why not"),
)
_SUMMED = ("bytes", "units", "seeds", "hits", "hsps", "gapped_alignments", "engine_s")


def summary_html(table: pd.DataFrame, title: str) -> str:
    """The summary as a standalone HTML page: numbers right-aligned with thousands separators,
    a totals row, a heading tooltip and a legend saying what each column holds."""
    from html import escape

    shown = [c for c in SHOWN if c[0] in table.columns]
    body = []
    for _, row in table.iterrows():
        cells = []
        for key, _, _ in shown:
            value = row[key]
            if key == "path":
                value = os.path.basename(str(value))
            cells.append(_cell(value, key))
        body.append("<tr>" + "".join(cells) + "</tr>")
    totals = [f"<th>total ({len(table)} queries)</th>"] + [
        _cell(table[key].sum(), key) if key in _SUMMED else "<td></td>" for key, _, _ in shown[1:]
    ]
    head = "".join(f'<th title="{escape(what)}">{escape(name)}</th>' for _, name, what in shown)
    legend = "".join(f"<li><b>{escape(name)}</b>: {escape(what)}</li>" for _, name, what in shown)
    return (
        f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{escape(title)}"
        f"</title><style>{_CSS}</style></head><body><h2>{escape(title)}</h2>\n"
        f"<table><thead><tr>{head}</tr></thead><tbody>\n"
        + "\n".join(body)
        + f"\n</tbody><tfoot><tr>{''.join(totals)}</tr></tfoot></table>\n"
        f"<ul class='legend'>{legend}</ul></body></html>\n"
    )


_CSS = (
    "body{font-family:sans-serif;font-size:14px;margin:1em}"
    "table{border-collapse:collapse}th,td{border:1px solid #ccc;padding:3px 8px}"
    "thead th{background:#eef}tfoot th,tfoot td{background:#f6f6f6;font-weight:bold}"
    "td.n{text-align:right;font-variant-numeric:tabular-nums}"
    "td.t{font-family:monospace}.legend{color:#555;font-size:12px}"
)


def _cell(value: object, key: str) -> str:
    from html import escape

    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "<td></td>"
    if isinstance(value, (int, float, np.integer, np.floating)) and key != "job":
        text = f"{value:,.3f}" if key == "engine_s" else f"{int(value):,}"
        return f"<td class='n'>{text}</td>"
    return (
        f"<td class='t'>{escape(str(value))}</td>"
        if key == "digest"
        else f"<td>{escape(str(value))}</td>"
    )
