"""The lake's table schemas, declared once.

Every table has an Arrow schema (what lands in Parquet) and, for the tables people read
record by record, a Pydantic model (what the CLI, the JSON export and connectors validate
against). Partition columns (``cluster``, ``day``, ``source``) live in the hive path, not in
the files; :data:`PARTITIONS` says which ones each table has.

Closed vocabularies (states, roles, domains, qualities) are declared here too so that the
rule loader, the engine and the docs all use the same sets.
"""

from __future__ import annotations

import re

from datetime import date, datetime
from typing import Literal

import polars as pl
import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

TS = pa.timestamp("us", tz="UTC")

# --- closed vocabularies -------------------------------------------------------------

STATES = (
    "completed", "failed", "cancelled", "timeout", "node_fail", "preempted",
    "out_of_memory", "boot_fail", "deadline", "running",
)
"""Normalized attempt states (ARCHITECTURE §3)."""

TS_SOURCES = ("line", "inferred", "ingest", "monotonic")
"""How an observation's time was obtained: printed on the line; inherited from the previous
stamped line of the same file; the time of ingest (nothing better); or a kernel monotonic
stamp converted to wall time with a boot time."""

ROLES = ("root_candidate", "cascade", "confirmation", "context", "benign")
"""What an event can mean for a failure: a possible root cause; a symptom another fault
produces; evidence that corroborates a root; background; explicitly harmless."""

DOMAINS = (
    "gpu", "gpu_memory", "nvlink", "network", "host", "storage", "scheduler", "workload",
    "unknown", "none",
)
"""The closed set of verdict domains (ARCHITECTURE §5)."""

QUALITIES = ("definitive", "probable", "ambiguous", "insufficient")

RESPONSIBILITY = {
    "gpu": "infrastructure", "gpu_memory": "infrastructure", "nvlink": "infrastructure",
    "network": "infrastructure", "host": "infrastructure", "storage": "infrastructure",
    "workload": "workload", "scheduler": "policy", "unknown": "unknown", "none": "none",
}
"""Who has to act, by domain. ``none`` is for attempts that succeeded. The decide stage
makes a host fault whose fix is the job's (action ``fix_workload``) ``workload``'s."""

CLUSTER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
"""What a cluster may be called: letters, digits, '.', '_' and '-' (it names a partition
folder, ``cluster=<name>``)."""

SCHEDULERS = ("slurm", "kueue", "static")

# --- Arrow schemas --------------------------------------------------------------------

ATTEMPTS = pa.schema([
    ("attempt_id", pa.string()),
    ("scheduler", pa.string()),
    ("job_id", pa.string()),
    ("job_name", pa.string()),
    ("user", pa.string()),
    ("partition", pa.string()),
    ("attempt_index", pa.int32()),
    ("submit_ts", TS),
    ("start_ts", TS),
    ("end_ts", TS),
    ("raw_state", pa.string()),
    ("state", pa.string()),
    ("exit_code", pa.int32()),
    ("signal", pa.int32()),
    ("nodes", pa.list_(pa.string())),
    ("n_nodes", pa.int32()),
    ("ranks_per_node", pa.int32()),
    ("gpus_per_node", pa.int32()),
    ("relaunch_ts", pa.list_(TS)),
    ("origin", pa.string()),
])
"""``relaunch_ts``: when the job script started its launcher again after every earlier
step of the attempt had ended (a retry loop around ``srun``: Slurm's numbered steps one
after another), null where the scheduler keeps no steps."""


def processes_per_node() -> pl.Expr:
    """An attempt's ranks (processes) per node: ``ranks_per_node`` (Slurm's tasks per node),
    or ``gpus_per_node`` where it ran one task per node (a torchrun or DeepSpeed launcher,
    which starts one process per GPU), or where it is unknown."""
    tasks = pl.col("ranks_per_node")
    return pl.when(tasks > 1).then(tasks).otherwise(pl.coalesce("gpus_per_node", tasks)).cast(pl.Int64)


HET_OFFSET = r"\+([0-9]+)$"
"""A Slurm heterogeneous job component's offset behind its leader's id (``1234+1``; group 1)."""


def het_leader(job_id: pl.Expr) -> pl.Expr:
    """The job a heterogeneous job's component is part of: its leader's id (``1234+1`` →
    ``1234``, the id its output file is named after); any other job id unchanged."""
    return job_id.str.replace(HET_OFFSET, "")


OBSERVATIONS = pa.schema([
    ("ts", TS),
    ("ts_source", pa.string()),
    ("node", pa.string()),
    ("attempt_id", pa.string()),
    ("rank", pa.int32()),
    ("program", pa.string()),
    ("message", pa.string()),
    ("origin", pa.string()),
    ("seq", pa.int64()),
    ("input_id", pa.string()),
])
"""Normalized log lines. ``message`` is the text after every timestamp/host/rank prefix;
``program`` the syslog tag or launcher (``kernel``, ``slurmstepd``, ``nccl``…); ``seq`` the
line number inside the input, which keeps order stable when stamps tie."""

METRICS = pa.schema([
    ("ts", TS),
    ("node", pa.string()),
    ("metric", pa.string()),
    ("gpu", pa.string()),
    ("hca", pa.string()),
    ("port", pa.string()),
    ("value", pa.float64()),
    ("labels", pa.string()),
    ("origin", pa.string()),
    ("input_id", pa.string()),
])

TOPOLOGY = pa.schema([
    ("kind", pa.string()),  # "hca_port" | "gpu" | "node_alias"
    ("node", pa.string()),
    ("hca", pa.string()),
    ("port", pa.string()),
    ("switch", pa.string()),
    ("switch_port", pa.string()),
    ("gpu", pa.string()),
    ("pci", pa.string()),
    ("origin", pa.string()),
    ("alias", pa.string()),
])
"""The cluster's fixed layout: ``hca_port`` rows cable a host port to a switch port (and
name its PCI function), ``gpu`` rows give a GPU index's PCI address, ``node_alias`` rows
name another name a node's logs use (``alias``: an old hostname, a Cray xname) for the
node the scheduler names (``node``)."""

REJECTS = pa.schema([
    ("ts_ingest", TS),
    ("source", pa.string()),
    ("origin", pa.string()),
    ("reason", pa.string()),
    ("raw", pa.string()),
    ("input_id", pa.string()),
])

EVENTS = pa.schema([
    ("event_id", pa.string()),
    ("ts", TS),
    ("last_ts", TS),
    ("count", pa.int64()),
    ("node", pa.string()),
    ("attempt_id", pa.string()),
    ("rank", pa.int32()),
    ("gpu", pa.string()),
    ("port", pa.string()),
    ("source", pa.string()),
    ("rule_id", pa.string()),
    ("event", pa.string()),
    ("domain", pa.string()),
    ("cause", pa.string()),
    ("role", pa.string()),
    ("action", pa.string()),
    ("params", pa.string()),
    ("message", pa.string()),
    ("origin", pa.string()),
    ("ts_source", pa.string()),
])
"""Extracted events. ``ts`` is the first occurrence, ``last_ts``/``count`` what the flood
dedupe folded in; ``params`` the rule's named groups as a JSON object."""

EVIDENCE = pa.struct([
    ("ts", TS),
    ("node", pa.string()),
    ("rank", pa.int32()),
    ("source", pa.string()),
    ("role", pa.string()),
    ("rule_id", pa.string()),
    ("event", pa.string()),
    ("count", pa.int64()),
    ("message", pa.string()),
    ("origin", pa.string()),
])

ALTERNATIVE = pa.struct([
    ("domain", pa.string()),
    ("cause", pa.string()),
    ("ts", TS),
    ("node", pa.string()),
    ("rule_id", pa.string()),
])

COVERAGE = pa.struct([
    ("source", pa.string()),
    ("rows", pa.int64()),
    ("error", pa.string()),
])

RESULTS = pa.schema([
    ("attempt_id", pa.string()),
    ("job_id", pa.string()),
    ("scheduler", pa.string()),
    ("state", pa.string()),
    ("start_ts", TS),
    ("end_ts", TS),
    ("domain", pa.string()),
    ("cause", pa.string()),
    ("responsibility", pa.string()),
    ("quality", pa.string()),
    ("culprit_nodes", pa.list_(pa.string())),
    ("culprit_gpus", pa.list_(pa.string())),
    ("culprit_ports", pa.list_(pa.string())),
    ("culprit_ranks", pa.list_(pa.int32())),
    ("affected_nodes", pa.list_(pa.string())),
    ("first_fault_ts", TS),
    ("fault_to_end_s", pa.float64()),
    ("evidence", pa.list_(EVIDENCE)),
    ("alternatives", pa.list_(ALTERNATIVE)),
    ("coverage", pa.list_(COVERAGE)),
    ("recommended_action", pa.string()),
    ("rule_pack_version", pa.string()),
    ("run_id", pa.string()),
    ("run_ts", TS),
])

TABLES: dict[str, pa.Schema] = {
    "attempts": ATTEMPTS,
    "observations": OBSERVATIONS,
    "metrics": METRICS,
    "topology": TOPOLOGY,
    "events": EVENTS,
    "results": RESULTS,
    "rejects": REJECTS,
}

LATER_COLUMNS: dict[str, tuple[str, ...]] = {
    "attempts": ("relaunch_ts",),
    "topology": ("alias",),
}
"""Columns added to a table after lakes were first written: a producer may leave them out,
and files written before lack them; both read as null."""


def with_later_columns(frame: pl.DataFrame, table: str) -> pl.DataFrame:
    """``frame`` with the columns of :data:`LATER_COLUMNS` of ``table`` it lacks, as nulls
    of their type, in the table's column order (other columns after them)."""
    absent = [c for c in LATER_COLUMNS.get(table, ()) if c not in frame.columns]
    if not absent:
        return frame
    schema = pl.from_arrow(TABLES[table].empty_table()).schema
    frame = frame.with_columns(pl.lit(None, dtype=schema[c]).alias(c) for c in absent)
    return frame.select(*(c for c in schema if c in frame.columns), *(c for c in frame.columns if c not in schema))

PARTITIONS: dict[str, tuple[str, ...]] = {
    "attempts": ("cluster", "day"),
    "observations": ("cluster", "day", "source"),
    "metrics": ("cluster", "day"),
    "topology": ("cluster",),
    "events": ("cluster", "day"),
    "results": ("cluster", "day"),
    "rejects": ("cluster", "day"),
}
"""Hive partition keys of each table, in path order. ``day`` is a UTC date."""

# --- Pydantic models (record-level contracts) ------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Attempt(_Strict):
    """One attempt of a job: a requeued Slurm job or re-admitted workload has several."""

    attempt_id: str
    cluster: str
    scheduler: Literal["slurm", "kueue", "static"]
    job_id: str
    job_name: str | None = None
    user: str | None = None
    partition: str | None = None
    attempt_index: int = 0
    submit_ts: datetime | None = None
    start_ts: datetime | None = None
    end_ts: datetime | None = None
    raw_state: str | None = None
    state: Literal[
        "completed", "failed", "cancelled", "timeout", "node_fail", "preempted",
        "out_of_memory", "boot_fail", "deadline", "running",
    ]
    exit_code: int | None = None
    signal: int | None = None
    nodes: list[str] = Field(default_factory=list)
    n_nodes: int = 0
    ranks_per_node: int | None = None
    gpus_per_node: int | None = None
    relaunch_ts: list[datetime] | None = None
    origin: str | None = None


class Evidence(_Strict):
    """One line of a verdict's evidence trail, with its provenance."""

    ts: datetime | None
    node: str | None
    rank: int | None
    source: str | None
    role: str
    rule_id: str
    event: str
    count: int
    message: str
    origin: str | None


class Alternative(_Strict):
    """A competing root candidate listed when the verdict is ambiguous."""

    domain: str
    cause: str
    ts: datetime | None
    node: str | None
    rule_id: str


class Coverage(_Strict):
    """Rows a source contributed to an attempt's window, and any connector error."""

    source: str
    rows: int
    error: str | None = None


class Verdict(_Strict):
    """One row of the results table (ARCHITECTURE §5): why an attempt ended as it did."""

    attempt_id: str
    job_id: str
    cluster: str
    scheduler: str
    state: str
    start_ts: datetime | None
    end_ts: datetime | None
    domain: Literal[
        "gpu", "gpu_memory", "nvlink", "network", "host", "storage", "scheduler",
        "workload", "unknown", "none",
    ]
    cause: str
    responsibility: Literal["infrastructure", "workload", "policy", "unknown", "none"]
    quality: Literal["definitive", "probable", "ambiguous", "insufficient"]
    culprit_nodes: list[str]
    culprit_gpus: list[str]
    culprit_ports: list[str]
    culprit_ranks: list[int]
    affected_nodes: list[str]
    first_fault_ts: datetime | None
    fault_to_end_s: float | None
    evidence: list[Evidence]
    alternatives: list[Alternative]
    coverage: list[Coverage]
    recommended_action: str
    rule_pack_version: str
    run_id: str
    run_ts: datetime
    day: date | None = None


def empty_table(name: str) -> pa.Table:
    """An empty Arrow table with the schema of lake table ``name``."""
    return TABLES[name].empty_table()


def schema_markdown() -> str:
    """Every lake table's columns and Arrow types as Markdown (what the README shows)."""
    out = []
    for name, schema in TABLES.items():
        parts = ", ".join(f"`{key}`" for key in PARTITIONS[name])
        out.append(f"**{name}** (partitioned by {parts})\n")
        out.append("| column | type |\n|---|---|")
        out.extend(f"| `{field.name}` | `{field.type}` |" for field in schema)
        out.append("")
    return "\n".join(out)
