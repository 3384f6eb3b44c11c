"""The cause catalog: every ``<domain>.<name>`` code the rule pack can produce.

Generated from the pack (extract rules and their ``map`` tables, metric rules, state rules,
the ``CAUSES`` python rules declare) plus the codes the engine itself assigns, so the
README's catalog can never drift from what the rules say: a test compares the two.
"""

from __future__ import annotations

import polars as pl

from engine.rules.loader import RulePack
from engine.rules.model import Outcome

ENGINE_CAUSES = (
    ("none", "none", "the attempt succeeded"),
    ("unknown.symptoms_only", "unknown", "only cascades/symptoms were found (e.g. NCCL timeouts everywhere)"),
    ("unknown.no_evidence", "unknown", "the attempt failed and no source said anything"),
)
"""Causes the decide stage assigns without a rule."""


def _outcomes(pack: RulePack) -> list[dict]:
    rows = []
    for rule in pack.extract:
        outcomes: list[Outcome] = [rule]
        if rule.map is not None:
            outcomes += list(rule.map.table.values()) + ([rule.map.default] if rule.map.default else [])
        for outcome in outcomes:
            rows.append({
                "cause": outcome.cause or rule.cause, "domain": outcome.domain or rule.domain,
                "role": outcome.role or rule.role, "rule": rule.id,
                "event": outcome.event or rule.event,
            })
    for rule in (*pack.metric, *pack.state):
        rows.append({"cause": rule.cause, "domain": rule.domain, "role": rule.role, "rule": rule.id,
                     "event": rule.event})
    for loaded in pack.python:
        for cause, domain, role, event in loaded.causes:
            rows.append({"cause": cause, "domain": domain, "role": role, "rule": loaded.rule.id, "event": event})
    return rows


def cause_catalog(pack: RulePack) -> pl.DataFrame:
    """One row per cause code: domain, the roles it appears with, the rules and the events
    that carry it."""
    rules = pl.DataFrame(_outcomes(pack), schema={k: pl.String for k in ("cause", "domain", "role", "rule", "event")})
    catalog = rules.group_by("cause", "domain").agg(
        pl.col("role").unique().sort().str.join(", ").alias("roles"),
        pl.col("rule").unique().sort().str.join(", ").alias("rules"),
        pl.col("event").unique().sort().str.join(", ").alias("events"),
    )
    engine = pl.DataFrame(
        [{"cause": c, "domain": d, "roles": "verdict only", "rules": "(engine)", "events": e} for c, d, e in ENGINE_CAUSES]
    )
    return pl.concat([catalog, engine]).sort("domain", "cause")


def catalog_markdown(pack: RulePack) -> str:
    """The catalog as a Markdown table (what the README embeds)."""
    lines = ["| cause | domain | roles | rules | events |", "|---|---|---|---|---|"]
    for row in cause_catalog(pack).iter_rows(named=True):
        events = (row["events"] or "").replace("|", "\\|")
        lines.append(f"| `{row['cause']}` | {row['domain']} | {row['roles']} | {row['rules']} | {events} |")
    return "\n".join(lines) + "\n"
