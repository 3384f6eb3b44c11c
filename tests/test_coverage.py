"""Coverage: a connector that failed for an attempt's window is reported, and lowers quality."""

from __future__ import annotations

from engine.config import EngineConfig
from engine.run import connector_failures
from ingest.connectors import ConnectorReport, record_ingest
from ingest.connectors.base import FetchWindow
from ingest.lake import Lake
from tests.engine_frames import at, attempts


def test_failed_connector_is_in_the_coverage_until_a_later_ingest_succeeds(tmp_path):
    lake = Lake(tmp_path)
    att = attempts({"attempt_id": "a", "start_ts": at(0), "end_ts": at(60)},
                   {"attempt_id": "far", "start_ts": at(60 * 30), "end_ts": at(60 * 31)})
    window = FetchWindow(start=at(-60), end=at(120))
    record_ingest(lake, window, [ConnectorReport(connector="prometheus", cluster="c", error="HTTP 503 after 5 tries")])
    gaps = connector_failures(lake, att, EngineConfig())
    assert gaps.to_dicts() == [{"attempt_id": "a", "source": "prometheus", "rows": 0,
                                "error": "connector failed: HTTP 503 after 5 tries"}]
    record_ingest(lake, window, [ConnectorReport(connector="prometheus", cluster="c")])
    assert connector_failures(lake, att, EngineConfig()).is_empty()


def test_other_clusters_failures_do_not_count(tmp_path):
    lake = Lake(tmp_path)
    record_ingest(lake, FetchWindow(start=at(-60), end=at(120)),
                  [ConnectorReport(connector="loki", cluster="elsewhere", error="down")])
    assert connector_failures(lake, attempts({"attempt_id": "a"}), EngineConfig()).is_empty()
