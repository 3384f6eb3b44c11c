"""Slurm accounting (``sacct``) → the ``attempts`` table.

Inputs: ``sacct --parsable2`` text (with a header line, or ``--noheader`` with a known
``--format``) and ``sacct --json`` of Slurm 22.05 (``openapi/dbv0.0.38``) and 23.x–25.x
(``data_parser/v0.0.39``+: numbers wrapped as ``{"set", "infinite", "number"}``,
``state.current`` a list, ``exit_code.status`` a list). Either read from files or by running
``sacct`` once per window.

What becomes an attempt:

* one job-level row (``JobID`` without a step suffix) is one attempt. With ``sacct -D`` a
  requeued job has one row per run; they are numbered ``attempt_index`` 0.. by start time
  within the ``JobIDRaw`` and ``attempt_id = slurm/<cluster>/<JobIDRaw>/<n>``;
* array tasks keep their display id (``5_2``) in ``job_id`` and their own ``JobIDRaw``;
* step rows (``.batch``, ``.extern``, ``.0``…) are not attempts: they supply the signal when
  the allocation line shows none (a cancelled or timed-out job's batch step ends ``0:15``),
  an ``OUT_OF_MEMORY`` step refines a ``FAILED`` job, and ``srun`` steps give ranks per node;
* a pending job (no start yet) and a pending array summary (``5_[4-10]``) are not attempts
  yet and are skipped; rows that cannot be parsed go to ``rejects`` with the reason.

Times: ``--parsable2`` prints the Slurm host's local time; it is read in
``SlurmOptions.timezone`` (default: this machine's zone) and stored in UTC. JSON carries
epoch seconds. When this connector runs ``sacct`` itself it sets ``TZ=UTC``.

Known defect of Slurm 22.05 ``--json``: its exit-code dumper reports ``SUCCESS`` / 0 for
every job that exited normally, so a job that ran ``exit 3`` shows 0 (``--parsable2`` shows
``3:0``). Exit codes from 22.05 JSON are therefore only kept for ``COMPLETED`` jobs and
signals; for the others ``exit_code`` is null. Give both files (``sacct_file: [a.txt,
b.json]``) and the parsable2 exit codes are used.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import polars as pl
from pydantic import Field, field_validator

from ingest.connectors.base import (
    Batch, Connector, ConnectorError, ConnectorOptions, FetchWindow, TransientError,
)
from ingest.hostlist import expand_hostlist_column
from ingest.states import normalize_state_expr, split_exit_code_expr

SACCT_FIELDS = (
    "JobID", "JobIDRaw", "JobName", "User", "Partition", "Submit", "Start", "End", "State",
    "ExitCode", "NodeList", "AllocNodes", "NNodes", "NTasks", "AllocTRES", "ReqTRES",
)
"""The ``--format`` fields asked for when the connector runs ``sacct`` itself."""

REQUIRED_FIELDS = ("State", "Start", "End")
NULL_TOKENS = ("", "Unknown", "None", "N/A", "None assigned")
TIME_FORMAT = "%Y-%m-%dT%H:%M:%S"

ROWS_SCHEMA = {
    "job_id": pl.String, "job_id_raw": pl.String, "step": pl.String, "job_name": pl.String,
    "user": pl.String, "partition": pl.String,
    "submit_ts": pl.Datetime("us", "UTC"), "start_ts": pl.Datetime("us", "UTC"),
    "end_ts": pl.Datetime("us", "UTC"), "raw_state": pl.String, "exit_code": pl.Int32,
    "signal": pl.Int32, "exit_trusted": pl.Boolean, "nodelist": pl.String,
    "alloc_nodes": pl.Int32, "step_nodes": pl.Int32, "ntasks": pl.Int32, "gpus": pl.Int32,
    "origin": pl.String,
}
"""One sacct row (job or step) in a format-independent shape, before attempts are built."""


def local_timezone() -> str:
    """This machine's IANA zone name (``TZ``, ``/etc/timezone``, ``/etc/localtime``), else UTC."""
    candidates = [os.environ.get("TZ", "").lstrip(":")]
    etc = Path("/etc/timezone")
    if etc.is_file():
        candidates.append(etc.read_text().strip())
    link = Path("/etc/localtime")
    if link.is_symlink():
        candidates.append(str(link.resolve()).split("zoneinfo/", 1)[-1])
    for name in candidates:
        try:
            if name:
                ZoneInfo(name)
                return name
        except (ZoneInfoNotFoundError, ValueError):
            continue
    return "UTC"


class SlurmOptions(ConnectorOptions):
    """Options of the ``slurm`` connector.

    ``sacct_file``: one or more saved outputs (parsable2 and/or JSON, mixed is fine); when
    absent the connector runs ``sacct_bin`` for the window. ``timezone``: the Slurm host's
    zone for parsable2 files (IANA name; default: this machine's). ``requeue_lookback_days``:
    how far before the window ``sacct`` looks so that earlier runs of a requeued job are
    counted in ``attempt_index`` (only attempts overlapping the window are landed).
    """

    sacct_file: list[Path] = Field(default_factory=list)
    sacct_bin: str = "sacct"
    format: Literal["auto", "parsable2", "json"] = "auto"
    extra_args: list[str] = Field(default_factory=list)
    timezone: str | None = None
    requeue_lookback_days: int = Field(default=7, ge=0)
    timeout_s: float = Field(default=300, gt=0)

    @field_validator("sacct_file", mode="before")
    @classmethod
    def _one_or_many(cls, value):
        return [value] if isinstance(value, str | Path) else value

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value):
        if value is not None:
            try:
                ZoneInfo(value)
            except (ZoneInfoNotFoundError, ValueError):
                raise ValueError(
                    f"unknown time zone {value!r}; use an IANA name such as 'Europe/Berlin' or 'UTC'"
                ) from None
        return value


# --------------------------------------------------------------------------- parsable2


def _conform(frame: pl.DataFrame) -> pl.DataFrame:
    """Add the :data:`ROWS_SCHEMA` columns a format lacks (as nulls), in schema order."""
    absent = [pl.lit(None, t).alias(c) for c, t in ROWS_SCHEMA.items() if c not in frame.columns]
    return frame.with_columns(absent).select(list(ROWS_SCHEMA)).cast(ROWS_SCHEMA)


def _parse_ts(col: pl.Expr, tz: str) -> pl.Expr:
    return (
        col.str.strip_chars()
        .str.to_datetime(TIME_FORMAT, strict=False, time_unit="us")
        .dt.replace_time_zone(tz, ambiguous="earliest", non_existent="null")
        .dt.convert_time_zone("UTC")
    )


def _bad_ts(col: str, tz: str) -> pl.Expr:
    """A reason when ``col`` holds text that is neither a time nor a null token."""
    raw = pl.col(col).str.strip_chars()
    bad = _parse_ts(pl.col(col), tz).is_null() & ~raw.is_in(NULL_TOKENS) & raw.is_not_null()
    return pl.when(bad).then(pl.format(f"unparseable {col} time '{{}}'", raw))


def _tres_gpus(col: pl.Expr) -> pl.Expr:
    """GPUs in an ``AllocTRES`` string: the untyped ``gres/gpu=N`` total, else a typed one."""
    untyped = col.str.extract(r"(?:^|,)gres/gpu=(\d+)", 1)
    typed = col.str.extract(r"(?:^|,)gres/gpu:[^=,]+=(\d+)", 1)
    return pl.coalesce(untyped, typed).cast(pl.Int32, strict=False)


def parse_parsable2(
    text: str, *, origin: str, timezone: str, fields: tuple[str, ...] | None = None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``sacct --parsable2`` text → (rows in :data:`ROWS_SCHEMA`, rejects).

    ``fields`` is the ``--format`` list when the text has no header line (``--noheader``);
    otherwise the first line must be the header. ``origin`` prefixes each row's
    ``<origin>:<line>``. Raises :class:`ConnectorError` when the header lacks a needed field.
    """
    lines = pl.DataFrame({"raw": text.splitlines()}, schema={"raw": pl.String})
    lines = lines.with_row_index("line", offset=1).filter(pl.col("raw").str.strip_chars() != "")
    body = pl.col("raw")
    if fields is None:
        if lines.is_empty():
            return pl.DataFrame(schema=ROWS_SCHEMA), _rejects_frame(lines, origin)
        header = lines["raw"][0]
        if header.endswith("|"):  # plain --parsable ends every line with "|"
            body = body.str.strip_suffix("|")
        fields = tuple(header.removesuffix("|").split("|"))
        lines = lines.slice(1)
    lines = lines.with_columns(body.alias("_body"))
    id_field = "JobIDRaw" if "JobIDRaw" in fields else "JobID"
    missing = [f for f in (id_field, *REQUIRED_FIELDS) if f not in fields]
    if missing:
        raise ConnectorError(
            f"{origin}: sacct output lacks field(s) {missing} (header: {'|'.join(fields)[:200]}); "
            f"run sacct --parsable2 with --format={','.join(SACCT_FIELDS)}"
        )
    parts = pl.col("_body").str.split("|")
    width_ok = parts.list.len() == len(fields)
    table = lines.filter(width_ok).select(
        "line", "raw", *[parts.list.get(i).alias(f) for i, f in enumerate(fields)]
    )
    for f in SACCT_FIELDS:
        if f not in table.columns:
            table = table.with_columns(pl.lit(None, pl.String).alias(f))
    if "JobIDRaw" not in fields:
        table = table.with_columns(pl.col("JobID").alias("JobIDRaw"))
    table = table.with_columns(pl.col("JobID").fill_null(pl.col("JobIDRaw")))

    raw_base = pl.col("JobIDRaw").str.split(".").list.first()
    problem = pl.concat_str(
        [
            pl.when(~raw_base.str.contains(r"^\d+(_\d+)?$"))
            .then(pl.format("JobIDRaw '{}' is not a job id", pl.col("JobIDRaw"))),
            *[_bad_ts(c, timezone) for c in ("Submit", "Start", "End")],
            pl.when(pl.col("State").str.strip_chars().fill_null("") == "").then(pl.lit("empty State")),
        ],
        separator="; ", ignore_nulls=True,
    )
    table = table.with_columns(problem.alias("reason"))
    bad_width = lines.filter(~width_ok).with_columns(
        pl.format(f"expected {len(fields)} '|'-separated fields, found {{}}", parts.list.len()).alias("reason")
    )
    rejects = pl.concat([
        bad_width.select("line", "raw", "reason"),
        table.filter(pl.col("reason") != "").select("line", "raw", "reason"),
    ])
    good = table.filter(pl.col("reason") == "")

    code, sig = split_exit_code_expr(pl.col("ExitCode"))

    def text_col(name: str) -> pl.Expr:
        value = pl.col(name).str.strip_chars()
        return pl.when(value.is_in(NULL_TOKENS)).then(None).otherwise(value)

    rows = good.select(
        pl.col("JobID").str.split(".").list.first().alias("job_id"),
        raw_base.alias("job_id_raw"),
        pl.col("JobIDRaw").str.split(".").list.get(1, null_on_oob=True).alias("step"),
        pl.col("JobName").alias("job_name"),
        text_col("User").alias("user"),
        text_col("Partition").alias("partition"),
        _parse_ts(pl.col("Submit"), timezone).alias("submit_ts"),
        _parse_ts(pl.col("Start"), timezone).alias("start_ts"),
        _parse_ts(pl.col("End"), timezone).alias("end_ts"),
        pl.col("State").str.strip_chars().alias("raw_state"),
        code.alias("exit_code"),
        pl.when(sig != 0).then(sig).alias("signal"),
        pl.lit(True).alias("exit_trusted"),
        text_col("NodeList").alias("nodelist"),
        pl.col("AllocNodes").cast(pl.Int32, strict=False).alias("alloc_nodes"),
        pl.coalesce("NNodes", "AllocNodes").cast(pl.Int32, strict=False).alias("step_nodes"),
        pl.col("NTasks").cast(pl.Int32, strict=False).alias("ntasks"),
        _tres_gpus(pl.col("AllocTRES")).alias("gpus"),
        pl.format("{}:{}", pl.lit(origin), pl.col("line")).alias("origin"),
    )
    return _conform(rows), _rejects_frame(rejects, origin)


def _rejects_frame(bad: pl.DataFrame, origin: str, sep: str = ":") -> pl.DataFrame:
    """Rows of the ``rejects`` table from ``line``, ``raw``, ``reason`` (origin ``<origin><sep><line>``)."""
    if "reason" not in bad.columns:
        bad = bad.with_columns(pl.lit(None, pl.String).alias("reason"))
    return bad.select(
        pl.lit(datetime.now(timezone.utc)).dt.cast_time_unit("us").alias("ts_ingest"),
        pl.lit("slurm").alias("source"),
        pl.format(f"{{}}{sep}{{}}", pl.lit(origin), pl.col("line")).alias("origin"),
        pl.col("reason"),
        pl.col("raw"),
        pl.lit(origin).alias("input_id"),
    )


# --------------------------------------------------------------------------- JSON


def _path(expr: pl.Expr, dtype: pl.DataType, path: str) -> tuple[pl.Expr, pl.DataType] | None:
    """Follow ``a.b.c`` through struct fields; ``None`` when this Slurm version lacks it."""
    for key in path.split("."):
        if not isinstance(dtype, pl.Struct):
            return None
        fields = {f.name: f.dtype for f in dtype.fields}
        if key not in fields:
            return None
        expr, dtype = expr.struct.field(key), fields[key]
    return expr, dtype


def _num(expr: pl.Expr, dtype: pl.DataType, *paths: str) -> pl.Expr:
    """First present path as Int64; unwraps ``{"set", "infinite", "number"}`` (unset → null)."""
    for path in paths:
        found = _path(expr, dtype, path)
        if found is None:
            continue
        value, vtype = found
        if isinstance(vtype, pl.Struct):
            names = {f.name for f in vtype.fields}
            if "number" not in names:
                continue
            ok = value.struct.field("set").fill_null(True) if "set" in names else pl.lit(True)
            if "infinite" in names:
                ok = ok & ~value.struct.field("infinite").fill_null(False)
            return pl.when(ok).then(value.struct.field("number").cast(pl.Int64, strict=False))
        return value.cast(pl.Int64, strict=False)
    return pl.lit(None, pl.Int64)


def _str(expr: pl.Expr, dtype: pl.DataType, path: str) -> pl.Expr:
    """A string field; a list (23.x ``state.current``, ``exit_code.status``) gives its first item."""
    found = _path(expr, dtype, path)
    if found is None:
        return pl.lit(None, pl.String)
    value, vtype = found
    if isinstance(vtype, pl.List):
        return value.list.first().cast(pl.String)
    return value.cast(pl.String, strict=False)


def _epoch(value: pl.Expr) -> pl.Expr:
    # Slurm writes 0 for a time that has not happened (a pending job's start)
    return pl.when(value > 0).then(pl.from_epoch(value, time_unit="s")).dt.replace_time_zone("UTC")


def _json_rows(root: pl.Expr, dtype: pl.DataType, legacy: bool) -> list[pl.Expr]:
    """Row expressions shared by jobs and steps; ``root`` is the job or step struct."""
    status = _str(root, dtype, "exit_code.status")
    code = _num(root, dtype, "exit_code.return_code")
    signal = _num(root, dtype, "exit_code.signal.id", "exit_code.signal.signal_id")
    signalled = (status == "SIGNALED") | (signal > 0)
    state = pl.coalesce(_str(root, dtype, "state.current"), _str(root, dtype, "state"))
    if legacy:
        # 22.05 reports 0 for any normal exit (see module docstring): keep 0 only where true
        trusted = signalled.fill_null(False) | (state == "COMPLETED")
        code = pl.when(signalled).then(code.fill_null(0)).when(trusted).then(code)
    else:
        trusted = pl.lit(True)
    return [
        pl.when(signalled & (signal > 0)).then(signal).cast(pl.Int32).alias("signal"),
        code.cast(pl.Int32).alias("exit_code"),
        trusted.fill_null(False).alias("exit_trusted"),
        state.alias("raw_state"),
        _epoch(_num(root, dtype, "time.start")).alias("start_ts"),
        _epoch(_num(root, dtype, "time.end")).alias("end_ts"),
    ]


def parse_json(text: str, *, origin: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``sacct --json`` (any supported Slurm version) → (rows in :data:`ROWS_SCHEMA`, rejects)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConnectorError(
            f"{origin}: not valid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}; "
            "give the unmodified output of sacct --json"
        ) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), list):
        raise ConnectorError(f"{origin}: no 'jobs' list; this is not the output of sacct --json")
    meta = doc.get("meta") or {}
    release = str((meta.get("Slurm") or meta.get("slurm") or {}).get("release") or "")
    plugin = meta.get("plugin") or {}
    parser = str(plugin.get("data_parser") or plugin.get("type") or "")
    legacy = release.split(".")[0] in {"20", "21", "22"} or (not release and "dbv0.0.3" in parser)
    if not doc["jobs"]:
        empty = pl.DataFrame(schema={"line": pl.String, "raw": pl.String})
        return pl.DataFrame(schema=ROWS_SCHEMA), _rejects_frame(empty, origin, sep="#")
    jobs = pl.from_dicts(doc["jobs"], strict=False, infer_schema_length=None)
    jobs = jobs.with_row_index("idx").select("idx", pl.struct(pl.all().exclude("idx")).alias("job"))
    jdt = jobs.schema["job"]
    job = pl.col("job")
    job_id_raw = _num(job, jdt, "job_id")
    array_job, task = _num(job, jdt, "array.job_id"), _num(job, jdt, "array.task_id")
    het_job, het_off = _num(job, jdt, "het.job_id"), _num(job, jdt, "het.job_offset")
    display = (
        pl.when((array_job > 0) & task.is_not_null()).then(pl.format("{}_{}", array_job, task))
        .when((het_job > 0) & het_off.is_not_null()).then(pl.format("{}+{}", het_job, het_off))
        .otherwise(job_id_raw.cast(pl.String))
    )
    killer = _str(job, jdt, "kill_request_user")
    killer = pl.when(killer != "").then(killer)
    common = _json_rows(job, jdt, legacy)
    state = pl.col("raw_state")
    gpus = pl.lit(None, pl.Int32)
    tres = _path(job, jdt, "tres.allocated")
    if tres is not None and isinstance(tres[1], pl.List):
        gpu = pl.element().struct
        gpus = tres[0].list.eval(
            gpu.field("count").filter((gpu.field("type") == "gres") & (gpu.field("name").cast(pl.String) == "gpu"))
        ).list.first().cast(pl.Int32)
    rows = jobs.with_columns(*common).select(
        display.alias("job_id"),
        job_id_raw.cast(pl.String).alias("job_id_raw"),
        _str(job, jdt, "name").alias("job_name"),
        _str(job, jdt, "user").alias("user"),
        _str(job, jdt, "partition").alias("partition"),
        _epoch(_num(job, jdt, "time.submission")).alias("submit_ts"),
        "start_ts", "end_ts",
        pl.when((state == "CANCELLED") & killer.is_not_null())
        .then(pl.format("CANCELLED by {}", killer)).otherwise(state).alias("raw_state"),
        "exit_code", "signal", "exit_trusted",
        _str(job, jdt, "nodes").alias("nodelist"),
        _num(job, jdt, "allocation_nodes").alias("alloc_nodes"),
        gpus.alias("gpus"),
        pl.format("{}#/jobs/{}", pl.lit(origin), pl.col("idx")).alias("origin"),
        pl.col("idx"),
    )
    problem = (
        pl.when(pl.col("job_id_raw").is_null()).then(pl.lit("job without job_id"))
        .when(pl.col("raw_state").is_null()).then(pl.lit("job without state"))
    )
    rows = rows.with_columns(problem.alias("reason"))
    rejects = rows.filter(pl.col("reason").is_not_null()).join(jobs, on="idx").select(
        pl.format("/jobs/{}", pl.col("idx")).alias("line"),
        pl.col("job").struct.json_encode().alias("raw"), "reason",
    )
    rows = rows.filter(pl.col("reason").is_null())
    step_rows = _json_steps(jobs.join(rows.select("idx", "job_id", "job_id_raw"), on="idx"), jdt, legacy, origin)
    rows = pl.concat([_conform(rows), step_rows])
    return rows, _rejects_frame(rejects, origin, sep="#")


def _json_steps(jobs: pl.DataFrame, jdt: pl.DataType, legacy: bool, origin: str) -> pl.DataFrame:
    """The ``steps`` of every job as rows (they only refine their attempt)."""
    found = _path(pl.col("job"), jdt, "steps")
    if found is None or not isinstance(found[1], pl.List) or not isinstance(found[1].inner, pl.Struct):
        return _conform(pl.DataFrame())
    steps = jobs.select("idx", "job_id", "job_id_raw", found[0].alias("s")).explode("s").drop_nulls("s")
    steps = steps.with_columns(pl.int_range(pl.len()).over("idx").alias("n"))
    sdt = found[1].inner
    s = pl.col("s")
    step_id = _str(s, sdt, "step.id")
    return steps.with_columns(*_json_rows(s, sdt, legacy)).select(
        "job_id", "job_id_raw",
        step_id.str.split(".").list.last().alias("step"),
        _str(s, sdt, "step.name").alias("job_name"),
        "start_ts", "end_ts", "raw_state", "exit_code", "signal", "exit_trusted",
        _str(s, sdt, "nodes.range").alias("nodelist"),
        _num(s, sdt, "nodes.count").alias("step_nodes"),
        _num(s, sdt, "tasks.count").alias("ntasks"),
        pl.format("{}#/jobs/{}/steps/{}", pl.lit(origin), pl.col("idx"), pl.col("n")).alias("origin"),
    ).pipe(_conform)


# --------------------------------------------------------------------------- attempts


def merge_rows(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """Rows of several inputs describing the same jobs (a parsable2 and a JSON file) → one row
    per (job, step, start): columns take the first non-null value, exit codes from a source
    that reports them correctly first (see the module docstring)."""
    rows = pl.concat(frames) if frames else _conform(pl.DataFrame())
    if len(frames) < 2:
        return rows
    keys = ["job_id_raw", "step", "start_ts"]
    ordered = rows.with_row_index("_order").sort(["exit_trusted", "_order"], descending=[True, False])
    merged = ordered.group_by(keys, maintain_order=True).agg(
        *[pl.col(c).drop_nulls().first() for c in ROWS_SCHEMA if c not in keys],
        pl.col("_order").min(),
    )
    return _conform(merged.sort("_order"))


def build_attempts(rows: pl.DataFrame, cluster: str) -> pl.DataFrame:
    """Rows in :data:`ROWS_SCHEMA` → the ``attempts`` table (columns of ``ingest.schema.ATTEMPTS``).

    Job rows become attempts numbered by start time within their ``JobIDRaw``; step rows are
    matched to the attempt they ran in (the latest one that started at or before them) and
    refine its signal, state and ranks per node. Pending jobs are skipped.
    """
    state = normalize_state_expr(pl.col("raw_state"))
    rows = rows.with_row_index("_order").with_columns(state.alias("state"))
    pending = (pl.col("state") == "running") & pl.col("start_ts").is_null() \
        & pl.col("raw_state").str.to_uppercase().str.starts_with("PENDING")
    jobs = rows.filter(pl.col("step").is_null() & ~pending & ~pl.col("job_id").str.contains(r"\[", literal=False))
    jobs = jobs.sort(["job_id_raw", "start_ts", "end_ts", "submit_ts", "_order"], nulls_last=True)
    jobs = jobs.with_columns(pl.int_range(pl.len(), dtype=pl.Int32).over("job_id_raw").alias("attempt_index"))

    starts = jobs.select("job_id_raw", "attempt_index", pl.col("start_ts").alias("_t")).drop_nulls("_t").sort("_t")
    steps = rows.filter(pl.col("step").is_not_null() & (pl.col("step") != "extern")).drop_nulls("start_ts")
    linked = steps.sort("start_ts").join_asof(
        starts, left_on="start_ts", right_on="_t", by="job_id_raw", strategy="backward",
        check_sortedness=False,  # sorted globally by time, hence within every job too
    ).drop_nulls("attempt_index")
    per_node = (pl.col("ntasks") / pl.col("step_nodes")).ceil().cast(pl.Int32)
    detail = linked.group_by("job_id_raw", "attempt_index").agg(
        pl.col("signal").sort_by("end_ts", nulls_last=True).drop_nulls().first().alias("step_signal"),
        (pl.col("state") == "out_of_memory").any().alias("step_oom"),
        per_node.filter(pl.col("step").str.contains(r"^\d+$")).max().alias("step_ranks"),
    )
    out = jobs.join(detail, on=["job_id_raw", "attempt_index"], how="left")
    try:
        nodes = expand_hostlist_column(out["nodelist"]).alias("nodes")
    except ValueError as exc:
        raise ConnectorError(f"slurm: NodeList of {cluster}: {exc}") from None
    out = out.with_columns(nodes).with_columns(pl.col("nodes").fill_null(pl.lit([], pl.List(pl.String))))
    out = out.with_columns(
        pl.when(pl.col("nodes").list.len() > 0).then(pl.col("nodes").list.len())
        .otherwise(pl.col("alloc_nodes").fill_null(0)).cast(pl.Int32).alias("n_nodes"),
    )
    return out.select(
        pl.format("slurm/{}/{}/{}", pl.lit(cluster), "job_id_raw", "attempt_index").alias("attempt_id"),
        pl.lit("slurm").alias("scheduler"),
        "job_id", "job_name", "user", "partition", "attempt_index",
        "submit_ts", "start_ts", "end_ts", "raw_state",
        pl.when((pl.col("state") == "failed") & pl.col("step_oom").fill_null(False))
        .then(pl.lit("out_of_memory")).otherwise(pl.col("state")).alias("state"),
        "exit_code",
        pl.coalesce("signal", "step_signal").alias("signal"),
        "nodes", "n_nodes",
        pl.coalesce(
            "step_ranks",
            pl.when(pl.col("n_nodes") > 0).then((pl.col("ntasks") / pl.col("n_nodes")).ceil()),
        ).cast(pl.Int32).alias("ranks_per_node"),
        pl.when(pl.col("n_nodes") > 0).then((pl.col("gpus") / pl.col("n_nodes")).ceil())
        .cast(pl.Int32).alias("gpus_per_node"),
        "origin",
    ).sort("attempt_id")


def parse_sacct(
    text: str, *, origin: str, format: str = "auto", timezone: str = "UTC",
    fields: tuple[str, ...] | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One sacct output (parsable2 or JSON; ``auto`` looks at the first character) → (rows, rejects)."""
    if format == "auto":
        format = "json" if text.lstrip().startswith("{") else "parsable2"
    if format == "json":
        return parse_json(text, origin=origin)
    return parse_parsable2(text, origin=origin, timezone=timezone, fields=fields)


# --------------------------------------------------------------------------- connector


def _overlaps(window: FetchWindow) -> pl.Expr:
    start, end = window.start.astimezone(timezone.utc), window.end.astimezone(timezone.utc)
    return (pl.col("end_ts").is_null() | (pl.col("end_ts") >= start)) & (
        pl.col("start_ts").is_null() | (pl.col("start_ts") < end)
    )


class SlurmConnector(Connector):
    """Slurm job attempts from ``sacct`` (see the module docstring).

    Yields one ``attempts`` batch and one ``rejects`` batch per input (possibly empty, so a
    re-run clears rejects that a fixed input no longer produces).
    """

    name = "slurm"
    Options = SlurmOptions
    options: SlurmOptions

    def fetch(self, window: FetchWindow | None) -> Iterator[Batch]:
        """Read the ``sacct_file`` inputs, or run ``sacct`` once for ``window``."""
        opts = self.options
        tz = opts.timezone or local_timezone()
        inputs: list[tuple[str, str, str, tuple[str, ...] | None]] = []
        if opts.sacct_file:
            for path in opts.sacct_file:
                try:
                    text = path.read_text(errors="replace")
                except OSError as exc:
                    raise ConnectorError(f"slurm: cannot read sacct_file {path}: {exc.strerror}; check the path") from None
                inputs.append((str(path), text, tz, None))
        else:
            if window is None:
                raise ConnectorError(
                    "slurm: running sacct needs a time window; give one, or set sacct_file"
                )
            input_id, text, fields = self._run_sacct(window)
            inputs.append((input_id, text, "UTC", fields))
        frames, rejects, fetched = [], [], 0
        for input_id, text, zone, fields in inputs:
            rows, bad = parse_sacct(text, origin=input_id, format=opts.format, timezone=zone, fields=fields)
            frames.append(rows)
            rejects.append((input_id, bad))
            fetched += rows.height + bad.height
        attempts = build_attempts(merge_rows(frames), self.cluster)
        if not opts.sacct_file and window is not None:
            attempts = attempts.filter(_overlaps(window))
        yield Batch("attempts", attempts, self.cluster, "+".join(i for i, *_ in inputs), fetched=fetched)
        for input_id, bad in rejects:
            yield Batch("rejects", bad, self.cluster, input_id, source="slurm")

    def sacct_command(self, window: FetchWindow) -> list[str]:
        """The one ``sacct`` call for ``window`` (run with ``TZ=UTC``, so times are UTC).

        ``-D`` lists every run of a requeued job; steps are kept (no ``-X``) because the
        signal of a cancelled or timed-out job is only on its batch step. The start goes
        back ``requeue_lookback_days`` so earlier runs are counted in ``attempt_index``.
        """
        opts = self.options
        start = window.start.astimezone(timezone.utc) - timedelta(days=opts.requeue_lookback_days)
        end = window.end.astimezone(timezone.utc)
        fmt = "json" if opts.format == "json" else "parsable2"
        shape = ["--json"] if fmt == "json" else ["--parsable2", "--noheader", f"--format={','.join(SACCT_FIELDS)}"]
        return [
            opts.sacct_bin, "-a", "-D", *shape,
            "-S", start.strftime(TIME_FORMAT), "-E", end.strftime(TIME_FORMAT), *opts.extra_args,
        ]

    def _run_sacct(self, window: FetchWindow) -> tuple[str, str, tuple[str, ...] | None]:
        cmd = self.sacct_command(window)
        env = {**os.environ, "TZ": "UTC", "SLURM_TIME_FORMAT": "standard"}
        input_id = f"sacct:{self.cluster}:{window.start.isoformat()}/{window.end.isoformat()}"
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=self.options.timeout_s)
        except FileNotFoundError:
            raise ConnectorError(
                f"slurm: {cmd[0]!r} not found; install the Slurm client or set sacct_bin"
            ) from None
        except subprocess.TimeoutExpired:
            raise TransientError(f"slurm: sacct did not answer within {self.options.timeout_s:g} s") from None
        if done.returncode != 0:
            message = f"slurm: sacct exited {done.returncode}: {done.stderr.strip()[:500]}"
            transient = any(s in done.stderr.lower() for s in ("connection", "slurmdbd", "timed out", "unable to contact"))
            raise (TransientError if transient else ConnectorError)(message)
        fields = None if "--json" in cmd else SACCT_FIELDS
        return input_id, done.stdout, fields
