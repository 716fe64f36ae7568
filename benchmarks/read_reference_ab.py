"""`hspZ index`'s reading of its reference, before and after the hostile pass of 2026-12-03:
three readers of the file at once (whole-file sha256, piece hashes, records) against one read
whose bytes are hashed while they are decoded (`commands.index.read_reference`).  Interleaved
rounds, medians, one JSON line each:

    python benchmarks/read_reference_ab.py /tmp/ib/ref.2bit [ROUNDS] [THREADS]
"""

import json
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from hspz.commands.index import read_reference
from hspz.formats import index as ix
from hspz.io.readers import read_side

ref = sys.argv[1]
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
threads = int(sys.argv[3]) if len(sys.argv) > 3 else 2


def old():
    with ThreadPoolExecutor(2) as pool:
        a = pool.submit(ix.file_sha256, ref)
        b = pool.submit(ix.file_pieces, ref, threads=threads)
        recs = read_side(ref, "reference")
        a.result()
        b.result()
    return recs


def new():
    return read_reference(ref, threads)[3]


read_side(ref, "reference")  # page cache, numba
res = {"old (3 readers)": [], "new (read once)": []}
for _ in range(rounds):
    for name, f in (("old (3 readers)", old), ("new (read once)", new)):
        t = time.perf_counter()
        r = f()
        res[name].append(round(time.perf_counter() - t, 3))
        del r
for k, v in res.items():
    print(json.dumps({"what": k, "median_s": statistics.median(v), "runs": v}))
