"""A run's summary: its counts, digest, phases, unit ledger and worker reports, which `execute`
(the driver's execute stage) gathers and `report` prints (a module of its own, so that the
report names it without importing the executor that imports the report)."""

from __future__ import annotations

from dataclasses import dataclass, field

from hspz.formats.manifest import Manifest
from hspz.planning import estimate
from hspz.planning import memory as planning_memory
from hspz.planning import schedule as scheduling


@dataclass
class Summary:
    seeds: int = 0
    hits: int = 0
    raw_hsps: int = 0
    hsps: int = 0
    digest: str = ""
    results: list = field(default_factory=list)  # UnitResults, kept only for --dump-raw
    phases: dict = field(default_factory=dict)
    ledger: list = field(default_factory=list)  # per emitted unit: its ledger row
    reports: list = field(default_factory=list)  # WorkerReports
    hit_stats: estimate.HitHistogram | None = None
    manifest: Manifest | None = None
    schedule: scheduling.Schedule | None = None
    jobs: list = field(default_factory=list)  # the execution's Jobs (a query-list run: one each)
    query_list: bool = False  # a --query-list run: the ledger has a job column
    memory: planning_memory.HostEstimate | None = None  # the CPU preflight's estimate (`--time`)
