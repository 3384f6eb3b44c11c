"""The connector contract.

A connector pulls one kind of input (a scheduler's accounting, a log store, a metrics
server, files) and yields :class:`Batch` records; it never writes files. The caller
(:func:`ingest.connectors.run_connector`) lands every batch through :mod:`ingest.lake` and
records what happened in the run manifest and the coverage of the attempts concerned.

To write a connector:

1. Declare its options as a Pydantic model (``extra="forbid"``); secrets are read from
   environment variables named in the options, never taken as values.
2. Subclass :class:`Connector`, set ``name`` and ``Options``, implement :meth:`fetch`.
3. Register it: in :data:`ingest.connectors.REGISTRY` for bundled ones, or through the
   ``causelake.connectors`` entry-point group for third-party packages.

``fetch`` must be a generator of batches. A batch is complete for its ``input_id``: landing
it replaces whatever was landed before under the same id, so a half-fetched window must
never be yielded (raise instead). Raise :class:`TransientError` for what a retry may fix
(timeouts, HTTP 429/5xx) once your own retries are exhausted, :class:`ConnectorError` for
what it will not (bad credentials, malformed answers).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import ClassVar

import polars as pl
from pydantic import BaseModel, ConfigDict


class ConnectorError(Exception):
    """A connector failed in a way a retry will not fix; the message says what and where."""


class TransientError(ConnectorError):
    """A connector failed in a way that may pass (timeout, 429, 5xx) after its retries."""


@dataclass
class Batch:
    """Rows for one lake table from one complete input.

    ``table`` is a lake table name (``attempts``, ``observations``, ``metrics``, ``topology``,
    ``rejects``); ``rows`` has that table's columns (see :mod:`ingest.schema`). ``source`` is
    the observation source partition (``syslog``, ``kmsg``, ``app``, ``loki``…) where the
    table has one. ``input_id`` names the input (file path, query + window, URL).
    ``fetched`` counts what was read from the input, rejected rows go in a separate batch
    for table ``rejects``.
    """

    table: str
    rows: pl.DataFrame
    cluster: str
    input_id: str
    source: str | None = None
    fetched: int = 0
    input_ids: list[str] | None = None
    """Set when the batch holds several complete inputs at once (rows carry their own
    ``input_id``): each listed input replaces what was landed before under its id."""
    warnings: list[str] = field(default_factory=list)
    """What the user should know about the input though it landed (rows that will match
    nothing): the connector's report carries them to the command's output."""


class ConnectorOptions(BaseModel):
    """Base of every connector's options model."""

    model_config = ConfigDict(extra="forbid")


@dataclass
class FetchWindow:
    """The time window a scheduled run asks a connector for; ``end`` is exclusive."""

    start: datetime
    end: datetime
    nodes: list[str] = field(default_factory=list)


def resolve_window(
    window: FetchWindow | None, start: datetime | None, end: datetime | None, what: str
) -> tuple[datetime, datetime]:
    """The UTC ``[start, end)`` to fetch: the run's window, else the options' own ``start``/
    ``end`` (naive times are UTC). ``what`` names the connector in the error."""
    start = window.start if window else start
    end = window.end if window else end
    if start is None or end is None:
        raise ConnectorError(f"{what}: no time window — pass one or set start and end in the options")
    start, end = (t.replace(tzinfo=timezone.utc) if t.tzinfo is None else t.astimezone(timezone.utc)
                  for t in (start, end))
    if end <= start:
        raise ConnectorError(f"{what}: window end {end} is not after start {start}")
    return start, end


class Connector:
    """Base class of connectors; see the module docstring for the contract."""

    name: ClassVar[str]
    Options: ClassVar[type[ConnectorOptions]]

    def __init__(self, options: ConnectorOptions, cluster: str):
        self.options = options
        self.cluster = cluster
        self.lake = None

    def attach_lake(self, lake) -> None:
        """Give the connector read access to the lake it lands into (e.g. the attempts an
        earlier connector of the same run landed, to tie job logs to them). Connectors read
        it and never write it."""
        self.lake = lake

    def fetch(self, window: FetchWindow | None) -> Iterator[Batch]:
        """Yield complete batches for ``window`` (``None``: everything the options name)."""
        raise NotImplementedError
