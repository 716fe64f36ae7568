"""Where a cold `hspZ run --backend gpu` spends its process wall, one cost per fresh process.

    python benchmarks/session5/stages.py REF QRY [RUNS]

Each row is a fresh `python3 -c ...` process, timed from outside (spawn to exit), RUNS times
(default 5), median and all: starting Python, then each import hspz needs on the GPU path,
numba's first function load, CUDA's start, then the whole run ending as a library call's does
and as the hspZ command's does (`cli.entry`: os._exit, no interpreter or CUDA teardown).
Last, one in-process run lists the numba functions the GPU path compiled or loaded.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

REF, QRY = sys.argv[1], sys.argv[2]
BACKEND = os.environ.get("BACKEND", "gpu")
RUNS = int(sys.argv[3]) if len(sys.argv) > 3 else 5
ARGS = f"['run', '-r', {REF!r}, '-q', {QRY!r}, '--backend', {BACKEND!r}, '-o', '/tmp/stages_out']"
NB = "import numpy as np; from hspz import sequence; sequence.score_codes(np.zeros(8, np.uint8))"
ROWS = [
    ("python3 -c pass", "pass"),
    ("import numpy", "import numpy"),
    ("import numpy, hspz.jit (numba, arraymath)", "import numpy; from hspz import jit"),
    ("... + first numba function (cached)", NB),
    ("import cupy", "import cupy"),
    ("import cupy, cupyx (lean)",
     "import cupy; from hspz import lean; lean.import_without('scipy.sparse', 'cupyx')"),
    ("import cupy + CUDA context", "import cupy; cupy.cuda.Device(0).mem_info"),
    ("import hspz.execute, hspz.engine.gpu",
     "from hspz import execute; from hspz.engine import gpu"),
    ("whole run, ordinary exit", f"from hspz.cli import main; main({ARGS})"),
    ("whole run, as the hspZ command (cli.entry)",
     f"import sys; sys.argv[1:] = {ARGS}; from hspz.cli import entry; entry()"),
]


def wall(code: str) -> float:
    t = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    if done.returncode:
        raise RuntimeError(done.stderr.strip().splitlines()[-1])
    return time.perf_counter() - t


def main() -> None:
    for label, code in ROWS:
        try:
            wall(code)  # warm the disk caches
            times = [wall(code) for _ in range(RUNS)]
        except RuntimeError as exc:
            print(f"{label:44s} failed: {exc}")
            continue
        print(f"{label:44s} median {statistics.median(times):6.3f} s  "
              + " ".join(f"{t:.3f}" for t in times), flush=True)
    code = (f"import gc; from hspz.cli import main; main({ARGS}); "
            "from numba.core.dispatcher import Dispatcher; "
            "print(sorted(f'{d.py_func.__module__}.{d.__name__}' for d in gc.get_objects() "
            "if isinstance(d, Dispatcher) and d.overloads))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    print("numba functions used:", out.stdout.strip().splitlines()[-1:] or out.stderr[-500:])


main()
