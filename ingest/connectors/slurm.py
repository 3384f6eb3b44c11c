"""Slurm accounting (``sacct``) → the ``attempts`` table.

Parsing lives in :mod:`ingest.connectors.slurm_parse`. Inputs: ``sacct --parsable2`` text (with a header line, or ``--noheader`` with a known
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
from ingest.connectors.slurm_parse import SACCT_FIELDS, TIME_FORMAT, merge_rows, parse_json, parse_parsable2
from ingest.files.common import FilesError, read_bytes
from ingest.hostlist import expand_hostlist_column
from ingest.states import normalize_state_expr


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

    ``sacct_file``: one or more saved outputs (parsable2 and/or JSON, mixed is fine; gzip
    is read by its magic number, whatever the name); when absent the connector runs
    ``sacct_bin`` for the window. ``timezone``: the Slurm host's zone for parsable2 files
    (IANA name; default: this machine's). ``requeue_lookback_days``: how far before the
    window ``sacct`` looks so that earlier runs of a requeued job are counted in
    ``attempt_index`` (only attempts overlapping the window are landed).
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


def build_attempts(rows: pl.DataFrame, cluster: str) -> pl.DataFrame:
    """Rows in :data:`ingest.connectors.slurm_parse.ROWS_SCHEMA` → the ``attempts`` table (columns of ``ingest.schema.ATTEMPTS``).

    Job rows become attempts numbered by start time within their ``JobIDRaw`` (a row repeated
    whole counts once); step rows are
    matched to the attempt they ran in (the latest one that started at or before them) and
    refine its signal, state and ranks per node. Pending jobs are skipped.
    """
    state = normalize_state_expr(pl.col("raw_state"))
    rows = rows.with_row_index("_order").with_columns(state.alias("state"))
    pending = (pl.col("state") == "running") & pl.col("start_ts").is_null() \
        & pl.col("raw_state").str.to_uppercase().str.starts_with("PENDING")
    jobs = rows.filter(pl.col("step").is_null() & ~pending & ~pl.col("job_id").str.contains(r"\[", literal=False))
    # A row repeated whole (two dumps concatenated, a window fetched twice) is one run, not
    # a requeue.
    jobs = jobs.unique([c for c in jobs.columns if c not in ("_order", "origin")], keep="first", maintain_order=True)
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
    out = jobs.join(detail, on=["job_id_raw", "attempt_index"], how="left").join(
        relaunches(linked), on=["job_id_raw", "attempt_index"], how="left"
    )
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
        "relaunch_ts",
        "origin",
    ).sort("attempt_id")


def relaunches(steps: pl.DataFrame) -> pl.DataFrame:
    """``job_id_raw``, ``attempt_index`` and ``relaunch_ts``: the start of each numbered
    step (an ``srun``) of an attempt that began once every earlier one had ended — the job
    script running its launcher again, as a retry loop does. Steps that overlap (a Ray
    head and its workers, a monitor beside the training) are no relaunch, and neither is
    a step after one still running (no end)."""
    numbered = steps.filter(pl.col("step").str.contains(r"^[0-9]+$")).sort("job_id_raw", "attempt_index", "start_ts")
    open_end = pl.lit(datetime.max.replace(tzinfo=timezone.utc)).dt.cast_time_unit("us")
    ended = pl.coalesce("end_ts", open_end).cum_max().shift(1).over("job_id_raw", "attempt_index")
    return numbered.filter(pl.col("start_ts") >= ended).group_by("job_id_raw", "attempt_index").agg(
        pl.col("start_ts").sort().alias("relaunch_ts")
    )


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


RUN_OF = r"^slurm/[^/]+/([^/]+)/[0-9]+$"
"""The ``JobIDRaw`` in a Slurm attempt id (group 1)."""


def after_stored_runs(attempts: pl.DataFrame, stored: pl.LazyFrame) -> pl.DataFrame:
    """``attempts`` (:func:`build_attempts`) numbered after the runs of their jobs the lake
    already holds (``stored``: its attempts), so that fetches that each list only some runs
    of a requeued job (daily ``sacct`` dumps) give every run the same id: a run that started
    when a stored one did keeps that one's number; runs that started after every stored run
    of the job follow its last number. A job with a run that started before a stored one
    (an older dump landed late) keeps the fetch's numbering."""
    run = pl.col("attempt_id").str.extract(RUN_OF, 1)
    known = (
        stored.filter(pl.col("scheduler") == "slurm")
        .select(run.alias("_run"), "attempt_index", "start_ts")
        .filter(pl.col("_run").is_in(attempts.select(run).to_series().implode()))
        .collect()
    )
    if known.is_empty():
        return attempts
    last = known.group_by("_run").agg(pl.col("attempt_index").max().alias("_last"), pl.col("start_ts").max().alias("_latest"))
    same = known.select("_run", "start_ts", pl.col("attempt_index").alias("_same")).unique(["_run", "start_ts"])
    mine = attempts.with_columns(run.alias("_run")).join(same, on=["_run", "start_ts"], how="left", maintain_order="left")
    mine = mine.join(last, on="_run", how="left", maintain_order="left")
    later = pl.col("_same").is_null() & (pl.col("start_ts") > pl.col("_latest")).fill_null(False)
    # The runs after the stored ones, in start order, follow the job's last stored number.
    after = (pl.col("_last") + 1 + pl.int_range(pl.len()).over("_run", later, order_by="start_ts")).cast(pl.Int32)
    # A job with a run before its stored ones cannot be numbered without renumbering those:
    # it keeps the fetch's numbers (the renumbered ones could repeat one).
    placeable = (pl.col("_same").is_not_null() | later | pl.col("_last").is_null()).all().over("_run")
    index = pl.when(placeable).then(pl.coalesce(pl.col("_same"), pl.when(later).then(after), pl.col("attempt_index")))
    index = index.otherwise(pl.col("attempt_index")).cast(pl.Int32)
    return mine.with_columns(index.alias("attempt_index")).with_columns(
        pl.concat_str([pl.col("attempt_id").str.replace(r"/[0-9]+$", "/"), pl.col("attempt_index").cast(pl.String)])
        .alias("attempt_id")
    ).select(attempts.columns)


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
                    # As log files are read: gzip by its magic number, a byte-order mark dropped.
                    raw, _ = read_bytes(path)
                except FilesError as exc:
                    raise ConnectorError(f"slurm: {exc}") from None
                except OSError as exc:
                    raise ConnectorError(f"slurm: cannot read sacct_file {path}: {exc.strerror}; check the path") from None
                inputs.append((str(path), raw.decode(errors="replace"), tz, None))
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
        if self.lake is not None:
            attempts = after_stored_runs(attempts, self.lake.scan("attempts", clusters=[self.cluster]))
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
