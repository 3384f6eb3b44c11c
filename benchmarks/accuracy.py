"""Accuracy benchmark: simulate → ingest → attribute → score against the ground truth, plus
the real incidents of the shared corpus through one-shot diagnosis."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import polars as pl

from benchmarks.incidents import INCIDENTS, score_incidents
from benchmarks.simulate import ingest, simulate
from engine.oneshot import attempt_days
from engine.run import landing_lake, run_attribution

def score(truth: pl.DataFrame, verdicts: pl.DataFrame) -> dict:
    """Scores of ``verdicts`` against ``truth`` (both keyed by ``attempt_id``)."""
    j = truth.join(verdicts.select("attempt_id", "domain", "cause", "quality", pl.col("culprit_nodes").alias("pred_nodes")),
                   on="attempt_id", how="left", suffix="_pred")
    j = j.with_columns(
        # A cause the truth also accepts brings its domain (the second of two faults).
        ((pl.col("domain") == pl.col("domain_pred"))
         | pl.col("also_accept").list.eval(pl.element().str.extract(r"^([a-z_]+)\.", 1)).list.contains(pl.col("domain_pred")))
        .fill_null(False).alias("domain_ok"),
        ((pl.col("cause") == pl.col("cause_pred")) | pl.col("also_accept").list.contains(pl.col("cause_pred"))).fill_null(False).alias("cause_ok"),
        pl.col("pred_nodes").fill_null([]),
    )
    tp = j.select(pl.col("culprit_nodes").list.set_intersection("pred_nodes").list.len().sum()).item()
    n_pred = j["pred_nodes"].list.len().sum()
    n_true = j["culprit_nodes"].list.len().sum()
    precision = tp / n_pred if n_pred else 1.0
    recall = tp / n_true if n_true else 1.0
    failed = j.filter(pl.col("domain") != "none")
    by_q = j.group_by("quality").agg(pl.len().alias("n"), pl.col("domain_ok").mean().alias("domain_accuracy")).sort("quality")
    amb = j.filter(pl.col("ambiguous"))
    confusion: dict = {}
    for t, p, n in j.group_by("domain", "domain_pred").len().sort("domain", "domain_pred").iter_rows():
        confusion.setdefault(t, {})[p or "missing"] = n
    by_s = j.group_by("scenario").agg(pl.len().alias("n"), pl.col("domain_ok").mean().alias("domain"), pl.col("cause_ok").mean().alias("cause"),
                                      pl.col("domain_pred").mode().first().alias("usual_domain"), pl.col("cause_pred").mode().first().alias("usual_cause"))
    return {
        "attempts": j.height,
        "failed_attempts": failed.height,
        "domain_accuracy": j["domain_ok"].mean(),
        "domain_accuracy_failed": failed["domain_ok"].mean() if failed.height else None,
        "cause_accuracy": j["cause_ok"].mean(),
        "cause_accuracy_failed": failed["cause_ok"].mean() if failed.height else None,
        "culprit_node_precision": precision,
        "culprit_node_recall": recall,
        "culprit_node_f1": 2 * precision * recall / (precision + recall) if precision + recall else 0.0,
        "accuracy_by_quality": {q or "missing": {"n": n, "domain_accuracy": a} for q, n, a in by_q.iter_rows()},
        "ambiguous_flagged": (amb["quality"] == "ambiguous").mean() if amb.height else None,
        "confusion": confusion,
        "by_scenario": {r["scenario"]: {k: v for k, v in r.items() if k != "scenario"} for r in by_s.sort("scenario").to_dicts()},
    }


def bench_accuracy(attempts: int = 2000, seed: int = 0, out: str | Path | None = None, workdir: str | Path | None = None) -> dict:
    """Simulate ``attempts`` attempts, ingest them, run the engine and score the verdicts.

    Writes the report as JSON to ``out`` when given. ``workdir`` keeps the simulated inputs
    and the lake (default: a temporary folder removed afterwards).
    """
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(workdir) if workdir else Path(tmp)
        sim = simulate(base / "fleet", attempts, seed)
        lake = landing_lake(base / "lake")
        ingest(lake, sim.out)
        since, until = attempt_days(lake)
        summary = run_attribution(lake, since, until)
        report = {"seed": seed, **score(pl.read_parquet(sim.truth), summary.verdicts)}
    report["real_incidents"] = score_incidents() if INCIDENTS.exists() else None
    if out:
        Path(out).write_text(json.dumps(report, indent=2, default=str))
    return report
