# Config helpers and input functions for the hspZ rules (no rules here).
#
# A job pairs one reference with one query or a list of them. Each (job, query) is one chain
# plan -> work[0..W-1] -> merge under results/<chain>/, where <chain> is the job name for a
# single query and <name>/000001, <name>/000002, ... (list order) for a list, the numbering
# `hspZ run --query-list` uses for its job directories.
import re
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
    """Workers in a written plan: `--gpus W` is an upper bound, the plan never uses more workers
    than it has reference bins, so the work jobs can only be known once the plan exists."""
    with open(plan) as lines:
        workers = {m[1] for m in (re.match(r"schedule: worker (\d+)", s) for s in lines) if m}
    return len(workers)


def work_results(wildcards):
    plan = checkpoints.hspz_plan.get(job=wildcards.job).output.plan
    return expand(
        "results/{job}/work/{k}.result", job=wildcards.job, k=range(planned_workers(plan))
    )


def work_gpus(wildcards):
    return 0 if CHAINS[wildcards.job][0]["backend"] == "cpu" else 1


def device_env(wildcards):
    """Pins work job k to one of config `gpu_devices` (round robin) when the list is set;
    otherwise the environment is left alone (SLURM sets CUDA_VISIBLE_DEVICES per job)."""
    devices = config["gpu_devices"]
    if not devices or not work_gpus(wildcards):
        return ""
    return f"CUDA_VISIBLE_DEVICES={devices[int(wildcards.k) % len(devices)]}"


def merge_flags(wildcards):
    job = CHAINS[wildcards.job][0]
    return "-D" if job["diagonal_partition"] else ""


def final_outputs():
    return expand(["results/{job}/segments", "results/{job}/digest.txt"], job=CHAINS)
