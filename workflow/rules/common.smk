# Config helpers and input functions for the hspZ rules (no rules here).
#
# A job of the config pairs one reference with a list of queries (`query`, a `queries` sheet
# or a `query_list` file). Its queries form one batch, `hspZ run --query-list` split into
# index -> plan -> work[0..W-1] -> merge, whose merge writes results/<job>/ (000001/, ...,
# queries.tsv) and names.tsv (sheet name -> job number). Sheet rows that carry their own
# run options form batches of their own, results/<job>/<group>/. Intermediates live under
# work/ (config key `work`), logs under logs/.
import hashlib
import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import yaml
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

SCHEMA = Path(workflow.current_basedir).parent / "schemas" / "config.schema.yaml"


def check_config(config):
    """Validate the config against the schema (filling its defaults); a bad config is one
    line naming the key, not the validator's dump."""
    for k, job in enumerate(config.get("jobs") or []):
        given = [
            key for key in ("query", "queries", "query_list") if key in (job or {})
        ]
        if isinstance(job, dict) and len(given) != 1:
            raise WorkflowError(
                f"config: jobs[{k}] ({job.get('name', '?')}) needs exactly one "
                f"of query, queries and query_list (has {given or 'none'})"
            )
    try:
        validate(config, str(SCHEMA))
    except WorkflowError:
        schema = yaml.safe_load(SCHEMA.read_text())
        error = best_match(Draft202012Validator(schema).iter_errors(config))
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.path)
        raise WorkflowError(f"config{where}: {error.message}") from None


check_config(config)
RESULTS = config.get("results", "results")
WORK = config.get("work", "work")
LOGS = config.get("logs", "logs")

# run options that decide the reference's bins and tables: the index's, never per query
INDEX_OPTIONS = ("seed", "step", "seq_block_size", "kegalign_bins")
FLAG = {"notransition": "--notransition", "noentropy": "--noentropy"}


wildcard_constraints:
    batch=r"[A-Za-z0-9][A-Za-z0-9._-]*(/g[0-9]+)?",
    k=r"[0-9]+",
    n=r"[0-9]{6}",
    index=r"[A-Za-z0-9._-]+",


def _sheet(job):
    """(name, path, per-query options) of every query of a config job, in sheet order."""
    for key in ("queries", "query_list"):
        if key in job and not Path(job[key]).is_file():
            raise WorkflowError(
                f"config: job {job['name']}: {key}: {job[key]} is not a file "
                f"(paths are relative to the working directory)"
            )
    if "query" in job:
        return [(Path(job["query"]).name, job["query"], {})]
    if "query_list" in job:
        folder = Path(job["query_list"]).parent
        rows = []
        for line in Path(job["query_list"]).read_text().splitlines():
            entry = line.strip()
            if entry and not entry.startswith("#"):
                path = entry if os.path.isabs(entry) else str(folder / entry)
                rows.append((Path(entry).name, path, {}))
        return rows
    sheet = pd.read_csv(job["queries"], sep="\t", dtype=str, comment="#").fillna("")
    missing = {"name", "path"} - set(sheet.columns)
    if missing:
        raise WorkflowError(
            f"{job['queries']}: the sheet needs the columns name and path "
            f"(tab-separated; it has {', '.join(sheet.columns)})"
        )
    if sheet["name"].duplicated().any():
        dup = sheet["name"][sheet["name"].duplicated()].iloc[0]
        raise WorkflowError(f"{job['queries']}: the name {dup!r} is used twice")
    extra = [c for c in sheet.columns if c not in ("name", "path")]
    folder = Path(job["queries"]).parent
    rows = []
    for _, row in sheet.iterrows():
        path = row["path"] if os.path.isabs(row["path"]) else str(folder / row["path"])
        options = {c: _value(row[c]) for c in extra if row[c] != ""}
        rows.append((row["name"], path, options))
    return rows


def _value(text):
    """A sheet cell as the YAML value it would be: true/false/integers stay typed."""
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    return int(text) if text.lstrip("-").isdigit() else text


def _batches(jobs):
    """batch id -> (job, its queries [(name, path)], its options), groups in sheet order."""
    out = {}
    for job in jobs:
        groups = {}
        for name, path, own in _sheet(job):
            bad = sorted(set(own) & set(INDEX_OPTIONS))
            if bad:
                raise WorkflowError(
                    f"job {job['name']}: {bad[0]} decides the reference bins and "
                    f"cannot vary per query"
                )
            options = {**job["options"], **own}
            key = json.dumps(options, sort_keys=True)
            groups.setdefault(key, (options, []))[1].append((name, path))
        several = len(groups) > 1
        for g, (options, queries) in enumerate(groups.values(), 1):
            out[f"{job['name']}/g{g}" if several else job["name"]] = (
                job,
                queries,
                options,
            )
    return out


BATCHES = _batches(config["jobs"])


def batch_job(wildcards):
    return BATCHES[wildcards.batch][0]


def setting(key):
    """An input function returning the batch's job setting `key`."""
    return lambda wildcards: batch_job(wildcards)[key]


def run_flags(options):
    """Run options as hspZ flags: seq_block_size: 5000 -> --seq-block-size 5000."""
    words = []
    for key, value in options.items():
        flag = FLAG.get(key, f"--{key.replace('_', '-')}")
        if value is True:
            words.append(flag)
        elif value is not False:
            words += [flag, shlex.quote(str(value))]
    return " ".join(words)


def plan_flags(wildcards):
    """The batch's run options (with an index, -B and --seed must equal its own: they do)."""
    return run_flags(BATCHES[wildcards.batch][2])


def index_key(job):
    """The index folder of a (reference, layout): one per pair, whatever the batches."""
    layout = {k: job["options"].get(k) for k in INDEX_OPTIONS}
    digest = hashlib.sha256(
        json.dumps([job["reference"], layout]).encode()
    ).hexdigest()[:12]
    return f"{Path(job['reference']).name.split('.')[0]}-{digest}"


INDEXES = {index_key(job): job for job in config["jobs"] if job["index"]}


def index_flags(wildcards):
    job = INDEXES[wildcards.index]
    return run_flags(
        {k: job["options"][k] for k in INDEX_OPTIONS if k in job["options"]}
    )


def index_reference(wildcards):
    return INDEXES[wildcards.index]["reference"]


def index_threads(wildcards):
    """The index job's threads: its reference's job's `threads` (the work jobs' too)."""
    return INDEXES[wildcards.index]["threads"]


def index_backend(wildcards):
    return INDEXES[wildcards.index]["backend"]


def plan_input(wildcards):
    job, queries, options = BATCHES[wildcards.batch]
    files = {"reference": job["reference"], "queries": [path for _, path in queries]}
    if job["index"]:
        files["index"] = f"{WORK}/index/{index_key(job)}"
    if "scoring" in options:
        files["scoring"] = options["scoring"]
    return files


def plan_sources(wildcards, input):
    """Where the plan takes the reference from: the index (the FASTA verified against it) or
    the FASTA."""
    if "index" in input.keys():
        return f"--index {input.index} --reference {input.reference}"
    return f"--reference {input.reference}"


def query_lines(wildcards):
    """The batch's query list file, one absolute path a line, quoted for printf."""
    _, queries, _ = BATCHES[wildcards.batch]
    return " ".join(shlex.quote(os.path.abspath(path)) for _, path in queries)


def name_lines(wildcards):
    """names.tsv's rows: sheet name, job number, path."""
    _, queries, _ = BATCHES[wildcards.batch]
    rows = [
        f"{name}\t{k:06d}\t{os.path.abspath(path)}"
        for k, (name, path) in enumerate(queries, 1)
    ]
    return " ".join(shlex.quote(r) for r in ["name\tjob\tpath", *rows])


def planned_workers(plan):
    """The `workers N` line of a plan file: `--gpus W` is only an upper bound (never more
    workers than reference bins), so the work jobs are known once the plan exists."""
    with open(plan) as lines:
        for line in lines:
            if line.startswith("workers "):
                return int(line.split()[1])
    raise ValueError(f"{plan}: no 'workers' line")


def work_results(wildcards):
    plan = checkpoints.hspz_plan.get(batch=wildcards.batch).output.plan
    workers = range(planned_workers(plan))
    return expand(
        f"{WORK}/{{batch}}/worker{{k}}.result", batch=wildcards.batch, k=workers
    )


def gpu_visible():
    """Whether this machine shows a GPU (`nvidia-smi -L` lists one), unless
    CUDA_VISIBLE_DEVICES hides them all. Under SLURM the submitting host may have none: there,
    say `backend: gpu` (or `gpus: true`)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1", "none", "NoDevFiles"):
        return False
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        done = subprocess.run(
            ["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and "GPU" in done.stdout


def gpus(wildcards):
    """GPUs a plan or work job asks for: one when it will use one (backend gpu, or auto with a
    GPU visible, unless the job's `gpus:` setting says otherwise), else none."""
    job = batch_job(wildcards)
    wanted = job.get("gpus", "auto")
    if wanted != "auto":
        return int(bool(wanted))
    return int(job["backend"] == "gpu" or (job["backend"] == "auto" and gpu_visible()))


def merge_flags(wildcards):
    job = batch_job(wildcards)
    flags = {"-D": job["diagonal_partition"], "-Z": job["tarball"]}
    return " ".join(flag for flag, wanted in flags.items() if wanted)


def query_jobs(batch):
    return [f"{k:06d}" for k in range(1, len(BATCHES[batch][1]) + 1)]


def final_outputs():
    """Every batch's queries.tsv and names.tsv, and what the config adds: the report's summary
    and dot plots, the gapped stage's alignments."""
    out = []
    for batch, (job, _, _) in BATCHES.items():
        out += [f"{RESULTS}/{batch}/queries.tsv", f"{RESULTS}/{batch}/names.tsv"]
        if job["report"]:
            out.append(f"{RESULTS}/reports/{batch}/summary.tsv")
            out += [
                f"{RESULTS}/reports/{batch}/{n}.dotplot.png" for n in query_jobs(batch)
            ]
        if job["gapped"]:
            fmt = job["gapped_format"]
            out += [f"{RESULTS}/gapped/{batch}/{n}.{fmt}" for n in query_jobs(batch)]
    return out
