"""The static execution-context connector: attempts written by hand or exported by a tool.

A context file lists job attempts when no scheduler accounting is at hand (a cloud VM
fleet, a replayed incident, a notebook investigation). Three formats, chosen by extension:

YAML (``.yml``/``.yaml``) and JSON (``.json``)::

    cluster: demo                  # default for rows that give none
    attempts:
      - job_id: "1001"             # required
        attempt_index: 0           # default 0
        attempt_id: ...            # default static/<cluster>/<job_id>/<attempt_index>
        cluster: demo              # optional per row
        job_name: llama-pretrain
        user: alice
        partition: gpu
        submit: 2026-11-28T09:58:00Z   # ISO 8601; naive times are UTC
        start: 2026-11-28T10:00:00Z
        end: 2026-11-28T11:32:10Z
        state: FAILED              # raw scheduler state (Slurm or Kueue spelling)
        exit_code: "1:0"           # code:signal, or a bare code
        nodes: "gpu[001-004]"      # a Slurm hostlist, or a list of them
        ranks_per_node: 8
        gpus_per_node: 8

CSV (``.csv``): one row per attempt, a header with the same names (``cluster`` optional).

Every value is read as the text written: in YAML an unquoted ``exit_code: 1:0`` is the
code 1 and signal 0, not YAML 1.1's base-60 number 60, and ``job_id: 0012`` stays ``0012``.

Validation is complete before anything lands: every problem of the file is reported at once
in one :class:`ContextError`, each naming the file, the line (or ``attempts[i]`` for JSON)
and the field, and saying how to fix it.
"""

from __future__ import annotations

import contextlib
import csv
import difflib
import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import polars as pl
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ingest.hostlist import expand_hostlist
from ingest.lake import Lake
from ingest.schema import ATTEMPTS, with_later_columns
from ingest.states import SLURM_STATES, normalize_state_expr, split_exit_code_expr

FORMATS = {".yml": "yaml", ".yaml": "yaml", ".json": "json", ".csv": "csv"}
"""File extension → format of a context file."""

TOP_LEVEL_KEYS = ("cluster", "attempts")

_TS = pl.Datetime("us", "UTC")
_EXIT_CODE = re.compile(r"\d+(:\d+)?")
_HAS_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")


class ContextError(ValueError):
    """A context file cannot be read; the message lists every problem with file, line,
    field and fix. Nothing has been landed when it is raised."""


class StaticAttempt(BaseModel):
    """One attempt as written in a context file (before defaults and normalization)."""

    model_config = ConfigDict(extra="forbid")

    job_id: str
    attempt_index: int = Field(default=0, ge=0)
    attempt_id: str | None = None
    cluster: str | None = None
    job_name: str | None = None
    user: str | None = None
    partition: str | None = None
    submit: datetime | None = None
    start: datetime | None = None
    end: datetime | None = None
    state: str
    exit_code: str | None = None
    nodes: list[str] = Field(default_factory=list)
    ranks_per_node: int | None = Field(default=None, ge=1)
    gpus_per_node: int | None = Field(default=None, ge=0)

    @field_validator("job_id", "attempt_id", "cluster", "state", mode="before")
    @classmethod
    def _identifier(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if isinstance(value, str):
            value = value.strip()
            if not value:
                raise ValueError("is empty — give a value or leave the key out")
        return value

    @field_validator("exit_code", mode="before")
    @classmethod
    def _exit_code(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if isinstance(value, str) and not _EXIT_CODE.fullmatch(value.strip()):
            raise ValueError(
                f"exit code {value!r} is not code or code:signal — write e.g. \"1:0\" or 1"
            )
        return value.strip() if isinstance(value, str) else value

    @field_validator("submit", "start", "end", mode="before")
    @classmethod
    def _timestamp(cls, value: Any) -> Any:
        if value is None:
            return None
        parsed = value if isinstance(value, datetime) else None
        if isinstance(value, str) and _HAS_TIME.match(value.strip()):
            with contextlib.suppress(ValueError):  # reported below, with the fix
                parsed = datetime.fromisoformat(value.strip())
        if parsed is None:
            raise ValueError(
                f"bad timestamp {value!r} — write ISO 8601 date and time, "
                "e.g. 2026-11-28T10:00:00Z (naive times are UTC)"
            )
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=timezone.utc)
        return parsed.astimezone(timezone.utc)

    @field_validator("nodes", mode="before")
    @classmethod
    def _nodes(cls, value: Any) -> Any:
        if value is None:
            return []
        if isinstance(value, str):
            return expand_hostlist(value)
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return [host for expr in value for host in expand_hostlist(expr)]
        raise ValueError("must be a hostlist string or a list of them, e.g. gpu[001-004]")


FIELDS = tuple(StaticAttempt.model_fields)


class _Salvaged(StaticAttempt):
    """The fields of a row that are valid on their own when others are not (so a required
    one may be absent): the checks across fields and rows still read them, and one run
    reports every problem of the file."""

    job_id: str | None = None
    state: str | None = None


@dataclass
class _Row:
    """One raw attempt with where it was written."""

    values: dict[str, Any]
    where: str  # "file:line" or "file: attempts[i]", for messages
    origin: str  # provenance landed with the row (absolute path)
    key_where: dict[str, str] = field(default_factory=dict)

    def at(self, name: str) -> str:
        return self.key_where.get(name, self.where)


@dataclass
class _Problems:
    """Every problem found in one file, in the order found; reading goes on past each one it
    can, so that one run reports them all."""

    path: Path
    items: list[str] = field(default_factory=list)

    def add(self, where: str, name: str, problem: str) -> None:
        """A problem of field ``name``."""
        self.items.append(f"{where}: {name}: {problem}")

    def note(self, where: str, problem: str) -> None:
        """A problem of the file's shape (no one field's)."""
        self.items.append(f"{where}: {problem}")

    def fatal(self, where: str, problem: str) -> ContextError:
        """The error to raise for a problem past which the file cannot be read, listing it
        after the problems found so far."""
        self.note(where, problem)
        return self.error()

    def error(self) -> ContextError:
        """The error listing every problem found."""
        count = len(self.items)
        head = f"cannot read execution context {self.path}: {count} problem{'s' * (count > 1)}"
        return ContextError("\n  ".join([head, *self.items]))

    def raise_if_any(self) -> None:
        if self.items:
            raise self.error()


def _suggest(name: str, allowed: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(name, allowed, n=1)
    hint = f"did you mean '{close[0]}'? " if close else ""
    return f"{hint}allowed keys: {', '.join(allowed)}"


# ----------------------------------------------------------------------- file readers


def _yaml_value(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    """A row value as written: scalars stay text (no base-60, octal or date guessing)."""
    if isinstance(node, yaml.ScalarNode):
        return None if node.tag.endswith(":null") else node.value
    if isinstance(node, yaml.SequenceNode):
        return [_yaml_value(loader, item) for item in node.value]
    return loader.construct_object(node, deep=True)


def _yaml_mapping(
    node: yaml.MappingNode, path: Path, what: str, problems: _Problems
) -> dict[str, tuple[int, yaml.Node]]:
    """key → (line of the key, value node); a repeated key is a problem, not last-wins (the
    first is kept, to check the rest)."""
    out: dict[str, tuple[int, yaml.Node]] = {}
    for key, value in node.value:
        line = key.start_mark.line + 1
        if key.value in out:
            problems.note(f"{path}:{line}", f"{what} repeats the key '{key.value}' — keep one")
        else:
            out[key.value] = (line, value)
    return out


def _read_yaml(path: Path, text: str, origin: str, problems: _Problems) -> tuple[str | None, list[_Row]]:
    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        raise problems.fatal(
            f"{path}:{line}",
            f"YAML syntax error: {exc.problem or exc.context} — fix the YAML near line {line} "
            "(quote values holding [ ] : or #, e.g. nodes: \"gpu[001-004]\")",
        ) from None
    if not isinstance(root, yaml.MappingNode):
        raise problems.fatal(f"{path}:1", "the file is not a mapping — start it with `attempts:`")
    top = _yaml_mapping(root, path, "the file", problems)
    _check_top_level(path, {k: f"{path}:{line}" for k, (line, _) in top.items()}, problems)
    cluster = _yaml_value(loader, top["cluster"][1]) if "cluster" in top else None
    items = top["attempts"][1]
    if not isinstance(items, yaml.SequenceNode):
        raise problems.fatal(
            f"{path}:{items.start_mark.line + 1}",
            "attempts: is not a list — write one `- job_id: ...` entry per attempt",
        )
    rows = []
    for item in items.value:
        line = item.start_mark.line + 1
        if not isinstance(item, yaml.MappingNode):
            problems.note(f"{path}:{line}", "an attempt is not a mapping — write `- job_id: ...`")
            continue
        mapping = _yaml_mapping(item, path, "the attempt", problems)
        rows.append(_Row(
            values={k: _yaml_value(loader, v) for k, (_, v) in mapping.items()},
            where=f"{path}:{line}",
            origin=f"{origin}:{line}",
            key_where={k: f"{path}:{key_line}" for k, (key_line, _) in mapping.items()},
        ))
    return cluster, rows


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"repeats the key '{key}' — keep one")
        out[key] = value
    return out


def _read_json(path: Path, text: str, origin: str, problems: _Problems) -> tuple[str | None, list[_Row]]:
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except json.JSONDecodeError as exc:
        raise problems.fatal(
            f"{path}:{exc.lineno}",
            f"JSON syntax error: {exc.msg} (column {exc.colno}) — fix the JSON near line {exc.lineno}",
        ) from None
    except ValueError as exc:
        raise problems.fatal(str(path), f"an object {exc}") from None
    if not isinstance(data, dict):
        raise problems.fatal(str(path), 'the file is not an object — write {"attempts": [...]}')
    _check_top_level(path, {k: str(path) for k in data}, problems)
    if not isinstance(data["attempts"], list):
        raise problems.fatal(str(path), "attempts is not a list — write one object per attempt")
    rows = []
    for i, item in enumerate(data["attempts"]):
        where = f"{path}: attempts[{i}]"
        if not isinstance(item, dict):
            problems.note(where, 'an attempt is not an object — write {"job_id": ...}')
            continue
        rows.append(_Row(values=item, where=where, origin=f"{origin}:attempts[{i}]"))
    return data.get("cluster"), rows


def _read_csv(path: Path, text: str, origin: str, problems: _Problems) -> tuple[str | None, list[_Row]]:
    reader = csv.reader(text.splitlines(keepends=True))
    header = next(reader, None)
    if not header:
        raise problems.fatal(f"{path}:1", f"no header row — start with: {','.join(FIELDS)}")
    header = [name.strip() for name in header]
    for name in header:
        if name not in FIELDS:
            problems.add(f"{path}:1", name, f"unknown column — {_suggest(name, FIELDS)}")
        elif header.count(name) > 1:
            problems.add(f"{path}:1", name, "the column appears twice — keep one")
    # The rows are still checked, by their known columns (a repeated one by its first cell).
    known = {name: header.index(name) for name in header if name in FIELDS}
    rows = []
    line = reader.line_num
    for record in reader:
        first_line, line = line + 1, reader.line_num
        if not any(cell.strip() for cell in record):
            continue
        if len(record) != len(header):
            problems.add(
                f"{path}:{first_line}", "row",
                f"{len(record)} cells for {len(header)} columns — quote cells that hold commas",
            )
            continue
        values = {name: record[i] for name, i in known.items() if record[i].strip()}
        rows.append(_Row(values=values, where=f"{path}:{first_line}", origin=f"{origin}:{first_line}"))
    return None, rows


def _check_top_level(path: Path, keys: dict[str, str], problems: _Problems) -> None:
    """Report unknown top-level keys; without ``attempts`` nothing more can be read."""
    for key, where in keys.items():
        if key not in TOP_LEVEL_KEYS:
            problems.add(where, key, f"unknown top-level key — {_suggest(key, TOP_LEVEL_KEYS)}")
    if "attempts" not in keys:
        problems.add(str(path), "attempts", "missing — list the attempts under `attempts:`")
        raise problems.error()


READERS = {"yaml": _read_yaml, "json": _read_json, "csv": _read_csv}
"""Format → reader returning (file-level default cluster, raw rows); it adds what it finds
wrong to the problems it is given, and raises only where it cannot read on."""


# ----------------------------------------------------------------------- validation


def _pydantic_problem(error: dict) -> tuple[str, str]:
    """(field, problem with fix) for one Pydantic error of a row."""
    name = str(error["loc"][0]) if error["loc"] else "row"
    kind = error["type"]
    if kind == "extra_forbidden":
        return name, f"unknown key — {_suggest(name, FIELDS)}"
    if kind == "missing":
        fixes = {
            "job_id": 'add job_id: "<the scheduler job id>"',
            "state": "add state: with the scheduler's final state, e.g. FAILED or COMPLETED",
        }
        return name, f"missing — {fixes.get(name, f'add {name}:')}"
    if kind == "value_error":
        return name, str(error["ctx"]["error"])
    return name, f"{error['msg'].lower()} (got {error.get('input')!r}) — fix the value"


def _validated(rows: list[_Row], problems: _Problems) -> list[tuple[StaticAttempt, frozenset[str]]]:
    """Each row's attempt and the keys that failed validation (reported to ``problems``):
    a row with failed keys keeps its valid fields (:class:`_Salvaged`)."""
    checked = []
    for row in rows:
        try:
            checked.append((StaticAttempt.model_validate(row.values), frozenset()))
        except ValidationError as exc:
            failed = set()
            for error in exc.errors():
                name, problem = _pydantic_problem(error)
                problems.add(row.at(name), name, problem)
                failed.add(name)
            # Pydantic reports every failing field: the others validate alone.
            valid = {k: v for k, v in row.values.items() if k not in failed}
            checked.append((_Salvaged.model_validate(valid), frozenset(failed)))
    return checked


def _valid(*names: str) -> pl.Expr:
    """True where none of the row's ``names`` failed validation. A failed one is null in
    the frame and already reported: a check reading it would report it again, or wrongly."""
    return ~pl.col("_failed").list.eval(pl.element().is_in(list(names))).list.any()


_RAW_SCHEMA = {
    "job_id": pl.String, "attempt_index": pl.Int32, "attempt_id": pl.String,
    "cluster": pl.String, "job_name": pl.String, "user": pl.String, "partition": pl.String,
    "submit": _TS, "start": _TS, "end": _TS, "state": pl.String, "exit_code": pl.String,
    "nodes": pl.List(pl.String), "ranks_per_node": pl.Int32, "gpus_per_node": pl.Int32,
    "origin": pl.String, "_failed": pl.List(pl.String),
}
_RENAMES = {
    "submit": "submit_ts", "start": "start_ts", "end": "end_ts", "state": "raw_state",
    "attempt_id": "given_attempt_id", "exit_code": "raw_exit",
}


def _frame(
    rows: list[_Row], checked: list[tuple[StaticAttempt, frozenset[str]]], clusters: list[str | None]
) -> pl.DataFrame:
    """The rows as an attempts frame (state and exit code normalized by expressions), with
    ``_failed``: the keys of each row that failed validation, whose fields are null."""
    records = [
        {**attempt.model_dump(), **dict.fromkeys(failed & set(FIELDS)), "cluster": chosen,
         "origin": row.origin, "_failed": sorted(failed)}
        for row, (attempt, failed), chosen in zip(rows, checked, clusters, strict=True)
    ]
    frame = pl.DataFrame(records, schema=_RAW_SCHEMA).rename(_RENAMES)
    exit_code, signal = split_exit_code_expr(pl.col("raw_exit"))
    default_id = pl.format(
        "static/{}/{}/{}", pl.col("cluster"), pl.col("job_id"), pl.col("attempt_index")
    )
    return frame.with_columns(
        # Unknown when a key it is made of failed: a guess could only repeat another row's.
        attempt_id=pl.when(_valid("job_id", "attempt_index", "attempt_id", "cluster"))
        .then(pl.coalesce("given_attempt_id", default_id)),
        scheduler=pl.lit("static"),
        state=normalize_state_expr(pl.col("raw_state")),
        exit_code=exit_code,
        signal=signal,
        n_nodes=pl.col("nodes").list.len().cast(pl.Int32),
    )


def _check_frame(frame: pl.DataFrame, rows: list[_Row], problems: _Problems) -> None:
    """Row-spanning checks, done with expressions; each failing row is reported."""
    known = (
        f"a Slurm state ({', '.join(sorted(SLURM_STATES))}) "
        "or a Kueue one (Succeeded, Failed, Evicted)"
    )
    checks = [
        ("state", _valid("state") & pl.col("state").is_null(),
         lambda r: f"unknown state {r['raw_state']!r} — use {known}"),
        ("end", pl.col("end_ts") < pl.col("start_ts"),
         lambda r: f"ends before it starts ({r['end_ts']:%Y-%m-%dT%H:%M:%SZ} < "
                   f"{r['start_ts']:%Y-%m-%dT%H:%M:%SZ}) — fix start or end"),
        ("start", pl.col("submit_ts") > pl.col("start_ts"),
         lambda r: "starts before it was submitted — fix submit or start"),
        ("start", _valid("submit", "start", "end")
         & pl.all_horizontal(pl.col("submit_ts", "start_ts", "end_ts").is_null()),
         lambda r: "no timestamp — give at least one of submit, start, end "
                   "(the lake files attempts by day)"),
        ("attempt_id", pl.col("attempt_id").is_not_null() & pl.col("attempt_id").is_duplicated()
         & (pl.int_range(pl.len()).over("attempt_id") > 0),
         lambda r: f"attempt id {r['attempt_id']!r} repeats the row at {rows[r['_first']].where}"
                   " — give each attempt its own job_id/attempt_index or attempt_id"),
    ]
    indexed = frame.with_row_index("_row").with_columns(
        _first=pl.col("_row").first().over("attempt_id")
    )
    for name, failing, message in checks:
        for bad in indexed.filter(failing.fill_null(False)).iter_rows(named=True):
            problems.add(rows[bad["_row"]].at(name), name, message(bad))


def read_static_context(path: str | Path, *, cluster: str | None = None) -> pl.DataFrame:
    """Read a YAML, JSON or CSV context file into an attempts frame.

    The frame has exactly the columns of :data:`ingest.schema.ATTEMPTS` plus ``cluster``,
    with ``scheduler="static"`` and ``origin="<absolute file>:<line>"`` (JSON:
    ``:attempts[i]``). A row's cluster is its own ``cluster``, else the file's top-level
    ``cluster``, else the ``cluster`` argument. Raises :class:`ContextError` listing every
    problem of the file (missing file, unknown extension, syntax, unknown key, missing
    ``job_id``/``state``, unknown state, bad timestamp, end before start, bad hostlist,
    duplicate attempt id).
    """
    path = Path(path)
    problems = _Problems(path)
    kind = FORMATS.get(path.suffix.lower())
    if kind is None:
        raise problems.fatal(
            str(path),
            f"unknown extension {path.suffix or '(none)'!r} — name the file "
            f"{' / '.join(FORMATS)}",
        )
    try:
        # utf-8-sig: a byte-order mark (Excel's "CSV UTF-8") would start the first key.
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise problems.fatal(str(path), "no such file — check the path") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise problems.fatal(str(path), f"cannot be read ({exc}) — check the file") from None
    file_cluster, rows = READERS[kind](path, text, str(path.resolve()), problems)
    # Reported once here; rows without a cluster of their own are then not reported one by one.
    file_names_cluster = file_cluster is not None
    if file_names_cluster and not (isinstance(file_cluster, str) and file_cluster.strip()):
        problems.note(str(path), f"cluster: {file_cluster!r} is not a name — write cluster: <name>")
        file_cluster = None
    if not rows and not problems.items:
        raise problems.fatal(str(path), "no attempts — add at least one attempt")
    checked = _validated(rows, problems)
    clusters = []
    for row, (attempt, failed) in zip(rows, checked, strict=True):
        chosen = attempt.cluster or file_cluster or cluster
        if chosen is None and not file_names_cluster and "cluster" not in failed:
            problems.add(
                row.where, "cluster",
                "missing — add `cluster:` to the row or the top of the file, or pass a cluster",
            )
        clusters.append(chosen)
    # Every row is cross-checked, by the fields it got right, so one run reports every problem.
    frame = _frame(rows, checked, clusters)
    _check_frame(frame, rows, problems)
    problems.raise_if_any()
    return with_later_columns(frame, "attempts").select([*ATTEMPTS.names, "cluster"])


def land_static_context(lake: Lake, path: str | Path, *, cluster: str | None = None) -> dict:
    """Validate a context file completely, then land its attempts per cluster.

    Landing upserts by ``attempt_id``, so landing the same file again changes nothing.
    Returns ``{"input", "read", "attempts" (rows landed), "clusters": {cluster: rows},
    "files"}``. Raises
    :class:`ContextError` (nothing landed) when the file has any problem.
    """
    frame = read_static_context(path, cluster=cluster)
    per_cluster: dict[str, int] = {}
    files: list[str] = []
    for (name,), part in frame.partition_by("cluster", as_dict=True, maintain_order=True).items():
        report = lake.land("attempts", part, cluster=name)
        per_cluster[name] = report.rows
        files.extend(report.files)
    return {
        "input": str(path),
        "read": frame.height,
        "attempts": sum(per_cluster.values()),
        "clusters": per_cluster,
        "files": sorted(set(files)),
    }
