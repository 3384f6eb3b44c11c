"""Connector registry and the one function that runs a connector into the lake.

:data:`REGISTRY` maps a connector ``type`` (as written in ``lake.yaml``) to
``"module:Class"``; modules are imported only when their connector is asked for, so a
connector whose optional module is missing does not break the others. Third-party packages
add connectors through the ``causelake.connectors`` entry-point group, e.g. in their
``pyproject.toml``::

    [project.entry-points."causelake.connectors"]
    lustre = "causelake_lustre:LustreConnector"

A third-party name equal to a bundled one is an error, never a silent override.
"""

from __future__ import annotations

import difflib
import importlib
import uuid
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from importlib.metadata import entry_points

from ingest.connectors.base import (
    Connector, ConnectorError, FetchWindow, TransientError,
)
from ingest.lake import Lake, LakeError

ENTRY_POINT_GROUP = "causelake.connectors"

REGISTRY: dict[str, str] = {
    "slurm": "ingest.connectors.slurm:SlurmConnector",
    "prometheus": "ingest.connectors.prometheus:PrometheusConnector",
    "loki": "ingest.connectors.loki:LokiConnector",
    "kueue": "ingest.connectors.kube:KueueConnector",
    "pod_logs": "ingest.connectors.kube:PodLogsConnector",
    "topology": "ingest.connectors.topology:TopologyConnector",
    "files": "ingest.connectors.local:FilesConnector",
    "static": "ingest.connectors.local:StaticConnector",
}
"""Bundled connectors: ``type`` → ``"module:Class"``."""


class RegistryError(ValueError):
    """A connector name is unknown, ambiguous or cannot be loaded; the message says why."""


def available_connectors() -> dict[str, str]:
    """Bundled connectors plus those of installed packages (``causelake.connectors``).

    Raises :class:`RegistryError` when a package registers a bundled name, or two packages
    register the same name.
    """
    found = dict(REGISTRY)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = ep.dist.name if ep.dist else "an installed package"
        if ep.name in found:
            raise RegistryError(
                f"connector {ep.name!r} from {dist} ({ep.value}) clashes with {found[ep.name]}; "
                f"rename the entry point in {dist}'s [project.entry-points.\"{ENTRY_POINT_GROUP}\"]"
            )
        found[ep.name] = ep.value
    return found


def get_connector(name: str) -> type[Connector]:
    """The connector class registered as ``name``, imported on demand."""
    known = available_connectors()
    if name not in known:
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(sorted(known))}"
        raise RegistryError(f"unknown connector type {name!r} — {hint}")
    module_name, _, attr = known[name].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise RegistryError(
            f"connector {name!r} needs module {module_name}, which cannot be imported ({exc}); "
            "install the package that provides it"
        ) from exc
    cls = getattr(module, attr, None)
    if not (isinstance(cls, type) and issubclass(cls, Connector)):
        raise RegistryError(f"connector {name!r}: {known[name]} is not a Connector subclass")
    return cls


@dataclass
class ConnectorReport:
    """What one connector run did, for the run manifest and the coverage of attempts.

    ``inputs`` are the input ids of the batches landed; ``fetched`` rows read from them;
    ``landed`` rows written to their tables; ``rejected`` rows sent to ``rejects``.
    ``error`` is set when the connector failed (batches yielded before the failure stay
    landed: each was complete), ``transient`` when a later retry may succeed.
    """

    connector: str
    cluster: str
    inputs: list[str] = field(default_factory=list)
    fetched: int = 0
    landed: int = 0
    rejected: int = 0
    tables: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    transient: bool = False
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the connector finished without error."""
        return self.error is None

    def to_dict(self) -> dict:
        """A JSON-ready dict (for ``runs/<run_id>.json``)."""
        return asdict(self)


def run_connector(lake: Lake, connector: Connector, window: FetchWindow | None) -> ConnectorReport:
    """Fetch ``window`` from ``connector`` and land every batch it yields in ``lake``.

    A :class:`ConnectorError` (or a batch the lake refuses) ends the run with the error
    recorded in the report; nothing of the failed input is landed, because a connector
    only yields complete batches. Other exceptions are bugs and propagate.
    """
    report = ConnectorReport(connector=connector.name, cluster=connector.cluster)
    connector.attach_lake(lake)
    try:
        for batch in connector.fetch(window):
            if batch.input_ids is not None:
                lake.land_inputs(batch.table, batch.rows, cluster=batch.cluster, source=batch.source,
                                 input_ids=batch.input_ids)
            else:
                lake.land(
                    batch.table, batch.rows, cluster=batch.cluster,
                    input_id=batch.input_id, source=batch.source,
                )
            report.fetched += batch.fetched
            if batch.table == "rejects":
                report.rejected += batch.rows.height
            else:
                report.landed += batch.rows.height
            report.tables[batch.table] = report.tables.get(batch.table, 0) + batch.rows.height
            report.warnings.extend(batch.warnings)
            if batch.input_id not in report.inputs:
                report.inputs.append(batch.input_id)
    except ConnectorError as exc:
        report.error = str(exc)
        report.transient = isinstance(exc, TransientError)
    except LakeError as exc:
        report.error = f"{connector.name}: the lake refused a batch: {exc}"
    return report


__all__ = [
    "ENTRY_POINT_GROUP", "REGISTRY", "ConnectorReport", "RegistryError",
    "available_connectors", "get_connector", "run_connector",
]


def record_ingest(lake: Lake, window: FetchWindow | None, reports: list[ConnectorReport]) -> str:
    """Write the ingest manifest ``runs/ingest-<stamp>-<id>.json`` for a set of connector
    runs over one window, so attribution can report connector failures in the coverage of
    the attempts they should have covered. Returns the manifest id."""
    now = datetime.now(timezone.utc)
    ingest_id = f"ingest-{now:%Y%m%dT%H%M%S%fZ}-{uuid.uuid4().hex[:6]}"
    lake.write_manifest(ingest_id, {
        "kind": "ingest",
        "ingest_id": ingest_id,
        "ingest_ts": now.isoformat(),
        "window": None if window is None else {"start": window.start.isoformat(), "end": window.end.isoformat()},
        "reports": [r.to_dict() for r in reports],
    })
    return ingest_id
