"""A driver report on every node of a job alike is the job's software, not the nodes'.

Some lines say the job's own CUDA could not work with the node's driver: CUDA's error 35
("CUDA driver version is insufficient for CUDA runtime version"), PyTorch's "The NVIDIA
driver on your system is too old", the NVIDIA container hook's "requirement error:
unsatisfied condition: cuda>=12.8", and PyTorch's "Found no NVIDIA driver on your system"
(libcuda could not be loaded: no driver on the node, or a container started without the
GPU libraries, Apptainer without ``--nv``). They are extracted as the node's
(``gpu.driver_mismatch``, ``gpu.init_failure``): on some nodes of a job only, those nodes
lag or lack what their peers have.

On every node of a job of several, with no node saying its own driver is broken or
missing (the kernel's or NVML's version mismatch, the container hook failing to start
NVML, systemd-modules-load finding no ``nvidia`` module, Apptainer finding no driver
files), the nodes agree and the job's build does not fit them: the report becomes the
workload's (:data:`CAUSE`), and no node is named. A one-node job cannot tell the two apart
and keeps the node's reading.

Declared in ``gpu_health.yaml``. Contract: :mod:`engine.rules.python_rules`.
"""

from __future__ import annotations

import polars as pl

JOB_SIDE = ("cuda_driver_too_old", "container_cuda_requirement", "cuda_no_driver_found")
"""Events of the lines that read the node's driver from the job's side."""
NODE_SIDE = ("nvml_driver_mismatch", "gpu_init_failed", "nvidia_module_missing", "container_driver_files_missing")
"""Events of the lines in which a node says its own driver is broken or missing."""
CAUSE = "workload.cuda_newer_than_driver"
"""The cause such a report takes: the job's CUDA is newer than the driver its nodes run."""
CAUSES = tuple((CAUSE, "workload", "root_candidate", event) for event in JOB_SIDE)
"""What the rule may give: its one cause, on the job-side events it relabels."""


def apply(events: pl.DataFrame, context) -> pl.DataFrame:
    """Make the job-side driver reports of attempts where every node gave one, and no node
    blamed its own driver, the workload's (see the module docstring)."""
    job_side = (pl.col("role") == "root_candidate") & pl.col("event").is_in(JOB_SIDE)
    if events.is_empty() or not events.select(job_side.any()).item():
        return events
    reporting = (
        events.filter(job_side & pl.col("node").is_not_null())
        .group_by("attempt_id").agg(pl.col("node").unique().alias("_reporting"))
    )
    node_side = events.filter(pl.col("event").is_in(NODE_SIDE)).select("attempt_id").unique()
    everywhere = (
        context.attempts.select("attempt_id", pl.col("nodes").list.unique().alias("_nodes"))
        .join(reporting, on="attempt_id")
        .join(node_side, on="attempt_id", how="anti")
        .filter((pl.col("_nodes").list.len() > 1)
                & (pl.col("_nodes").list.set_difference("_reporting").list.len() == 0))
    )["attempt_id"]
    theirs = job_side & pl.col("attempt_id").is_in(everywhere.implode())
    return events.with_columns(
        pl.when(theirs).then(pl.lit("workload")).otherwise("domain").alias("domain"),
        pl.when(theirs).then(pl.lit(CAUSE)).otherwise("cause").alias("cause"),
        pl.when(theirs).then(pl.lit("fix_workload")).otherwise("action").alias("action"),
    )
