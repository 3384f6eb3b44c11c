"""The performance benchmark end to end on a small fleet: every stage runs and reports its
figures (no timing is asserted: speed belongs in ``causelake bench perf``)."""

from __future__ import annotations

import json

import pytest

from benchmarks.perf import bench_perf


def test_small_perf_run_reports_every_stage(tmp_path):
    out = tmp_path / "perf.json"
    report = bench_perf(150, out=out, workdir=tmp_path / "work", seed=3)
    assert json.loads(out.read_text()) == json.loads(json.dumps(report))
    stages = report["timings_s"]
    for stage in ("simulate", "ingest", "extract_at_landing", "engine_extract", "engine_correlate_decide", "engine_attribute", "engine_fleet", "engine_write"):
        assert stages[stage] >= 0, stage
    assert stages["extract_at_landing"] > 0  # the ingest extracted the lines as it landed them
    assert report["lines_landed"] > 0 and report["raw_lines"] >= report["lines_landed"]
    assert report["batch_s"] > 0 and report["one_at_a_time_s"] > 0
    assert all(report["peak_rss_mb"][stage] > 0 for stage in ("simulate", "ingest", "attribution"))
    assert stages["engine_attribute"] > 0
    assert report["raw_to_results_s"] == pytest.approx(stages["ingest"] + stages["attribution_total"], abs=0.01)
