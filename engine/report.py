"""A self-contained HTML fleet report: trend charts, a table of attempts, and one section
per failed attempt with its evidence timeline.

The page works offline: CSS and the chart script (``engine/report_assets/``) are inlined,
charts are SVG drawn by that script from JSON embedded in the page. Every piece of text that
comes from the lake (log messages, node names, attempt ids) is HTML-escaped on the Python
side and set through ``textContent`` on the script side, so a log line cannot inject markup.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
from datetime import date, datetime
from pathlib import Path

import polars as pl

from engine.queries import run_query
from ingest.lake import Lake

ASSETS = Path(__file__).resolve().parent / "report_assets"

MAX_SECTIONS = 200
"""Failed attempts that get their own section (latest first); the table lists them all."""

OPEN_EVIDENCE = 15
"""Evidence tables up to this many lines are shown open; longer ones start folded."""

QUALITIES = ("definitive", "probable", "ambiguous", "insufficient")

COLORS = {
    "gpu": "#c53030", "gpu_memory": "#dd6b20", "nvlink": "#d69e2e", "network": "#3182ce",
    "host": "#805ad5", "storage": "#319795", "scheduler": "#718096", "workload": "#38a169",
    "unknown": "#a0aec0",
    "definitive": "#2f855a", "probable": "#68b36b", "ambiguous": "#d69e2e", "insufficient": "#c53030",
    "root_candidate": "#c53030", "confirmation": "#d69e2e", "cascade": "#805ad5",
    "context": "#a0aec0", "benign": "#cbd2d9",
    "link-down": "#c53030", "flap": "#dd6b20", "errors": "#3182ce",
    "_cycle": ["#3182ce", "#c53030", "#38a169", "#d69e2e", "#805ad5", "#319795", "#dd6b20"],
}

FAILED = ~pl.col("state").is_in(["completed", "running"])


def _e(value: object) -> str:
    """HTML-escape anything for text or attribute context."""
    return html.escape("" if value is None else str(value), quote=True)


def _anchor(attempt_id: str) -> str:
    """A stable, HTML-safe element id for an attempt (slug + hash, so slugs never collide)."""
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", attempt_id).strip("-")[:60]
    return f"attempt-{slug}-{hashlib.sha1(attempt_id.encode()).hexdigest()[:6]}"


def _ts(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value else "–"


def _ms(value: datetime | None) -> float | None:
    return value.timestamp() * 1000 if value else None


def _scoped_results(lake: Path, since: date | None, until: date | None) -> pl.DataFrame:
    scan = Lake(lake).scan("results")
    if since:
        scan = scan.filter(pl.col("day") >= since)
    if until:
        scan = scan.filter(pl.col("day") <= until)
    return scan.collect().sort(["end_ts", "attempt_id"], descending=True, nulls_last=True)


def _failures_chart(lake: Path, params: dict) -> dict:
    frame = run_query(lake, "failures_by_domain", {**params, "grain": "day"})
    per = frame.group_by("period", "domain").agg(pl.col("failures").sum())
    days = sorted(per["period"].unique().to_list())
    domains = sorted(per["domain"].unique().to_list())
    wide = pl.DataFrame({"period": days}).join(
        per.pivot(on="domain", index="period", values="failures"), on="period", how="left"
    ).fill_null(0) if days else pl.DataFrame()
    return {
        "type": "stacked", "unit": "failed attempts",
        "categories": [d.isoformat() for d in days],
        "series": [{"name": d, "values": wide[d].to_list()} for d in domains],
    }


def _xid_chart(lake: Path, params: dict) -> dict:
    frame = run_query(lake, "xid_daily", params)
    per_code = frame.group_by("node", "day", "xid").agg(pl.col("occurrences").sum()).sort("xid")
    cells = per_code.group_by("node", "day").agg(
        value=pl.col("occurrences").sum(),
        detail=pl.format("XID {} ×{}", "xid", "occurrences").str.join(", "),
    )
    rows = sorted(cells["node"].unique().to_list())
    cols = sorted(cells["day"].unique().to_list())
    index = cells.with_columns(
        row=pl.col("node").replace_strict(rows, list(range(len(rows))), return_dtype=pl.Int32),
        col=pl.col("day").replace_strict(cols, list(range(len(cols))), return_dtype=pl.Int32),
    )
    return {
        "type": "heatmap", "rows": rows, "cols": [d.isoformat() for d in cols],
        "cells": index.select("row", "col", "value", "detail").to_dicts(),
    }


def _ports_chart(lake: Path, params: dict) -> dict:
    frame = run_query(lake, "port_hotspots", {**params, "limit": 12})
    items = frame.select(
        label=pl.format("{} {}", "node", "port"),
        values=pl.concat_list("link_downs", "flaps", "errors"),
        detail=pl.format("{} failed attempt(s) exposed; switch {} port {}", "failed_attempts",
                         pl.col("switch").fill_null("?"), pl.col("switch_port").fill_null("?")),
    )
    return {"type": "hbars", "series": ["link-down", "flap", "errors"], "items": items.to_dicts(),
            "empty": "no fabric port fault in this window"}


def _offenders_chart(lake: Path, results: pl.DataFrame) -> dict:
    if results.is_empty():
        return {"type": "hbars", "series": ["failed attempts blamed"], "items": []}
    first, last = results["day"].min(), results["day"].max()
    frame = run_query(lake, "repeat_offenders", {"k": 1, "days": (last - first).days + 1, "until": last})
    items = frame.filter(pl.col("kind") == "node").head(15).select(
        label="node", values=pl.concat_list("attempts"), highlight=pl.col("attempts") >= 2,
        detail=pl.col("causes").list.join(", "),
    )
    return {"type": "hbars", "series": ["failed attempts blamed"], "items": items.to_dicts(),
            "empty": "no node blamed for a failure in this window"}


def _quality_chart(lake: Path, params: dict) -> dict:
    frame = run_query(lake, "explain_gaps", params).group_by("day").agg(
        pl.col(q).sum() for q in QUALITIES).sort("day")
    return {
        "type": "stacked", "percent": True, "unit": "failed attempts",
        "categories": [d.isoformat() for d in frame["day"]],
        "series": [{"name": q, "values": frame[q].to_list()} for q in QUALITIES],
    }


def _evidence(failed: pl.DataFrame) -> pl.DataFrame:
    """One row per evidence item of the given attempts, in time order."""
    return (
        failed.select("attempt_id", "evidence").explode("evidence")
        .filter(pl.col("evidence").is_not_null()).unnest("evidence")
        .sort(["attempt_id", "ts"], nulls_last=True)
    )


def _timeline_chart(rows: list[dict], fault: datetime | None) -> dict:
    lanes: list[str] = []
    points = []
    for e in rows:
        lane = e["node"] or "(job)"
        if lane not in lanes:
            lanes.append(lane)
        rank = "" if e["rank"] is None else f" rank {e['rank']}"
        count = f" ×{e['count']}" if (e["count"] or 1) > 1 else ""
        points.append({
            "t": _ms(e["ts"]), "lane": lanes.index(lane), "role": e["role"],
            "label": f"{_ts(e['ts'])} {lane}{rank} [{e['role']}] {e['event']}{count}: {(e['message'] or '')[:300]}",
        })
    points = [p for p in points if p["t"] is not None]
    times = [p["t"] for p in points] + ([_ms(fault)] if fault else [])
    return {"type": "timeline", "lanes": lanes, "points": points,
            "t0": min(times) if times else 0, "t1": max(times) if times else 0, "fault": _ms(fault)}


def _culprit(row: dict) -> str:
    parts = [", ".join(row["culprit_nodes"] or [])]
    if row["culprit_gpus"]:
        parts.append("GPU " + ", ".join(row["culprit_gpus"]))
    if row["culprit_ports"]:
        parts.append("port " + ", ".join(row["culprit_ports"]))
    if row["culprit_ranks"]:
        parts.append("rank " + ", ".join(str(r) for r in row["culprit_ranks"]))
    return " · ".join(p for p in parts if p) or "–"


def _quality(q: str) -> str:
    return f'<span class="q q-{_e(q)}">{_e(q)}</span>'


def _attempts_table(results: pl.DataFrame, sections: set[str]) -> str:
    if results.is_empty():
        return '<p class="empty">no verdict in this window</p>'
    out = ["<table><thead><tr><th>attempt</th><th>job</th><th>state</th><th>ended (UTC)</th>"
           "<th>domain</th><th>cause</th><th>quality</th><th>culprit</th></tr></thead><tbody>"]
    for row in results.iter_rows(named=True):
        name = _e(row["attempt_id"])
        if row["attempt_id"] in sections:
            name = f'<a href="#{_anchor(row["attempt_id"])}">{name}</a>'
        out.append(
            f"<tr><td>{name}</td><td>{_e(row['job_id'])}</td><td>{_e(row['state'])}</td>"
            f"<td>{_ts(row['end_ts'])}</td><td>{_e(row['domain'])}</td><td>{_e(row['cause'])}</td>"
            f"<td>{_quality(row['quality'])}</td><td>{_e(_culprit(row))}</td></tr>"
        )
    out.append("</tbody></table>")
    return "".join(out)


def _attempt_section(row: dict, evidence: list[dict], chart_key: str) -> str:
    alts = "".join(
        f"<li>{_e(a['domain'])} / {_e(a['cause'])} on {_e(a['node'])} at {_ts(a['ts'])} ({_e(a['rule_id'])})</li>"
        for a in row["alternatives"] or []
    )
    gaps = "".join(f"<li>{_e(c['source'])}: {_e(c['error'])}</li>" for c in row["coverage"] or [] if c["error"])
    lines = "".join(
        f"<tr><td>{_ts(e['ts'])}</td><td>{_e(e['node'])}</td><td>{_e(e['rank'])}</td>"
        f'<td class="role-{_e(e["role"])}">{_e(e["role"])}</td><td>{_e(e["event"])}'
        f"{' ×' + str(e['count']) if (e['count'] or 1) > 1 else ''}</td>"
        f'<td class="msg">{_e(e["message"])}</td><td class="msg">{_e(e["origin"])}</td></tr>'
        for e in evidence
    )
    fault = ""
    if row["first_fault_ts"]:
        fault = f" · first fault {_ts(row['first_fault_ts'])}, ran on {row['fault_to_end_s'] or 0:.0f} s after it"
    return (
        f'<section class="attempt" id="{_anchor(row["attempt_id"])}">'
        f"<h3>{_e(row['attempt_id'])} — {_e(row['domain'])} / {_e(row['cause'])} {_quality(row['quality'])}</h3>"
        f'<p class="meta">job {_e(row["job_id"])} on {_e(row["cluster"])} · state {_e(row["state"])} · '
        f"{_ts(row['start_ts'])} → {_ts(row['end_ts'])}{fault} · culprit {_e(_culprit(row))} · "
        f"action <b>{_e(row['recommended_action'])}</b> · <a href=\"#attempts\">back to the table</a></p>"
        + (f"<p>alternatives:</p><ul>{alts}</ul>" if alts else "")
        + (f"<p>coverage gaps:</p><ul>{gaps}</ul>" if gaps else "")
        + f'<svg class="chart timeline" data-chart="{chart_key}" role="img" aria-label="evidence timeline"></svg>'
        + (f"<details{' open' if len(evidence) <= OPEN_EVIDENCE else ''}><summary>{len(evidence)} evidence "
           f"line(s)</summary><table><thead><tr><th>time</th><th>node</th><th>rank</th><th>role</th>"
           f"<th>event</th><th>message</th><th>origin</th></tr></thead><tbody>{lines}</tbody></table></details>"
           if lines else '<p class="empty">no evidence line</p>')
        + "</section>"
    )


def _card(title: str, key: str, wide: bool = False) -> str:
    return (f'<div class="card{" wide" if wide else ""}"><h2>{_e(title)}</h2>'
            f'<svg class="chart" data-chart="{key}" role="img" aria-label="{_e(title)}"></svg></div>')


def build_report(lake: Path, since: date | None = None, until: date | None = None) -> str:
    """The whole report as one HTML document (inline CSS, SVG and script; no network)."""
    lake = Path(lake)
    if since and until and until < since:
        raise ValueError(f"--until {until} is before --since {since}")
    params = {"since": since, "until": until}
    results = _scoped_results(lake, since, until)
    charts = {
        "failures": _failures_chart(lake, params),
        "xid": _xid_chart(lake, params),
        "ports": _ports_chart(lake, params),
        "offenders": _offenders_chart(lake, results),
        "quality": _quality_chart(lake, params),
    }
    failed = results.filter(FAILED).head(MAX_SECTIONS)
    evidence = _evidence(failed)
    by_attempt = {key: part.to_dicts() for (key,), part in evidence.partition_by("attempt_id", as_dict=True).items()} \
        if evidence.height else {}
    sections = []
    for i, row in enumerate(failed.iter_rows(named=True)):
        rows = by_attempt.get(row["attempt_id"], [])
        charts[f"t{i}"] = _timeline_chart(rows, row["first_fault_ts"])
        sections.append(_attempt_section(row, rows, f"t{i}"))
    n_failed = results.filter(FAILED).height
    window = (f"{results['day'].min()} to {results['day'].max()}" if results.height
              else "no verdicts")
    if since or until:
        window = f"{since or '…'} to {until or '…'}"
    lost = run_query(lake, "failures_by_domain", {**params, "grain": "day"})["lost_gpu_hours"].sum()
    kpis = [
        (results.height, "attempts with a verdict"), (n_failed, "did not complete"),
        (f"{lost:,.0f}", "GPU-hours in failed attempts"),
        (results.filter(FAILED, pl.col("quality").is_in(["ambiguous", "insufficient"])).height,
         "failures left ambiguous / insufficient"),
    ]
    payload = json.dumps({"charts": charts, "colors": COLORS}, default=str).replace("<", "\\u003c")
    more = (f'<p class="empty">{n_failed - MAX_SECTIONS} older failed attempts have no section here.</p>'
            if n_failed > MAX_SECTIONS else "")
    return (
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>causelake report — {_e(window)}</title>"
        f"<style>{(ASSETS / 'report.css').read_text()}</style></head><body>"
        f"<header><h1>causelake fleet report</h1><p>{_e(window)} · lake {_e(lake)}</p></header><main>"
        '<div class="kpis">' + "".join(f'<div class="kpi"><b>{_e(v)}</b><span>{_e(t)}</span></div>' for v, t in kpis)
        + '</div><div class="grid">'
        + _card("Failed attempts by domain per day", "failures")
        + _card("Verdict quality of failed attempts per day", "quality")
        + _card("XID lines by node × day", "xid", wide=True)
        + _card("Top fabric ports by faults", "ports")
        + _card("Nodes blamed for failures (grey: once; coloured: repeat offender)", "offenders")
        + '</div><h2 id="attempts" style="margin-top:22px">Attempts</h2><div class="card wide">'
        + _attempts_table(results, set(failed["attempt_id"].to_list())) + "</div>"
        + "".join(sections) + more
        + f'</main><script type="application/json" id="report-data">{payload}</script>'
        + f"<script>{(ASSETS / 'report.js').read_text()}</script></body></html>\n"
    )


def write_report(lake: Path, output: Path, since: date | None = None, until: date | None = None) -> Path:
    """Build the report and write it to ``output`` (parent folders created)."""
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(build_report(lake, since, until))
    return output

