"""The fault catalog of the simulator: what can end an attempt, how often, and the truth.

Probabilities are per attempt and depend on the job's size class (``single`` node, ``multi``
2–16 nodes, ``large`` 64+ nodes), following the published fleet statistics
(``FAILURES.md``): by job count user errors dominate and hit small jobs early; by lost GPU
time hardware dominates, because a job's exposure grows with its node count and runtime.
Whatever probability is left over is a normal completion.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl


@dataclass(frozen=True)
class Scenario:
    """One way an attempt ends, with its ground truth.

    ``state``/``exit`` are what sacct reports. ``node_root`` says the root line is in a
    node's kernel log (so that node must keep its syslog). ``min_nodes`` restricts the
    scenario to jobs that big. ``quality`` is the exact expected quality when the case is
    defined by it (``ambiguous``, ``insufficient``), else None. ``also`` are causes that are
    right too (their domains with them). ``p`` holds the per-attempt probabilities for the
    ``single``, ``multi`` and ``large`` size classes.
    """

    name: str
    domain: str
    cause: str
    state: str
    exit: str
    p: tuple[float, float, float]
    node_root: bool = False
    min_nodes: int = 1
    quality: str | None = None
    also: tuple[str, ...] = ()
    culprit: str = "node"  # node | none


CATALOG: tuple[Scenario, ...] = (
    Scenario("success", "none", "none", "COMPLETED", "0:0", (0, 0, 0), culprit="none"),
    # hardware (rare per attempt, frequent per GPU-hour)
    Scenario("gpu_fallen_off_bus", "gpu", "gpu.fallen_off_bus", "FAILED", "1:0", (0.002, 0.010, 0.080), node_root=True),
    Scenario("hbm_uncorrectable_ecc", "gpu_memory", "gpu_memory.uncorrectable_ecc", "FAILED", "1:0", (0.002, 0.010, 0.070), node_root=True),
    Scenario("gsp_timeout", "gpu", "gpu.gsp_timeout", "FAILED", "1:0", (0.001, 0.004, 0.020), node_root=True, also=("gpu.gsp_error",)),
    Scenario("nvlink_fatal", "nvlink", "nvlink.link_error", "FAILED", "1:0", (0.001, 0.005, 0.030), node_root=True),
    Scenario("ib_link_down", "network", "network.link_down", "FAILED", "1:0", (0, 0.008, 0.050), node_root=True, min_nodes=2,
             also=("network.port_module_event", "network.transceiver_error")),
    Scenario("nic_fatal", "network", "network.nic_hardware_fault", "FAILED", "1:0", (0, 0.003, 0.020), node_root=True,
             min_nodes=2),
    Scenario("kernel_panic", "host", "host.kernel_fault", "NODE_FAIL", "0:0", (0.0005, 0.003, 0.020), node_root=True,
             also=("host.node_failure",)),
    Scenario("node_failure", "host", "host.node_failure", "NODE_FAIL", "0:0", (0.0005, 0.002, 0.010)),
    Scenario("gpu_broken_as_oom", "gpu_memory", "gpu_memory.uncorrectable_ecc", "FAILED", "1:0", (0.001, 0.003, 0.010), node_root=True),
    # host, storage
    Scenario("host_oom", "host", "host.oom_killer", "OUT_OF_MEMORY", "0:125", (0.008, 0.005, 0.005), node_root=True),
    # A full filesystem (the checkpoint directory) names no node: draining the node that
    # noticed frees nothing.
    Scenario("lustre_outage", "storage", "storage.filesystem_unavailable", "FAILED", "1:0", (0, 0.003, 0.005), min_nodes=2,
             culprit="none"),
    Scenario("disk_full", "storage", "storage.disk_full", "FAILED", "1:0", (0.004, 0.004, 0.010), culprit="none"),
    # workload (frequent, early, small)
    Scenario("python_exception", "workload", "workload.exception", "FAILED", "1:0", (0.060, 0.040, 0.030)),
    Scenario("cuda_oom", "workload", "workload.cuda_oom", "FAILED", "1:0", (0.030, 0.020, 0.010)),
    Scenario("bad_path", "workload", "workload.file_not_found", "FAILED", "1:0", (0.020, 0.015, 0.005),
             also=("workload.exception",)),
    Scenario("config_error", "workload", "workload.exception", "FAILED", "1:0", (0.010, 0.008, 0.004)),
    Scenario("dataloader_stuck", "workload", "workload.exception", "FAILED", "1:0", (0.002, 0.004, 0.010)),
    # scheduler policy
    Scenario("time_limit", "scheduler", "scheduler.time_limit", "TIMEOUT", "0:0", (0.020, 0.020, 0.020), culprit="none"),
    Scenario("preempted", "scheduler", "scheduler.preempted", "PREEMPTED", "0:0", (0.010, 0.020, 0.030), culprit="none"),
    Scenario("cancelled", "scheduler", "scheduler.cancelled", "CANCELLED by {uid}", "0:0", (0.030, 0.030, 0.020), culprit="none"),
    # hard cases
    # Two faults within the clock skew: either is a right root (the verdict must say ambiguous).
    Scenario("two_faults", "gpu", "gpu.fallen_off_bus", "FAILED", "1:0", (0, 0.003, 0.020), node_root=True, min_nodes=2,
             quality="ambiguous", also=("network.link_down", "network.transceiver_error", "network.port_module_event")),
    Scenario("fail_slow", "unknown", "unknown.symptoms_only", "FAILED", "1:0", (0.0005, 0.002, 0.010), quality="insufficient",
             culprit="none"),
    # A GPU falls off the bus on a node whose clock runs minutes ahead: its XID is stamped
    # long after the hang began, and only the node's slurmd launch stamp tells by how much.
    Scenario("clock_ahead_xid", "gpu", "gpu.fallen_off_bus", "FAILED", "1:0", (0, 0.001, 0.005), node_root=True, min_nodes=4),
    # On a node two jobs share, the kernel kills the other job's process for memory while
    # this one dies of its own CUDA OOM.
    Scenario("other_jobs_oom", "workload", "workload.cuda_oom", "FAILED", "1:0", (0.002, 0.001, 0), node_root=True),
    # The management NIC's transmit queue times out and the driver resets it mid-job; the
    # job trains on until its time limit.
    Scenario("nic_reset_survived", "scheduler", "scheduler.time_limit", "TIMEOUT", "0:0", (0.002, 0.002, 0.002),
             node_root=True, culprit="none"),
)

BY_NAME = {s.name: s for s in CATALOG}
SIZE_CLASSES = ("single", "multi", "large")


def catalog_frame() -> pl.DataFrame:
    """The catalog as a frame: one row per scenario with its truth and probabilities."""
    return pl.DataFrame(
        {
            "scenario": [s.name for s in CATALOG],
            "scenario_code": list(range(len(CATALOG))),
            "domain": [s.domain for s in CATALOG],
            "cause": [s.cause for s in CATALOG],
            "also_accept": [list(s.also) for s in CATALOG],
            "raw_state": [s.state for s in CATALOG],
            "exit_code": [s.exit for s in CATALOG],
            "node_root": [s.node_root for s in CATALOG],
            "min_nodes": [s.min_nodes for s in CATALOG],
            "expect_quality": [s.quality for s in CATALOG],
            "has_culprit": [s.culprit == "node" for s in CATALOG],
        },
        schema_overrides={"scenario_code": pl.Int16, "expect_quality": pl.String, "also_accept": pl.List(pl.String)},
    )


def probabilities(size_class: str) -> list[float]:
    """Per-scenario probabilities for one size class; ``success`` takes the remainder."""
    k = SIZE_CLASSES.index(size_class)
    p = [s.p[k] for s in CATALOG]
    p[0] = 1.0 - sum(p[1:])
    if p[0] <= 0:
        raise ValueError(f"fault probabilities of size class {size_class!r} sum past 1; lower them in CATALOG")
    return p
