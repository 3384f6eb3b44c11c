"""Parsing ``sacct`` output into one frame of job and step rows.

``--parsable2`` text and ``--json`` documents of every Slurm shape (22.05
``openapi/dbv0.0.38``; 23.x–25.x ``data_parser`` with wrapped numbers and list states) become
the same row frame (:data:`ROWS_SCHEMA`); :mod:`ingest.connectors.slurm` turns those rows into
attempts. Rows that cannot be parsed come back separately with the reason.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

import polars as pl

from ingest.connectors.base import ConnectorError
from ingest.hostlist import expand_hostlist
from ingest.states import normalize_state_expr, split_exit_code_expr

SACCT_FIELDS = (
    "JobID", "JobIDRaw", "JobName", "User", "Partition", "Submit", "Start", "End", "State",
    "ExitCode", "NodeList", "AllocNodes", "NNodes", "NTasks", "AllocTRES", "ReqTRES", "Elapsed",
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



def _conform(frame: pl.DataFrame) -> pl.DataFrame:
    """Add the :data:`ROWS_SCHEMA` columns a format lacks (as nulls), in schema order."""
    absent = [pl.lit(None, t).alias(c) for c, t in ROWS_SCHEMA.items() if c not in frame.columns]
    return frame.with_columns(absent).select(list(ROWS_SCHEMA)).cast(ROWS_SCHEMA)


def _parse_ts(col: pl.Expr, tz: str, ambiguous: str = "earliest") -> pl.Expr:
    return (
        col.str.strip_chars()
        .str.to_datetime(TIME_FORMAT, strict=False, time_unit="us")
        .dt.replace_time_zone(tz, ambiguous=ambiguous, non_existent="null")
        .dt.convert_time_zone("UTC")
    )


def _elapsed_s(col: pl.Expr) -> pl.Expr:
    """Seconds of an ``Elapsed`` value (``[D-]HH:MM:SS``), null if it is none."""
    parts = col.str.strip_chars().str.extract_groups(r"^(?:(?P<d>\d+)-)?(?P<h>\d+):(?P<m>\d{2}):(?P<s>\d{2})$")
    field = lambda name: parts.struct.field(name).cast(pl.Int64, strict=False)  # noqa: E731
    return field("d").fill_null(0) * 86400 + field("h") * 3600 + field("m") * 60 + field("s")


def _end_ts(end: pl.Expr, start: pl.Expr, elapsed: pl.Expr, tz: str) -> pl.Expr:
    """``End`` in UTC. A local time the autumn change repeats is read as its earlier instant
    (what Slurm's own time zone rules would give), unless ``Elapsed`` says the later one
    (the start plus the elapsed time is the end whatever the clocks did) or the earlier one
    is before the start."""
    early, late = _parse_ts(end, tz), _parse_ts(end, tz, "latest")
    by_elapsed = start + pl.duration(seconds=_elapsed_s(elapsed))
    later = (late == by_elapsed).fill_null(False) | (early < start).fill_null(False)
    return pl.when((early != late) & later).then(late).otherwise(early)


def _start_ts(start: pl.Expr, submit: pl.Expr, end: pl.Expr, elapsed: pl.Expr, tz: str) -> pl.Expr:
    """``Start`` in UTC. A local time the autumn change repeats is read as its earlier
    instant, unless that instant is before the job was submitted (whose own time is taken
    at its earlier instant too): a job cannot start before its submission, so it started
    in the second pass of the hour; or unless an ``End`` outside the repeated hour less
    ``Elapsed`` is the later instant (the elapsed time counts real seconds)."""
    early, late = _parse_ts(start, tz), _parse_ts(start, tz, "latest")
    submitted = _parse_ts(submit, tz)
    end_early, end_late = _parse_ts(end, tz), _parse_ts(end, tz, "latest")
    by_elapsed = ((end_early == end_late) & (end_early - pl.duration(seconds=_elapsed_s(elapsed)) == late))
    later = (submitted > early).fill_null(False) | by_elapsed.fill_null(False)
    return pl.when((early != late) & later).then(late).otherwise(early)


def _bad_ts(col: str, tz: str) -> pl.Expr:
    """A reason when ``col`` holds text that is neither a time nor a null token."""
    raw = pl.col(col).str.strip_chars()
    bad = _parse_ts(pl.col(col), tz).is_null() & ~raw.is_in(NULL_TOKENS) & raw.is_not_null()
    return pl.when(bad).then(pl.format(f"unparseable {col} time '{{}}'", raw))


def _null_token(col: pl.Expr) -> pl.Expr:
    """``col`` stripped, null where it holds one of :data:`NULL_TOKENS`."""
    value = col.str.strip_chars()
    return pl.when(value.is_in(NULL_TOKENS)).then(None).otherwise(value)


def _with_hostlist_problems(table: pl.DataFrame, col: str, field: str) -> pl.DataFrame:
    """``table`` with ``_hostlist``: why its node list ``col`` (sacct's ``field``) does not
    expand, null if it does.

    Landed, a malformed list would fail the expansion of every attempt of the input (or,
    read leniently, tie node events to the wrong nodes); it is this row's problem. Each
    distinct list is expanded once: a dump repeats a few lists thousands of times.
    """
    lists = table.select(_null_token(pl.col(col)).alias("_list"))
    problems = {}
    for expr in lists["_list"].drop_nulls().unique():
        try:
            expand_hostlist(expr)
        except ValueError as exc:
            problems[expr] = f"{field}: {exc}"
    return table.with_columns(
        lists["_list"].replace_strict(problems, default=None, return_dtype=pl.String).alias("_hostlist")
    )


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
            pl.when(pl.col("State").str.strip_chars().fill_null("") == "").then(pl.lit("empty State"))
            # Landed, a state no rule knows would never be attributed, and nothing would say so.
            .when(normalize_state_expr(pl.col("State")).is_null())
            .then(pl.format("State '{}' is not a Slurm job state", pl.col("State").str.strip_chars())),
            pl.col("_hostlist"),
        ],
        separator="; ", ignore_nulls=True,
    )
    table = _with_hostlist_problems(table, "NodeList", "NodeList").with_columns(problem.alias("reason"))
    bad_width = lines.filter(~width_ok).with_columns(
        pl.format(f"expected {len(fields)} '|'-separated fields, found {{}}", parts.list.len()).alias("reason")
    )
    rejects = pl.concat([
        bad_width.select("line", "raw", "reason"),
        table.filter(pl.col("reason") != "").select("line", "raw", "reason"),
    ])
    good = table.filter(pl.col("reason") == "")

    code, sig = split_exit_code_expr(pl.col("ExitCode"))
    # The end is read knowing the start: the start is read once, as a column of its own.
    start = _start_ts(pl.col("Start"), pl.col("Submit"), pl.col("End"), pl.col("Elapsed"), timezone)
    rows = good.with_columns(start.alias("_start")).select(
        pl.col("JobID").str.split(".").list.first().alias("job_id"),
        raw_base.alias("job_id_raw"),
        pl.col("JobIDRaw").str.split(".").list.get(1, null_on_oob=True).alias("step"),
        pl.col("JobName").alias("job_name"),
        _null_token(pl.col("User")).alias("user"),
        _null_token(pl.col("Partition")).alias("partition"),
        _parse_ts(pl.col("Submit"), timezone).alias("submit_ts"),
        pl.col("_start").alias("start_ts"),
        _end_ts(pl.col("End"), pl.col("_start"), pl.col("Elapsed"), timezone).alias("end_ts"),
        pl.col("State").str.strip_chars().alias("raw_state"),
        code.alias("exit_code"),
        pl.when(sig != 0).then(sig).alias("signal"),
        pl.lit(True).alias("exit_trusted"),
        _null_token(pl.col("NodeList")).alias("nodelist"),
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
        .otherwise(pl.col("_hostlist"))
    )
    rows = _with_hostlist_problems(rows, "nodelist", "nodes").with_columns(problem.alias("reason"))
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
