"""Which parser a file needs: the registry of sources and format detection.

Detection looks at the first :data:`HEAD_LINES` non-blank lines and picks the source whose
signature matches most of them (ties go to the earlier entry of :data:`SIGNATURES`); a file
nothing recognises is an application log, whose lines are free text.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable

import polars as pl

from ingest.files import app, journald, kmsg, kubectl, syslog
from ingest.files.common import FilesError, ParseContext

Parser = Callable[[pl.DataFrame, ParseContext], pl.DataFrame]

PARSERS: dict[str, Parser] = {
    "syslog": syslog.parse,
    "journald": journald.parse,
    "kmsg": kmsg.parse,
    "app": app.parse,
    "kubectl": kubectl.parse,
}
"""Source name (the ``source`` partition and ``--source`` value) → parser."""

SIGNATURES: dict[str, str] = {
    "journald": r'^\s*\{.*"(?:__REALTIME_TIMESTAMP|MESSAGE|_HOSTNAME)"\s*:',
    "kmsg": (
        r"^(?:<\d+>)?(?:[a-z]+ *:[a-z]+ *: )?(?:\[ *\d+\.\d+\]"
        r"|\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}\]"
        r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d+[+-]\d\d:?\d\d |\d+,\d+,\d+,[^;]*;)"
    ),
    "kubectl": r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z(?: |$)",
    "syslog": (
        # RFC 3164 (journalctl's short-precise adds microseconds), RFC 3339 / 5424,
        # journalctl's short-iso, whose offset had no colon before systemd 255 (+0200), and
        # its short-unix (epoch seconds).
        r"^(?:<\d{1,3}>)?(?:[A-Z][a-z]{2} {1,2}\d{1,2} \d\d:\d\d:\d\d(?:\.\d+)?"
        r"|(?:<\d{1,3}>1 )?\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)"
        r"|\d{9,11}\.\d+) \S+ "
        r"(?:[A-Za-z0-9_./-]+(?:\[\d+\])?:|\S+ \S+ \S+ )"
    ),
}
"""Line signatures tried by :func:`detect_source`, in tie-break order."""

HEAD_LINES = 20


def detect_sources(lines: pl.DataFrame) -> pl.DataFrame:
    """The source of every file of a batch (``file``, ``source``), from the first
    :data:`HEAD_LINES` non-blank lines of each, all files at once. Files without any line
    are absent (the caller treats them as ``app``)."""
    head = lines.select("file", "line").group_by("file", maintain_order=True).head(HEAD_LINES)
    scores = head.group_by("file", maintain_order=True).agg(
        pl.col("line").str.contains(rx).sum().alias(name) for name, rx in SIGNATURES.items()
    )
    best = pl.max_horizontal(*SIGNATURES)
    # The first signature reaching the best score wins; no score at all → free text.
    choice = pl.when(best == 0).then(pl.lit("app"))
    for name in SIGNATURES:
        choice = choice.when(pl.col(name) == best).then(pl.lit(name))
    return scores.select("file", choice.alias("source"))


def detect_source(lines: pl.DataFrame) -> str:
    """The source name for one file from its first non-blank lines (``app`` if none fits);
    ``lines`` has a ``line`` column (and optionally ``file``, all the same)."""
    if "file" not in lines.columns:
        lines = lines.with_columns(pl.lit(0, dtype=pl.UInt32).alias("file"))
    found = detect_sources(lines)
    return found["source"][0] if found.height else "app"


def check_source(source: str) -> str:
    """Return ``source`` if it names a parser, else raise :class:`FilesError` listing them."""
    if source in PARSERS:
        return source
    close = difflib.get_close_matches(source, PARSERS, n=1)
    hint = f" — did you mean '{close[0]}'?" if close else "."
    raise FilesError(
        f"unknown source '{source}'{hint} Valid sources: {', '.join(sorted(PARSERS))}."
    )
