# Input functions and parse-time facts for the report (report.smk) and the gapped stage
# (gapped.smk). Included after common.smk, whose BATCHES, WORK and RESULTS they read.
import csv


def _check_gapped_layout():
    """The gapped stage reads the segments folders, which tarball: true replaces."""
    for job in config["jobs"]:
        if job["gapped"] and job["tarball"]:
            fail(
                f"config: job {job['name']}: gapped: true needs the segments folders, "
                f"and tarball: true keeps only archives"
            )


_check_gapped_layout()


def sheet_name(wildcards):
    """The sheet name of query NNNNNN of a batch (names.tsv's row)."""
    return BATCHES[wildcards.batch][1][int(wildcards.n) - 1][0]


def gapped_parts(wildcards):
    """The group outputs of one query, in group order, once its split is known."""
    groups = checkpoints.hspz_gapped_split.get(
        batch=wildcards.batch, n=wildcards.n
    ).output
    with open(groups[0]) as lines:
        count = sum(1 for _ in lines)
    folder = f"{WORK}/{wildcards.batch}/gapped/{wildcards.n}"
    return [f"{folder}/part{g}.{wildcards.format}" for g in range(count)]


def summary_gapped(wildcards):
    """The batch's gapped outputs (counted in the summary), when the job makes them."""
    job = batch_job(wildcards)
    if not job["gapped"]:
        return []
    fmt = job["gapped_format"]
    return [
        f"{RESULTS}/gapped/{wildcards.batch}/{n}.{fmt}"
        for n in query_jobs(wildcards.batch)
    ]


def query_labels(wildcards):
    return {
        "job": wildcards.n,
        "query": sheet_name(wildcards),
        "batch": wildcards.batch,
    }


def gapped_labels(wildcards):
    return {**query_labels(wildcards), "format": wildcards.format}


def _hspz_version(plan):
    """The hspZ version a batch's plan was made with (its manifests' hspz_version line)."""
    try:
        with open(plan) as lines:
            for line in lines:
                if line.startswith("hspz_version "):
                    return line.split()[1]
    except OSError:
        pass
    return None


def _work_jobs(plan, workers):
    """How many work jobs the plan made, against the workers asked for."""
    try:
        made = planned_workers(plan)
    except (OSError, ValueError):
        return f"up to {workers} (not planned yet)"
    return f"{made} (workers: {workers})"


def _total_hsps(queries):
    try:
        with open(queries) as table:
            return sum(
                int(row["hsps"]) for row in csv.DictReader(table, delimiter="\t")
            )
    except (OSError, KeyError, ValueError):
        return None


def report_facts():
    """What the landing page (report/workflow.rst) names per batch: the reference, the query
    count, the settings and options, and once run, the hspZ version and the total HSPs.
    """
    facts = []
    for batch, (job, queries, options) in BATCHES.items():
        total = _total_hsps(f"{RESULTS}/{batch}/queries.tsv")
        facts.append(
            {
                "batch": batch,
                "reference": job["reference"],
                "queries": len(queries),
                "names": ", ".join(name for name, _ in queries[:6])
                + (", ..." if len(queries) > 6 else ""),
                "workers": job["workers"],
                "backend": job["backend"],
                "threads": job["threads"],
                "options": run_flags(options) or "(hspZ's defaults)",
                "work_jobs": _work_jobs(f"{WORK}/{batch}/plan.txt", job["workers"]),
                "gapped": (
                    f"{job['gapped_format']} by {job['lastz']} {job['lastz_flags']}".strip()
                    + f", at most {job['gapped_group_bytes']:,} segments bytes a job"
                    if job["gapped"]
                    else "no (gapped: false)"
                ),
                "version": _hspz_version(f"{WORK}/{batch}/plan.txt") or "not run yet",
                "hsps": "not run yet" if total is None else f"{total:,}",
            }
        )
    return facts


# Not a config key (the schema refuses one): the landing page's Jinja sees only the config, so
# the facts ride in it, computed when `snakemake --report` parses the workflow.
config["report_facts"] = report_facts()
