"""Kernel ring buffer dumps: ``dmesg``, ``dmesg -T``, ``dmesg --time-format iso``,
``dmesg -x`` (``kern  :warn  :`` prefix) and raw ``/dev/kmsg`` records
(``6,3964,206764307,-;message``).

Monotonic stamps (``[  1234.567890]``, the µs field of ``/dev/kmsg``) become wall time
with the boot time: the one given, else one read from the file itself — a syslog-wrapped
kernel line (``Nov 30 15:32:38 host kernel: [  199.234935] …``) carries both clocks. These
lines get ``ts_source="monotonic"``; without any boot time they are rejected with a reason
saying how to fix it (or, for one-shot diagnosis, placed as if the last line was written at
ingest time, ``ts_source="ingest"``). ``dmesg -T`` and ISO stamps are wall time already. Lines without a
stamp (wrapped continuations) inherit the previous one; a line whose bracket stamp cannot be
read (``dmesg -d`` deltas such as ``[  +0.000004]``) is rejected. ``journalctl -o
short-monotonic`` has the same stamp, then the host and the tag of every program
(:data:`JOURNAL_ENTRY`): they give ``node`` and ``program``.
"""

from __future__ import annotations

import polars as pl

from ingest.files.common import (
    TS_DTYPE, ZONELESS, ParseContext, bsd_stamp_parts, iso_zoned, local_stamps, parse_iso, peel, seconds_to_us,
    stamps_without_year,
)
from ingest.hostlist import short_host

KMSG = (
    r"(?:<[0-9]+>)?(?:[a-z]+ *:[a-z]+ *: )?(?:"
    r"\[ *(?P<mono>[0-9]+\.[0-9]+)\]"
    r"|\[(?P<ctime>[A-Z][a-z]{2} [A-Z][a-z]{2} [ 0-9][0-9] [0-9]{2}:[0-9]{2}:[0-9]{2} [0-9]{4})\]"
    r"|(?P<iso>[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}[,.][0-9]+(?:Z|[+-][0-9]{2}:?[0-9]{2}))"
    r"|[0-9]+,[0-9]+,(?P<usec>[0-9]+),[^;]*;"
    r") ?"
)
SYSLOG_KERNEL = (
    r"(?P<smon>[A-Z][a-z]{2}) {1,2}(?P<sday>[0-9]{1,2}) (?P<stime>[0-9]{2}:[0-9]{2}:[0-9]{2}) "
    r"(?P<shost>\S+) kernel: \[ *(?P<smono>[0-9]+\.[0-9]+)\] ?"
)
JOURNAL_ENTRY = r"(?P<jhost>[A-Za-z0-9][A-Za-z0-9._-]*) (?P<jtag>kernel|[^\s\[:]+)(?P<jpid>\[[0-9]+\])?: "
"""``journalctl -o short-monotonic``'s host and tag after the monotonic stamp (``[2138031.491413]
kc-gpu010 kernel: NVRM: …``, ``… kc-gpu010 slurmd[2233]: …``): a journal of every program,
not the kernel's ring buffer. Only ``kernel`` or a tag with its pid counts, so a driver's
``usb 1-1: …`` stays a kernel message."""
BROKEN_STAMP = r"^(?:[a-z]+ *:[a-z]+ *: )?\[ *[+\-0-9]"

NEEDS_BOOT_TIME = (
    "kernel monotonic stamp needs the boot time: pass --boot-time "
    "(e.g. the output of `uptime -s` on that node, in UTC)"
)


def parse(lines: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """Parse kernel log lines (see the module docstring)."""
    line = pl.col("line")
    frame = peel(lines, "line", KMSG, "msg")
    frame = peel(frame, "line", SYSLOG_KERNEL, "smsg")
    # Only a monotonic stamp can come before a journal's host and tag.
    frame = peel(frame.with_columns(pl.when(pl.col("mono").is_not_null()).then(pl.col("msg")).alias("_jtext")),
                 "_jtext", JOURNAL_ENTRY, "jmsg")
    journal = (pl.col("jtag") == "kernel") | pl.col("jpid").is_not_null()
    frame = frame.with_columns(
        *bsd_stamp_parts("smon", "sday", "stime"),
        pl.coalesce(seconds_to_us(pl.col("mono")), pl.col("usec").cast(pl.Int64)).alias("_mono_us"),
        seconds_to_us(pl.col("smono")).alias("_smono_us"),
    )
    frame = frame.with_columns(stamps_without_year(frame, "_month", "_rest", ctx).alias("_sys_ts"))
    mono = pl.col("_mono_us")
    if ctx.boot_time is not None:
        boot = pl.lit(ctx.boot_time, dtype=TS_DTYPE)
    else:
        # Per file: the first line that carries both a wall and a monotonic stamp.
        both = pl.col("_sys_ts").is_not_null() & pl.col("_smono_us").is_not_null()
        boot = (pl.col("_sys_ts") - pl.duration(microseconds=pl.col("_smono_us"))).filter(both).first().over("file")
    if ctx.boot_time is None and ctx.end_at_ingest:
        guessed = boot.is_null() & mono.max().over("file").is_not_null()
        boot = pl.when(guessed).then(
            pl.lit(ctx.ingest_time, dtype=TS_DTYPE) - pl.duration(microseconds=mono.max().over("file"))
        ).otherwise(boot)
    else:
        guessed = pl.lit(False)
    frame = frame.with_columns(boot.alias("_boot"), guessed.alias("_guessed"))
    monotonic = pl.col("_boot") + pl.duration(microseconds=mono)
    wall = pl.coalesce(
        local_stamps(pl.col("ctime"), "%a %b %e %H:%M:%S %Y", ctx.timezone),
        parse_iso(pl.col("iso"), ctx.timezone),
        pl.col("_sys_ts"),
    )
    has_mono = pl.col("_mono_us").is_not_null()
    # A column, not an expression: ts_kind and the reason read it too, and would parse again.
    frame = frame.with_columns(pl.when(has_mono).then(monotonic).otherwise(wall).alias("_ts"))
    ts = pl.col("_ts")
    matched = has_mono | pl.col("ctime").is_not_null() | pl.col("iso").is_not_null() | pl.col("smon").is_not_null()
    reason = (
        pl.when(has_mono & ts.is_null()).then(pl.lit(NEEDS_BOOT_TIME))
        .when(matched & ts.is_null()).then(pl.lit("invalid date in the dmesg timestamp"))
        .when(~matched & line.str.contains(BROKEN_STAMP)).then(
            pl.lit("unreadable dmesg stamp (relative `dmesg -d` stamps cannot be placed); "
                   "export with `dmesg -T` or `dmesg --time-format iso`")
        )
    )
    return frame.select(
        "file",
        "seq",
        ts.alias("ts"),
        pl.when(ts.is_null()).then(None)
        .when(has_mono & pl.col("_guessed")).then(pl.lit("ingest"))
        .when(has_mono).then(pl.lit("monotonic"))
        .otherwise(pl.lit("line")).alias("ts_kind"),
        pl.coalesce(pl.col("shost"), pl.when(journal).then(short_host(pl.col("jhost"))),
                    pl.lit(ctx.default_node, dtype=pl.String)).alias("node"),
        pl.lit(None, dtype=pl.Int32).alias("rank"),
        pl.when(journal).then(pl.col("jtag")).otherwise(pl.lit("kernel")).alias("program"),
        pl.when(journal).then(pl.col("jmsg"))
        .when(pl.col("msg_prefix").is_not_null()).then(pl.col("msg"))
        .when(pl.col("smsg_prefix").is_not_null()).then(pl.col("smsg"))
        .otherwise(line.str.strip_chars()).alias("message"),
        reason.cast(pl.String).alias("reason"),
        # Monotonic stamps are placed by the boot time, and `--time-format iso` carries its
        # offset; `dmesg -T` and a syslog-style header carry no zone.
        (ts.is_not_null() & ~has_mono & ~(pl.col("ctime").is_null() & iso_zoned(pl.col("iso")).fill_null(False)))
        .alias(ZONELESS),
    )

