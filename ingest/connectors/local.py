"""Local inputs as connectors, so a nightly ``lake.yaml`` can name them like any other:
``files`` (log files and folders, see :mod:`ingest.files`) and ``static`` (an execution
context file, see :mod:`ingest.static`).

Both read what is on disk now; the run window does not filter them (a file holds what it
holds, and landing it again replaces its rows).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
from pydantic import Field

from ingest.connectors.base import Batch, Connector, ConnectorError, ConnectorOptions, FetchWindow
from ingest.files import FilesError
from ingest.files.common import ParseContext
from ingest.files.land import checked_files, known_attempts, lake_slices, tied_batches
from ingest.files.read import as_utc
from ingest.static import ContextError, read_static_context


class FilesOptions(ConnectorOptions):
    """Options of the ``files`` connector (the ``causelake ingest files`` flags)."""

    paths: list[Path] = Field(min_length=1)
    source: str | None = None
    node: str | None = None
    node_pattern: str | None = None
    attempt_id: str | None = None
    year: int | None = None
    boot_time: datetime | None = None
    timezone: str = "UTC"


class FilesConnector(Connector):
    """Log files and folders: observations per source and rejects, one batch per ~128 MiB
    of text (:func:`ingest.files.land.tied_batches`, as ``causelake ingest files``). Slurm
    output files are tied to the attempts already in the lake (land the scheduler's
    connector first in the config)."""

    name = "files"
    Options = FilesOptions

    def fetch(self, window: FetchWindow | None) -> Iterator[Batch]:
        """Yield the batches of every file the options name (``window`` is not used)."""
        opts: FilesOptions = self.options
        try:
            files = checked_files(opts.paths, source=opts.source, node=opts.node, node_pattern=opts.node_pattern,
                                  timezone=opts.timezone)
        except FilesError as exc:
            raise ConnectorError(f"files: {exc}") from None
        attempts = known_attempts(self.lake, self.cluster)
        ctx = ParseContext(year=opts.year, boot_time=as_utc(opts.boot_time), default_node=opts.node,
                           ingest_time=datetime.now(UTC), node_pattern=opts.node_pattern, timezone=opts.timezone)
        cut: list[str] = []
        for parsed, obs in tied_batches(files, ctx, opts.source, attempts, opts.attempt_id):
            cut += parsed.files.filter(pl.col("cut").is_not_null())["input_id"].to_list()
            for table, source, rows, input_ids in lake_slices(parsed, obs):
                yield Batch(table=table, rows=rows, cluster=self.cluster, source=source,
                            input_id=f"files:{len(input_ids)} inputs", input_ids=input_ids.to_list(),
                            fetched=rows.height)
        if cut:
            # Their lines up to the damage landed with the rest; the error keeps the window's
            # coverage honest until a good copy is landed.
            raise ConnectorError(f"files: gzip data cut short or corrupt in {', '.join(cut)}: their lines before "
                                 "the damage landed; re-copy them and land them again")


class StaticOptions(ConnectorOptions):
    """Options of the ``static`` connector."""

    path: Path


class StaticConnector(Connector):
    """Attempts from a static execution-context file (YAML, JSON or CSV); rows naming
    another cluster than the connector's are left to that cluster's entry."""

    name = "static"
    Options = StaticOptions

    def fetch(self, window: FetchWindow | None) -> Iterator[Batch]:
        """Yield the context's attempts of this cluster (``window`` is not used)."""
        try:
            rows = read_static_context(self.options.path, cluster=self.cluster)
        except ContextError as exc:
            raise ConnectorError(str(exc)) from None
        mine = rows.filter(pl.col("cluster") == self.cluster)
        yield Batch(table="attempts", rows=mine, cluster=self.cluster,
                    input_id=str(self.options.path), fetched=rows.height)
