"""Where a setup step failed says whose fault it is: on every node of a job alike, the job's;
on some nodes only, while the others got through it, those nodes'.

Every node of a job runs the same setup with the same software and settings: it loads the
node's driver, opens the HCA and brings its queue pairs up, finds the network NCCL was
told to use. A failure every node of a job of several reports alike, with no node saying
it is itself broken, comes from what the nodes share, the job; a failure some nodes report
while their peers printed that they got through the same step comes from those nodes. A
one-node job cannot tell the two apart and keeps the extracted reading. Each step of
:data:`STEPS` says which reports it reads and which way it may turn them:

* **The driver** (``gpu_health.yaml``). CUDA's error 35 ("CUDA driver version is
  insufficient for CUDA runtime version"), PyTorch's "The NVIDIA driver on your system is
  too old", the NVIDIA container hook's "requirement error: unsatisfied condition:
  cuda>=12.8" and PyTorch's "Found no NVIDIA driver on your system" (libcuda could not be
  loaded: no driver on the node, or a container started without the GPU libraries) are
  extracted as the node's (``gpu.driver_mismatch``, ``gpu.init_failure``). On every node,
  with no node saying its own driver is broken or missing (the kernel's or NVML's version
  mismatch, the container hook failing to start NVML, systemd-modules-load finding no
  ``nvidia`` module, Apptainer finding no driver files), the job's build does not fit the
  nodes: ``workload.cuda_newer_than_driver``.
* **Queue pairs** (``fabric.yaml``). ``Call to ibv_modify_qp failed`` moves a queue pair to
  the state that needs the GID, path and MTU the job asked for: on one node, its port or
  its RoCE addressing (``network.ib_setup_failed``); on every node, with no node's kernel
  reporting its port down, the job's setting (a ``NCCL_IB_GID_INDEX`` no port has):
  ``workload.bad_network_config``.
* **The network NCCL was told to use** (``communication.yaml``). "Bootstrap : no socket
  interface found" (``NCCL_SOCKET_IFNAME`` names no interface) and "Error: network IB not
  found." (``NCCL_NET=IB`` and no usable HCA) are the job's settings
  (``workload.nccl_invalid_usage``, no node) when every node reports them. On some nodes
  only, while a node that did not report printed the banner that says it got through
  (``Bootstrap : Using …`` for the interface, ``NET/IB : Using …`` for the HCAs), the same
  setting works on the others: the reporting nodes lack the interface or HCA their peers
  have (renamed after a reimage, the IB driver not loaded). Each gets a root of its own,
  ``network.interface_missing``, of which its reports are confirmations.
* **The rendezvous** (``communication.yaml``). torchrun's store waits for one agent per
  node, ``init_process_group``'s for one client per rank; "Timed out after 901 seconds
  waiting for clients. 2/4 clients joined." on a job given two nodes, every one of which
  joined (or "16/32 clients joined" on a job of 16 ranks, every one of which did), says the
  job asked for more than it was given (``--nnodes 4`` on a two-node allocation, a
  ``WORLD_SIZE`` of 32): ``workload.bad_arguments``, no node, instead of a rendezvous
  timeout's cascade. So is a Slurm job's ranks timing out connecting to a store on a host
  that is none of the job's nodes, by name (``MASTER_ADDR=gpu090`` for a job on
  ``gpu[030-031]``: under Slurm the store runs on a node of the job). An address, or a
  name the topology knows as another name of one of the job's nodes, is no such host.

Contract: :mod:`engine.rules.python_rules`.
"""

from __future__ import annotations

from typing import NamedTuple

import polars as pl

from engine.config import NODE_LOG_SOURCES
from engine.extract import address_banner
from engine.rules.python_rules import at_rows, link_to_roots, new_events, param, with_values
from ingest.hostlist import short_host
from ingest.schema import processes_per_node

RULE_ID = "job_setup"


class Step(NamedTuple):
    """A setup step every node of a job runs alike.

    ``reports``: the events of a node saying the step failed (root candidates);
    ``own_fault``: events in which a node blames itself, which keep the reports its own;
    ``everywhere``: the ``(domain, cause, action)`` the reports take when every node of a
    job of several gave one (none: they keep theirs); ``passed``: the rows (NCCL's benign
    banners, ``benign.yaml``) that say a node got through the step, which make the reports
    of the nodes that did not their own fault (:data:`MISSING`) when some node that did not
    report printed one."""

    reports: pl.Expr
    own_fault: pl.Expr
    everywhere: tuple[str, str, str] | None
    passed: pl.Expr | None = None


STORE_TIMEOUT = "network.store_timeout"
"""The event of the rendezvous store's timeout (``comm.tcpstore_timeout``): ``joined`` and
``world_size`` say how many clients came of how many it waited for."""
DRIVER_REPORTS = ("cuda_driver_too_old", "container_cuda_requirement", "cuda_no_driver_found")
"""Events of the lines that read the node's driver from the job's side (``gpu_health.yaml``)."""

STEPS = (
    Step(
        reports=pl.col("event").is_in(DRIVER_REPORTS),
        own_fault=pl.col("event").is_in(
            ["nvml_driver_mismatch", "gpu_init_failed", "nvidia_module_missing", "container_driver_files_missing"]),
        everywhere=("workload", "workload.cuda_newer_than_driver", "fix_workload"),
    ),
    Step(
        reports=(pl.col("event") == "network.ibv_call_failed")
        & (pl.col("params").str.json_path_match("$.ibv_call") == "ibv_modify_qp"),
        # The node's kernel or subnet manager saying its port went down: that port, then.
        own_fault=(pl.col("domain") == "network") & (pl.col("role") == "root_candidate")
        & pl.col("source").is_in(NODE_LOG_SOURCES),
        everywhere=("workload", "workload.bad_network_config", "fix_workload"),
    ),
    Step(
        reports=pl.col("event") == "workload.nccl_no_socket_interface",
        own_fault=pl.lit(False),
        everywhere=None,
        passed=address_banner(),
    ),
    Step(
        reports=pl.col("event") == "workload.nccl_network_not_found",
        own_fault=pl.lit(False),
        everywhere=None,
        # NET/IB's banner: the node opened its HCAs.
        passed=pl.col("event") == "network.nccl_ib_address",
    ),
)
"""The steps read, in order (see the module docstring)."""

MISSING = ("network", "network.interface_missing", "network.interface_missing", "check_fabric_port")
"""``(domain, cause, event, action)`` of the root a node that failed a step its peers got
through is given."""
CAUSES = (
    *(("workload.cuda_newer_than_driver", "workload", "root_candidate", event) for event in DRIVER_REPORTS),
    ("workload.bad_network_config", "workload", "root_candidate", "network.ibv_call_failed"),
    ("workload.bad_arguments", "workload", "root_candidate", STORE_TIMEOUT),
    (MISSING[1], MISSING[0], "root_candidate", MISSING[2]),
)
"""What the rule may give: the job's cause on the reports it relabels, and the root of a node
that failed a step its peers got through."""


def apply(events: pl.DataFrame, context) -> pl.DataFrame:
    """Give each step's reports the job's reading where every node of a job gave one, and
    a root of their node's where some nodes did while their peers got through (see the
    module docstring)."""
    for step in STEPS:
        events = _read_step(events, context, step)
    return _misconfigured_rendezvous(events, context)


ADDRESS = r"^(?:[0-9.]+|.*:.*)$"
"""An IPv4 or IPv6 address: a store host given so names no node the lake could compare."""


def _misconfigured_rendezvous(events: pl.DataFrame, context) -> pl.DataFrame:
    """``events`` with the rendezvous timeouts that say the job's own settings were wrong
    made the job's root candidates: every node (or every rank) joined while the store
    waited for more, or a Slurm job's ranks looked for the store on a host none of its
    nodes is (see the module docstring)."""
    timeout = pl.col("event") == STORE_TIMEOUT
    if events.is_empty() or not events.select(timeout.any()).item():
        return events
    attempts = context.attempts.select(
        "attempt_id", "cluster", "scheduler", pl.col("nodes").list.unique().alias("_nodes"),
        (pl.col("nodes").list.unique().list.len() * processes_per_node()).alias("_ranks"),
    )
    joined = param("joined").cast(pl.Int64, strict=False)
    everyone_joined = (joined == pl.col("_nodes").list.len()) | (joined == pl.col("_ranks"))
    peer = pl.col("_peer")
    elsewhere = (
        (pl.col("scheduler") == "slurm") & ~peer.str.contains(ADDRESS) & (peer != "localhost")
        & ~pl.col("_nodes").list.contains(pl.coalesce(pl.col("_alias_of"), peer))
    )
    aliases = context.topology.filter(pl.col("kind") == "node_alias").select(
        "cluster", pl.col("alias").str.to_lowercase().alias("_peer"), pl.col("node").alias("_alias_of")).unique(
        ["cluster", "_peer"], keep="first")
    reports = (
        events.with_row_index("_row").filter(timeout).join(attempts, on=["attempt_id", "cluster"])
        .with_columns(short_host(param("peer").str.strip_chars()).alias("_peer"))
        .join(aliases, on=["cluster", "_peer"], how="left")
    )
    misconfigured = reports.filter(
        (everyone_joined & (param("world_size").cast(pl.Int64, strict=False) > joined)) | elsewhere.fill_null(False)
    )["_row"]
    if misconfigured.is_empty():
        return events
    theirs = at_rows(events, misconfigured)
    return with_values(events, theirs, role="root_candidate", domain="workload", cause="workload.bad_arguments",
                    action="fix_workload")


def _read_step(events: pl.DataFrame, context, step: Step) -> pl.DataFrame:
    """``events`` with one step's reports read where they happened."""
    reported = (pl.col("role") == "root_candidate") & step.reports & pl.col("node").is_not_null()
    if events.is_empty() or not events.select(reported.any()).item():
        return events
    reporting = events.filter(reported).group_by("attempt_id").agg(pl.col("node").unique().alias("_reporting"))
    nodes = context.attempts.select("attempt_id", pl.col("nodes").list.unique().alias("_nodes")).join(
        reporting, on="attempt_id").filter(pl.col("_nodes").list.len() > 1)
    if step.everywhere is not None:
        events = _everywhere(events, reported, nodes, step)
    if step.passed is None:
        return events
    # Some nodes reported, and a node that did not printed that it got through.
    passed = (
        events.filter(step.passed & pl.col("attempt_id").is_in(nodes["attempt_id"].implode()))
        .select("attempt_id", "node").unique()
        .join(reporting, on="attempt_id")
        .filter(~pl.col("_reporting").list.contains(pl.col("node")))
        .select("attempt_id").unique()
    )
    reports = events.filter(reported).join(passed, on="attempt_id", how="semi").sort("attempt_id", "node", "ts", "event_id")
    if reports.is_empty():
        return events
    first = reports.group_by("attempt_id", "node", maintain_order=True).first()
    domain, cause, event, action = MISSING
    added = new_events(
        first.with_columns(pl.concat_str([
            pl.lit("this node's ranks failed a setup step the job's other nodes got through (they printed "
                   "NCCL's banner for it): the node lacks the interface or HCA its peers have; "), pl.col("message"),
        ]).alias("message")),
        events, rule_id=RULE_ID, event=event, domain=domain, cause=cause, role="root_candidate", action=action,
    )
    links = reports.select("attempt_id", "event_id", "node").join(
        added.select("attempt_id", "node", pl.col("event_id").alias("_root")), on=["attempt_id", "node"])
    return pl.concat([link_to_roots(events, links, "confirmation"), added])


def _everywhere(events: pl.DataFrame, reported: pl.Expr, nodes: pl.DataFrame, step: Step) -> pl.DataFrame:
    """``events`` with the ``reported`` rows of the attempts of ``nodes`` (its nodes and
    those that reported) where every node reported and none blamed itself given the
    step's ``everywhere`` reading."""
    blamed = events.filter(step.own_fault).select("attempt_id").unique()
    everywhere = (
        nodes.join(blamed, on="attempt_id", how="anti")
        .filter(pl.col("_nodes").list.set_difference("_reporting").list.len() == 0)
    )["attempt_id"]
    domain, cause, action = step.everywhere
    theirs = reported & pl.col("attempt_id").is_in(everywhere.implode())
    return with_values(events, theirs, domain=domain, cause=cause, action=action)
