"""The command drivers, one module per command, each the list of its stages in order:

    run       read -> freeze (manifest) -> schedule -> workers -> emit -> report
    plan      read -> freeze -> schedule -> plan file
    work      plan file -> read -> one worker's units -> results file
    merge     plan file + results files -> emit
    estimate  read -> plan -> exact seed hits per unit (hits-estimate)

They share every stage call (`inputs`, `freeze`, `execute`), so `run` and the workflow's three
steps write the same bytes; `run` (one query or a query list) is `hspz.run.driver.drive`.
`Request` is what the CLI hands a planning command after validating its flags."""

from __future__ import annotations

from dataclasses import dataclass

from hspz.core.options import Options


@dataclass
class Request:
    """What a planning command was asked for (the CLI fills it after validation)."""

    options: Options
    explicit: set[str]
    reference: str | None  # None only with an index
    query: str
    output: str = "."
    tarball: str | None = None
    from_manifest: str | None = None
    dump_manifest: str | None = None
    dump_plan: str | None = None
    dump_raw: str | None = None
    time: bool = False
    hit_stats: bool = False
    cpu_only: bool = False
    index: str | None = None  # an index folder (`hspZ index`) instead of building the bins
    query_list: str | None = None  # a file of query paths: query-list mode (`commands.query_list`)
