"""Turning verdicts and events into what people read: tables, timelines, JSON lines."""

from __future__ import annotations

import json
from datetime import date, datetime

import polars as pl
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ingest.schema import Verdict

ROLE_STYLE = {
    "root_candidate": "bold red", "confirmation": "yellow", "cascade": "magenta",
    "context": "dim", "benign": "dim",
}
QUALITY_STYLE = {
    "definitive": "bold green", "probable": "green", "ambiguous": "yellow", "insufficient": "red",
}


def _json_default(value: object) -> str:
    if isinstance(value, datetime | date):
        return value.isoformat()
    raise TypeError(f"cannot serialize {type(value).__name__}")


def verdict_records(results: pl.DataFrame, *, json_mode: bool = False) -> list[dict]:
    """Results rows as validated verdict records (the JSON contract of ``explain``);
    ``json_mode`` turns times into ISO strings."""
    columns = [c for c in Verdict.model_fields if c in results.columns]
    mode = "json" if json_mode else "python"
    return [Verdict.model_validate(row).model_dump(mode=mode) for row in results.select(columns).to_dicts()]


def to_jsonl(records: list[dict]) -> str:
    """One JSON object per line, keys sorted, so the output diffs cleanly."""
    return "".join(json.dumps(r, sort_keys=True, default=_json_default) + "\n" for r in records)


def _short(ts: datetime | None) -> str:
    return ts.strftime("%Y-%m-%d %H:%M:%S") if ts else "-"


def verdict_table(results: pl.DataFrame, title: str = "verdicts") -> Table:
    """A compact table of verdicts: one row per attempt."""
    table = Table(title=title, show_lines=False)
    for name in ("attempt", "state", "domain", "cause", "quality", "culprit", "action"):
        table.add_column(name, overflow="fold")
    for row in results.sort(["end_ts", "attempt_id"], nulls_last=True).iter_rows(named=True):
        culprit = ",".join(row["culprit_nodes"] or []) or "-"
        if row["culprit_gpus"]:
            culprit += " gpu " + ",".join(row["culprit_gpus"])
        if row["culprit_ports"]:
            culprit += " port " + ",".join(row["culprit_ports"])
        table.add_row(
            Text(row["attempt_id"]), row["state"], row["domain"], row["cause"],
            Text(row["quality"], style=QUALITY_STYLE.get(row["quality"], "")),
            Text(culprit), row["recommended_action"],
        )
    return table


def summary_table(counts: pl.DataFrame, title: str) -> Table:
    """Any small frame as a rich table."""
    table = Table(title=title)
    for name in counts.columns:
        table.add_column(name)
    for row in counts.iter_rows():
        table.add_row(*[Text(str(v)) for v in row])
    return table


def print_explanation(console: Console, verdict: dict) -> None:
    """The verdict and its evidence as a timeline: root first, then every event in time
    order with its node, rank, role and provenance, then a per-node roll-up."""
    v = verdict
    console.print(f"[bold]{escape(v['attempt_id'])}[/bold]  job {escape(v['job_id'])} on {escape(v['cluster'])}  "
                  f"state [bold]{v['state']}[/bold]  {_short(v['start_ts'])} → {_short(v['end_ts'])} UTC")
    quality = Text(v["quality"], style=QUALITY_STYLE.get(v["quality"], ""))
    console.print(Text.assemble("verdict: ", (v["domain"], "bold"), " / ", (v["cause"], "bold"),
                                "  quality ", quality, f"  responsibility {v['responsibility']}"))
    if v["culprit_nodes"] or v["culprit_gpus"] or v["culprit_ports"] or v["culprit_ranks"]:
        console.print(f"culprit: nodes {v['culprit_nodes']} gpus {v['culprit_gpus']} "
                      f"ports {v['culprit_ports']} ranks {v['culprit_ranks']}", markup=False)
    if v["first_fault_ts"]:
        console.print(f"first fault {_short(v['first_fault_ts'])}, job ran on "
                      f"{v['fault_to_end_s']:.0f} s after it", markup=False)
    if v["affected_nodes"]:
        console.print(f"affected nodes: {', '.join(v['affected_nodes'])}", markup=False)
    console.print(f"recommended action: [bold]{escape(v['recommended_action'])}[/bold]")
    for alt in v["alternatives"]:
        console.print(f"  alternative: {alt['domain']} / {alt['cause']} on {alt['node']} at "
                      f"{_short(alt['ts'])} ({alt['rule_id']})", style="yellow", markup=False)
    missing = [c for c in v["coverage"] if c["error"]]
    for c in missing:
        console.print(f"  coverage gap: {c['source']}: {c['error']}", style="red", markup=False)
    table = Table(title="evidence timeline")
    for name in ("time (UTC)", "node", "rank", "role", "event", "message", "origin"):
        table.add_column(name, overflow="fold")
    for e in v["evidence"]:
        count = f" ×{e['count']}" if e["count"] and e["count"] > 1 else ""
        # Log text is data, not markup: "[rank3]:" must print as it was logged.
        table.add_row(
            _short(e["ts"]), Text(e["node"] or "-"), "-" if e["rank"] is None else str(e["rank"]),
            Text(e["role"], style=ROLE_STYLE.get(e["role"], "")), Text(e["event"] + count),
            Text((e["message"] or "")[:160]), Text(e["origin"] or "-"),
        )
    console.print(table)
    per_node: dict[str, dict[str, int]] = {}
    for e in v["evidence"]:
        per_node.setdefault(e["node"] or "-", {}).setdefault(e["role"], 0)
        per_node[e["node"] or "-"][e["role"]] += 1
    if per_node:
        nodes = Table(title="per node")
        nodes.add_column("node")
        nodes.add_column("events by role")
        for node in sorted(per_node):
            nodes.add_row(Text(node), ", ".join(f"{r} {n}" for r, n in sorted(per_node[node].items())))
        console.print(nodes)
