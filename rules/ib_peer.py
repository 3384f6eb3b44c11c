"""The node every failing InfiniBand/RoCE connection of an attempt touches.

NCCL prints ``NET/IB : Got completion from peer <address><port> with error 12`` (the
transport retry counter ran out) on the rank whose sends went unanswered, naming the other
end of the queue pair. A bad cable, port or HCA breaks every connection through it, so the
ranks on both sides of it report: the other nodes name the broken node's address, and the
broken node names each of theirs. Every such report is a root candidate, and without more
the verdict blames every node that reported.

The broken node is the one end all the failing connections share. Nothing in the logs maps
addresses to nodes, but a node never names its own address: when every reporting node but
one names the same peer, more often than any other peer is named, and that one node names
only other peers (no more of them than there are nodes naming the shared one), that node is
the shared end. Its reports stay root candidates; the other nodes' reports become
cascades caused by its first one. When the shared peer's node reported nothing, or two
nodes only name each other, nothing tells the ends apart and the reports stay as they are.
Contract: :mod:`engine.rules.python_rules`.
"""

from __future__ import annotations

import polars as pl

from engine.rules.python_rules import link_to_roots

EVENT = "network.ib_retry_exceeded"
"""The event of a ``with error 12`` / ``status=12`` completion (``fabric.yaml``)."""


def apply(events: pl.DataFrame, context) -> pl.DataFrame:
    """Make the reports of the nodes around the shared end of an attempt's failing
    connections cascades of that end's first report (see the module docstring)."""
    reports = events.filter(
        (pl.col("event") == EVENT) & (pl.col("role") == "root_candidate")
        & pl.col("attempt_id").is_not_null() & pl.col("node").is_not_null()
    ).with_columns(pl.col("params").str.json_path_match("$.peer").alias("_peer")).filter(pl.col("_peer").is_not_null())
    if reports.is_empty():
        return events
    pairs = reports.select("attempt_id", "node", "_peer").unique()
    named = pairs.group_by("attempt_id", "_peer").agg(pl.len().alias("_by"))
    # The peer named by the most nodes, when no other peer is named as often.
    shared = (
        named.filter(pl.col("_by") == pl.col("_by").max().over("attempt_id"))
        .filter((pl.len().over("attempt_id") == 1) & (pl.col("_by") >= 2))
        .select("attempt_id", pl.col("_peer").alias("_shared"), "_by")
    )
    # The one reporting node that never names the shared peer, and names few enough others.
    per_node = pairs.join(shared, on="attempt_id").group_by("attempt_id", "node").agg(
        (pl.col("_peer") == pl.col("_shared")).any().alias("_names_shared"),
        pl.len().alias("_peers"),
        pl.col("_by").first(),
    )
    ends = (
        per_node.filter(~pl.col("_names_shared"))
        .filter((pl.len().over("attempt_id") == 1) & (pl.col("_peers") <= pl.col("_by")))
        .select("attempt_id", pl.col("node").alias("_end"))
    )
    if ends.is_empty():
        return events
    first = (
        reports.join(ends, left_on=["attempt_id", "node"], right_on=["attempt_id", "_end"])
        .sort("attempt_id", "ts", "event_id")
        .group_by("attempt_id", maintain_order=True)
        .agg(pl.col("event_id").first().alias("_root"), pl.col("node").first().alias("_end"))
    )
    around = (
        reports.join(first, on="attempt_id").filter(pl.col("node") != pl.col("_end"))
        .select("attempt_id", "event_id", "_root").unique()
    )
    # The reports are root candidates, which no earlier rule linked to anything.
    return link_to_roots(events, around, "cascade")
