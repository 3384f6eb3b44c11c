"""Syslog files: RFC 3164 (``Nov 30 15:32:38 host tag[pid]: msg``), rsyslog's
high-precision ISO-8601 format (``2026-11-30T15:32:38.123456+00:00 host tag: msg``),
RFC 5424 (``<pri>1 2026-11-30T15:32:38Z host app procid msgid [sd] msg``) and journalctl's
``short-unix`` (``1795167565.212709 host tag: msg``, epoch seconds).

The host field gives ``node`` (its short name, :func:`short_host`), the tag (or RFC 5424
APP-NAME) gives ``program``. A kernel message's own ``[  123.456789]`` monotonic stamp is
stripped from ``message``. Lines that start with whitespace continue the previous message
(wrapped lines) and inherit its stamp, as do the rows of asterisks around opensm's sweep
banners. journalctl's own marker lines (``-- Logs begin at
… --``, ``-- Journal begins at … --``, ``-- Boot 3d2a… --``, ``-- Reboot --``, ``-- No entries
--``) land as lines of program ``journalctl`` on the node of the lines around them, with an
inherited stamp: a boot marker says the node restarted there. opensm's own log, which puts
microseconds, a thread and a level where the host would be, lands as program ``opensm`` on
the landing's ``--node``. Any other line without a syslog header is rejected.
"""

from __future__ import annotations

import polars as pl

from ingest.files.common import (
    ZONELESS, ParseContext, bsd_stamp_parts, epoch_stamps, parse_iso, peel, stamps_without_year,
)
from ingest.hostlist import short_host

PRI = r"(?:<[0-9]{1,3}>)?"
RFC3164 = (
    PRI + r"(?P<mon>[A-Z][a-z]{2}) {1,2}(?P<day>[0-9]{1,2}) "
    r"(?P<time>[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?) "
    r"(?:(?P<osm_usec>[0-9]{6}) \[[0-9A-Fa-f]+\] 0x[0-9a-f]{2} -> |(?P<host>\S+) ?)"
)
"""An RFC 3164 header, or opensm's own log line (``Nov 25 14:07:33 121004 [4E8006C0] 0x01
-> log_trap_info: …``: microseconds, thread and level where a host would be; the subnet
manager's host is ``--node``'s)."""
ISO_HEADER = (
    r"(?:<[0-9]{1,3}>(?P<v5424>1 )?)?"
    r"(?P<iso>[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]+)?(?:Z|[+-][0-9]{2}:?[0-9]{2})) "
    r"(?P<ihost>\S+) ?"
)
EPOCH_HEADER = r"(?P<epoch>[0-9]{9,11}\.[0-9]{1,9}) (?P<ehost>\S+) ?"
"""``journalctl -o short-unix``: seconds since the epoch (UTC) with a fraction, then the
host (``1795167565.212709 kc-gpu040 kernel: …``)."""
RFC5424_HEADER = r"(?P<app>\S+) \S+ \S+ (?:-|(?:\[(?:[^\]\\]|\\.)*\])+) ?(?:\x{FEFF})?"
TAG = r"(?P<tag>[^\s\[:]+)(?:\[[0-9]+\])?: ?"
KERNEL_STAMP = r"^\[ *[0-9]+\.[0-9]+\] ?"
CONTINUED = r"^(?:\s|\*{3,})"
"""A line without a header that continues the previous message: a wrapped line (leading
whitespace), or a row of the box of asterisks opensm draws around a sweep's banner
(``OSM_LOG_MSG_BOX``: ``*** HEAVY SWEEP START ***`` between rows of asterisks, each on a
line of its own under ``do_sweep:``)."""
JOURNAL_MARKER = r"^-- (?:Logs begin at |Journal begins at |(?:Boot|Reboot)(?: [0-9a-f]+)? --$|No entries --$|cursor: )"
"""journalctl's marker lines between its entries: the span header, one ``-- Boot <id> --``
per boot (``-- Reboot --`` before systemd 247), ``-- No entries --`` and ``--show-cursor``'s
trailer."""


def parse(lines: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """Parse syslog lines (see the module docstring for formats and rules)."""
    line = pl.col("line")
    frame = peel(lines, "line", RFC3164, "_bsd_rest")
    frame = peel(frame, "line", ISO_HEADER, "_iso_rest")
    frame = peel(frame, "line", EPOCH_HEADER, "_epoch_rest")
    opensm = pl.col("osm_usec").is_not_null()
    frame = frame.with_columns(
        pl.when(opensm).then(pl.concat_str([pl.col("time"), pl.col("osm_usec")], separator="."))
        .otherwise(pl.col("time")).alias("time")
    ).with_columns(
        *bsd_stamp_parts("mon", "day", "time"),
        pl.when(pl.col("_bsd_rest_prefix").is_not_null()).then(pl.col("_bsd_rest"))
        .when(pl.col("_iso_rest_prefix").is_not_null()).then(pl.col("_iso_rest"))
        .otherwise(pl.col("_epoch_rest")).alias("_body"),
    )
    frame = frame.with_columns(
        stamps_without_year(frame, "_month", "_rest", ctx).alias("_bsd_ts"),
        parse_iso(pl.col("iso"), ctx.timezone).alias("_iso_ts"),
        epoch_stamps(pl.col("epoch")).alias("_epoch_ts"),
    )
    is_5424 = pl.col("v5424").is_not_null()
    # opensm's message has no tag: its header ended at "-> ".
    frame = frame.with_columns(pl.when(~opensm).then(pl.col("_body")).alias("_tagged"))
    frame = peel(frame, "_tagged", TAG, "msg")
    # Only RFC 5424 lines have those header fields: other lines skip the regex (null input).
    frame = frame.with_columns(pl.when(is_5424).then(pl.col("_body")).alias("_body5424"))
    frame = peel(frame, "_body5424", RFC5424_HEADER, "msg5424")
    body = pl.col("_body")
    matched = pl.col("mon").is_not_null() | pl.col("iso").is_not_null() | pl.col("epoch").is_not_null()
    app = pl.when(pl.col("app") != "-").then(pl.col("app"))
    program = pl.when(is_5424).then(app).when(opensm).then(pl.lit("opensm")).otherwise(pl.col("tag"))
    text = (
        pl.when(is_5424).then(pl.col("msg5424"))
        .when(pl.col("tag").is_not_null()).then(pl.col("msg"))
        .otherwise(body)
    )
    # Columns, not expressions: each is read several times below.
    frame = frame.with_columns(
        (~matched & line.str.contains(CONTINUED)).alias("_continuation"),
        (~matched & line.str.contains(JOURNAL_MARKER)).alias("_marker"),
        text.alias("_text"),
    )
    continuation = pl.col("_continuation")
    marker = pl.col("_marker")
    text = pl.col("_text")
    # Only a text starting with "[" can hold a kernel stamp, and only lines without a header
    # are stripped: the other rows reach those operations as null.
    unstamped = pl.coalesce(pl.when(text.str.starts_with("[")).then(text).str.replace(KERNEL_STAMP, ""), text)
    message = pl.when(matched).then(unstamped).otherwise(pl.when(~matched).then(line).str.strip_chars())
    ts = pl.coalesce("_bsd_ts", "_iso_ts", "_epoch_ts")
    reason = (
        pl.when(continuation | marker).then(None)
        .when(~matched).then(pl.lit("no syslog header (RFC 3164 'Mmm dd hh:mm:ss host' or RFC 5424/ISO-8601 timestamp and host)"))
        .when(ts.is_null()).then(pl.lit("invalid date in the syslog timestamp"))
    )
    # A wrapped line belongs to the host and program of the line it continues; a marker to
    # the host of the lines around it (the span header comes before the first entry).
    node = short_host(pl.coalesce("host", "ihost", "ehost"))
    node = pl.when(opensm).then(pl.lit(ctx.default_node, dtype=pl.String)).otherwise(node)
    return frame.select(
        "file",
        "seq",
        ts.alias("ts"),
        pl.when(ts.is_not_null()).then(pl.lit("line")).alias("ts_kind"),
        pl.when(continuation).then(node.forward_fill().over("file"))
        .when(marker).then(pl.coalesce(node.forward_fill().over("file"), node.backward_fill().over("file")))
        .otherwise(node).alias("node"),
        pl.lit(None, dtype=pl.Int32).alias("rank"),
        pl.when(continuation).then(program.forward_fill().over("file"))
        .when(marker).then(pl.lit("journalctl")).otherwise(program).alias("program"),
        message.alias("message"),
        reason.cast(pl.String).alias("reason"),
        # An RFC 3164 stamp has no zone; the ISO header always carries one.
        pl.col("_bsd_ts").is_not_null().alias(ZONELESS),
    )
