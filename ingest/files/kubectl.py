"""``kubectl logs --timestamps``: an RFC 3339 stamp with nanoseconds, a space, the line.

The container's own line behind the stamp goes through the application prefixes
(:func:`ingest.files.app.peel_prefixes`) for ``rank`` and ``program``, but not ``node``: a
container's own hostname is its pod's, so the node is only the file's (``--node``), except
for a line a Ray head forwards from a worker on another node (``(PPOLearner pid=23310,
ip=10.64.1.51) …``) or Ray's word that another node died, which name no node (the pod's
address is no node's name); the
kubelet's stamp is the time (the application's own stamp, if any, is only removed from
``message``). A line without the leading stamp is rejected.
"""

from __future__ import annotations

import polars as pl

from ingest.files.app import RAY_NODE_DEAD_LITERAL, peel_prefixes
from ingest.files.common import PLACEMENT_COLUMNS, ParseContext, parse_iso, peel

KUBECTL = r"(?P<kts>[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?(?:Z|[+-][0-9]{2}:[0-9]{2}))(?: |$)"


def parse(lines: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """Parse ``kubectl logs --timestamps`` lines (see the module docstring)."""
    frame = peel(lines, "line", KUBECTL, "body")
    frame = frame.with_columns(
        pl.when(pl.col("kts").is_not_null()).then(pl.col("body")).alias("_body"),
        parse_iso(pl.col("kts")).alias("_kts"),
    )
    frame = peel_prefixes(frame, "_body", ctx)
    ts = pl.col("_kts")
    # A Ray worker's line forwarded with its address, or Ray's word that a node died: another
    # node's, which the pod's log cannot name.
    elsewhere = (pl.col("rayip").is_not_null() | pl.col("rayip2").is_not_null()
                 | pl.col("message").str.contains(RAY_NODE_DEAD_LITERAL, literal=True)).fill_null(False)
    reason = (
        pl.when(pl.col("kts").is_null())
        .then(pl.lit("no RFC 3339 timestamp at the start (expected `kubectl logs --timestamps` output)"))
        .when(ts.is_null()).then(pl.lit("invalid date in the RFC 3339 timestamp"))
    )
    return frame.select(
        "file",
        "seq",
        ts.alias("ts"),
        pl.when(ts.is_not_null()).then(pl.lit("line")).alias("ts_kind"),
        # A host the container's line names (NCCL's ``host:pid:tid``, a pdsh label) is the
        # container's hostname: the pod's, not its node's (which, with hostNetwork, is the
        # node --node gives anyway).
        pl.when(elsewhere).then(pl.lit(None, dtype=pl.String))
        .otherwise(pl.lit(ctx.default_node, dtype=pl.String)).alias("node"),
        "rank",
        "program",
        pl.coalesce(pl.col("message"), pl.col("line")).alias("message"),
        reason.cast(pl.String).alias("reason"),
        *PLACEMENT_COLUMNS,
    )
