"""A rank's program error outranks a GPU or network fault the job never saw.

A node event attaches to every attempt that ran on its node, and on a node several jobs
share the kernel reports every GPU's faults: an XID on a neighbour's GPU lands beside this
attempt's own failure, often shortly before it; so does the link-down of a port the job's
traffic never used (a management NIC). Which GPUs and ports an attempt used is rarely in its
logs, but how it failed is: a rank that died of a *program error* — an exception no
hardware fault raises (``ValueError``, ``KeyError``, a tensor shape mismatch, a CUDA
kernel's failed assertion: see :data:`PROGRAM_ERRORS`, :data:`TENSOR_MISMATCH` and
:data:`DEVICE_ASSERT_RULES`) — failed for its own reason. A fault of
the job's own GPU reaches the job as a CUDA error (``uncorrectable ECC error``,
``unspecified launch failure``), which ``precedence.xid_over_cuda_error`` makes the fault's
confirmation; a port of its own as NCCL transport errors, which the port-fault precedence
rules make the port's.

So in an attempt with a program error, a root candidate of a GPU or network domain
(:data:`DEVICE_DOMAINS`) that no event of the attempt confirms (program errors aside: the
XID precedence pairs any exception on the node with the XID) becomes ``context`` — unless
it is a fault of a GPU (:data:`GPU_DOMAINS`) on a node whose every GPU the attempt held
(as many per node as the topology lists on that node, a GB200 tray's 4; else
:data:`WHOLE_NODE_GPUS` or more: no neighbour's GPU is there) within
:data:`SIMULTANEOUS` of the program error: then it is the job's own GPU failing at the same
moment, a second explanation the verdict weighs (``ambiguous``), not a neighbour's, and
both carry :data:`~engine.rules.python_rules.RIVAL_PARAM` (on one node too); a
program error the XID precedence had made that fault's confirmation is a root candidate
again. One it had made the confirmation of a fault this rule demotes is a root candidate
again too (:func:`engine.relabel.restore_orphaned_confirmations`). A fault some error of the job
confirms keeps its role. Host faults are left alone (a dead node raises nothing), and so
are storage faults on the nodes where a rank died of the program error (a file system that
went away makes imports fail there); a storage fault that no event of the job confirms on
another node (one client evicted by a Lustre target while a rank elsewhere raised a
``ValueError``), where every program error names its node, becomes ``context`` too: that
node's ranks never noticed it.

Declared in ``gpu_xid.yaml`` after ``lost_gpu``, whose restored fall-offs it sees.
Contract: :mod:`engine.rules.python_rules`.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from engine.rules.python_rules import RIVAL_PARAM, with_param

EXCEPTION_RULE = "framework.python_exception"
"""The rule (``cuda_framework.yaml``) whose ``exception`` and ``exc_message`` params name the
exception that ended a process."""

DEVICE_ASSERT_RULES = ("cuda.device_side_assert", "cuda.kernel_assert")
"""The rules (``cuda_framework.yaml``) of a CUDA kernel's failed assertion and the
"device-side assert triggered" error it raises: an index or class label out of range that
the program passed a kernel, which no hardware fault makes."""

RULES = (EXCEPTION_RULE, *DEVICE_ASSERT_RULES)

PROGRAM_ERRORS = (
    "ValueError", "KeyError", "IndexError", "TypeError", "AttributeError", "NameError",
    "UnboundLocalError", "ImportError", "ModuleNotFoundError", "ZeroDivisionError",
    "NotImplementedError", "SyntaxError",
)
"""Exception classes raised by the program's own logic, data handling or imports. Not here:
``RuntimeError`` and ``OSError`` (CUDA failures are raised as those), ``AssertionError`` (a
check on a loss that turned NaN), ``FileNotFoundError`` (a file system that went away)."""

TENSOR_MISMATCH = (
    r"^(?:The size of tensor a \(\d+\) must match the size of tensor b \(\d+\)"
    r"|mat1 and mat2 shapes cannot be multiplied"
    r"|Expected all tensors to be on the same device"
    r"|stack expects each tensor to be equal size"
    r"|Sizes of tensors must match except in dimension"
    r"|shape '\[[-\d, ]*\]' is invalid for input of size"
    r"|Given groups=\d+, weight of size)"
)
"""PyTorch's ``RuntimeError`` messages for tensors of the wrong shape or device: the
program's arithmetic, whatever the hardware did (``torch.stack`` and ``torch.cat`` of
samples a collate function left uneven, a ``view`` to the wrong shape, a convolution given
the wrong number of channels)."""

DEVICE_DOMAINS = ("gpu", "gpu_memory", "nvlink", "network")
"""Domains of the faults a program error outranks when nothing of the job confirms them."""
GPU_DOMAINS = ("gpu", "gpu_memory", "nvlink")
"""The domains of a GPU's own faults."""
WHOLE_NODE_GPUS = 8
"""GPUs per node at which an attempt holds its nodes whole where the topology lists none of
a node's GPUs: no node has more."""
SIMULTANEOUS = timedelta(seconds=5)
"""How close to a program error a fault of the job's own GPU competes with it: the default
clock skew between nodes, within which no clock orders the two."""


def program_errors() -> pl.Expr:
    """True for the events of :data:`EXCEPTION_RULE` that report a program error, and for
    device-side asserts (:data:`DEVICE_ASSERT_RULES`)."""
    exception = pl.col("rule_id") == EXCEPTION_RULE
    # Only the exception rule's params are parsed, not every event's.
    params = pl.when(exception).then(pl.col("params"))
    cls = params.str.json_path_match("$.exception")
    message = params.str.json_path_match("$.exc_message")
    mismatch = (cls == "RuntimeError") & message.str.contains(TENSOR_MISMATCH)
    return (exception & (cls.is_in(PROGRAM_ERRORS) | mismatch)).fill_null(False) \
        | pl.col("rule_id").is_in(DEVICE_ASSERT_RULES)


def apply(events: pl.DataFrame, context) -> pl.DataFrame:
    """Demote the GPU and network root candidates nothing confirms in attempts whose rank
    died of a program error (see the module docstring)."""
    # Every step but the last runs on the few rows it concerns, not on the whole run's events.
    exceptions = events.filter(pl.col("rule_id").is_in(RULES))
    raised = exceptions.filter(program_errors())
    attempts = raised.filter(pl.col("role").is_in(["root_candidate", "confirmation"]))["attempt_id"]
    if attempts.is_empty():
        return events
    mine = pl.col("attempt_id").is_in(attempts.unique().implode())
    # A storage fault of a node where no rank died of a program error, in an attempt whose
    # program errors all name their node, is a suspect too.
    error_nodes = raised.select("attempt_id", "node").unique()
    placed = error_nodes.group_by("attempt_id").agg(pl.col("node").is_not_null().all().alias("_placed"))
    candidates = events.with_row_index("_row").filter(mine & (pl.col("role") == "root_candidate"))
    elsewhere = (
        candidates.filter((pl.col("domain") == "storage") & pl.col("node").is_not_null())
        .join(placed.filter("_placed"), on="attempt_id", how="semi")
        .join(error_nodes, on=["attempt_id", "node"], how="anti")
    )
    suspects = pl.concat([candidates.filter(pl.col("domain").is_in(DEVICE_DOMAINS)), elsewhere]).select(
        "_row", "attempt_id", "event_id", "domain", "ts", "node")
    if suspects.is_empty():
        return events
    confirmed = (
        events.filter(mine & (pl.col("role") == "confirmation") & pl.col("caused_by").is_not_null())
        .filter(~program_errors())
        .select("attempt_id", pl.col("caused_by").alias("event_id"))
        .unique()
    )
    # A fault of the job's own GPU (the attempt held its node whole) at the moment of the
    # program error competes with it.
    held = _held_whole(context.attempts.join(suspects.select("attempt_id").unique(), on="attempt_id", how="semi"),
                       context.topology)
    errors = raised.select(
        "attempt_id", (pl.col("ts") - SIMULTANEOUS).alias("_from"), (pl.col("ts_hi") + SIMULTANEOUS).alias("_to"))
    competing = (
        suspects.join(held, on=["attempt_id", "node"], how="semi").filter(pl.col("domain").is_in(GPU_DOMAINS))
        .join(errors, on="attempt_id").filter(pl.col("ts").is_between("_from", "_to"))
        .select("_row", "attempt_id", "event_id").unique()
    )
    unseen = (
        suspects.join(confirmed, on=["attempt_id", "event_id"], how="anti")
        .join(competing, on="_row", how="anti")["_row"]
    )
    events = events.with_columns(events["role"].scatter(unseen, "context"))
    if competing.is_empty():
        return events
    # The XID precedence made the program error the competing fault's confirmation: it is a
    # root of its own again, beside that fault.
    freed = program_errors() & (pl.col("role") == "confirmation") & pl.struct("attempt_id", "caused_by").is_in(
        competing.select("attempt_id", pl.col("event_id").alias("caused_by")).to_struct().implode())
    events = events.with_columns(
        pl.when(freed).then(pl.lit("root_candidate")).otherwise(pl.col("role")).alias("role"),
        pl.when(freed).then(pl.lit(None, dtype=pl.String)).otherwise(pl.col("caused_by")).alias("caused_by"),
    )
    # Both sides are marked: on one node the verdict would otherwise take an unstamped
    # error whose span holds the fault's moment for the fault's local consequence.
    rival = (
        pl.int_range(pl.len()).is_in(competing["_row"].implode())
        | (program_errors() & (pl.col("role") == "root_candidate")
           & pl.col("attempt_id").is_in(competing["attempt_id"].implode()))
    )
    return with_param(events, rival, RIVAL_PARAM, "a program error and the job's own GPU failing at its moment")


def _held_whole(attempts: pl.DataFrame, topology: pl.DataFrame) -> pl.DataFrame:
    """``attempt_id`` and ``node`` of each node of ``attempts`` whose every GPU the attempt
    held: at least as many per node as the topology lists on the node, else
    :data:`WHOLE_NODE_GPUS`."""
    listed = topology.filter(pl.col("kind") == "gpu").group_by("cluster", "node").agg(
        pl.col("gpu").n_unique().alias("_gpus"))
    return (
        attempts.select("attempt_id", "cluster", "gpus_per_node", pl.col("nodes").alias("node")).explode("node")
        .join(listed, on=["cluster", "node"], how="left")
        .filter(pl.col("gpus_per_node") >= pl.col("_gpus").fill_null(WHOLE_NODE_GPUS))
        .select("attempt_id", "node")
    )
