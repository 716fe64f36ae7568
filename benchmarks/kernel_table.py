"""Device time per kernel name from a profiler's CSV (`gpu_issue27.sh`'s kprof step): the
table behind the unit ledger's "rest" (CuPy's own kernels beside the project's).

    python3 benchmarks/kernel_table.py nsys|ncu FILE.csv

nsys: `nsys stats -r cuda_gpu_kern_sum -f csv` (one row per kernel name).  ncu: `ncu --csv
--metrics gpu__time_duration.sum` (one row per launch).  Names are cut at the first "(" or
"<" so that template instances and CuPy's generated names group by family.
"""

from __future__ import annotations

import csv
import io
import re
import sys
from collections import defaultdict


def family(name: str) -> str:
    name = name.strip().strip('"')
    name = re.split(r"[(<]", name, maxsplit=1)[0].strip()
    return re.sub(r"^void ", "", name) or "?"


def rows(text: str) -> list[dict[str, str]]:
    start = text.find('"')  # both tools may print lines before the CSV header
    return list(csv.DictReader(io.StringIO(text[start:] if start >= 0 else text)))


def main() -> None:
    tool, path = sys.argv[1], sys.argv[2]
    ns: dict[str, float] = defaultdict(float)
    launches: dict[str, int] = defaultdict(int)
    for row in rows(open(path, errors="replace").read()):
        if tool == "nsys":
            name, total, count = (
                row.get("Name", ""),
                row.get("Total Time (ns)"),
                row.get("Instances"),
            )
            if total is None:
                continue
            ns[family(name)] += float(total)
            launches[family(name)] += int(float(count or 0))
        else:
            if row.get("Metric Name") != "gpu__time_duration.sum":
                continue
            name = family(row.get("Kernel Name", ""))
            ns[name] += float(row["Metric Value"].replace(",", ""))
            launches[name] += 1
    total = sum(ns.values())
    print(f"kernels: {sum(launches.values())} launches, {total / 1e6:.1f} ms of device time")
    print(f"{'ms':>9} {'%':>6} {'launches':>8}  kernel")
    for name, t in sorted(ns.items(), key=lambda kv: -kv[1]):
        print(f"{t / 1e6:9.2f} {100 * t / total:6.1f} {launches[name]:8d}  {name[:90]}")


if __name__ == "__main__":
    main()
