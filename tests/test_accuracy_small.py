"""Accuracy on a small simulated fleet, through the real connectors and engine."""

from __future__ import annotations

import polars as pl

from benchmarks.accuracy import score
from benchmarks.simulate import ingest, simulate
from engine.oneshot import attempt_days
from engine.run import landing_lake, run_attribution


def test_small_fleet_accuracy(tmp_path):
    sim = simulate(tmp_path / "fleet", 150, seed=2)
    lake = landing_lake(tmp_path / "lake")
    ingest(lake, sim.out)
    since, until = attempt_days(lake)
    report = score(pl.read_parquet(sim.truth), run_attribution(lake, since, until).verdicts)
    assert report["attempts"] == 150
    assert report["domain_accuracy"] >= 0.99, report["by_scenario"]
    assert report["culprit_node_f1"] >= 0.98, report["by_scenario"]
    definitive = report["accuracy_by_quality"].get("definitive")
    assert definitive is None or definitive["domain_accuracy"] >= 0.995
