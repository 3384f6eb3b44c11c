"""The node every failing InfiniBand/RoCE/EFA connection of an attempt touches.

NCCL prints ``NET/IB : Got completion from peer <address><port> with error 12`` (the
transport retry counter ran out) on the rank whose sends went unanswered, naming the other
end of the queue pair; Open MPI's openib BTL prints ``… from <host> to: <peer> error
polling LP CQ with status RETRY EXCEEDED ERROR status number 12 …``; on AWS, the EFA
plugin prints ``NET/OFI Request … completed with error … Unresponsive remote … Peer host
id: i-…`` (the peer's EC2 instance id, or its EFA address before a handshake), and NCCL's
socket transport ``Call to recv from <address><port> failed : Connection timed out``;
UCX prints ``Transport retry count exceeded on mlx5_0:1/IB (synd 0x15 …)`` and, on the next
line, the failed work request with the peer's LID (``[rqpn 0x637 rlid 1422]``). A
bad cable, port or HCA breaks every connection through it, so the ranks on both sides of
it report: the other nodes name the broken node's address, and the broken node names each
of theirs. Every such report is a root candidate, and without more the verdict blames
every node that reported.

The broken node is the one end all the failing connections share: the peer named by the
most reporting nodes, when no other peer is named as often, or the one peer named when one
node reports (the other node of a two-node job died or hung, and its ranks said nothing:
had the link between them broken, both would report). Which node has that address is
read from NCCL's own INFO banners (``Bootstrap : Using ib0:10.0.0.3<0>``, ``NET/IB : Using
[0]mlx5_0:1/IB ; OOB ib0:10.0.0.3<0>``) and the EFA errors' ``My host id:`` (the benign
address banners' ``addr``, :func:`engine.extract.address_banner`), where exactly one node
of the attempt printed it; a peer named by its host name (Open MPI's openib BTL prints
``from <host> to: <peer host>``) is that node of the attempt. Without either, a node never names its own address:
when every reporting node but one names the shared peer and that one node names only other
peers (no more of them than there are nodes naming the shared one), that node is the shared
end; when every reporting node names it, none of them is it, and the one node of the
attempt that reported nothing is (unless another fault is a root of the attempt already,
an OOM kill or a GPU off the bus on another node, which the precedence rules weigh against
the reports; one on that quiet node itself, Slurm's report that it stopped answering, only
confirms it).

The shared end's reports stay root candidates and the other nodes' reports become cascades
of its first one; a shared end that reported nothing itself (its log lost with it) gets a
root candidate of its own, of which every report is a cascade, marked
:data:`~engine.rules.python_rules.UNDECIDED_PARAM` (only the others' reports place the
fault, and nothing says whether its HCA, its cable or the node itself broke: the verdict is
never ``definitive``); when that silent end's own
kernel reported a fault of its GPU or host, or one of its ranks died of the job's own error
(:data:`LATE_DOMAINS`), before the first report can have been printed (its ``ts_hi``: an unstamped report only inherited an earlier stamp,
and a node that shut down at 15:44 is why reports stamped "15:41" failed), or stamped
after the attempt ended, the reports are that fault's cascades instead. When every reporting
node names one end nothing maps and several nodes reported nothing, the end is one of them,
none of the reporters: one root on no node stands for the reports, which become
``context``, never ``definitive``. When two nodes only name each other, the end is the one
whose port counted errors during the attempt (:data:`PORT_ERRORS`: symbol or receive errors
rising), or whose HCA told NCCL of a change of its own (:data:`PORT_CHANGES`: its GID table
changed, an address taken off its RoCE interface) within :data:`CHANGE_BEFORE` before the
first report, when the other's did not; otherwise nothing tells the ends apart: the reports stay
root candidates, both nodes are named, and the reports carry
:data:`~engine.rules.python_rules.UNDECIDED_PARAM`, so the verdict is never ``definitive``.

Connections that share no end at all (at least :data:`SCATTERED_NODES` reporting nodes,
each peer named by one of them only: pairs of nodes across the job that have nothing in
common but the fabric between them, a switch dropping traffic) name no node: their reports
become ``context`` and one root of the attempt's stands for them, at the first of them,
on no node. So do two reporting nodes that each name one peer, both known to be other
nodes of the attempt: four nodes, two connections, no end in common. Nothing corroborates
such an inference, so it is never ``definitive``.
Contract: :mod:`engine.rules.python_rules`.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from engine.extract import address_banner
from engine.rules.python_rules import (
    UNDECIDED_PARAM, link_to_roots, new_events, origin_position, with_param, with_role,
)

EVENTS = ("network.ib_retry_exceeded", "network.efa_peer_unresponsive", "network.socket_peer_unreachable")
"""The events of a ``with error 12`` / ``status=12`` / ``status number 12`` completion, of
EFA's unresponsive peer (``fabric.yaml``) and of a NET/Socket connection that timed out
(``communication.yaml``): a connection's transport retries ran out."""
UCX_REQUEST = "network.ucx_failed_work_request"
"""The second line of UCX's completion error report: the failed work request, with the
remote LID (``fabric.yaml``)."""
RULE_ID = "ib_common_peer"
SILENT_END_EVENT = "network.ib_common_peer"
LATE_DOMAINS = ("gpu", "gpu_memory", "nvlink", "host", "workload")
"""The domains of a node's own fault that explain why every connection to it failed: a GPU
that fell off the bus, an NVLink or host fault, or a rank that died of its own error (a
CUDA OOM, a segfault: its queue pairs closed with it, "a remote process exiting
prematurely" in NCCL's words). Before the reports, such a fault on the silent shared end is
why they failed; stamped after the attempt ended, it was seen by a clock that runs ahead (its ranks printed nothing to say so): either way its reports'
cascades are its, and with no root before the end it is the verdict's, never
``definitive``."""
PORT_ERRORS = "network.link_errors"
"""The cause of a port's error counters rising (``metrics.yaml``: symbol and receive errors,
a bad cable or transceiver): what tells the broken end of two nodes that name each other."""
PORT_CHANGES = ("network.gid_table_change",)
"""Events of an HCA's own port changing under its connections (``fabric.yaml``'s NCCL async
events): background alone, the broken end of two nodes that name each other when only one
saw it just before they failed."""
CHANGE_BEFORE = timedelta(minutes=2)
"""How long before an attempt's first failing connection a port change can be what broke it."""
SCATTERED_EVENT = "network.ib_errors_scattered"
SCATTERED_NODES = 3
"""Reporting nodes from which failing connections that share no end are the fabric's."""
CAUSES = (
    ("network.transport_retry_exceeded", "network", "root_candidate", SILENT_END_EVENT),
    ("network.transport_retry_exceeded", "network", "root_candidate", SCATTERED_EVENT),
)
"""The node whose address every failing connection names, when it reported nothing itself;
the fabric between the nodes of failing connections that share no end."""

ROOT_COLUMNS = ["attempt_id", "ts", "origin", "ts_source", "source", "cluster", "job_id", "user", "state", "start_ts",
                "end_ts"]
"""The columns of a report an added root keeps (the line it rests on, its attempt)."""


def _ucx_peers(events: pl.DataFrame) -> pl.DataFrame:
    """``attempt_id``, ``node``, ``_file``, ``_line`` and ``_lid_peer`` of each UCX completion
    error's peer: the LID of the failed work request UCX prints on the next line of the same
    node's output (:data:`UCX_REQUEST`), as ``lid <n>``."""
    return events.filter(pl.col("event") == UCX_REQUEST).select(
        "attempt_id", "node", *origin_position(),
        pl.concat_str([pl.lit("lid "), pl.col("params").str.json_path_match("$.lid")]).alias("_lid_peer"),
    ).with_columns(pl.col("_line") - 1).drop_nulls().unique(["attempt_id", "node", "_file", "_line"], keep="first",
                                                            maintain_order=True)


def apply(events: pl.DataFrame, context) -> pl.DataFrame:
    """Make the reports of the nodes around the shared end of an attempt's failing
    connections cascades of that end's first report (see the module docstring)."""
    reports = events.filter(
        pl.col("event").is_in(EVENTS) & (pl.col("role") == "root_candidate")
        & pl.col("attempt_id").is_not_null() & pl.col("node").is_not_null()
    ).with_columns(*origin_position()).join(
        _ucx_peers(events), on=["attempt_id", "node", "_file", "_line"], how="left", maintain_order="left",
    ).with_columns(
        # EFA names a peer it never reached by its address only; UCX by its LID, a line below.
        pl.coalesce(pl.col("params").str.json_path_match("$.peer"), pl.col("params").str.json_path_match("$.peer_addr"),
                    "_lid_peer").alias("_peer")
    ).drop("_file", "_line", "_lid_peer").filter(pl.col("_peer").is_not_null())
    if reports.is_empty():
        return events
    pairs = reports.select("attempt_id", "node", "_peer").unique()
    named = pairs.group_by("attempt_id", "_peer").agg(pl.len().alias("_by"))
    # The peer named by the most nodes, when no other peer is named as often; or the one
    # peer the one reporting node names (a two-node job whose other node went silent).
    lone = pairs.group_by("attempt_id").agg((pl.col("node").n_unique() == 1).alias("_lone"))
    shared = (
        named.join(lone, on="attempt_id")
        .filter(pl.col("_by") == pl.col("_by").max().over("attempt_id"))
        .filter((pl.len().over("attempt_id") == 1) & ((pl.col("_by") >= 2) | pl.col("_lone")))
        .select("attempt_id", pl.col("_peer").alias("_shared"), "_by")
    )
    # The node whose address a peer is, where one node of the attempt printed it.
    addresses = (
        events.filter(address_banner())
        .select("attempt_id", "node", "params")
        .select("attempt_id", "node", pl.col("params").str.json_path_match("$.addr").alias("_address"))
        .drop_nulls().unique()
        .filter(pl.len().over("attempt_id", "_address") == 1)
    )
    # Or the node of the attempt the peer names outright (Open MPI's openib names hosts).
    names = context.attempts.select("attempt_id", pl.col("nodes").alias("node")).explode("node").drop_nulls()
    by_address = (
        _nodes_of(shared, "_shared", "_end", addresses, names)
        .select("attempt_id", "_end").unique("attempt_id", keep="first", maintain_order=True)
    )
    # Otherwise the one reporting node that never names the shared peer, and names few
    # enough others.
    per_node = pairs.join(shared, on="attempt_id").group_by("attempt_id", "node").agg(
        (pl.col("_peer") == pl.col("_shared")).any().alias("_names_shared"),
        pl.len().alias("_peers"),
        pl.col("_by").first(),
    )
    inferred = (
        per_node.filter(~pl.col("_names_shared"))
        .filter((pl.len().over("attempt_id") == 1) & (pl.col("_peers") <= pl.col("_by")))
        .select("attempt_id", pl.col("node").alias("_end"))
    )
    # Or, when every reporting node names the shared peer (so none of them is it) and the
    # attempt has one node that reported nothing, that node; unless another fault is a root
    # of the attempt already (an OOM kill, a dead GPU), which the other rules weigh against
    # the reports.
    reporting = pairs.select("attempt_id", "node").unique()
    reporters = reporting.group_by("attempt_id").agg(pl.len().alias("_reporters"))
    quiet = (
        names.join(reporting, on=["attempt_id", "node"], how="anti")
        .filter(pl.len().over("attempt_id") == 1)
    )
    # A root on that one quiet node (Slurm's report that it stopped answering, its GPU off
    # the bus) is why the connections to it failed: it points at the node, not elsewhere.
    other_roots = events.filter(
        (pl.col("role") == "root_candidate") & pl.col("attempt_id").is_not_null() & ~pl.col("event").is_in(EVENTS)
    ).select("attempt_id", "node").join(quiet, on=["attempt_id", "node"], how="anti").select("attempt_id").unique()
    named_by_all = (
        shared.join(reporters, on="attempt_id").filter(pl.col("_by") == pl.col("_reporters"))
        .join(other_roots, on="attempt_id", how="anti")
    )
    silent = quiet.join(named_by_all, on="attempt_id", how="semi").select("attempt_id", pl.col("node").alias("_end"))
    # Or, of two nodes that only name each other, the one whose port counted errors, or
    # whose port changed just before the first report.
    first_report = reports.group_by("attempt_id").agg(pl.col("ts").min().alias("_first"))
    changed = (
        events.filter(pl.col("event").is_in(PORT_CHANGES)).join(first_report, on="attempt_id")
        .filter(pl.col("ts").is_between(pl.col("_first") - CHANGE_BEFORE, pl.col("_first")))
        .select("attempt_id", "node", pl.lit(True).alias("_changed"))
    )
    counted = pl.concat([
        events.filter(pl.col("cause") == PORT_ERRORS).select("attempt_id", "node", pl.lit(False).alias("_changed")),
        changed,
    ]).group_by("attempt_id", "node").agg(pl.col("_changed").all())
    mutual = (
        reporters.filter(pl.col("_reporters") == 2).join(shared, on="attempt_id", how="anti")
        .join(reporting, on="attempt_id")
        .join(counted, on=["attempt_id", "node"])
        .filter(pl.len().over("attempt_id") == 1)
        .select("attempt_id", pl.col("node").alias("_end"), "_changed")
    )
    # Each attempt's end by the first of these ways that finds one (each finds one at most).
    ends = pl.concat([by_address, inferred, mutual.drop("_changed"), silent]).unique(
        "attempt_id", keep="first", maintain_order=True)
    # Two reporting nodes and nothing that tells their ends apart: the connections between
    # them broke at one end or the other. Both stay named, never definitively.
    undecided = (
        reporters.filter(pl.col("_reporters") == 2)
        .join(shared, on="attempt_id", how="anti").join(ends, on="attempt_id", how="anti")["attempt_id"]
    )
    events = with_param(
        events,
        pl.col("event").is_in(EVENTS) & (pl.col("role") == "root_candidate") & pl.col("attempt_id").is_in(undecided.implode()),
        UNDECIDED_PARAM, "two nodes report failing connections and nothing tells which end broke",
    )
    # A port change only tells the end by its moment (a container's start changes the GID
    # table too): the end it names is never definitive.
    by_change = mutual.filter("_changed").select("attempt_id", pl.col("_end").alias("node"))
    events = with_param(
        events,
        pl.col("event").is_in(EVENTS) & (pl.col("role") == "root_candidate")
        & pl.struct("attempt_id", "node").is_in(by_change.to_struct().implode()),
        UNDECIDED_PARAM, "of two nodes whose connections failed, the one whose port changed just before",
    )
    ordered = reports.sort("attempt_id", "ts", "event_id")
    # The node each named peer is, where the attempt tells.
    peer_nodes = (
        _nodes_of(pairs, "_peer", "_peer_node", addresses, names)
        .select("attempt_id", "node", "_peer", "_peer_node").unique(["attempt_id", "node", "_peer"], keep="first")
    )
    events = _scattered(events, ordered, pairs, named, peer_nodes)
    # Every reporting node names the shared peer, nothing says which node it is, and several
    # nodes reported nothing: it is one of those, not a reporter.
    unplaced = (
        named_by_all.filter(pl.col("_reporters") >= 2)
        .join(ends, on="attempt_id", how="anti")
        .select("attempt_id", "_shared")
    )
    events = _unplaced(events, ordered, unplaced)
    if ends.is_empty():
        return events
    first = (
        ordered.join(ends, left_on=["attempt_id", "node"], right_on=["attempt_id", "_end"])
        .group_by("attempt_id", maintain_order=True)
        .agg(pl.col("event_id").first().alias("_root"), pl.col("node").first().alias("_end"))
    )
    # A shared end that reported nothing: a root of its own, at the first report naming it,
    # unless its own kernel reported a fault of its hardware before that report can have
    # been printed, or after the attempt ended.
    silent = (
        ordered.join(ends.join(first, on="attempt_id", how="anti"), on="attempt_id")
        .join(shared, on="attempt_id")
        .group_by("attempt_id", maintain_order=True).first()
    )
    late = (
        events.filter((pl.col("role") == "root_candidate") & pl.col("domain").is_in(LATE_DOMAINS))
        .join(silent.select("attempt_id", pl.col("_end").alias("node"), pl.col("ts_hi").alias("_reported_by")),
              on=["attempt_id", "node"])
        .filter((pl.col("ts") > pl.col("end_ts")) | (pl.col("ts") <= pl.col("_reported_by")))
        .sort("attempt_id", "ts", "event_id")
        .group_by("attempt_id", maintain_order=True)
        .agg(pl.col("event_id").first().alias("_root"), pl.col("node").first().alias("_end"))
    )
    silent = silent.join(late, on="attempt_id", how="anti")
    added = new_events(
        silent.select(
            *ROOT_COLUMNS,
            pl.col("_end").alias("node"),
            pl.concat_str([
                pl.lit("every failing connection of the attempt names "), pl.col("_shared"),
                pl.lit(", the address "), pl.col("_end"), pl.lit("'s NCCL uses: its link, port or HCA broke"),
            ]).alias("message"),
            pl.struct(pl.col("_shared").alias("peer")).struct.json_encode().alias("params"),
        ),
        events, rule_id=RULE_ID, event=SILENT_END_EVENT, domain="network", cause="network.transport_retry_exceeded",
        role="root_candidate", action="check_fabric_port",
    )
    # Only the others' reports place it: its own logs say nothing of what broke (its HCA,
    # its cable, the node itself), so the verdict is never definitive.
    added = with_param(added, pl.lit(True), UNDECIDED_PARAM,
                       "only the other nodes' failing connections place the fault; this node reported nothing")
    first = pl.concat([
        first, late, added.select("attempt_id", pl.col("event_id").alias("_root"), pl.col("node").alias("_end")),
    ])
    around = (
        reports.join(first, on="attempt_id").filter(pl.col("node") != pl.col("_end"))
        .select("attempt_id", "event_id", "_root").unique()
    )
    # The reports are root candidates, which no earlier rule linked to anything.
    return pl.concat([link_to_roots(events, around, "cascade"), added])


def _unplaced(events: pl.DataFrame, ordered: pl.DataFrame, unplaced: pl.DataFrame) -> pl.DataFrame:
    """``events`` with the reports of ``unplaced`` attempts (``attempt_id``, ``_shared``:
    every reporting node names that one peer, which no node of the attempt is known by)
    standing for one root on no node (:func:`_root_on_no_node`): the shared end is one of
    the nodes that reported nothing, none of the reporters, and nothing says which."""
    message = pl.concat_str([
        pl.lit("every failing connection of the attempt names "), pl.col("_shared"),
        pl.lit(", an end no node of the attempt is known by: one of the nodes that reported nothing, "
               "not a reporting node, lost its link, port or HCA"),
    ])
    params = pl.struct(pl.col("_shared").alias("peer")).struct.json_encode()
    return _root_on_no_node(events, ordered, unplaced, SILENT_END_EVENT, message, params)


def _nodes_of(rows: pl.DataFrame, peer: str, into: str, addresses: pl.DataFrame, names: pl.DataFrame) -> pl.DataFrame:
    """``rows`` (with ``attempt_id``) whose peer, in column ``peer``, is a known node of
    their attempt, with that node as ``into``: the node whose address banner printed it
    (``addresses``: ``attempt_id``, ``node``, ``_address``), then the node of the attempt
    (``names``: ``attempt_id``, ``node``) it names outright; a peer known both ways has a
    row for each, the address's first."""
    return pl.concat([
        rows.join(addresses.rename({"node": into}), left_on=["attempt_id", peer], right_on=["attempt_id", "_address"]),
        rows.with_columns(pl.col(peer).str.to_lowercase().alias(into))
        .join(names.rename({"node": into}), on=["attempt_id", into]),
    ])


def _scattered(
    events: pl.DataFrame, ordered: pl.DataFrame, pairs: pl.DataFrame, named: pl.DataFrame, peer_nodes: pl.DataFrame,
) -> pl.DataFrame:
    """``events`` with the reports of attempts whose failing connections share no end
    standing for one root of the fabric's (:func:`_root_on_no_node`; see the module
    docstring). ``ordered``: the reports by time; ``pairs``: each reporting node and peer it
    names; ``named``: how many nodes name each peer; ``peer_nodes``: the pairs whose peer
    is a known node of the attempt, with that node (``_peer_node``)."""
    # Two reporting nodes, one peer each, and four distinct nodes at the ends.
    disjoint = (
        pairs.join(peer_nodes, on=["attempt_id", "node", "_peer"], how="left")
        .group_by("attempt_id")
        .agg(pl.len().alias("_pairs"), pl.col("_peer_node").null_count().alias("_unknown"),
             pl.col("node").append(pl.col("_peer_node")).n_unique().alias("_ends"))
        .filter((pl.col("_pairs") == 2) & (pl.col("_unknown") == 0) & (pl.col("_ends") == 4))
        .select("attempt_id", pl.lit(True).alias("_disjoint"))
    )
    scattered = (
        named.group_by("attempt_id").agg(pl.col("_by").max().alias("_most"))
        .join(pairs.group_by("attempt_id").agg(pl.col("node").n_unique().alias("_nodes")), on="attempt_id")
        .join(disjoint, on="attempt_id", how="left")
        .filter((pl.col("_most") == 1)
                & ((pl.col("_nodes") >= SCATTERED_NODES) | ((pl.col("_nodes") == 2) & pl.col("_disjoint").fill_null(False))))
        .select("attempt_id", "_nodes")
    )
    message = pl.concat_str([
        pl.lit("the failing connections of "), pl.col("_nodes").cast(pl.String),
        pl.lit(" nodes share no end (each names a peer no other names): the fabric between them dropped "
               "their traffic, not one node's link or HCA"),
    ])
    return _root_on_no_node(events, ordered, scattered, SCATTERED_EVENT, message)


def _root_on_no_node(
    events: pl.DataFrame, ordered: pl.DataFrame, attempts: pl.DataFrame, event: str, message: pl.Expr,
    params: pl.Expr | None = None,
) -> pl.DataFrame:
    """``events`` with the reports of ``attempts`` (one row each, the columns ``message``
    and ``params`` read) made ``context`` and one root ``event`` on no node added for each
    at its first report (``ordered``: the reports by time). Nothing corroborates such a
    root, so it is never ``definitive``."""
    if attempts.is_empty():
        return events
    reports = ordered.join(attempts, on="attempt_id")
    first = reports.group_by("attempt_id", maintain_order=True).first()
    added = new_events(
        first.select(
            *ROOT_COLUMNS,
            pl.lit(None, dtype=pl.String).alias("node"),
            message.alias("message"),
            *([params.alias("params")] if params is not None else []),
        ),
        events, rule_id=RULE_ID, event=event, domain="network", cause="network.transport_retry_exceeded",
        role="root_candidate", action="check_fabric_port",
    )
    keys = reports.select("attempt_id", "event_id").with_columns(_demoted=pl.lit(True))
    demoted = events.join(keys, on=["attempt_id", "event_id"], how="left", maintain_order="left")["_demoted"]
    return pl.concat([with_role(events, demoted.fill_null(False), "context"), added])
