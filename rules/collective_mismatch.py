"""Ranks that timed out in different collectives at one sequence number: their code diverged.

PyTorch numbers the collectives of a process group in the order each rank calls them
(``WorkNCCL(SeqNum=1142, OpType=ALLREDUCE, …)`` in the watchdog's report). When every
timeout report of an attempt names the same number but not the same operation (some ranks
in ``ALLREDUCE``, the others in ``ALLGATHER``), the ranks called different collectives at
the same point: the program took different paths on different ranks (a branch on
rank-local data, an uneven last batch, a condition on the rank), and each waited for a
collective the others never called. PyTorch's own check (``TORCH_DISTRIBUTED_DEBUG=DETAIL``)
reports this as a collective mismatch; without it, the watchdog lines say the same. No
fault of a node makes ranks call different operations: the workload is the root, never
``definitive`` (nothing links the timeouts to it).

Only attempts left without any root candidate get this event, and only when every timeout
report names one sequence number: several process groups (tensor and data parallel), each
numbering its own collectives, give several, and ranks of different groups may well be in
different operations. Point-to-point operations (:data:`POINT_TO_POINT`: a pipeline stage's
``SEND`` and the next stage's ``RECV`` of it) are the two ends of one transfer, one
operation here. Contract: :mod:`engine.rules.python_rules`.
"""

from __future__ import annotations

import polars as pl

from engine.rules.python_rules import COLLECTIVE_TIMEOUT_EVENT, new_events, param, rooted_attempts

RULE_ID = "collective_mismatch"
POINT_TO_POINT = ("SEND", "RECV", "RECVANYSOURCE")
"""PyTorch's point-to-point operation types (c10d's ``OpType``): a rank sending and its peer
receiving are one transfer, not ranks in different collectives."""
CAUSES = (("workload.collective_mismatch", "workload", "root_candidate", "collective_mismatch"),)


def apply(events: pl.DataFrame, context) -> pl.DataFrame:
    """Add a workload root to each attempt without a root whose timeout reports all name one
    collective sequence number and more than one operation."""
    reports = (
        events.filter((pl.col("event") == COLLECTIVE_TIMEOUT_EVENT)
                      & pl.col("params").str.contains('"optype"', literal=True))
        .join(rooted_attempts(events), on="attempt_id", how="anti")
    )
    if reports.is_empty():
        return events
    ranks = pl.coalesce("ranks", pl.concat_list("rank")).list.len()
    reports = reports.with_columns(param("seqnum").alias("_seqnum"), param("optype").alias("_optype"),
                                   ranks.alias("_ranks"))
    per_op = reports.group_by("attempt_id", "_optype").agg(pl.col("_ranks").sum())
    transfer = pl.col("_optype").is_in(POINT_TO_POINT)
    ops = per_op.sort("_optype").group_by("attempt_id").agg(
        pl.concat_str([pl.col("_optype"), pl.lit(" ("), pl.col("_ranks").cast(pl.String), pl.lit(" ranks)")])
        .str.join(", ").alias("_ops"),
        (pl.col("_optype").filter(~transfer).n_unique() + transfer.any().cast(pl.UInt32)).alias("_n_ops"),
    )
    mismatched = (
        reports.group_by("attempt_id").agg(
            pl.col("_seqnum").drop_nulls().first().alias("_seq"),
            (pl.col("_seqnum").n_unique() == 1).alias("_one_seq"),
            pl.col("_seqnum").is_not_null().all().alias("_all_numbered"),
        )
        .join(ops, on="attempt_id")
        .filter(pl.col("_one_seq") & pl.col("_all_numbered") & (pl.col("_n_ops") > 1))
    )
    if mismatched.is_empty():
        return events
    first = (
        reports.sort("attempt_id", "ts", "event_id").group_by("attempt_id", maintain_order=True).first()
        .join(mismatched, on="attempt_id")
    )
    timeout_ms = param("timeout_ms").cast(pl.Int64, strict=False).fill_null(0)
    added = new_events(
        first.with_columns(
            pl.concat_str([pl.lit("ranks called different collectives at SeqNum="), pl.col("_seq"), pl.lit(": "),
                           pl.col("_ops"), pl.lit(" (their code took different paths; each waited for a collective "
                                                  "the others never called)")]).alias("message"),
            pl.struct(pl.col("_seq").alias("seqnum"), pl.col("_ops").alias("operations")).struct.json_encode()
            .alias("params"),
            pl.lit(None, dtype=pl.String).alias("node"),
            pl.lit(None, dtype=pl.Int32).alias("rank"),
            pl.max_horizontal(pl.col("ts") - pl.duration(milliseconds=timeout_ms), pl.col("start_ts")).alias("ts"),
        ).drop("gpu", "port", "caused_by"),
        events, rule_id=RULE_ID, event="collective_mismatch", domain="workload",
        cause="workload.collective_mismatch", role="root_candidate", action="fix_workload",
    )
    return pl.concat([events, added])
