"""Python rules: logic the YAML rule kinds cannot express, loaded by path.

The contract
------------
A rule file ``rules/<name>.yaml`` may declare::

    - kind: python
      id: gpu.repeat_xid_on_same_gpu
      title: The same XID twice on one GPU within an attempt is a hardware fault
      path: repeat_xid.py          # relative to the YAML file

and the Python file beside it defines one function::

    def apply(events: pl.DataFrame, context: RuleContext) -> pl.DataFrame: ...

``events`` are the correlated events of the run: the EVENTS columns of
:mod:`ingest.schema` plus ``cluster``, with ``attempt_id`` filled (a node event appears once
per attempt it touched) and the attempt columns ``state``, ``job_id``, ``user``,
``start_ts``, ``end_ts``. A cascade line several ranks of a node printed alike is one row
(:func:`engine.correlate.collapse_rank_copies`): ``rank`` is the first copy's, ``ranks``
(a sorted list) holds every copy's, and is null on rows that stand for one rank or none; a
rule asking which ranks reported a line reads ``ranks`` where it is set. Other columns the
engine adds must be passed through untouched.

``apply`` returns a frame with the same columns (same names and dtypes). It may change
``role``, ``domain``, ``cause`` and ``action`` of existing rows (:func:`link_to_roots` makes
rows the cascades or confirmations of a root, :func:`with_role` gives rows a role, :func:`with_values` sets role, domain, cause or action) and add rows (give new rows
an ``event_id`` of the form ``<rule id>@<origin>`` and ``rule_id`` = the rule's id;
:func:`new_events` builds such rows); it must
never drop or rename columns. It must be columnar (Polars expressions and joins, no loop over
rows) and deterministic: the same input gives the same output.

``context`` (:class:`RuleContext`) carries the attempts in scope and a lazy view of past
events (``history``, possibly empty) for rules that look at repeat offenders. A rule that
reads ``history`` names the events it looks for in a module-level ``HISTORY_EVENTS`` (a
tuple of event names): the run keeps those events of the whole lake in memory, updated as
it rewrites days, instead of scanning the events table once per chunk, so ``history``
holds only events some rule of the pack declares.

A rule that places a fault between several nodes without telling which of them is at
fault (``ib_peer.py``: two nodes whose failing connections name only each other) marks
those root candidates with :data:`UNDECIDED_PARAM` (:func:`with_param`): the verdict names
them all and is never ``definitive``. A rule that finds root candidates competing whatever
their nodes (``program_error.py``: a rank's program error and the job's own GPU failing at
its moment) marks them with :data:`RIVAL_PARAM`: the verdict lists them as alternatives.

A rule whose added rows copy another rule's outcome (its ``event``: ``het_sibling.py`` gives
a heterogeneous job's component its sibling's root) sets a module-level ``COPIES_OUTCOMES =
True``: its rows then name nodes as that outcome does (a memory cgroup's kill names none,
:meth:`engine.rules.loader.RulePack.node_naming`).

A rule that gives rows a cause of its own declares it in a module-level ``CAUSES``: a tuple
of ``(cause, domain, role, event)``, one per outcome. The cause catalog
(:mod:`engine.rules.catalog`, the README's table) lists them beside the YAML rules' causes.

Rule files are imported under a private module name derived from their path, so two packs
can hold files with the same name and importing a rule never shadows a real module.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from engine.rules.model import PythonRule
from ingest.schema import TOPOLOGY

ApplyFn = Callable[[pl.DataFrame, "RuleContext"], pl.DataFrame]
"""The signature a python rule's ``apply`` function has."""


class PythonRuleError(Exception):
    """A python rule could not be loaded, or broke the contract when run."""


def no_topology() -> pl.DataFrame:
    """An empty :attr:`RuleContext.topology`: the topology table's columns plus ``cluster``,
    as a lake without topology files gives them."""
    return pl.from_arrow(TOPOLOGY.empty_table()).with_columns(pl.lit(None, dtype=pl.String).alias("cluster"))


COLLECTIVE_TIMEOUT_EVENT = "network.collective_timeout"
"""The event of PyTorch's NCCL watchdog reporting a collective that timed out
(``comm.nccl_watchdog_timeout``): what the rules that read the ranks' timeouts select."""
SLOWDOWN_CAUSES = ("gpu.thermal_power_slowdown", "gpu.thermal", "host.cpu_thermal_throttle")
"""The causes of the reports of a GPU or CPU slowed by heat or a power brake, ``context`` on
their own (the rules that promote them: ``fail_slow.py``, ``straggler.py``): a GPU's
(``gpu_health.yaml``), a GPU's temperature above its slowdown point in DCGM's metrics
(``metrics.yaml``: one event per hot spell, its ``last_ts`` the spell's last sample), a
node's CPUs' (``host.yaml``)."""
GPU_FAULT_CAUSES = (
    "workload.non_finite_loss", "workload.illegal_memory_access", "workload.gpu_illegal_address",
    "workload.gpu_mmu_fault", "workload.kernel_exception", "workload.launch_failure", "workload.illegal_instruction",
    "workload.cublas_failure",
)
"""Workload causes a failing GPU also produces: the XID catalog sends XID 13 and 31 to
diagnostics to tell the GPU from the application, and a GPU whose memory or arithmetic
fails makes any code fault the same way (a loss gone NaN first of all)."""
SLOW_FAULT_CAUSES = (*SLOWDOWN_CAUSES, "gpu.straggler", "host.pcie_link_degraded")
"""The causes of the faults that only slow a job down (``fail_slow.py``'s roots: a GPU or
CPU held back by heat, the rank Megatron-LM names slowest, a GPU's link trained narrow): the
job goes on reporting progress through them, so going on is no sign it outlived them."""
SUSTAINED_PARAM = "sustained"
"""The param ``fail_slow.py`` sets (to why) on the link-downs of a port that went down again
and again through a run that then hit its time limit: each bounce was outlived, but together
they slowed the job, as any of :data:`SLOW_FAULT_CAUSES` does."""


def slows_the_job() -> pl.Expr:
    """Whether a root candidate is a fault that only slows a job down: one of
    :data:`SLOW_FAULT_CAUSES`, or a port's repeated bounces (:data:`SUSTAINED_PARAM`). The job
    goes on reporting progress through it, so going on is no sign it outlived it."""
    return pl.col("cause").is_in(SLOW_FAULT_CAUSES) | param(SUSTAINED_PARAM).is_not_null()


@dataclass(frozen=True)
class RuleContext:
    """What a python rule may look at besides the events.

    ``attempts``: the attempts in scope (attempts table columns plus ``cluster``).
    ``history``: past events (events table columns plus ``cluster``) named in the
    ``HISTORY_EVENTS`` of the pack's python rules; may be an empty frame, which a rule must
    tolerate. ``topology``: the lake's topology rows (topology table columns plus
    ``cluster``: HCA ports and their switch ports and PCI functions, GPUs and their PCI
    addresses); may have no row, but always has those columns.
    """

    attempts: pl.DataFrame
    history: pl.LazyFrame
    topology: pl.DataFrame = field(default_factory=no_topology)


Cause = tuple[str, str, str, str]
"""A declared outcome of a python rule: ``(cause, domain, role, event)``."""


@dataclass(frozen=True)
class LoadedPythonRule:
    """A python rule with its resolved file, its ``apply`` function, the causes it
    declares (its module's ``CAUSES``), the past events it reads (``HISTORY_EVENTS``) and
    whether its rows copy other rules' outcomes (``COPIES_OUTCOMES``)."""

    rule: PythonRule
    path: Path
    apply: ApplyFn
    causes: tuple[Cause, ...] = ()
    history_events: tuple[str, ...] = ()
    copies_outcomes: bool = False


def _module_name(path: Path) -> str:
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:16]
    return f"_causelake_rule_{digest}"


def load_python_rule(path: Path) -> ApplyFn:
    """Import the rule file at ``path`` and return its ``apply`` function.

    Raises :class:`PythonRuleError` naming the file when it is missing, fails to import, or
    has no callable ``apply``.
    """
    path = Path(path).resolve()
    if not path.is_file():
        raise PythonRuleError(f"python rule file {path} does not exist — check the rule's path")
    name = _module_name(path)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise PythonRuleError(f"{path} cannot be imported as a Python module — name it *.py")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # any error in user code is reported, not raised through
        raise PythonRuleError(
            f"importing {path} failed: {type(exc).__name__}: {exc} — fix the rule file"
        ) from exc
    apply = getattr(module, "apply", None)
    if not callable(apply):
        raise PythonRuleError(
            f"{path} defines no function apply(events, context) — add one "
            "(see engine.rules.python_rules for the contract)"
        )
    sys.modules[name] = module
    return apply


def _declared(apply: ApplyFn, name: str, valid: Callable[[object], bool], shape: str) -> tuple:
    """The module-level ``name`` of the rule module that defines ``apply``, as a tuple
    (empty when absent); raises :class:`PythonRuleError` unless each item is ``valid``."""
    declared = apply.__globals__.get(name, ())
    items = tuple(declared) if isinstance(declared, tuple | list) else (declared,)
    for item in items:
        if not valid(item):
            raise PythonRuleError(f"{apply.__globals__.get('__file__')}: {name} holds {item!r} — give {shape}")
    return items


def declared_causes(apply: ApplyFn) -> tuple[Cause, ...]:
    """The ``CAUSES`` of the rule module that defines ``apply`` (empty when it declares
    none). Raises :class:`PythonRuleError` unless each is four strings."""
    return _declared(
        apply, "CAUSES", lambda c: isinstance(c, tuple) and len(c) == 4 and all(isinstance(v, str) for v in c),
        "a tuple of (cause, domain, role, event) strings",
    )


def declared_history_events(apply: ApplyFn) -> tuple[str, ...]:
    """The ``HISTORY_EVENTS`` of the rule module that defines ``apply``: the event names it
    looks up in ``context.history`` (empty when it reads none). Raises
    :class:`PythonRuleError` unless each is a non-empty string."""
    return _declared(apply, "HISTORY_EVENTS", lambda e: isinstance(e, str) and bool(e), "event names (strings)")


def declared_copies_outcomes(apply: ApplyFn) -> bool:
    """The ``COPIES_OUTCOMES`` of the rule module that defines ``apply`` (false when
    absent). Raises :class:`PythonRuleError` unless it is a bool."""
    declared = apply.__globals__.get("COPIES_OUTCOMES", False)
    if not isinstance(declared, bool):
        raise PythonRuleError(f"{apply.__globals__.get('__file__')}: COPIES_OUTCOMES is {declared!r} — give True or False")
    return declared


def attempt_job_id() -> pl.Expr:
    """The job id an attempt's own lines name: a Slurm attempt's raw job id (the
    ``<jobidraw>`` of ``slurm/<cluster>/<jobidraw>/<n>``, what slurmd's and the kernel's
    cgroup lines print, array tasks included), any other attempt's ``job_id``."""
    return pl.coalesce(pl.col("attempt_id").str.extract(r"^slurm/[^/]+/([^/]+)/", 1), pl.col("job_id"))


def origin_position() -> list[pl.Expr]:
    """``_file`` and ``_line``: the input and the line number of each row's ``origin``
    (``<input>:<n>``; the line null where the origin holds none), which order the lines of
    one file."""
    origin = pl.col("origin")
    return [origin.str.replace(r":\d+$", "").alias("_file"), origin.str.extract(r":(\d+)$").cast(pl.Int64).alias("_line")]


UNDECIDED_PARAM = "undecided"
"""The param a rule sets (:func:`with_param`, to why) on the root candidates of a fault it
placed between several nodes without telling which of them is at fault (two nodes whose
failing connections name only each other, ``ib_peer.py``), on a node only the others'
reports place (the silent end of every failing connection, ``ib_peer.py``), or on a GPU
only its repeating across jobs blames (``xid_roles.py``), or on a fault only its place
beside the silent ranks ties to the hang (:func:`engine.relabel.demote_roots_after_the_hang`,
``midrun_cuda_error.py``): the verdict names them all, and is never ``definitive``
(:func:`engine.decide.decide`)."""


RIVAL_PARAM = "rival"
"""The param a rule sets (:func:`with_param`, to why) on root candidates it found competing
with each other whatever their nodes (a rank's program error and the job's own GPU failing
at its moment, ``program_error.py``; a row the GPU marked for remapping and the NaN a rank
on its node found within a minute, ``memory_nan.py``): one whose span, widened by the clock
skew, holds the root's moment, or that carries the root's own reason (the rule paired the
two), is listed among the verdict's alternatives, also on the root's own node, where an
unstamped line would otherwise count as the root's local consequence
(:func:`engine.decide.select_root_cause`)."""


def with_param(events: pl.DataFrame, mask: pl.Series | pl.Expr, name: str, value: str) -> pl.DataFrame:
    """``events`` with ``name`` set to the string ``value`` in the ``params`` (JSON) of the
    rows ``mask`` selects: how a rule tells a later stage something about a line."""
    entry = json.dumps({name: value})[1:-1]
    empty = pl.col("params").is_null() | pl.col("params").str.contains(r"^\s*\{\s*\}\s*$")
    added = (
        pl.when(empty).then(pl.lit("{" + entry + "}"))
        .otherwise(pl.concat_str([pl.lit("{" + entry + ", "), pl.col("params").str.strip_chars_start().str.slice(1)]))
    )
    return events.with_columns(pl.when(mask).then(added).otherwise(pl.col("params")).alias("params"))


def param(name: str) -> pl.Expr:
    """The string value of ``name`` in an event's ``params`` (JSON), null where absent."""
    return pl.col("params").str.extract(rf'"{name}": ?"([^"]*)"', 1)


def rooted_attempts(events: pl.DataFrame) -> pl.DataFrame:
    """``attempt_id`` of every attempt with a root candidate among ``events``: the ones a
    rule that only infers a root from what is missing leaves alone."""
    return events.filter(pl.col("role") == "root_candidate").select("attempt_id").unique()


def known_events(events: pl.DataFrame, context: RuleContext, names: Iterable[str], columns: list[str]) -> pl.DataFrame:
    """``columns`` of every event named in ``names``, among ``events`` (the run's) and the
    lake's past events (``context.history``, when it has those columns), once each: what
    a rule needs when the evidence it looks for may lie outside the attempt's window. The
    rule declares ``names`` in its ``HISTORY_EVENTS``, or history holds none of them."""
    names = list(names)
    frames = [events.select(*columns, _event=pl.col("event")).filter(pl.col("_event").is_in(names)).drop("_event")]
    if set(columns) | {"event"} <= set(context.history.collect_schema().names()):
        frames.append(
            context.history.filter(pl.col("event").is_in(names)).select(columns).collect()
            .cast({c: events.schema[c] for c in columns})
        )
    return pl.concat(frames).unique().sort(columns)


def new_events(
    rows: pl.DataFrame, like: pl.DataFrame, *, rule_id: str, event: str | pl.Expr, domain: str | pl.Expr,
    cause: str | pl.Expr, role: str | pl.Expr, action: str | pl.Expr,
) -> pl.DataFrame:
    """Events a python rule adds, in the columns and dtypes of ``like`` (the events it got).

    ``rows`` has one row per new event with at least ``attempt_id``, ``node``, ``ts``,
    ``origin`` (the line the inference rests on) and ``message``; any other column of
    ``like`` it carries (``gpu``, ``rank``, ``params``, ``source``, the attempt columns…) is
    kept, the rest are null. Each new event gets ``event_id`` ``<rule_id>@<origin>``,
    ``rule_id``, one occurrence at ``ts`` (``last_ts`` and ``ts_hi`` too) and the outcome
    given (a value, or an expression over ``rows``).
    """
    def value(v: str | pl.Expr) -> pl.Expr:
        return v if isinstance(v, pl.Expr) else pl.lit(v, dtype=pl.String)

    built = rows.with_columns(
        pl.concat_str([pl.lit(f"{rule_id}@"), pl.col("origin")]).alias("event_id"),
        pl.col("ts").alias("last_ts"),
        pl.col("ts").alias("ts_hi"),
        pl.lit(1, dtype=pl.Int64).alias("count"),
        pl.lit(rule_id).alias("rule_id"),
        value(event).alias("event"),
        value(domain).alias("domain"),
        value(cause).alias("cause"),
        value(role).alias("role"),
        value(action).alias("action"),
    )
    return built.select(
        pl.col(c).cast(t) if c in built.columns else pl.lit(None, dtype=t).alias(c) for c, t in like.schema.items()
    )


def with_values(events: pl.DataFrame, mask: pl.Series | pl.Expr, **values: str) -> pl.DataFrame:
    """``events`` with the columns named in ``values`` (``role``, ``domain``, ``cause``,
    ``action``) set to those values on the rows ``mask`` selects: how a rule relabels
    lines (a driver report on every node of a job is the job's)."""
    return events.with_columns(pl.when(mask).then(pl.lit(v)).otherwise(pl.col(c)).alias(c) for c, v in values.items())


def at_rows(events: pl.DataFrame, rows: pl.Series) -> pl.Series:
    """The mask of ``events``' rows whose index is among ``rows`` (``_row`` numbers a rule
    took from ``events.with_row_index("_row")`` and narrowed on a small frame)."""
    return pl.int_range(events.height, eager=True).is_in(rows.implode())


def with_role(events: pl.DataFrame, mask: pl.Series | pl.Expr, role: str) -> pl.DataFrame:
    """``events`` with the rows ``mask`` selects given ``role`` (their links unchanged): how
    a rule demotes lines to ``context`` or promotes them to root candidates."""
    return with_values(events, mask, role=role)


BOOT_EVENT = "host.node_boot"
"""The kernel's first line of a new boot (``Linux version …``, ``host.yaml``)."""


def rebooted(rows: pl.DataFrame, events: pl.DataFrame, context: RuleContext, *, since: pl.Expr, until: pl.Expr,
             key: str) -> pl.DataFrame:
    """``rows`` (with ``cluster`` and ``node``) whose node booted again after ``since`` and no
    later than ``until`` (:data:`BOOT_EVENT`, among ``events`` and past events: a reboot
    usually comes after the attempt's window closed; the rule declares it in its
    ``HISTORY_EVENTS``), one per ``key``, with ``_boot``, its first such boot."""
    boots = known_events(events, context, [BOOT_EVENT], ["cluster", "node", "ts"]).rename({"ts": "_boot"})
    return (
        rows.join(boots, on=["cluster", "node"])
        .filter((pl.col("_boot") > since) & (pl.col("_boot") <= until))
        .sort(key, "_boot")
        .unique(key, keep="first", maintain_order=True)
    )


def not_rebooted(rows: pl.DataFrame, events: pl.DataFrame, context: RuleContext, *, since: pl.Expr,
                 until: pl.Expr) -> pl.DataFrame:
    """``rows`` (with ``cluster`` and ``node``) whose node did not boot again after ``since``
    and by ``until`` (:func:`rebooted`'s boots): a state the node reported (a GPU gone, a
    link trained narrow) that still held then. Row order is kept."""
    indexed = rows.with_row_index("_unbooted")
    booted = rebooted(indexed, events, context, since=since, until=until, key="_unbooted").select("_unbooted")
    return indexed.join(booted, on="_unbooted", how="anti", maintain_order="left").drop("_unbooted")


def node_down_events(rows: pl.DataFrame, like: pl.DataFrame, *, rule_id: str, why: pl.Expr) -> pl.DataFrame:
    """``host.node_failure`` root candidates (event ``host.node_lost``) for nodes a rule found
    went down and booted again: one per row of ``rows`` (an event of ``like``'s columns, with
    ``_boot`` from :func:`rebooted`, kept in ``params`` as ``booted``), its message ``why``
    and the boot. Their time is inferred, never printed."""
    message = pl.concat_str([why, pl.lit(", and it booted again at "), pl.col("_boot").dt.strftime("%Y-%m-%dT%H:%M:%SZ"),
                             pl.lit(": it lost power, hung or crashed")])
    booted = pl.struct(pl.col("_boot").dt.strftime("%Y-%m-%dT%H:%M:%S%.fZ").alias("booted")).struct.json_encode()
    return new_events(
        rows.with_columns(message.alias("message"), booted.alias("params"), pl.lit("inferred").alias("ts_source"))
        .drop("caused_by", strict=False),
        like, rule_id=rule_id, event="host.node_lost", domain="host", cause="host.node_failure",
        role="root_candidate", action="check_host",
    )


def link_to_roots(events: pl.DataFrame, links: pl.DataFrame, role: str) -> pl.DataFrame:
    """``events`` with each row ``links`` names (``attempt_id``, ``event_id``) given ``role``
    and linked (``caused_by``, unless it is linked already) to the event id in the link's
    ``_root``: how a rule makes lines the cascades or confirmations of the root it found."""
    linked = events.join(
        links.select("attempt_id", "event_id", "_root"), on=["attempt_id", "event_id"], how="left", maintain_order="left"
    )
    return linked.with_columns(
        pl.when(pl.col("_root").is_not_null()).then(pl.lit(role)).otherwise(pl.col("role")).alias("role"),
        pl.coalesce("caused_by", "_root").alias("caused_by"),
    ).drop("_root")


def run_python_rules(
    events: pl.DataFrame, rules: Iterable[LoadedPythonRule], context: RuleContext
) -> pl.DataFrame:
    """Apply the pack's python rules in order, checking each keeps the frame's columns."""
    for loaded in rules:
        try:
            out = loaded.apply(events, context)
        except Exception as exc:
            raise PythonRuleError(
                f"python rule {loaded.rule.id} ({loaded.path}) failed: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(out, pl.DataFrame) or out.schema != events.schema:
            got = out.schema if isinstance(out, pl.DataFrame) else type(out).__name__
            raise PythonRuleError(
                f"python rule {loaded.rule.id} ({loaded.path}) must return a DataFrame with "
                f"the columns it received ({events.schema}), got {got} — keep every column "
                "and its dtype"
            )
        events = out
    return events
