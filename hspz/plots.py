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

from hspz.errors import InputError
from hspz.manifest import replaced_atomically

COLUMNS = ("ref_name", "ref_start", "ref_end", "query_name", "query_start", "query_end",
           "strand", "score")


def segments_texts(source: str | os.PathLike) -> list[bytes]:
    """The bytes of every segments file of one job: a folder of them, or its -Z archive."""
    path = Path(source)
    if path.is_dir():
        return [p.read_bytes() for p in sorted(path.glob("*.segments"))]
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
    rows = np.loadtxt(io.BytesIO(data), dtype=str, delimiter="\t", ndmin=2)
    if rows.shape[1] != len(COLUMNS):
        raise InputError(f"segments lines have {rows.shape[1]} columns, not {len(COLUMNS)}")
    out = {c: rows[:, i] for i, c in enumerate(COLUMNS)}
    for c in ("ref_start", "ref_end", "query_start", "query_end", "score"):
        out[c] = out[c].astype(np.int64)
    return out


def dotplot(texts: Sequence[bytes], ref: tuple[list[str], list[int]],
            qry: tuple[list[str], list[int]], output: str | os.PathLike, title: str) -> int:
    """Draw the HSPs (reference across, query up, records end to end; minus-strand HSPs on the
    query's forward coordinates, in another colour) into a PNG; the number of HSPs."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    from matplotlib.collections import LineCollection

    h = read_segments(texts)
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
    with replaced_atomically(output, "--output: ") as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)
    return len(h["score"])


def _offsets(names: list[str], lengths: list[int]) -> dict[str, int]:
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
    return dict(zip(names, starts.tolist(), strict=True))


def summarize(queries: str, names: str, ledger: str, output: str) -> None:
    """One row per job: names.tsv's sheet name, queries.tsv's columns and the ledger's seeds,
    hits, raw HSPs and engine seconds summed over the job's units."""
    import pandas as pd

    table = pd.read_csv(queries, sep="\t", dtype={"job": str})
    sheet = pd.read_csv(names, sep="\t", dtype={"job": str})[["name", "job"]]
    units = pd.read_csv(ledger, sep="\t", dtype={"job": str})
    work = units.groupby("job").agg(seeds=("seeds", "sum"), hits=("hits", "sum"),
                                    raw_hsps=("raw_hsps", "sum"), engine_ms=("gpu_ms", "sum"))
    work["engine_s"] = (work.pop("engine_ms") / 1e3).round(3)
    out = sheet.merge(table, on="job", how="right").merge(work, on="job", how="left")
    with replaced_atomically(output, "--output: ") as tmp:
        out.to_csv(tmp, sep="\t", index=False)
