"""`hspZ` under cProfile, for the workflow's rules (issue 25's overhead): put a script that runs
`python3 benchmarks/profile_hspz.py "$@"` on PATH as `hspZ`, set HSPZ_PROFILE_DIR, and every hspZ
process the workflow starts leaves DIR/COMMAND-PID.prof and a line in DIR/stamps.tsv (command,
pid, wall seconds from the interpreter's start to the end of `main`).  `--report DIR` prints each
profile's top functions by cumulative time."""

from __future__ import annotations

import os
import sys
import time


def profiled(argv: list[str]) -> None:
    import cProfile

    folder = os.environ["HSPZ_PROFILE_DIR"]
    profile = cProfile.Profile()
    profile.enable()
    from hspz.cli import main

    code = main(argv)
    profile.disable()
    name = f"{argv[0] if argv else 'none'}-{os.getpid()}"
    profile.dump_stats(os.path.join(folder, f"{name}.prof"))
    since = time.time() - START
    with open(os.path.join(folder, "stamps.tsv"), "a") as fh:
        fh.write(f"{name}\t{since:.3f}\n")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def report(folder: str, top: int = 35) -> None:
    import glob
    import pstats

    for path in sorted(glob.glob(os.path.join(folder, "*.prof"))):
        print(f"===== {os.path.basename(path)}")
        pstats.Stats(path).sort_stats("cumulative").print_stats(top)


START = time.time()  # close to the interpreter's start: nothing heavy is imported above
if __name__ == "__main__":
    if sys.argv[1:2] == ["--report"]:
        report(sys.argv[2])
    else:
        profiled(sys.argv[1:])
