# Config helpers and input functions for the hspZ rules (no rules here).
#
# A job pairs one reference with one query or a list of them. Each (job, query) is one chain
# plan -> work[0..W-1] -> merge under results/<chain>/, where <chain> is the job name for a
# single query and <name>/000001, <name>/000002, ... (list order) for a list, the numbering
# `hspZ run --query-list` uses for its job directories.
import shlex


wildcard_constraints:
    job=r"[A-Za-z0-9][A-Za-z0-9._-]*(/[0-9]{6})?",
    k=r"[0-9]+",


def _chains(jobs):
    chains = {}
    for job in jobs:
        name, queries = job["name"], job["query"]
        if any(c.split("/")[0] == name for c in chains):
            raise ValueError(f"config: job name {name!r} is used twice")
        if isinstance(queries, str):
            chains[name] = (job, queries)
        else:
            chains.update({f"{name}/{i:06d}": (job, q) for i, q in enumerate(queries, 1)})
    return chains


CHAINS = _chains(config["jobs"])


def setting(key):
    """An input function returning the chain's job setting `key` (workers, backend, threads)."""
    return lambda wildcards: CHAINS[wildcards.job][0][key]


def run_flags(wildcards):
    """The job's `options:` as hspZ run flags: seq_block_size: 5000 -> --seq-block-size 5000."""
    words = []
    for key, value in CHAINS[wildcards.job][0]["options"].items():
        flag = f"--{key.replace('_', '-')}"
        if value is True:
            words.append(flag)
        elif value is not False:
            words += [flag, shlex.quote(str(value))]
    return " ".join(words)


def plan_input(wildcards):
    job, query = CHAINS[wildcards.job]
    files = {"reference": job["reference"], "query": query}
    if "scoring" in job["options"]:
        files["scoring"] = job["options"]["scoring"]
    return files


def planned_workers(plan):
    """The `workers N` line of a plan file: `--gpus W` is only an upper bound (never more workers
    than reference bins), so the work jobs are known once the plan exists."""
    with open(plan) as lines:
        for line in lines:
            if line.startswith("workers "):
                return int(line.split()[1])
    raise ValueError(f"{plan}: no 'workers' line")


def work_results(wildcards):
    plan = checkpoints.hspz_plan.get(job=wildcards.job).output.plan
    workers = range(planned_workers(plan))
    return expand("results/{job}/work/{k}.result", job=wildcards.job, k=workers)


def gpus(wildcards):
    """GPUs for a plan or work job: one, unless the job's backend is cpu."""
    return 0 if CHAINS[wildcards.job][0]["backend"] == "cpu" else 1


def merge_flags(wildcards):
    job = CHAINS[wildcards.job][0]
    flags = {"-D": job["diagonal_partition"], "-Z": job["tarball"]}
    return " ".join(flag for flag, wanted in flags.items() if wanted)


def final_outputs():
    return expand(["results/{job}/segments", "results/{job}/digest.txt"], job=CHAINS)
