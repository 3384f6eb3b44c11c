"""Prometheus connector and metric rules.

Unit tests parse real Prometheus 2.42 answers (``tests/fixtures/prometheus/``, copied from
the project corpus). The slow test backfills OpenMetrics history into a real Prometheus
(Debian ``prometheus`` 2.42), starts it on loopback and queries it through the connector.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path

import polars as pl
import pytest

from engine.metrics import metric_events
from engine.rules.loader import load_rule_pack
from engine.rules.testing import run_inline_tests
from ingest.connectors.base import FetchWindow
from ingest.connectors.prometheus import (
    PrometheusConnector,
    PrometheusOptions,
    chunk_ranges,
    matrix_to_metrics,
)
from ingest.lake import Lake
from ingest.schema import METRICS

FIXTURES = Path(__file__).parent / "fixtures" / "prometheus"
RULES = Path(__file__).parent.parent / "rules" / "metrics.yaml"
T0 = datetime(2026, 11, 30, 15, 0, tzinfo=timezone.utc)  # first sample of history.om


def _result(name: str) -> list[dict]:
    return json.loads((FIXTURES / name).read_text())["data"]["result"]


def test_real_dcgm_answer_maps_to_metric_rows():
    rows = matrix_to_metrics(_result("q_raw_samples.json"), "http://p/q", "q")
    assert rows.columns == METRICS.names
    assert rows.height == 9
    first = rows.row(0, named=True)
    assert first["node"] == "gpu-node-001"  # Hostname wins over instance
    assert first["gpu"] == "0" and first["hca"] is None and first["port"] is None
    assert first["metric"] == "DCGM_FI_DEV_XID_ERRORS"
    assert first["ts"] == datetime(2026, 11, 30, 15, 39, 32, 34000, tzinfo=timezone.utc)
    labels = json.loads(first["labels"])
    assert list(labels) == sorted(labels) and labels["pci_bus_id"] == "00000000:18:00.0"
    assert rows["value"].to_list() == [79.0] * 3 + [48.0] * 6


def test_real_infiniband_answer_strips_instance_port():
    rows = matrix_to_metrics(_result("qr_link_downed.json"), "http://p/q", "q")
    assert rows["node"].unique().to_list() == ["127.0.0.1"]
    assert rows.select("hca", "port").unique().rows() == [("mlx5_0", "1")]
    assert rows["value"].to_list() == [3.0, 5.0, 5.0, 5.0]


def test_renamed_xid_counter_and_expression_results_get_one_name():
    result = [
        {"metric": {"__name__": "DCGM_EXP_XID_ERRORS_TOTAL", "instance": "[::1]:9400"},
         "values": [[1.0, "1"], [2.0, "NaN"]]},
        {"metric": {"instance": "n7:9100"}, "values": [[1.0, "+Inf"]]},
    ]
    rows = matrix_to_metrics(result, "o", "rate(x[5m])")
    assert rows["metric"].to_list() == ["DCGM_EXP_XID_ERRORS_COUNT"] * 2 + ["rate(x[5m])"]
    assert rows["node"].to_list() == ["::1", "::1", "n7"]
    assert json.loads(rows["labels"][0])["__name__"] == "DCGM_EXP_XID_ERRORS_TOTAL"


def test_chunks_stay_under_the_point_limit_and_never_overlap():
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    end = start + timedelta(days=7)
    chunks = chunk_ranges(start, end, 15.0)
    assert chunks[0][0] == start and chunks[-1][1] < end
    for lo, hi in chunks:
        assert (hi - lo).total_seconds() / 15 + 1 <= 11_000
    for (_, hi), (lo, _) in zip(chunks, chunks[1:]):
        assert (lo - hi).total_seconds() == 15
    points = sum(int((hi - lo).total_seconds() // 15) + 1 for lo, hi in chunks)
    assert points == 7 * 86400 // 15


# --- metric rules ---------------------------------------------------------------------


def test_metric_rule_pack_is_valid_and_its_cases_pass():
    pack = load_rule_pack([RULES])
    assert {r.cause for r in pack.metric} >= {
        "network.link_down", "network.link_errors", "gpu.xid_error",
        "gpu_memory.row_remap_failure", "gpu.thermal",
    }
    results = run_inline_tests(pack)
    assert len(results) == sum(len(r.tests) for r in pack.metric)
    assert [(r.rule_id, r.case, r.message) for r in results if not r.ok] == []


# --- a real Prometheus ----------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def prometheus(tmp_path):
    """A real Prometheus on loopback serving the backfilled ``history.om``; stopped by PID."""
    binaries = [shutil.which("prometheus"), shutil.which("promtool")]
    if not all(binaries):
        if os.environ.get("CI") == "true":
            pytest.fail("prometheus/promtool missing in CI — .ci/setup.d/20-prometheus.sh installs them")
        pytest.skip("prometheus/promtool not installed (apt-get install prometheus)")
    data = tmp_path / "tsdb"
    subprocess.run(
        ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(FIXTURES / "history.om"), str(data)],
        check=True, capture_output=True,
    )
    config = tmp_path / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1m\nscrape_configs: []\n")
    port = _free_port()
    proc = subprocess.Popen(
        ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={data}",
         "--storage.tsdb.retention.time=100y", f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                pytest.fail("prometheus did not become ready within 30 s")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_real_prometheus_history_through_the_connector(prometheus, tmp_path):
    window = FetchWindow(start=T0, end=T0 + timedelta(minutes=10))
    options = PrometheusOptions(url=prometheus, step="15s", method="POST")
    batches = list(PrometheusConnector(options, cluster="lab").fetch(window))
    assert len(batches) == 1
    rows = batches[0].rows
    assert rows.columns == METRICS.names and batches[0].fetched == rows.height
    assert set(rows["metric"].unique()) == {
        "DCGM_FI_DEV_XID_ERRORS", "DCGM_EXP_XID_ERRORS_COUNT", "DCGM_FI_DEV_GPU_TEMP",
        "node_infiniband_link_downed_total", "node_infiniband_symbol_error_total",
        "node_infiniband_state_id",
    }
    gpu = rows.filter(pl.col("metric") == "DCGM_FI_DEV_XID_ERRORS").sort("ts")
    assert gpu["node"].unique().to_list() == ["gpu-node-001"] and gpu["gpu"][0] == "0"
    assert gpu["value"].unique(maintain_order=True).to_list() == [0.0, 79.0, 48.0]
    ib = rows.filter(pl.col("metric").str.starts_with("node_infiniband"))
    assert ib.select("node", "hca", "port").unique().rows() == [("gpu-node-002", "mlx5_0", "1")]
    assert rows["origin"].str.contains("/api/v1/query_range").all()

    # Chunked fetch (5 points per request) returns exactly the same samples.
    chunked = PrometheusOptions(url=prometheus, step="15s", method="GET", max_points=5)
    again = next(PrometheusConnector(chunked, cluster="lab").fetch(window)).rows
    key = ["metric", "labels", "ts"]
    assert again.height == rows.height
    assert again.select(key + ["value"]).sort(key).equals(rows.select(key + ["value"]).sort(key))

    # The metric rules fire on this history: one XID (gauge and counter), one link down.
    events = metric_events(rows.with_columns(cluster=pl.lit("lab")), load_rule_pack([RULES]))
    fired = events.group_by("rule_id").agg(pl.len())
    assert dict(fired.select("rule_id", "len").iter_rows()) == {
        "metric.gpu_xid_gauge": 1,  # 0→79 and 79→48 fold within one dedupe window
        "metric.gpu_xid_counter": 1,
        "metric.ib_link_downed": 1,
        "metric.ib_port_state_down": 1,
        "metric.ib_symbol_errors": 1,
    }
    link = events.filter(pl.col("rule_id") == "metric.ib_link_downed").row(0, named=True)
    assert link["node"] == "gpu-node-002" and link["port"] == "mlx5_0:1"
    assert link["ts"] == T0 + timedelta(seconds=15 * 25)
    assert link["cause"] == "network.link_down" and link["role"] == "root_candidate"

    lake = Lake(tmp_path / "lake")
    report = lake.land("metrics", rows, cluster="lab", input_id=batches[0].input_id)
    assert report.rows == rows.height
    assert lake.scan("metrics").collect().height == rows.height

