"""Outages that open and close: a port's link down and back up, a Lustre client's lost and
restored connection to its target, an NFS server that stopped answering and came back.

A recovered outage is often no root of the failure that followed it: one that ended long
before the attempt started failing (:func:`engine.relabel.demote_recovered_outages`), or one
the attempt went on reporting progress after (:func:`engine.decide.demote_survived_outages`).
Both find an outage's recoveries here.
"""

from __future__ import annotations

import polars as pl

from engine.rules.python_rules import param

LINK_DOWN_CAUSES = ("network.link_down", "network.link_flap", "network.nic_tx_timeout", "network.transceiver_error")
"""Causes of a port or NIC that stopped passing traffic and may come back: a link-down, the
port error NCCL's async thread reports, a transmit queue the driver reset, a transceiver's
error that took its port down (high temperature, a bad cable) until it was reseated or
cooled ("Cable plugged", the port active again)."""
LINK_UP_CAUSE = "network.link_up"
LUSTRE_LOST_EVENT = "storage.lustre_connection_lost"
LUSTRE_RESTORED_EVENT = "storage.lustre_connection_restored"
NFS_DOWN_EVENT = "storage.nfs_not_responding"
NFS_UP_EVENT = "storage.nfs_recovered"


def outage(down: bool) -> pl.Expr:
    """Which kind of outage an event opens (``down``) or closes, as ``_outage``: ``link``
    (a port's link-down / link-up, by cause), ``lustre`` (a client's lost / restored
    connection) or ``nfs`` (a server ``not responding`` / ``OK``); null for other events."""
    link = pl.col("cause").is_in(LINK_DOWN_CAUSES) if down else pl.col("cause") == LINK_UP_CAUSE
    lustre = LUSTRE_LOST_EVENT if down else LUSTRE_RESTORED_EVENT
    nfs = NFS_DOWN_EVENT if down else NFS_UP_EVENT
    return (
        pl.when(link).then(pl.lit("link"))
        .when(pl.col("event") == lustre).then(pl.lit("lustre"))
        .when(pl.col("event") == nfs).then(pl.lit("nfs"))
        .alias("_outage")
    )


def outage_of() -> pl.Expr:
    """What an outage event is of, that its recovery must name too: the port of a link, the
    server of an NFS mount (null: any recovery of its kind on its node closes it)."""
    return pl.when(pl.col("event").is_in([NFS_DOWN_EVENT, NFS_UP_EVENT])).then(param("server")).otherwise(pl.col("port"))


def last_seen() -> pl.Expr:
    """The last stamp of an event the flood dedupe folded repeats into (its ``last_ts``), or
    its own: a port that bounced five times is one link-down from the first to the last."""
    return pl.coalesce("last_ts", "ts")


def recoveries(events: pl.DataFrame) -> pl.DataFrame:
    """Every recovery of the same attempt, node and outage (:func:`outage`) as
    ``_outage``, ``_up_port`` (:func:`outage_of`) and the stamp ``_up`` of its last repeat
    (:func:`last_seen`): what closes the outages of ``events``."""
    return events.filter(outage(down=False).is_not_null()).select(
        "attempt_id", "node", outage_of().alias("_up_port"), outage(down=False), last_seen().alias("_up")
    )


def closed(downs: pl.DataFrame, ups: pl.DataFrame) -> pl.DataFrame:
    """``downs`` (outage events with ``_row`` and ``_outage``) each paired with every
    recovery of ``ups`` (:func:`recoveries`) that closes it: of its node and kind, of its
    port or server (an outage that names none, NCCL's ``port error`` of older releases, a
    netdev's transmit timeout, is closed by any of its kind on its node), at or after its last
    repeat (:func:`last_seen`: a port whose last word was down stayed down, however often it
    came back before). Columns ``_row``, ``attempt_id``, ``node``, ``port``, ``_outage``,
    ``event_id``, ``ts`` and ``_up``."""
    return (
        downs.select("_row", "attempt_id", "node", outage_of().alias("port"), "_outage", "event_id", "ts",
                     last_seen().alias("_down_last"))
        .join(ups, on=["attempt_id", "node", "_outage"], how="inner", nulls_equal=True)
        .filter((pl.col("port").is_null() | pl.col("port").eq_missing(pl.col("_up_port")))
                & (pl.col("_up") >= pl.col("_down_last")))
        .drop("_up_port", "_down_last")
    )


def confirmed(events: pl.DataFrame, downs: pl.DataFrame) -> pl.DataFrame:
    """``attempt_id``, ``node`` and ``_confirmed`` (the first one's stamp) of the nodes whose
    outages of ``downs`` (with ``event_id``) errors of ``events`` were tied to as their
    confirmations (NCCL's ``NET/IB`` retry errors): the job felt those outages. One confirmed
    outage stands for every outage of its node in the attempt (the kernel reports one flap
    at the netdev and at the HCA port, and the errors link to one of them)."""
    return (
        events.filter((pl.col("role") == "confirmation") & pl.col("caused_by").is_not_null())
        .select("attempt_id", pl.col("caused_by").alias("event_id"), pl.col("ts").alias("_confirmed"))
        .join(downs.select("attempt_id", "event_id", "node"), on=["attempt_id", "event_id"])
        .group_by("attempt_id", "node").agg(pl.col("_confirmed").min())
    )
