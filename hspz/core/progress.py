"""Progress of a run or a query-list run, inside units as well as between them.

Workers report each unit in flight as the share of its seed batches done and the seed hits
those held (`Progress.advance`), and each finished unit (`unit_done`); a query-list run also reports
each job it publishes (`job_done`).  On a terminal a tqdm bar shows units done of the total
(fractions of units in flight included), jobs done, seed hits per second and an ETA.  In a log
(stderr not a terminal: Snakemake, SLURM) one `progress:` line is printed each time another tenth of
the work is done, and one per finished job, so a long run is never silent:

    progress: 40% (3.2/8 units, 1/2 jobs), 1.21e+09 seed hits, 3.05e+08 hits/s, ETA 0:00:11

Everything here is called from the threads that receive results; one lock orders it.
"""

from __future__ import annotations

import sys
import threading
import time
from datetime import timedelta
from typing import TextIO


class Progress:
    def __init__(
        self, units: int, jobs: int = 1, stream: TextIO | None = None, terminal: bool | None = None
    ) -> None:
        self.units, self.jobs = max(units, 1), jobs
        self.stream = stream or sys.stderr
        self.terminal = _is_terminal(self.stream) if terminal is None else terminal
        self.lock = threading.Lock()
        self.t0 = time.perf_counter()
        self.in_flight: dict[object, tuple[float, int]] = {}  # unit key -> (share, hits)
        self.finished_units = 0
        self.finished_hits = 0
        self.finished_jobs = 0
        self.tenths = 0
        self.bar = None
        if self.terminal:
            from tqdm import tqdm

            self.bar = tqdm(
                total=self.units,
                unit="unit",
                file=self.stream,
                leave=True,
                dynamic_ncols=True,
                mininterval=0.5,
                bar_format="{l_bar}{bar}| {n:.1f}/{total_fmt} units "
                "[{elapsed}<{remaining}{postfix}]",
            )

    def advance(self, key: object, share: float, hits: int) -> None:
        """A unit in flight has done `share` of its seed batches, holding `hits` seed hits."""
        with self.lock:
            self.in_flight[key] = (min(max(share, 0.0), 1.0), hits)
            self._show()

    def unit_done(self, key: object, hits: int) -> None:
        with self.lock:
            self.in_flight.pop(key, None)
            self.finished_units += 1
            self.finished_hits += hits
            self._show()

    def job_done(self, line: str | None = None) -> None:
        """A job of the query-list run is complete (and published); `line` says so in a log."""
        with self.lock:
            self.finished_jobs += 1
            if self.bar is not None:
                self._show()
            elif line:
                print(line, file=self.stream)

    def close(self) -> None:
        with self.lock:
            if self.bar is not None:
                self.bar.close()
                self.bar = None

    # ----------------------------------------------------------------------------------------

    def _done(self) -> tuple[float, int]:
        units = self.finished_units + sum(s for s, _ in self.in_flight.values())
        hits = self.finished_hits + sum(h for _, h in self.in_flight.values())
        return min(units, self.units), hits

    def _show(self) -> None:
        units, hits = self._done()
        elapsed = max(time.perf_counter() - self.t0, 1e-9)
        if self.bar is not None:
            self.bar.n = units
            self.bar.set_postfix_str(
                f"{self.finished_jobs}/{self.jobs} jobs, {hits / elapsed:.3g} hits/s", refresh=False
            )
            self.bar.refresh()
            return
        tenths = int(10 * units / self.units + 1e-9)
        if tenths > self.tenths:
            self.tenths = tenths
            print(self.line(units, hits, elapsed), file=self.stream)

    def line(self, units: float, hits: int, elapsed: float) -> str:
        share = units / self.units
        eta = elapsed * (1 - share) / share if share > 0 else 0.0
        jobs = f", {self.finished_jobs}/{self.jobs} jobs" if self.jobs > 1 else ""
        return (
            f"progress: {100 * share:.0f}% ({units:.1f}/{self.units} units{jobs}), "
            f"{hits:.3g} seed hits, {hits / elapsed:.3g} hits/s, "
            f"ETA {timedelta(seconds=round(eta))}"
        )


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
