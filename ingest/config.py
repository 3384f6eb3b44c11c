"""The nightly-run configuration file (``lake.yaml``) and the ingest it drives.

Shape::

    lake: ./lake                        # relative paths are relative to this file
    clusters:
      <cluster>:
        connectors:
          - type: slurm                 # a name from ingest.connectors.REGISTRY / entry points
            options: {sacct_bin: sacct, timezone: Europe/Berlin}
          - type: prometheus
            options: {url: "http://prom:9090", token_env: PROM_TOKEN}

Validation is strict and reports every problem at once, each located as
``<file>:<line>: <field path>: <message>``: unknown or duplicate keys, unknown connector
types (with a did-you-mean), and each connector's ``options`` checked against that
connector's own ``Options`` model. Secrets never appear in the file: a key that looks like
a credential (``token``, ``password``, ``secret``…) is refused; name an environment
variable instead (``token_env: PROM_TOKEN``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ingest.connectors import ConnectorReport, RegistryError, get_connector, record_ingest, run_connector
from ingest.connectors.base import Connector, ConnectorOptions, FetchWindow
from ingest.lake import Derivation, Lake
from ingest.schema import CLUSTER_NAME

SECRET_KEY = re.compile(r"(token|password|passwd|secret|api_?key|credential)s?$", re.IGNORECASE)

Loc = tuple[str | int, ...]


class ConfigError(Exception):
    """``lake.yaml`` is invalid; ``problems`` lists every located problem found."""

    def __init__(self, path: Path, problems: list[tuple[int | None, str, str]]):
        self.path = path
        self.problems = problems
        lines = [
            f"{path}:{line if line is not None else '?'}: {field or '<top>'}: {message}"
            for line, field, message in problems
        ]
        super().__init__(f"{len(problems)} problem(s) in {path}:\n" + "\n".join(lines))


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ConnectorSpec(_Strict):
    """One connector of a cluster: its registered ``type`` and raw ``options``."""

    type: str
    options: dict[str, Any] = Field(default_factory=dict)


class ClusterSpec(_Strict):
    """The connectors that feed one cluster's partitions."""

    connectors: list[ConnectorSpec] = Field(min_length=1)


class LakeConfig(_Strict):
    """The whole file."""

    lake: Path
    clusters: dict[str, ClusterSpec] = Field(min_length=1)


@dataclass(frozen=True)
class ConfiguredConnector:
    """A validated connector entry, ready to instantiate."""

    cluster: str
    type: str
    cls: type[Connector]
    options: ConnectorOptions
    line: int | None


@dataclass(frozen=True)
class Config:
    """A validated ``lake.yaml``: the lake directory and every connector, in file order."""

    path: Path
    lake: Path
    connectors: list[ConfiguredConnector]


def _dotted(loc: Loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _compose(text: str, path: Path) -> tuple[Any, dict[Loc, int], list[tuple[int | None, str, str]]]:
    """Parse YAML keeping the line of every node and reporting duplicate keys."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else None
        raise ConfigError(path, [(line, "", f"not valid YAML: {getattr(exc, 'problem', exc)}")]) from None
    lines: dict[Loc, int] = {}
    problems = []

    def walk(node: yaml.Node, loc: Loc, line: int | None = None) -> None:
        lines[loc] = line or node.start_mark.line + 1  # a mapping entry is located at its key
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for key, value in node.value:
                name = str(key.value)
                if name in seen:
                    problems.append((key.start_mark.line + 1, _dotted((*loc, name)), "duplicate key; keep one"))
                seen.add(name)
                walk(value, (*loc, name), key.start_mark.line + 1)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                walk(item, (*loc, i))

    if root is not None:
        walk(root, ())
    return data, lines, problems


def _line(lines: dict[Loc, int], loc: Loc) -> int | None:
    """The line of ``loc`` or of its nearest ancestor present in the file."""
    for n in range(len(loc), -1, -1):
        if loc[:n] in lines:
            return lines[loc[:n]]
    return None


def _resolve_paths(options: ConnectorOptions, base: Path) -> ConnectorOptions:
    """Relative ``Path`` options (or lists of them) are relative to the config file."""
    updates = {}
    for name in type(options).model_fields:
        value = getattr(options, name)
        if isinstance(value, Path) and not value.is_absolute():
            updates[name] = base / value
        elif isinstance(value, list) and value and all(isinstance(v, Path) for v in value):
            updates[name] = [v if v.is_absolute() else base / v for v in value]
    return options.model_copy(update=updates) if updates else options


def load_config(config_path: str | Path) -> Config:
    """Read and validate ``lake.yaml``; raises :class:`ConfigError` listing every problem."""
    path = Path(config_path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(path, [(None, "", f"cannot read the file: {exc.strerror}")]) from None
    data, lines, problems = _compose(text, path)
    try:
        spec = LakeConfig.model_validate(data)
    except ValidationError as exc:
        problems += [(_line(lines, e["loc"]), _dotted(e["loc"]), e["msg"]) for e in exc.errors()]
        raise ConfigError(path, problems) from None
    base = path.resolve().parent
    connectors = []
    for cluster, cluster_spec in spec.clusters.items():
        if not CLUSTER_NAME.match(cluster):
            problems.append((_line(lines, ("clusters", cluster)), f"clusters.{cluster}",
                             "cluster names are letters, digits, '.', '_' and '-' (they become directory names)"))
        for i, entry in enumerate(cluster_spec.connectors):
            loc: Loc = ("clusters", cluster, "connectors", i)
            for key in entry.options:
                if SECRET_KEY.search(key) and not key.endswith("_env"):
                    problems.append((_line(lines, (*loc, "options", key)), _dotted((*loc, "options", key)),
                                     f"secrets are not accepted in this file; put it in an environment "
                                     f"variable and name it with '{key}_env:'"))
            try:
                cls = get_connector(entry.type)
            except RegistryError as exc:
                problems.append((_line(lines, (*loc, "type")), _dotted((*loc, "type")), str(exc)))
                continue
            try:
                options = cls.Options.model_validate(entry.options)
            except ValidationError as exc:
                for e in exc.errors():
                    where = (*loc, "options", *e["loc"])
                    problems.append((_line(lines, where), _dotted(where), e["msg"]))
                continue
            connectors.append(ConfiguredConnector(
                cluster, entry.type, cls, _resolve_paths(options, base), _line(lines, loc)
            ))
    if problems:
        raise ConfigError(path, problems)
    lake = spec.lake if spec.lake.is_absolute() else base / spec.lake
    return Config(path=path, lake=lake, connectors=connectors)


def connector_labels(entries: Sequence[ConfiguredConnector]) -> list[str]:
    """What each configured connector is called in ingest reports and coverage, in the order
    of ``entries``: its type, numbered in file order (``files#1``, ``files#2``) when its
    cluster has several of that type, so that one failing is not hidden by another that
    succeeded."""
    totals = Counter((entry.cluster, entry.type) for entry in entries)
    seen: Counter[tuple[str, str]] = Counter()
    labels = []
    for entry in entries:
        key = (entry.cluster, entry.type)
        seen[key] += 1
        labels.append(entry.type if totals[key] == 1 else f"{entry.type}#{seen[key]}")
    return labels


def day_window(day: date) -> FetchWindow:
    """``[day 00:00, day+1 00:00)`` in UTC."""
    start = datetime.combine(day, time(0), tzinfo=timezone.utc)
    return FetchWindow(start=start, end=start + timedelta(days=1))


def ingest_from_config(
    config_path: str | Path, day: date, derivations: Sequence[Derivation] = ()
) -> list[ConnectorReport]:
    """Run every configured connector for UTC ``day`` into the configured lake (opened with
    ``derivations``, :class:`ingest.lake.Derivation`), the ``topology`` connectors first (their
    node aliases apply to what lands after them), the others in the order given.

    One failing connector never stops the others: its report carries the error (an
    unexpected exception too, with its type), the rest still land; the reports are kept in
    an ingest manifest (:func:`ingest.connectors.record_ingest`) so that attribution can say
    which attempts a failed connector should have covered. Invalid configuration raises
    :class:`ConfigError` before anything runs.
    """
    config = load_config(config_path)
    lake = Lake(config.lake, derivations)
    window = day_window(day)
    reports = []
    labelled = zip(config.connectors, connector_labels(config.connectors), strict=True)
    # Topology first: the node aliases it lands rename the nodes of the logs landed after it.
    for entry, label in sorted(labelled, key=lambda pair: pair[0].type != "topology"):
        try:
            report = run_connector(lake, entry.cls(entry.options, entry.cluster), window)
        except Exception as exc:  # a bug in one connector must not cost the night's other data
            report = ConnectorReport(
                connector=entry.type, cluster=entry.cluster, error=f"{type(exc).__name__}: {exc}"
            )
        report.connector = label
        reports.append(report)
    record_ingest(lake, window, reports)
    return reports
