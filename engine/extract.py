"""Extract: observations (normalized log lines) → typed events, vectorized.

One pass over the lines: a literal prefilter built from every extract rule's ``prefilter``
(``str.contains_any``, an Aho-Corasick scan) keeps the candidate lines; lines that match no
literal cost nothing more. Then, for each rule, on the candidates only: the rule's own
literals, its regex (Polars' Rust engine) and ``str.extract_groups``. A line may match several
rules (a generic and a specific one) and yields an event for each; ``benign`` is a role like
any other, so benign matches are emitted too and the decision stage ignores them.

Reserved named groups fill location columns: ``gpu``, ``port`` (``mlx5_0/1``, and a ``port``
group with a ``port_num`` group, are written ``mlx5_0:1``), ``rank`` and ``node`` (the observation's own rank/node win when present, since
the launcher prefix and the syslog host are more reliable than a number in the message).
Every other group lands in ``params`` as a JSON object with sorted keys.

Floods collapse in :func:`dedupe_events`: repeats of one event on the same
node/attempt/rank/GPU/port whose gap to the previous repeat is within the rule's
``dedupe_window`` become one event (first row's fields, ``count``, ``last_ts``).

Extraction at landing: every event comes from one line, so the events of a day are the
union of the events of its files. :func:`landing_derivation` has the lake extract each
observations file while it is being landed (the lines are in memory then); a run reads
those events (:func:`lake_events`, each file's floods already collapsed) and extracts
only the files that have none for its pack, then collapses floods over the whole day.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import polars as pl

from engine.rules.loader import OUTCOME_FIELDS, RESERVED_GROUPS, RulePack, regex_for
from engine.rules.model import ExtractRule, parse_duration
from ingest.hostlist import expand_hostlist, short_host
from ingest.lake import Derivation, Lake
from ingest.schema import EVENTS

EVENT_SCHEMA = pl.Schema({**pl.from_arrow(EVENTS.empty_table()).schema, "cluster": pl.String})
"""Columns and dtypes of extracted events: the events table plus ``cluster``."""

DEDUPE_KEYS = ["cluster", "node", "attempt_id", "rank", "gpu", "port", "rule_id", "event", "cause"]
"""Events equal on these columns are repeats of one event for the flood dedupe."""

ORDER = ["cluster", "ts", "node", "origin", "rule_id"]
"""Output order of every events frame (deterministic)."""

_DEFAULT_WINDOW_S = parse_duration(ExtractRule.model_fields["dedupe_window"].default)
_INPUT_COLUMNS = {
    "ts": EVENT_SCHEMA["ts"], "ts_source": pl.String, "node": pl.String,
    "attempt_id": pl.String, "rank": pl.Int32, "message": pl.String, "origin": pl.String,
    "cluster": pl.String, "source": pl.String,
}


def empty_events() -> pl.DataFrame:
    """An empty events frame with :data:`EVENT_SCHEMA`."""
    return pl.DataFrame(schema=EVENT_SCHEMA)


def _prefilter(rules: Sequence[ExtractRule]) -> pl.Expr:
    """True for lines containing any rule's literal.

    One regex alternation of the escaped literals (case-insensitive ones in an ASCII-only
    ``(?i-u:…)`` group, as ``ascii_case_insensitive`` would match them): the regex engine
    scans for such literal sets with SIMD and measured about twice as fast as
    ``str.contains_any`` over a day of fleet logs.
    """
    branches = []
    for ignore_case in (False, True):
        literals = sorted({lit for r in rules if r.ignore_case == ignore_case for lit in r.prefilter})
        if literals:
            alternation = "|".join(re.escape(lit) for lit in literals)
            branches.append(f"(?i-u:{alternation})" if ignore_case else alternation)
    if not branches:
        return pl.lit(False)
    return pl.col("message").str.contains("|".join(branches)).fill_null(False)


def _outcome(rule: ExtractRule, key: pl.Expr | None) -> tuple[list[pl.Expr], pl.Expr | None]:
    """Outcome columns of ``rule`` and, for a ``map`` without default, the keep filter."""
    base = {field: getattr(rule, field) for field in OUTCOME_FIELDS}
    if rule.map is None or key is None:
        return [pl.lit(value, pl.String).alias(field) for field, value in base.items()], None
    table = rule.map.table
    fallback = rule.map.default
    columns = []
    for field in OUTCOME_FIELDS:
        otherwise = (getattr(fallback, field) or base[field]) if fallback is not None else None
        if table:
            column = key.replace_strict(
                list(table), [getattr(o, field) or base[field] for o in table.values()],
                default=pl.lit(otherwise, pl.String), return_dtype=pl.String,
            )
        else:
            column = pl.lit(otherwise, pl.String)
        columns.append(column.alias(field))
    keep = None if fallback is not None else key.is_in(list(table)).fill_null(False)
    return columns, keep


@dataclass(frozen=True)
class _RulePlan:
    """What one extract rule does to its candidate lines: the expressions depend on the rule
    alone, so they are built once per rule (:func:`_plan_of`), not once per landing batch."""

    source: pl.Expr | None
    match: pl.Expr
    groups: pl.Expr | None
    keep: pl.Expr | None
    columns: tuple[pl.Expr, ...]

    def events(self, lines: pl.LazyFrame) -> pl.LazyFrame:
        """The rule's events from its candidate lines."""
        if self.source is not None:
            lines = lines.filter(self.source)
        lines = lines.filter(self.match)
        if self.groups is not None:
            lines = lines.with_columns(self.groups)
        if self.keep is not None:
            lines = lines.filter(self.keep)
        return lines.select(self.columns)


_PLANS: dict[tuple[bytes, str], _RulePlan] = {}
"""Built plans by (pack extraction digest, rule id): rule ids are unique within a pack."""


def _plan_of(pack: RulePack, rule: ExtractRule) -> _RulePlan:
    """The plan of ``rule`` of ``pack`` (built on first use)."""
    key = (pack.extraction_digest, rule.id)
    if key not in _PLANS:
        _PLANS[key] = _build_plan(rule)
    return _PLANS[key]


def _build_plan(rule: ExtractRule) -> _RulePlan:
    """The expressions of one rule's events (:class:`_RulePlan`)."""
    pattern = regex_for(rule)
    groups = list(re.compile(rule.regex).groupindex)
    # Lines of unknown source (ad hoc input) are tried against every rule.
    source = pl.col("source").is_null() | pl.col("source").is_in(rule.sources) if rule.sources else None

    def group(name: str) -> pl.Expr:
        if name in groups:
            return pl.col("_groups").struct.field(name)
        return pl.lit(None, pl.String)

    outcome, keep = _outcome(rule, pl.coalesce([group(k) for k in rule.map.keys]) if rule.map else None)
    others = sorted(g for g in groups if g not in RESERVED_GROUPS)
    params = (
        pl.struct([group(name).alias(name) for name in others]).struct.json_encode()
        if others else pl.lit("{}")
    )
    columns = (
        # concat_str, not pl.format: Polars 2.1 panics formatting filtered multi-chunk input.
        pl.concat_str([pl.lit(f"{rule.id}@"), pl.col("origin")]).alias("event_id"),
        pl.col("ts"),
        pl.col("ts").alias("last_ts"),
        pl.lit(1, pl.Int64).alias("count"),
        # The lake keeps node names short and in lower case (ingest.lake.Lake._conform).
        (pl.coalesce(short_host(group("node")), pl.col("node")) if rule.subject_node
         else pl.lit(None, dtype=pl.String) if rule.subject_rank
         else pl.coalesce(pl.col("node"), short_host(group("node")))).alias("node"),
        pl.col("attempt_id"),
        (pl.coalesce(group("rank").cast(pl.Int32, strict=False), pl.col("rank")) if rule.subject_rank
         else pl.coalesce(pl.col("rank"), group("rank").cast(pl.Int32, strict=False))).alias("rank"),
        normalize_gpu(group("gpu")).alias("gpu"),
        # ``mlx5_1`` + ``port_num`` 1 (``mlx5_1: Port: 1 Link DOWN``) is port ``mlx5_1:1``.
        pl.when(group("port_num").is_not_null())
        .then(pl.concat_str([group("port"), group("port_num")], separator=":"))
        .otherwise(group("port").str.replace(r"/(\d+)$", ":$1")).alias("port"),
        pl.col("source"),
        pl.lit(rule.id).alias("rule_id"),
        *outcome,
        params.alias("params"),
        pl.col("message"),
        pl.col("origin"),
        pl.col("ts_source"),
        pl.col("cluster"),
    )
    return _RulePlan(
        source=source,
        match=pl.col("message").str.contains(pattern),
        groups=pl.col("message").str.extract_groups(pattern).alias("_groups") if groups else None,
        keep=keep,
        columns=columns,
    )


_PCI = r"^(?:[0-9a-f]{0,4}?([0-9a-f]{4}):)?([0-9a-f]{2}):([0-9a-f]{2})(?:\.[0-7])?$"


def normalize_gpu(gpu: pl.Expr) -> pl.Expr:
    """One spelling per GPU: PCI addresses become ``dddd:bb:dd`` (lower case, the 8-digit
    domain nvidia-smi prints cut to 4, the function dropped), so ``00000000:3B:00.0`` from
    nvidia-smi and ``0000:3b:00`` from an XID name the same GPU. Indices stay as they are."""
    lowered = gpu.str.strip_chars().str.to_lowercase()
    pci = lowered.str.extract_groups(_PCI)
    domain = pl.coalesce(pci.struct.field("1"), pl.lit("0000"))
    return (
        pl.when(lowered.str.contains(_PCI))
        .then(pl.concat_str([domain, pci.struct.field("2"), pci.struct.field("3")], separator=":"))
        .otherwise(lowered)
    )


def _with_input_columns(observations: pl.LazyFrame | pl.DataFrame) -> pl.LazyFrame:
    lf = observations.lazy()
    present = lf.collect_schema().names()
    return lf.select(
        pl.col(name).cast(dtype) if name in present else pl.lit(None, dtype).alias(name)
        for name, dtype in _INPUT_COLUMNS.items()
    )


def _rule_hits(candidates: pl.DataFrame, rules: Sequence[ExtractRule]) -> pl.DataFrame:
    """``(_row, _rule)`` for every candidate row and every rule one of whose literals it
    holds: one Aho-Corasick pass over all literals (per case mode) instead of one scan per
    rule, so the cost stays flat as the pack grows."""
    found = []
    for ignore_case in (False, True):
        owners = pl.DataFrame(
            [(lit.lower() if ignore_case else lit, i) for i, r in enumerate(rules)
             if r.ignore_case == ignore_case for lit in r.prefilter],
            schema={"_lit": pl.String, "_rule": pl.Int64}, orient="row",
        ).unique()
        if owners.is_empty():
            continue
        literals = sorted(set(owners["_lit"].to_list()))
        matched = candidates.select(
            "_row",
            pl.col("message").str.extract_many(literals, ascii_case_insensitive=ignore_case, overlapping=True)
            .alias("_lit"),
        ).explode("_lit").drop_nulls("_lit")
        if ignore_case:
            matched = matched.with_columns(pl.col("_lit").str.to_lowercase())
        found.append(matched.join(owners, on="_lit").select("_row", "_rule"))
    return pl.concat(found).unique() if found else pl.DataFrame(schema={"_row": pl.UInt32, "_rule": pl.Int64})


def _extract(
    observations: pl.LazyFrame | pl.DataFrame, pack: RulePack, *, keep_benign: bool = True, ordered: bool = True
) -> pl.DataFrame:
    """Events of the pack's extract rules, one per matching line and rule, sorted by
    :data:`ORDER` unless ``ordered`` is false (the flood dedupe sorts them its own way)."""
    rules = [r for r in pack.extract
             if keep_benign or r.role != "benign" or r.map is not None or ADDRESS_GROUP in r.regex]
    if not rules:
        return empty_events()
    candidates = _with_input_columns(observations).filter(_prefilter(rules)).collect().with_row_index("_row")
    by_rule = _rule_hits(candidates, rules).sort("_row").partition_by("_rule", as_dict=True)
    candidates = candidates.drop("_row")

    def lines_of_rule(i: int, rule: ExtractRule) -> pl.LazyFrame:
        # Row indices gathered in order: the rule's lines, in the candidates' order.
        lines = candidates.select(pl.all().gather(by_rule[(i,)]["_row"])).lazy()
        if not keep_benign and rule.role == "benign" and ADDRESS_GROUP in rule.regex:
            # Only the first of a node's identical banners is kept below (every rank of the
            # node prints it): the others need no regex at all.
            lines = lines.sort("ts", "origin").unique(["attempt_id", "node", "message"], keep="first", maintain_order=True)
        return lines

    plans = [_plan_of(pack, rule).events(lines_of_rule(i, rule)) for i, rule in enumerate(rules) if (i,) in by_rule]
    if not plans:
        return empty_events()
    # Collected one by one: one union of a hundred rules' plans costs more to optimize than
    # to run on a landing batch.
    events = pl.concat(pl.collect_all(plans), how="vertical").lazy().cast(dict(EVENT_SCHEMA))
    if not keep_benign:
        # A benign line naming its node's address (NCCL's bootstrap banner) stays, once per
        # attempt, node and address and without its rank (every rank prints it): by it a
        # peer's address is mapped back to its node (rules/ib_peer.py).
        events = pl.concat([
            events.filter(pl.col("role") != "benign"),
            events.filter(address_banner()).with_columns(pl.lit(None, dtype=pl.Int32).alias("rank"))
            .sort("ts", "origin").unique(["attempt_id", "node", "params"], keep="first", maintain_order=True),
        ])
    if ordered:
        events = events.sort(ORDER, nulls_last=True, maintain_order=True)
    return _one_per_listed_node(events.collect())


def _one_per_listed_node(events: pl.DataFrame) -> pl.DataFrame:
    """``events`` with every event whose node is a Slurm hostlist (slurmctld's ``Nodes
    gn[033-040] not responding, setting DOWN`` names all the nodes that went down together)
    repeated once per node it lists, in the list's place: each is that node's event (its id
    suffixed ``#<node>``). A list that does not expand stays as it is."""
    listed = pl.col("node").str.contains(r"[\[,]").fill_null(False)
    if not events.select(listed.any()).item():
        return events
    expanded = {}
    for expr in events.filter(listed)["node"].unique().to_list():
        try:
            expanded[expr] = [node.lower() for node in expand_hostlist(expr)]
        except ValueError:
            continue
    if not expanded:
        return events
    lists = pl.DataFrame({"node": list(expanded), "_nodes": list(expanded.values())},
                         schema={"node": pl.String, "_nodes": pl.List(pl.String)})
    rows = events.with_row_index("_row")
    split = (
        rows.join(lists, on="node").explode("_nodes")
        .with_columns(pl.col("_nodes").alias("node"),
                      pl.concat_str([pl.col("event_id"), pl.lit("#"), pl.col("_nodes")]).alias("event_id"))
        .drop("_nodes")
    )
    kept = rows.join(lists.select("node"), on="node", how="anti")
    return pl.concat([kept, split.select(kept.columns)]).sort("_row", maintain_order=True).drop("_row")


def extract_events(observations: pl.LazyFrame | pl.DataFrame, pack: RulePack) -> pl.DataFrame:
    """Events of the pack's extract rules over ``observations``, floods collapsed.

    ``observations`` has the observations table's columns plus ``cluster``, ``day`` and
    ``source``. Returns :data:`EVENT_SCHEMA` columns sorted by cluster, ts, node, origin,
    rule_id. Benign events are kept (the attribution run leaves them out,
    :func:`line_events`).
    """
    return dedupe_events(_extract(observations, pack, ordered=False), pack)


EXTRACTOR_CODE = ("extract.py", "rules/loader.py", "rules/model.py")
"""The files (under ``engine/``) of the code that turns a pack's extract rules into events."""


@cache
def _extractor_digest() -> bytes:
    """Digest of :data:`EXTRACTOR_CODE`: a change to it makes landed events stale. Read once
    per process, not per day."""
    digest = hashlib.sha256()
    for name in EXTRACTOR_CODE:
        digest.update((Path(__file__).parent / name).read_bytes())
    return digest.digest()


ADDRESS_GROUP = "(?P<addr>"
"""The capture of a benign rule that names its node's network address: runs keep its events."""
ADDRESS_PARAM = '"addr":'
"""That capture in an event's params."""


def address_banner() -> pl.Expr:
    """Whether an event is a benign line naming its node's network address (NCCL's
    bootstrap, IB and socket banners, EFA's host id): the only benign events runs keep."""
    return (pl.col("role") == "benign") & pl.col("params").str.contains(ADDRESS_PARAM, literal=True).fill_null(False)


def line_events(observations: pl.LazyFrame | pl.DataFrame, pack: RulePack) -> pl.DataFrame:
    """What a run takes from some lines: their events before the flood dedupe, without the
    harmless ones (benign events never take part in a verdict, and NCCL INFO banners are
    most of a log) except those naming their node's address (``addr``), one per node."""
    return _extract(observations, pack, keep_benign=False, ordered=False)


def landing_derivation(pack: RulePack) -> Derivation:
    """Extraction at landing: the :func:`line_events` of each observations file, floods
    collapsed (:func:`dedupe_events`), written beside it as it lands. The name holds a
    digest of the pack's extract rules and of the extractor's code, so a run whose pack
    extracts otherwise (or another causelake) never reads them, while one whose pack
    differs only elsewhere does."""
    digest = hashlib.sha256(pack.extraction_digest + _extractor_digest())
    # An event is on its line's day: the partition of the file it came from.
    return Derivation(f"events-{digest.hexdigest()[:16]}", "observations",
                      lambda rows: dedupe_events(line_events(rows, pack), pack).with_columns(
                          pl.col("ts").dt.date().alias("day")))


def lake_events(lake: Lake, pack: RulePack, files: Sequence[Path]) -> pl.DataFrame:
    """Events of the observations ``files`` of one lake, floods collapsed: read from their
    landed events (:func:`landing_derivation`, each file's floods collapsed) where those
    exist, extracted from the file otherwise — the same events either way — and collapsed
    again across the files (a node's flood can span its syslog and kmsg files)."""
    return dedupe_events(lake.read_derived(landing_derivation(pack), files).cast(dict(EVENT_SCHEMA)), pack)


def extract_lines(lines: Sequence[str], pack: RulePack, *, source: str | None = None) -> pl.DataFrame:
    """Events of the pack's extract rules over raw ``lines`` (no timestamps, no dedupe).

    Line ``n`` (1-based) gets origin ``<input>:<n>``. With ``source`` only rules for that
    source (or for every source) apply; without it every rule is tried.
    """
    observations = pl.DataFrame({"message": list(lines)}, schema={"message": pl.String}).with_columns(
        pl.concat_str([pl.lit("<input>:"), pl.int_range(1, pl.len() + 1).cast(pl.String)]).alias("origin"),
        pl.lit(source, pl.String).alias("source"),
    )
    return _extract(observations, pack)


def dedupe_window_s(pack: RulePack) -> pl.Expr:
    """The ``dedupe_window`` of each row's rule (``rule_id``), in seconds; rules not in the
    pack have the default (5m)."""
    windows = pack.dedupe_seconds()
    if not windows:
        return pl.lit(_DEFAULT_WINDOW_S)
    return pl.col("rule_id").replace_strict(
        list(windows), list(windows.values()), default=_DEFAULT_WINDOW_S, return_dtype=pl.Float64
    )


def dedupe_events(
    events: pl.DataFrame, pack: RulePack, keys: Sequence[str] = DEDUPE_KEYS, folds: Sequence[pl.Expr] = (),
) -> pl.DataFrame:
    """Collapse floods: repeats within the rule's ``dedupe_window`` of the previous repeat.

    Repeats are rows equal on ``keys`` (:data:`DEDUPE_KEYS`). A run of repeats whose
    consecutive gaps (from the latest ``last_ts`` of the repeats before it to this ``ts``)
    are within the window becomes one event: the first row's fields, ``ts`` of the first,
    the latest ``last_ts`` and ``count`` the sum of counts, and each of ``folds`` (an
    aggregation named after a column of ``events``) over the run instead of the first
    row's value. Rules not in the pack use the default window (5m).

    Rows that are themselves collapsed floods merge as their lines would have: collapsing
    each file's events and then their union gives what collapsing the union of the lines
    gives (landing collapses each file's, a run the day's).
    """
    if events.is_empty():
        return events
    window_s = dedupe_window_s(pack)
    # An event that is the only one of its key (one rank's line; half of a simulated day's
    # events) is a burst of its own. Only the repeated keys are ordered, each numbered once
    # (a hash join), so the sort compares one integer and the stamp instead of nine strings
    # (a third off the dedupe).
    keys = list(keys)
    repeated = events.select(pl.struct(keys).is_duplicated()).to_series()
    repeats = events.filter(repeated)
    numbered = repeats.select(keys).unique(maintain_order=True).with_row_index("_key")
    ordered = repeats.join(numbered, on=keys, nulls_equal=True).sort("_key", "ts", "origin", nulls_last=True)
    # The latest end so far, not the previous row's: a collapsed flood may outlast the
    # shorter ones that start after it.
    latest = pl.col("last_ts").cum_max().over("_key").shift(1)
    gap_s = (pl.col("ts") - latest).dt.total_microseconds() / 1_000_000
    starts = ((pl.col("_key") != pl.col("_key").shift(1)) | (gap_s > window_s)).fill_null(True)
    flagged = ordered.with_columns(starts.alias("_start"))
    if flagged["_start"].all():  # nothing to fold: a run's pass over floods landing collapsed
        return events.sort(ORDER, nulls_last=True, maintain_order=True)
    burst = pl.col("_start").cum_sum()
    totals = flagged.group_by(burst.alias("_burst"), maintain_order=True).agg(
        pl.col("last_ts").max(), pl.col("count").sum(), *folds
    )
    firsts = flagged.filter(pl.col("_start")).drop(totals.columns[1:], "_start")
    folded = firsts.hstack(totals.drop("_burst")).select(events.columns)
    return pl.concat([events.filter(~repeated), folded]).sort(ORDER, nulls_last=True, maintain_order=True)


def extract_lines_from_files(
    paths: Sequence[Path], pack: RulePack, *, source: str | None = None
) -> pl.DataFrame:
    """Events each line of some log files yields, without landing anything and without
    flood dedupe (the ``causelake extract`` view: one event per matching line and rule)."""
    # Imported here so the extractor itself does not depend on the file connector.
    from ingest.files import read_log_file
    from ingest.files.land import expand_paths

    frames = []
    for path in expand_paths(paths):
        parsed = read_log_file(path, source=source)
        frames.append(parsed.observations.with_columns(
            pl.lit("local").alias("cluster"), pl.lit(parsed.source).alias("source"),
            pl.col("ts").dt.date().alias("day"),
        ))
    if not frames:
        return empty_events()
    return _extract(pl.concat(frames), pack).sort("origin", "rule_id")
