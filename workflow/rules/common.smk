# Config helpers and input functions for the hspZ rules (no rules here).
#
# A job of the config pairs one reference with a list of queries (`query`, a `queries` sheet
# or a `query_list` file). Its queries form one batch, `hspZ run --query-list` split into
# index -> plan -> work[0..W-1] -> merge, whose merge writes results/<job>/ (000001/, ...,
# queries.tsv) and names.tsv (sheet name -> job number). Sheet rows that carry their own
# run options form batches of their own, results/<job>/<group>/. Intermediates live under
# work/ (config key `work`), logs under logs/.
#
# Everything the config and the sheets say is checked here, when the workflow is parsed: a bad
# value is one line naming the file, the row and the column (`fail`), before any job runs. No
# text of theirs reaches a shell unquoted: the rules pass every value through `:q` (shlex).
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from snakemake.exceptions import WorkflowError


# The workflow's own files: from the checkout, or through Snakemake's source cache
# (workflow.source_path) where the workflow is a module from a git repository or GitHub, whose
# files are no folder on this machine.
def workflow_file(relative):
    """A file of the workflow by its path relative to workflow/rules/: the file itself in a
    checkout, else Snakemake's cached copy."""
    here = Path(str(workflow.current_basedir.get_path_or_uri(secret_free=True)))
    if here.is_dir():
        return str((here / relative).resolve())
    return str(workflow.source_path(relative))


# libyaml's loader where PyYAML has it: the schema loads in milliseconds, not a quarter second
# (every job's snakemake parses the workflow again)
SCHEMA = yaml.load(
    Path(workflow_file("../schemas/config.schema.yaml")).read_text(),
    Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader),
)
MANIFEST_SCRIPT = workflow_file("../scripts/results_manifest.py")


def _load_script(name, path):
    """A module of workflow/scripts/, imported from its file (a cached copy has no .py)."""
    import importlib.machinery
    import importlib.util

    spec = importlib.util.spec_from_loader(
        name, importlib.machinery.SourceFileLoader(name, path)
    )
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


# the merge's checksummed manifest (workflow/scripts/results_manifest.py)
results_manifest = _load_script("results_manifest", MANIFEST_SCRIPT)


def install_source(basedir):
    """Where the conda env's post-deploy script (envs/hspz.post-deploy.sh) pip-installs hspZ
    from: the package this workflow came with, at the same version. A checkout (the workflow
    used in place or as a module by path): its folder; a module from a git repository or
    GitHub/GitLab: that repository at the module's tag or commit. HSPZ_INSTALL_SOURCE
    (INSTALL_SOURCE), when set, wins (a wheel, an index's `hspz==0.1.0`, a mirror)."""
    given = os.environ.get(INSTALL_SOURCE)
    if given:
        return given
    repo = getattr(basedir, "repo", None)
    if repo is not None:  # GithubFile, GitlabFile
        ref = basedir.commit or basedir.tag or basedir.branch
        return f"hspz[workflow] @ git+https://{basedir.host}/{repo}@{ref}"
    repo_path = getattr(basedir, "repo_path", None)
    if repo_path is not None:  # LocalGitFile (git+file://...)
        return f"hspz[workflow] @ git+file://{os.path.abspath(repo_path)}@{basedir.ref}"
    root = Path(str(basedir.get_path_or_uri(secret_free=True))).resolve().parents[1]
    return f"hspz[workflow] @ {root.as_uri()}"


# optional: no envvars: directive, which would demand it
INSTALL_SOURCE = "HSPZ_INSTALL_SOURCE"
os.environ[INSTALL_SOURCE] = install_source(workflow.current_basedir)

# run options that decide the reference's bins and tables: the index's, never per query
INDEX_OPTIONS = ("seed", "step", "seq_block_size", "kegalign_bins")
FLAG = {"notransition": "--notransition", "noentropy": "--noentropy"}
OPTION_NAMES = tuple(SCHEMA["$defs"]["options"]["properties"])
JOB_KEYS = tuple(SCHEMA["$defs"]["job"]["properties"])
SHEET_COLUMNS = ("name", "path")


def fail(message):
    """A config or sheet error: one line on stderr and exit status 2, no traceback."""
    print(f"hspZ workflow: {message}", file=sys.stderr)
    sys.exit(2)


def suggestion(word, choices):
    """' (did you mean 'x'?)' for the closest of `choices`, or ''."""
    import difflib

    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def schema_message(error):
    """A jsonschema error as one line, with a suggestion for a mistyped key."""
    if error.validator == "additionalProperties":
        allowed = tuple(error.schema.get("properties", ()))
        extra = sorted(set(error.instance) - set(allowed))
        if extra:
            return f"{error.message}{suggestion(extra[0], allowed)}"
    return error.message


def check_config(config):
    """Validate the config against the schema (filling its defaults) and what a schema
    cannot say (one name per job, the folders apart); a bad config is one line naming the
    key, not the validator's dump."""
    for k, job in enumerate(config.get("jobs") or []):
        given = [
            key for key in ("query", "queries", "query_list") if key in (job or {})
        ]
        if isinstance(job, dict) and len(given) != 1:
            fail(
                f"config: jobs[{k}] ({job.get('name', '?')}) needs exactly one "
                f"of query, queries and query_list (has {given or 'none'})"
            )
    error = best_match(Draft202012Validator(SCHEMA).iter_errors(config))
    if error is not None:
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.path)
        fail(f"config{where}: {schema_message(error)}")
    fill_defaults(config)
    seen = {}
    for k, job in enumerate(config["jobs"]):
        if job["name"] in seen:
            fail(
                f"config.jobs[{k}].name: {job['name']!r} is used twice "
                f"(first by jobs[{seen[job['name']]}])"
            )
        seen[job["name"]] = k
        for key in ("reference", "query", "queries", "query_list"):
            if key in job and not Path(job[key]).is_file():
                fail(
                    f"config.jobs[{k}].{key}: {job[key]} is not a file "
                    f"(paths are relative to the working directory)"
                )
        scoring = job["options"].get("scoring")
        if scoring is not None and not Path(scoring).is_file():
            fail(f"config.jobs[{k}].options.scoring: {scoring} is not a file")
    folders = {key: os.path.abspath(config[key]) for key in ("results", "work", "logs")}
    for key, folder in folders.items():
        for other, inner in folders.items():
            if other != key and (inner == folder or inner.startswith(folder + os.sep)):
                fail(
                    f"config.{other}: {config[other]} is within config.{key} "
                    f"({config[key]}): results, work and logs must be three folders apart"
                )


def fill_defaults(config):
    """The schema's defaults, as snakemake.utils.validate(set_default=True) fills them."""
    for key in ("results", "work", "logs"):
        config.setdefault(key, SCHEMA["properties"][key]["default"])
    for job in config["jobs"]:
        for key, spec in SCHEMA["$defs"]["job"]["properties"].items():
            if "default" in spec:
                job.setdefault(key, spec["default"])
    for key in ("max_mem_mb", "max_runtime", "retry_factor", "size_runtime"):
        config.setdefault(key, SCHEMA["properties"][key]["default"])


check_config(config)
RESULTS = config["results"]
WORK = config["work"]
LOGS = config["logs"]


wildcard_constraints:
    batch=r"[A-Za-z0-9][A-Za-z0-9._-]*(/g[0-9]+)?",
    k=r"[0-9]+",
    n=r"[0-9]{6}",
    index=r"[A-Za-z0-9._-]+",


def _sheet(job):
    """(name, path, per-query options) of every query of a config job, in sheet order."""
    if "query" in job:
        return [(Path(job["query"]).name, job["query"], {})]
    if "query_list" in job:
        return _listed(job["query_list"])
    return _sheet_rows(job["queries"])


def _listed(listing):
    """A query list's entries, as `hspZ run --query-list` reads them (relative to its
    folder), each checked to be a file."""
    folder = Path(listing).parent
    rows = []
    for number, line in enumerate(Path(listing).read_text().splitlines(), 1):
        entry = line.strip()
        if entry and not entry.startswith("#"):
            path = entry if os.path.isabs(entry) else str(folder / entry)
            if not Path(path).is_file():
                fail(f"{listing}: line {number}: {entry} is not a file ({path})")
            rows.append((Path(entry).name, path, {}))
    return rows


def _sheet_lines(sheet):
    """(line number, cells) of a tab-separated sheet's header and rows, cells taken as they
    are (no quoting), blank and `#` lines skipped."""
    try:
        text = Path(sheet).read_text(encoding="utf-8-sig")  # a spreadsheet's BOM
    except UnicodeDecodeError:
        fail(f"{sheet}: not a UTF-8 text file")
    lines = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip() and not line.startswith("#"):
            lines.append((number, line.split("\t")))
    if not lines:
        fail(f"{sheet}: the sheet is empty (it needs a header: name, path)")
    return lines


def _columns(sheet, header):
    """The sheet's option columns, after checking every column name: name and path once,
    no job setting, only run options that may vary per query."""
    for column in SHEET_COLUMNS:
        if header.count(column) > 1:
            fail(f"{sheet}: column {column!r} is given twice")
    if set(SHEET_COLUMNS) - set(header):
        fail(
            f"{sheet}: the sheet needs the columns name and path "
            f"(tab-separated; it has {', '.join(map(repr, header))})"
        )
    extra = [c for c in header if c not in SHEET_COLUMNS]
    for column in extra:
        if header.count(column) > 1:
            fail(f"{sheet}: column {column!r} is given twice")
        if column in JOB_KEYS:
            fail(
                f"{sheet}: column {column!r} is reserved (a job's setting in the config, "
                f"not a run option)"
            )
        if column in INDEX_OPTIONS:
            fail(
                f"{sheet}: column {column!r} decides the reference bins and cannot vary "
                f"per query (set it in the job's options)"
            )
        if column not in OPTION_NAMES:
            fail(
                f"{sheet}: column {column!r} is not a run option"
                f"{suggestion(column, OPTION_NAMES)}"
            )
    return extra


def _typed(column, text):
    """A sheet cell as the value its option's schema expects: integers, sizes given as
    digits and true/false are typed; anything else stays text (and the schema judges it).
    """
    spec = SCHEMA["$defs"]["options"]["properties"][column]
    kinds = {spec.get("type")} | {
        s.get("type") for s in SCHEMA["$defs"]["size"]["oneOf"] if "$ref" in spec
    }
    lowered = text.lower()
    if "boolean" in kinds and lowered in ("true", "false"):
        return lowered == "true"
    if "integer" in kinds and text.lstrip("-").isdigit():
        return int(text)
    return text


OPTION_VALIDATOR = Draft202012Validator(
    {"$ref": "#/$defs/options", "$defs": SCHEMA["$defs"]}
)


def _sheet_rows(sheet):
    """A sample sheet's rows, each cell checked: names unique and printable, paths files,
    option cells typed by the options' schema."""
    lines = _sheet_lines(sheet)
    header = [c.strip() for c in lines[0][1]]
    extra = _columns(sheet, header)
    folder = Path(sheet).parent
    rows, first = [], {}
    for number, cells in lines[1:]:
        if len(cells) != len(header):
            fail(
                f"{sheet}: row {number}: {len(cells)} cells, the header has "
                f"{len(header)} (cells are tab-separated)"
            )
        row = dict(zip(header, cells))
        for column in SHEET_COLUMNS:
            if row[column] == "":
                fail(f"{sheet}: row {number}, column {column}: empty")
            if not row[column].isprintable():
                fail(f"{sheet}: row {number}, column {column}: a control character")
        name = row["name"]
        if name in first:
            fail(
                f"{sheet}: row {number}, column name: {name!r} is used twice "
                f"(first on row {first[name]})"
            )
        first[name] = number
        path = row["path"] if os.path.isabs(row["path"]) else str(folder / row["path"])
        if not Path(path).is_file():
            fail(
                f"{sheet}: row {number}, column path: {row['path']} is not a file ({path})"
            )
        options = {c: _typed(c, row[c]) for c in extra if row[c] != ""}
        error = best_match(OPTION_VALIDATOR.iter_errors(options))
        if error is not None:
            column = error.path[0] if error.path else "?"
            fail(f"{sheet}: row {number}, column {column}: {error.message}")
        if "scoring" in options and not Path(options["scoring"]).is_file():
            fail(
                f"{sheet}: row {number}, column scoring: {options['scoring']} is not a file"
            )
        rows.append((name, path, options))
    if not rows:
        fail(f"{sheet}: the sheet has no rows")
    return rows


def _batches(jobs):
    """batch id -> (job, its queries [(name, path)], its options), groups in sheet order."""
    out = {}
    for job in jobs:
        groups = {}
        for name, path, own in _sheet(job):
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
    """Run options as hspZ words (a list, each word one argument): seq_block_size: 5000 ->
    --seq-block-size=5000 (one word, so a value never reads as a flag)."""
    words = []
    for key, value in options.items():
        flag = FLAG.get(key, f"--{key.replace('_', '-')}")
        if value is True:
            words.append(flag)
        elif value is not False:
            words.append(f"{flag}={value}")
    return words


def plan_flags(wildcards):
    """The batch's run options (with an index, -B and --seed must equal its own: they do)."""
    return run_flags(BATCHES[wildcards.batch][2])


def index_key(job):
    """The index folder of a (reference, layout): one per pair, whatever the batches."""
    layout = {k: job["options"].get(k) for k in INDEX_OPTIONS}
    digest = hashlib.sha256(
        json.dumps([job["reference"], layout]).encode()
    ).hexdigest()[:12]
    stem = "".join(
        c if c.isalnum() or c in "._-" else "_"
        for c in Path(job["reference"]).name.split(".")[0]
    ).lstrip("._-")
    return f"{stem or 'reference'}-{digest}"


INDEXES = {index_key(job): job for job in config["jobs"] if job["index"]}


def index_flags(wildcards):
    job = INDEXES[wildcards.index]
    return run_flags(
        {k: job["options"][k] for k in INDEX_OPTIONS if k in job["options"]}
    )


def index_reference(wildcards):
    return INDEXES[wildcards.index]["reference"]


def index_backend(wildcards):
    return INDEXES[wildcards.index]["backend"]


def plan_input(wildcards):
    job, queries, options = BATCHES[wildcards.batch]
    files = {"reference": job["reference"], "query_files": [p for _, p in queries]}
    if job["index"]:
        files["index"] = f"{WORK}/index/{index_key(job)}"
    if "scoring" in options:
        files["scoring"] = options["scoring"]
    return files


def plan_sources(wildcards, input):
    """Where the plan takes the reference from: the index (the FASTA named beside it, which
    each work job verifies against it) or the FASTA; one word each, so a path that starts with
    `-` is never a flag."""
    words = [f"--reference={input.reference}"]
    if "index" in input.keys():
        words.insert(0, f"--index={input.index}")
    return words


def query_lines(wildcards):
    """The batch's query list file, one absolute path a line."""
    _, queries, _ = BATCHES[wildcards.batch]
    return [os.path.abspath(path) for _, path in queries]


def write_query_list(output, params, log):
    """hspz_query_list's work: its two files from its params, and its log line."""
    results_manifest.write_atomically(
        output.queries, [f"{q}\n" for q in params.queries]
    )
    results_manifest.write_atomically(output.names, [f"{n}\n" for n in params.names])
    with open(log[0], "w") as written:
        written.write(f"{len(params.queries)} queries\n")


def name_lines(wildcards):
    """names.tsv's rows: sheet name, job number, path."""
    _, queries, _ = BATCHES[wildcards.batch]
    rows = [
        f"{name}\t{k:06d}\t{os.path.abspath(path)}"
        for k, (name, path) in enumerate(queries, 1)
    ]
    return ["name\tjob\tpath", *rows]


def planned_workers(plan):
    """The `workers N` line of a plan file: `--gpus W` is only an upper bound (never more
    workers than reference bins), so the work jobs are known once the plan exists."""
    with open(plan) as lines:
        for line in lines:
            if line.startswith("workers "):
                return int(line.split()[1])
    raise ValueError(f"{plan}: no 'workers' line")


WARNED = set()


def work_results(wildcards):
    plan = checkpoints.hspz_plan.get(batch=wildcards.batch).output.plan
    if wildcards.batch not in WARNED:
        WARNED.add(wildcards.batch)
        warn_capped_workers(plan, wildcards.batch)
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


def job_uses_gpu(job):
    """Whether a config job's plan and work jobs ask for a GPU: backend gpu, or auto with a
    GPU visible, unless its `gpus:` setting says otherwise."""
    wanted = job.get("gpus", "auto")
    if wanted != "auto":
        return bool(wanted)
    return job["backend"] == "gpu" or (job["backend"] == "auto" and gpu_visible())


def gpus(wildcards):
    """GPUs a plan or work job asks for: one when it will use one, else none."""
    return int(job_uses_gpu(batch_job(wildcards)))


def merge_flags(wildcards):
    job = batch_job(wildcards)
    flags = {"-D": job["diagonal_partition"], "-Z": job["tarball"]}
    return [flag for flag, wanted in flags.items() if wanted]


def query_jobs(batch):
    return [f"{k:06d}" for k in range(1, len(BATCHES[batch][1]) + 1)]


def final_outputs():
    """Every batch's queries.tsv, names.tsv and results manifest, and what the config adds:
    the report's summary and dot plots, the gapped stage's alignments."""
    out = []
    for batch, (job, _, _) in BATCHES.items():
        out += [
            f"{RESULTS}/{batch}/queries.tsv",
            f"{RESULTS}/{batch}/names.tsv",
            manifest_path(batch),
        ]
        if job["report"]:
            out.append(f"{RESULTS}/reports/{batch}/summary.tsv")
            out += [
                f"{RESULTS}/reports/{batch}/{n}.dotplot.png" for n in query_jobs(batch)
            ]
        if job["gapped"]:
            fmt = job["gapped_format"]
            out += [f"{RESULTS}/gapped/{batch}/{n}.{fmt}" for n in query_jobs(batch)]
    return out


# --- the batch contract for results/<job>/ and its reports -------------------------------


def manifest_path(batch):
    """The checksummed manifest of results/<batch>/ that hspz_merge writes last."""
    return f"{WORK}/{batch}/results.manifest"


def results_root(wildcards, output):
    """The results folder, from a merge job's queries.tsv (results/<batch>/queries.tsv)."""
    return str(Path(output.queries).parents[len(Path(wildcards.batch).parts)])


def main_process():
    """Whether this is the snakemake the user started (not a job's own, under SLURM)."""
    return workflow.is_main_process and not workflow.remote_exec


def set_aside_damaged_results():
    """A batch whose results/<job>/ no longer matches its manifest (a job folder deleted,
    added or changed since the merge): its manifest is set aside (.stale), so that hspz_merge,
    whose output it is, runs again and rebuilds the batch (one line each)."""
    for batch in BATCHES:
        manifest = manifest_path(batch)
        why = results_manifest.damage(f"{RESULTS}/{batch}", manifest)
        if why is not None:
            os.replace(manifest, f"{manifest}.stale")
            print(
                f"hspZ workflow: {RESULTS}/{batch}/: {why} since the merge: "
                f"hspz_merge rebuilds it",
                file=sys.stderr,
            )


def local_memory_cap():
    """Locally (no --jobs for a cluster), mem_mb is a resource of the machine: 90% of its
    memory unless given (--resources mem_mb=...), so that work jobs that would not fit side
    by side wait for each other."""
    if "mem_mb" in workflow.global_resources or workflow.global_resources.get("_nodes"):
        return
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return
    workflow.global_resources["mem_mb"] = int(total * 0.9 / 1e6)


if main_process():
    set_aside_damaged_results()
    local_memory_cap()


# --- cores and resources -----------------------------------------------------------------


def total_cores():
    """--cores, or (a cluster run gives none) this machine's cores."""
    try:
        cores = workflow.cores
    except WorkflowError:
        cores = None
    return cores if isinstance(cores, int) else os.cpu_count() or 1


CORES = total_cores()


def concurrent_work_jobs(job):
    """How many of a job's work jobs can run at once: its workers (never more than its
    reference bins, `bins_hint`), at most the GPUs a GPU job can have."""
    workers = job["workers"]
    if job_uses_gpu(job):
        workers = min(
            workers, max(1, int(workflow.global_resources.get("gpu", 1) or 1))
        )
    return max(1, workers)


def work_threads(wildcards):
    """A work job's threads: the job's `threads`, or (threads: 0, the default) the cores
    divided among the work jobs that can run at once."""
    job = batch_job(wildcards)
    if job["threads"]:
        return job["threads"]
    return max(1, CORES // concurrent_work_jobs(job))


def index_threads(wildcards):
    """The index job's threads: its reference's job's `threads`, or every core (it runs
    before any work job of its reference)."""
    return INDEXES[wildcards.index]["threads"] or CORES


def sizes_flags(wildcards):
    """--sizes-hits where the work jobs' runtime matters (size_runtime: a cluster's time
    limits); the local profile turns it off, since the counting costs the plan seconds.
    """
    return ["--sizes-hits"] if config["size_runtime"] else []


def sizes_path(batch):
    return f"{WORK}/{batch}/sizes.tsv"


def worker_size(wildcards, column):
    """A work job's planned size (`hspZ plan --sizes`): mem_mb or runtime (minutes)."""
    with open(sizes_path(wildcards.batch)) as rows:
        header = rows.readline().rstrip("\n").split("\t")
        for line in rows:
            row = dict(zip(header, line.rstrip("\n").split("\t")))
            if row["worker"] == str(wildcards.k):
                return None if row[column] == "-" else float(row[column])
    raise ValueError(f"{sizes_path(wildcards.batch)}: no row for worker {wildcards.k}")


def retry_factor(attempt):
    """The safety factor of a job's attempt: config's retry_factor, once more per retry."""
    return config["retry_factor"] ** attempt


def capped(value, cap):
    return int(min(max(1, math.ceil(value)), cap))


def work_mem_mb(wildcards, attempt):
    return capped(
        worker_size(wildcards, "mem_mb") * retry_factor(attempt), config["max_mem_mb"]
    )


UNSIZED_WORK_MINUTES = 240  # a work job's runtime when its plan counted no hits


def work_runtime(wildcards, attempt):
    seconds = worker_size(wildcards, "runtime_s")
    minutes = UNSIZED_WORK_MINUTES if seconds is None else seconds / 60
    return capped(minutes * retry_factor(attempt), config["max_runtime"])


def input_mb(input):
    """Megabytes of a job's input files (folders: their files)."""
    total = 0
    for item in input:
        path = Path(item)
        if path.is_dir():
            total += sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
        elif path.exists():
            total += path.stat().st_size
    return total / 1e6


def sized(base_mb, per_input_mb, base_min, per_input_min):
    """(mem_mb, runtime) callables from a job's input size: a fixed part (the Python
    process, hspZ's imports) and a part per MB of input, times the attempt's factor."""

    def mem(wildcards, input, attempt):
        need = base_mb + per_input_mb * input_mb(input)
        return capped(need * retry_factor(attempt), config["max_mem_mb"])

    def runtime(wildcards, input, attempt):
        need = base_min + per_input_min * input_mb(input)
        return capped(need * retry_factor(attempt), config["max_runtime"])

    return mem, runtime


def warn_capped_workers(plan, batch):
    """One line when the plan makes fewer work jobs than `workers` asks (never more than
    reference bins): how many, and why."""
    job = BATCHES[batch][0]
    made = planned_workers(plan)
    if made < job["workers"]:
        print(
            f"hspZ workflow: job {batch}: workers: {job['workers']}, but its plan makes "
            f"{made} work job(s): the reference has {made} bin(s) at this layout (-B), "
            f"and a worker needs a bin of its own",
            file=sys.stderr,
        )


# Snakemake's scheduler arms a threading.Timer (a thread that is not a daemon) for each
# scheduling round, to look again once --max-jobs-per-timespan's window (1 s by default) has
# passed; the interpreter then waits up to that second at exit for the last one, after every
# job is done (0.99 s of a 5.4 s demo run, strace). Once the workflow has ended, nothing is left
# to schedule: the waiting timers are cancelled (their action skipped), so snakemake exits then.
def cancel_rescheduling():
    import threading

    for thread in threading.enumerate():
        action = getattr(thread, "function", None)
        if isinstance(thread, threading.Timer) and "_schedule_reevalutation" in getattr(
            action, "__qualname__", ""
        ):
            thread.cancel()


# At exit the interpreter collects every object it tracks, some 90 thousand in Snakemake's
# process: 0.14 s of each run after its last job (dev machine, `workflow_overhead.py --stamps`).
# Once the workflow has ended they are frozen (gc.freeze): the exit's collection skips them and
# the process's end frees their memory. What Snakemake makes afterwards is collected as usual,
# and its log is flushed and closed by logging's exit hook, not by the collector.
def freeze_for_exit():
    import gc

    gc.freeze()
