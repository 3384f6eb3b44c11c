"""Fleet: what only a view across many attempts can tell (ARCHITECTURE §4.6).

Runs after decide over every verdict of the run plus the recent verdicts already in the
lake, vectorized across attempts:

* **Switch ports** — a culprit HCA port is looked up in the fabric topology, and the switch
  port it is cabled to is added to ``culprit_ports`` (``switch:<switch>/<port>``).
* **Repeat offenders** — a node (or GPU) blamed for infrastructure failures of several
  different jobs within ``repeat_window`` is a lemon: the verdict gets a ``fleet`` evidence
  entry saying so, and a ``probable`` verdict with complete coverage becomes ``definitive``
  (independent failures corroborate each other). A blame that was part of a systemic event
  (many nodes, one cause, at once) does not count: its node was a victim; nor does one
  fault that struck several jobs sharing the node at once.
* **Systemic events** — the same root cause on many nodes at once (a storage outage, a
  switch failure) is noted in the evidence of every verdict it explains, so nobody drains
  twenty healthy nodes for one bad filer.
* **Silent suspects** — a verdict that names no culprit but whose other ranks all waited
  for one node (``straggler_rank``: a hung GPU prints nothing) gets a ``fleet`` note when
  that node was blamed for an infrastructure failure of another job within
  ``repeat_window``: the first place to look. The verdict itself stays as the logs of the
  attempt make it.
* **GPU suspects** — a loss gone NaN or infinite, or a CUDA fault (an illegal memory
  access, an XID 13 or 31, a launch failure…: :data:`GPU_FAULT_CAUSES`), on the ranks of
  one node only is the job's own as far as its logs tell; when other jobs of the run ended
  so on that same node, and on it alone, within ``repeat_window`` (earlier verdicts keep
  no evidence to tell which node their fault was on), a GPU of it may be failing or
  computing wrong numbers: each such verdict gets a ``fleet`` note naming the node
  (``fleet.sdc_suspect`` on a NaN loss, ``fleet.gpu_fault_suspect`` on a CUDA fault), names
  it as a culprit (the node to test; the cause stays the code's), and is ``probable`` at
  most (the code may still be at fault).

A run applies them in two steps: :func:`fleet_notes` over a slim view of every verdict,
then :func:`apply_fleet_notes` to each chunk of full verdicts as it is written.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from engine.config import EngineConfig
from engine.decide import EVIDENCE_DTYPE, INFRASTRUCTURE
from engine.rules.python_rules import GPU_FAULT_CAUSES
from ingest.schema import het_leader


def _fleet_evidence(ts: pl.Expr, node: pl.Expr, rule_id: str | pl.Expr, event: str | pl.Expr,
                    message: pl.Expr) -> pl.Expr:
    """One ``fleet`` evidence entry (a confirmation: the fleet corroborates or questions,
    it never adds a root)."""
    rule_id, event = (pl.lit(v) if isinstance(v, str) else v for v in (rule_id, event))
    return pl.struct(
        ts.alias("ts"), node.alias("node"), pl.lit(None, dtype=pl.Int32).alias("rank"),
        pl.lit("fleet").alias("source"), pl.lit("confirmation").alias("role"),
        rule_id.alias("rule_id"), event.alias("event"),
        pl.lit(1, dtype=pl.Int64).alias("count"), message.alias("message"),
        pl.lit(None, dtype=pl.String).alias("origin"),
    ).cast(EVIDENCE_DTYPE)


PORT_DOMAIN = "network"
"""The domain whose culprits are HCA ports (the fabric's): a port of the verdict is cabled
on a node that is a culprit of a fault of that domain."""


def add_switch_ports(verdicts: pl.DataFrame, topology: pl.DataFrame) -> pl.DataFrame:
    """Append the switch port each culprit HCA port is cabled to (from ``topology``).

    A verdict's culprit ports and nodes are separate lists: a port is looked up on the
    culprit nodes of the fabric's faults only, not on a node named for a rival fault of
    another domain (an ``ambiguous`` verdict's GPU that fell off the bus beside a port that
    went down elsewhere: that node's port of the same name did nothing). A port named by
    its device alone (NCCL's ``hca mlx5_6``) is the one port of that device the topology
    lists on the node."""
    cabling = topology.filter(pl.col("kind") == "hca_port").select(
        "cluster", "node", "hca", (pl.col("hca") + ":" + pl.col("port")).alias("port"),
        (pl.lit("switch:") + pl.col("switch") + "/" + pl.col("switch_port")).alias("switch_port"),
    ).unique()
    if cabling.is_empty() or verdicts.is_empty():
        return verdicts
    alternatives = (
        verdicts.select("attempt_id", "alternatives").explode("alternatives").drop_nulls("alternatives")
        .select("attempt_id", pl.col("alternatives").struct.field("domain").alias("_domain"),
                pl.col("alternatives").struct.field("node").alias("node"))
        .drop_nulls("node")
    )
    # Nodes named only for rivals of another domain carry none of the fabric's ports.
    elsewhere = (
        alternatives.group_by("attempt_id", "node").agg((pl.col("_domain") != PORT_DOMAIN).all().alias("_other"))
        .filter("_other").select("attempt_id", "node")
    )
    rival_ports = alternatives.filter(pl.col("_domain") == PORT_DOMAIN).select("attempt_id", "node").unique()
    nodes = verdicts.select("attempt_id", "cluster", "domain", pl.col("culprit_nodes").alias("node")).explode("node")
    port_nodes = pl.concat([
        nodes.filter(pl.col("domain") == PORT_DOMAIN).join(elsewhere, on=["attempt_id", "node"], how="anti")
        .drop("domain"),
        nodes.drop("domain").join(rival_ports, on=["attempt_id", "node"], how="semi"),
    ]).unique()
    ports = verdicts.select("attempt_id", pl.col("culprit_ports").alias("port")).explode("port").drop_nulls()
    pairs = port_nodes.join(ports, on="attempt_id")
    by_device = cabling.filter(pl.len().over("cluster", "node", "hca") == 1).select(
        "cluster", "node", pl.col("hca").alias("port"), "switch_port")
    blamed = (
        pl.concat([pairs.join(cabling.drop("hca"), on=["cluster", "node", "port"]),
                   pairs.join(by_device, on=["cluster", "node", "port"])])
        .group_by("attempt_id").agg(pl.col("switch_port").unique().sort().alias("_switch"))
    )
    return (
        verdicts.join(blamed, on="attempt_id", how="left")
        .with_columns(
            pl.concat_list("culprit_ports", pl.col("_switch").fill_null(pl.lit([], dtype=pl.List(pl.String))))
            .list.unique(maintain_order=True).alias("culprit_ports")
        )
        .drop("_switch")
    )


REPEAT_CAUSES = ("gpu.repeated_xid",)
"""Causes a rule inferred from one fault repeating on a GPU across jobs (``xid_roles.py``:
the same XID 13 in two users' jobs is the GPU's, not either program's)."""


def mark_repeat_offenders(
    verdicts: pl.DataFrame, history: pl.DataFrame, config: EngineConfig
) -> pl.DataFrame:
    """Note culprit nodes blamed by other jobs' infrastructure failures within the window
    (a heterogeneous job's components are one job).

    ``history``: earlier verdicts (results columns + ``cluster``); rows of this run's
    attempts in it are ignored. A probable verdict with complete coverage whose culprit is a
    repeat offender becomes definitive, unless its cause was itself inferred from the fault
    repeating across jobs (:data:`REPEAT_CAUSES`): the other jobs are its evidence already,
    and counting them again proves nothing more. Only a verdict naming that one node is
    upgraded (a fault placed between two nodes stays undecided however often one of them
    failed before), and only by another job's verdict that was not ``ambiguous`` itself
    (a suspect among competing explanations was never shown at fault).
    """
    window = timedelta(seconds=config.seconds("repeat_window"))
    # One fault that struck two jobs sharing the node (an XID of a GPU both used, a node
    # that died under both) is one failure, not a repeat: their roots lie within the skew.
    same_fault = timedelta(seconds=config.seconds("clock_skew"))
    blames = _outside_systemic_events(_blames(verdicts, history), config)
    current = blames.filter(pl.col("attempt_id").is_in(verdicts["attempt_id"].implode()))
    apart = (pl.col("first_fault_ts_other") - pl.col("first_fault_ts")).abs()
    pairs = (
        current.join(blames, on=["cluster", "node"], suffix="_other")
        .filter((pl.col("job_id_other") != pl.col("job_id")) & (apart <= window) & (apart > same_fault))
        .group_by("attempt_id", "node")
        .agg(pl.col("job_id_other").n_unique().alias("others"), pl.col("first_fault_ts").first().alias("ts"),
             (pl.col("quality_other") != "ambiguous").any().alias("_firm"))
        .sort("attempt_id", "node")
    )
    if pairs.is_empty():
        return verdicts
    message = pl.concat_str([
        pl.col("node"), pl.lit(" was also blamed for infrastructure failures of "),
        pl.col("others").cast(pl.String), pl.lit(f" other job(s) within {config.repeat_window}"),
    ])
    notes = pairs.group_by("attempt_id", maintain_order=True).agg(
        _fleet_evidence(pl.col("ts"), pl.col("node"), "fleet.repeat_offender", "repeat_offender", message).alias("_notes"),
        pl.col("_firm").any(),
    )
    complete = pl.col("coverage").list.eval(pl.element().struct.field("error").is_null()).list.all()
    upgraded = (pl.col("quality") == "probable") & complete & ~pl.col("cause").is_in(REPEAT_CAUSES) \
        & (pl.col("culprit_nodes").list.len() == 1) & pl.col("_firm")
    return _update_noted(verdicts, notes, [
        pl.concat_list("evidence", "_notes").alias("evidence"),
        pl.when(upgraded).then(pl.lit("definitive")).otherwise(pl.col("quality")).alias("quality"),
    ])


def _blames(verdicts: pl.DataFrame, history: pl.DataFrame) -> pl.DataFrame:
    """One row per culprit node of every infrastructure verdict, this run's and ``history``'s
    (rows of this run's attempts in it ignored): ``attempt_id``, ``job_id`` (a heterogeneous
    job's components are one job), ``cluster``, ``node``, ``cause``, ``first_fault_ts``."""
    columns = ["attempt_id", het_leader(pl.col("job_id")), "cluster", "cause", "quality", "culprit_nodes",
               "first_fault_ts"]
    current = verdicts.filter(pl.col("domain").is_in(INFRASTRUCTURE)).select(columns)
    past = history.filter(
        pl.col("domain").is_in(INFRASTRUCTURE) & ~pl.col("attempt_id").is_in(verdicts["attempt_id"].implode())
    ).select(columns)
    return pl.concat([current, past]).explode("culprit_nodes").rename({"culprit_nodes": "node"}).drop_nulls("node")


def _same_cause_nearby(roots: pl.DataFrame, others: pl.DataFrame, window: timedelta) -> pl.DataFrame:
    """Each row of ``roots`` beside each row of ``others`` of its cluster and cause whose
    ``first_fault_ts`` lies within ``window`` of its own (``others``' columns suffixed
    ``_other``, its time as ``ts_other``). Both are bucketed by the window so that only
    neighbouring buckets are paired: one cause can be the root of thousands of attempts
    over a week."""
    bucket = pl.col("first_fault_ts").dt.epoch("s") // int(window.total_seconds())
    spread = (
        others.with_columns(pl.concat_list(bucket - 1, bucket, bucket + 1).alias("_bucket"))
        .explode("_bucket")
        .rename({"first_fault_ts": "ts_other"})
    )
    return (
        roots.with_columns(bucket.alias("_bucket"))
        .join(spread, on=["cluster", "cause", "_bucket"], suffix="_other")
        .filter((pl.col("ts_other") - pl.col("first_fault_ts")).abs() <= window)
    )


def _outside_systemic_events(blames: pl.DataFrame, config: EngineConfig) -> pl.DataFrame:
    """``blames`` (:func:`_blames`) without those of a cause that struck at least
    ``systemic_nodes`` nodes within ``systemic_window`` of them (:func:`mark_systemic`'s
    measure): the victims of a leaf switch or a filer that failed are no lemons."""
    window = timedelta(seconds=config.seconds("systemic_window"))
    keyed = blames.filter(pl.col("first_fault_ts").is_not_null()).with_row_index("_blame")
    shared = (
        _same_cause_nearby(keyed, keyed.select("cluster", "cause", "node", "first_fault_ts"), window)
        .group_by("_blame").agg(pl.col("node_other").n_unique().alias("_nodes"))
        .filter(pl.col("_nodes") >= config.systemic_nodes)
    )
    return keyed.join(shared, on="_blame", how="anti").drop("_blame")


SILENT_RULE = "straggler_rank"
"""The rule whose evidence names the node an attempt's other ranks waited for (``rules/straggler.py``)."""
NAN_CAUSE = "workload.non_finite_loss"
"""The cause of a loss gone NaN or infinite (``rules/cuda_framework.yaml``)."""


def slim_view(verdicts: pl.DataFrame) -> pl.DataFrame:
    """The columns of ``verdicts`` the fleet views read: :data:`FLEET_COLUMNS`,
    ``silent_nodes``, the nodes the evidence says the attempt's other ranks waited for, and
    ``fault_nodes``, the nodes of the root evidence of a :data:`GPU_FAULT_CAUSES` verdict
    (empty for any other)."""
    field = pl.element().struct.field
    silent = field("node").filter(field("rule_id") == SILENT_RULE)
    root = field("node").filter(field("role") == "root_candidate")
    return verdicts.select(
        *FLEET_COLUMNS,
        pl.col("evidence").list.eval(silent.drop_nulls()).list.unique().list.sort().alias("silent_nodes"),
        pl.when(pl.col("cause").is_in(GPU_FAULT_CAUSES))
        .then(pl.col("evidence").list.eval(root.drop_nulls()).list.unique().list.sort())
        .otherwise(pl.lit([], dtype=pl.List(pl.String))).alias("fault_nodes"),
    )


def mark_gpu_suspects(verdicts: pl.DataFrame, config: EngineConfig) -> pl.DataFrame:
    """Note, on each :data:`GPU_FAULT_CAUSES` verdict whose fault was on the ranks of one
    node only, that node when other jobs of the run ended of such a fault on it alone
    within ``repeat_window`` (one fault that struck two jobs sharing the node, within
    ``clock_skew``, is one), name it a culprit, and make such a verdict ``probable`` at
    most (see the module docstring)."""
    window = timedelta(seconds=config.seconds("repeat_window"))
    same_fault = timedelta(seconds=config.seconds("clock_skew"))
    confined = verdicts.filter(
        pl.col("cause").is_in(GPU_FAULT_CAUSES) & (pl.col("quality") != "ambiguous")
        & (pl.col("fault_nodes").list.len() == 1)
    ).select(
        "attempt_id", het_leader(pl.col("job_id")), "cluster", "cause", "end_ts", "first_fault_ts",
        pl.col("fault_nodes").list.first().alias("node"),
    )
    if confined.is_empty():
        return verdicts
    apart = (pl.col("first_fault_ts_other") - pl.col("first_fault_ts")).abs()
    pairs = (
        confined.join(confined, on=["cluster", "node"], suffix="_other")
        .filter((pl.col("job_id_other") != pl.col("job_id"))
                & ((pl.col("end_ts_other") - pl.col("end_ts")).abs() <= window)
                & (apart > same_fault).fill_null(True))
        .group_by("attempt_id", "node", "cause", "end_ts")
        .agg(pl.col("job_id_other").n_unique().alias("others"),
             pl.col("cause_other").unique().sort().str.join(", ").alias("causes"))
    )
    if pairs.is_empty():
        return verdicts
    message = pl.concat_str([
        pl.col("others").cast(pl.String), pl.lit(" other job(s) ended on a GPU fault on "), pl.col("node"),
        pl.lit(" alone too ("), pl.col("causes"),
        pl.lit(f"), within {config.repeat_window}: a GPU of it may be failing or computing wrong numbers "
               "(silent data corruption); test it (dcgmi diag -r 3) before blaming the code"),
    ])
    nan = pl.col("cause") == NAN_CAUSE
    notes = pairs.select(
        "attempt_id",
        _fleet_evidence(
            pl.col("end_ts"), pl.col("node"),
            pl.when(nan).then(pl.lit("fleet.sdc_suspect")).otherwise(pl.lit("fleet.gpu_fault_suspect")),
            pl.when(nan).then(pl.lit("sdc_suspect")).otherwise(pl.lit("gpu_fault_suspect")), message,
        ).alias("_note"),
        pl.col("node").alias("_suspect"),
    )
    return _update_noted(verdicts, notes, [
        pl.concat_list("evidence", "_note").alias("evidence"),
        pl.concat_list("culprit_nodes", "_suspect").list.unique().list.sort().alias("culprit_nodes"),
        pl.when(pl.col("quality") == "definitive").then(pl.lit("probable")).otherwise(pl.col("quality")).alias("quality"),
    ])


def mark_silent_suspects(verdicts: pl.DataFrame, history: pl.DataFrame, config: EngineConfig) -> pl.DataFrame:
    """Note, on each verdict that names no culprit node, the nodes its other ranks waited
    for (``silent_nodes``) that were blamed for infrastructure failures of other jobs within
    ``repeat_window`` before it ended (``history`` as for :func:`mark_repeat_offenders`)."""
    window = timedelta(seconds=config.seconds("repeat_window"))
    silent = (
        verdicts.filter(pl.col("culprit_nodes").list.len() == 0)
        .select("attempt_id", het_leader(pl.col("job_id")), "cluster", "end_ts", pl.col("silent_nodes").alias("node"))
        .explode("node").drop_nulls("node")
    )
    if silent.is_empty():
        return verdicts
    pairs = (
        silent.join(_blames(verdicts, history), on=["cluster", "node"], suffix="_other")
        .filter(
            (pl.col("job_id_other") != pl.col("job_id"))
            & pl.col("first_fault_ts").is_between(pl.col("end_ts") - window, pl.col("end_ts"))
        )
        .sort("attempt_id", "node", "first_fault_ts", "cause")
        .group_by("attempt_id", "node", maintain_order=True)
        .agg(pl.col("job_id_other").n_unique().alias("others"), pl.col("first_fault_ts", "cause").last())
    )
    if pairs.is_empty():
        return verdicts
    message = pl.concat_str([
        pl.col("node"), pl.lit(", the node the other ranks waited for, was blamed for infrastructure failures of "),
        pl.col("others").cast(pl.String), pl.lit(f" other job(s) within {config.repeat_window} before (latest: "),
        pl.col("cause"), pl.lit("): a GPU or host that fails again may print nothing; check it first"),
    ])
    notes = pairs.group_by("attempt_id", maintain_order=True).agg(
        _fleet_evidence(pl.col("first_fault_ts"), pl.col("node"), "fleet.silent_suspect", "silent_suspect",
                        message).alias("_notes")
    )
    return _update_noted(verdicts, notes, [pl.concat_list("evidence", "_notes").alias("evidence")])


def _update_noted(verdicts: pl.DataFrame, notes: pl.DataFrame, updates: list[pl.Expr]) -> pl.DataFrame:
    """Apply ``updates`` to the verdicts that have a row in ``notes`` only (list columns are
    costly to rewrite for every attempt when few are concerned); row order is kept."""
    indexed = verdicts.with_row_index("_order")
    noted = indexed.join(notes, on="attempt_id", how="inner").with_columns(updates).drop(notes.columns[1:])
    rest = indexed.join(notes.select("attempt_id"), on="attempt_id", how="anti")
    return pl.concat([rest, noted.select(rest.columns)]).sort("_order").drop("_order")


def mark_systemic(verdicts: pl.DataFrame, config: EngineConfig) -> pl.DataFrame:
    """Note root causes shared by at least ``systemic_nodes`` culprit nodes whose first
    faults lie within ``systemic_window`` of each other (one outage, many victims). A root
    that names no culprit (a filesystem every node of the job lost: its server is at
    fault) counts the attempt's affected nodes, but only beside another attempt with the
    same cause: one job's own nodes all waiting on its fault say nothing of a shared
    component. The culprits of an ``ambiguous`` verdict are counted for none: they are the
    suspects of competing explanations, not nodes the cause was found on. Where the culprit
    ports are cabled to known switches (:func:`add_switch_ports` ran first), only roots
    behind a switch of this root's count; when the culprit ports of them all are cabled to
    one switch, the note names it, and a fabric verdict whose own culprit ports are all
    cabled to that switch names no culprit node: the switch failed under its nodes, which
    are victims to keep in service (they stay in ``affected_nodes``, the switch's ports in
    ``culprit_ports``)."""
    window = timedelta(seconds=config.seconds("systemic_window"))
    named = pl.col("culprit_nodes").list.len() > 0
    roots = (
        verdicts.filter(pl.col("domain").is_in(INFRASTRUCTURE) & pl.col("first_fault_ts").is_not_null())
        .select("attempt_id", "cluster", "cause", "first_fault_ts",
                pl.when(named).then("culprit_nodes").otherwise("affected_nodes").alias("culprit_nodes"),
                (~named).alias("_affected"), "quality", (pl.col("domain") == PORT_DOMAIN).alias("_fabric"),
                # The switches its culprit ports are cabled to (``switch:<switch>/<port>``, the
                # switch's own description may hold "/").
                pl.col("culprit_ports").list.eval(pl.element().str.extract(r"^switch:(.*)/[^/]+$", 1).drop_nulls())
                .alias("_switches"))
    )
    if roots.is_empty():
        return verdicts
    # An ambiguous verdict's culprits are suspects of competing explanations: they join no
    # event, and its nodes are never the switch's victims.
    firm = roots.filter(pl.col("quality") != "ambiguous")
    others = firm.drop("quality", "_fabric").explode("culprit_nodes")
    affected_only = pl.col("_affected")
    # Where both roots' ports are cabled to known switches, only roots behind a switch of
    # this one's share its component: a cable pulled under another leaf at the same time is
    # a fault of its own.
    switches, other_switches = pl.col("_switches"), pl.col("_switches_other")
    same_component = (
        (switches.list.len() == 0) | (other_switches.list.len() == 0)
        | (switches.list.set_intersection(other_switches).list.len() > 0)
    )
    nearby = (
        _same_cause_nearby(roots.drop("quality", "_affected", "_fabric"), others, window)
        .filter(same_component)
        .group_by("attempt_id", "cause", "first_fault_ts")
        .agg(
            pl.col("culprit_nodes_other").filter(
                ~affected_only | (pl.col("attempt_id_other").filter(affected_only).n_unique() >= 2)
            ).drop_nulls().n_unique().alias("nodes"),
            other_switches.list.explode(keep_nulls=False, empty_as_null=False).unique().sort().alias("switches"),
        )
        .filter(pl.col("nodes") >= config.systemic_nodes)
    )
    if nearby.is_empty():
        return verdicts
    # Culprit ports all cabled to one switch name the shared component.
    one_switch = pl.when(pl.col("switches").list.len() == 1).then(
        pl.concat_str([pl.lit("; every culprit port is cabled to switch "), pl.col("switches").list.first()])
    ).otherwise(pl.lit(""))
    message = pl.concat_str([
        pl.col("cause"), pl.lit(" was the root cause on "), pl.col("nodes").cast(pl.String),
        pl.lit(f" nodes within {config.systemic_window}: a shared component, not one node, is likely at fault"),
        one_switch,
    ])
    # A fabric verdict whose own culprit ports all hang off the event's one switch (not an
    # ambiguous one's rival suspects) blames the switch, not the nodes behind it.
    own = firm.select("attempt_id", "_fabric", pl.col("_switches").list.unique().alias("_own"))
    behind_switch = (
        pl.col("_fabric") & (pl.col("switches").list.len() == 1) & (pl.col("_own").list.len() == 1)
        & (pl.col("_own").list.first() == pl.col("switches").list.first())
    )
    notes = nearby.join(own, on="attempt_id", how="left").select(
        "attempt_id",
        _fleet_evidence(pl.col("first_fault_ts"), pl.lit(None, dtype=pl.String), "fleet.systemic", "systemic_event",
                        message).alias("_note"),
        behind_switch.fill_null(False).alias("_behind_switch"),
    )
    return _update_noted(verdicts, notes, [
        pl.concat_list("evidence", "_note").alias("evidence"),
        pl.when("_behind_switch").then(pl.lit([], dtype=pl.List(pl.String))).otherwise("culprit_nodes")
        .alias("culprit_nodes"),
    ])


FLEET_COLUMNS = [
    "attempt_id", "job_id", "cluster", "end_ts", "domain", "cause", "quality",
    "culprit_nodes", "culprit_ports", "affected_nodes", "first_fault_ts", "coverage", "alternatives",
]
"""Verdict columns the fleet views read (everything but the bulky evidence trail)."""

HISTORY_COLUMNS = ["attempt_id", "job_id", "cluster", "domain", "cause", "quality", "culprit_nodes", "first_fault_ts"]
"""Columns of earlier verdicts the repeat-offender and silent-suspect views read."""


def fleet_notes(
    verdicts: pl.DataFrame, history: pl.DataFrame, topology: pl.DataFrame, config: EngineConfig
) -> pl.DataFrame:
    """What the fleet views change, one row per verdict they touch: ``attempt_id``,
    ``_nodes`` (new ``culprit_nodes``), ``_ports`` (new ``culprit_ports``), ``_quality`` (new
    ``quality``) and ``_fleet`` (evidence entries to append).

    ``verdicts`` needs only the columns of :func:`slim_view` (full verdicts are reduced to
    them): a run over a million attempts keeps this slim view of every verdict in memory,
    not their evidence trails, and applies the notes (:func:`apply_fleet_notes`) when it
    writes each chunk.
    """
    slim = (verdicts if "fault_nodes" in verdicts.columns else slim_view(verdicts)).with_columns(
        pl.lit([], dtype=pl.List(EVIDENCE_DTYPE)).alias("evidence")
    )
    out = add_switch_ports(slim, topology)
    out = mark_silent_suspects(mark_repeat_offenders(out, history, config), history, config)
    out = mark_gpu_suspects(mark_systemic(out, config), config)
    before = slim.select("attempt_id", pl.col("culprit_ports").alias("_ports0"), pl.col("quality").alias("_quality0"))
    # Every change to culprit nodes comes with a note, so the evidence test covers them.
    return (
        out.join(before, on="attempt_id", how="left")
        .filter(
            (pl.col("evidence").list.len() > 0)
            | (pl.col("culprit_ports") != pl.col("_ports0"))
            | (pl.col("quality") != pl.col("_quality0"))
        )
        .select("attempt_id", pl.col("culprit_nodes").alias("_nodes"), pl.col("culprit_ports").alias("_ports"),
                pl.col("quality").alias("_quality"), pl.col("evidence").alias("_fleet"))
        .sort("attempt_id")
    )


def apply_fleet_notes(verdicts: pl.DataFrame, notes: pl.DataFrame) -> pl.DataFrame:
    """``verdicts`` with the :func:`fleet_notes` that concern them applied (row order kept)."""
    if notes.is_empty():
        return verdicts
    # Nodes no longer blamed (behind a failed switch) stay among the affected.
    return _update_noted(verdicts, notes, [
        pl.col("_nodes").alias("culprit_nodes"),
        pl.concat_list("affected_nodes", pl.col("culprit_nodes").list.set_difference("_nodes"))
        .list.unique().list.sort().alias("affected_nodes"),
        pl.col("_ports").alias("culprit_ports"),
        pl.col("_quality").alias("quality"),
        pl.concat_list("evidence", "_fleet").alias("evidence"),
    ])
