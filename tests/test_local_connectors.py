"""The ``files`` and ``static`` connectors: a nightly config can land local inputs, with
the same rows as the ``ingest files``/``ingest static`` commands."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from typer.testing import CliRunner

from engine.cli import app
from engine.config import EngineConfig
from engine.extract import landing_derivation
from engine.oneshot import SAMPLES
from engine.rules.loader import load_rule_pack
from engine.run import COUNTS, connector_failures
from ingest.config import ingest_from_config
from ingest.connectors import ConnectorReport
from ingest.files import land_log_files
from ingest.lake import Lake
from ingest.static import land_static_context


def _nightly(tmp_path: Path, connectors: str) -> list[ConnectorReport]:
    """The reports of ``ingest --config`` for 2026-11-28 into ``tmp_path/lake``, the cluster
    ``demo`` having the ``connectors`` (YAML list items, indented by six spaces)."""
    config = tmp_path / "lake.yaml"
    config.write_text(f"lake: {tmp_path / 'lake'}\nclusters:\n  demo:\n    connectors:\n{connectors}")
    return ingest_from_config(config, date(2026, 11, 28))


def test_config_with_local_connectors_lands_what_the_commands_land(tmp_path):
    reports = _nightly(tmp_path, f"""\
      - type: static
        options: {{path: {SAMPLES / 'context.yaml'}}}
      - type: files
        options: {{paths: [{SAMPLES / 'jobs'}], source: app}}
      - type: files
        options: {{paths: [{SAMPLES / 'nodes' / 'gpu003' / 'syslog'}], node: gpu003}}
""")
    assert [r.ok for r in reports] == [True, True, True], [r.error for r in reports]
    by_config = Lake(tmp_path / "lake")

    direct = Lake(tmp_path / "direct")
    land_static_context(direct, SAMPLES / "context.yaml")
    land_log_files(direct, [SAMPLES / "jobs"], cluster="demo", source="app")
    land_log_files(direct, [SAMPLES / "nodes" / "gpu003" / "syslog"], cluster="demo", node="gpu003")

    for table in ("attempts", "observations", "rejects"):
        a = by_config.scan(table).collect()
        b = direct.scan(table).collect()
        assert a.height == b.height, table
    key = ["origin"]
    obs_a = by_config.scan("observations").collect().sort(key).drop("day")
    obs_b = direct.scan("observations").collect().sort(key).drop("day")
    assert obs_a.equals(obs_b)
    assert reports[1].landed == obs_a.filter(obs_a["source"] == "app").height


def test_missing_files_fail_that_connector_only_and_stay_in_coverage(tmp_path):
    """A failing connector never stops the others; two ``files`` connectors of one cluster
    are told apart (``files#1``, ``files#2``), so the first failing stays in the attempts'
    coverage though the second succeeded."""
    reports = _nightly(tmp_path, f"""\
      - type: files
        options: {{paths: [{tmp_path / 'nope.log'}]}}
      - type: static
        options: {{path: {SAMPLES / 'context.yaml'}}}
      - type: files
        options: {{paths: [{SAMPLES / 'jobs'}], source: app}}
""")
    assert [(r.connector, r.ok) for r in reports] == [("files#1", False), ("static", True), ("files#2", True)]
    assert "no such file" in reports[0].error
    lake = Lake(tmp_path / "lake")
    assert lake.scan("attempts").collect().height == 20
    gaps = connector_failures(lake, lake.scan("attempts").collect(), EngineConfig())
    assert set(gaps["source"]) == {"files#1"} and gaps["error"].str.contains("no such file").all()


def test_a_gzip_file_cut_short_lands_up_to_the_cut_and_fails_its_connector(tmp_path):
    """The night's node logs land, the cut rotation's lines up to the cut too, and the
    connector reports the file: the window's verdicts say it needs a good copy."""
    import gzip

    logs = tmp_path / "logs"
    logs.mkdir()
    body = (SAMPLES / "nodes" / "gpu003" / "syslog").read_bytes()
    whole = gzip.compress(body * 20)
    (logs / "syslog.2.gz").write_bytes(whole[: len(whole) // 2])
    (logs / "syslog").write_bytes(body)
    (report,) = _nightly(tmp_path, f"""\
      - type: files
        options: {{paths: [{logs}], node: gpu003}}
""")
    assert "gzip data cut short or corrupt in" in report.error and "syslog.2.gz" in report.error
    assert report.landed > body.count(b"\n")


def test_the_ingest_commands_extract_every_file_they_land(tmp_path):
    """``causelake ingest --config`` and ``causelake ingest files`` land each observations
    file with its events for the installed pack, which runs then read."""
    config = tmp_path / "lake.yaml"
    config.write_text(f"""
lake: {tmp_path / 'nightly'}
clusters:
  demo:
    connectors:
      - type: files
        options: {{paths: [{SAMPLES / 'jobs'}], source: app}}
""")
    nightly = CliRunner().invoke(app, ["ingest", "--config", str(config), "--day", "2026-11-28"])
    direct = CliRunner().invoke(app, ["ingest", "files", str(SAMPLES / "nodes" / "gpu003" / "syslog"),
                                      "--lake", str(tmp_path / "direct"), "--cluster", "demo", "--node", "gpu003"])
    assert nightly.exit_code == 0 and direct.exit_code == 0, nightly.output + direct.output
    for lake in (Lake(tmp_path / "nightly"), Lake(tmp_path / "direct")):
        files = lake.files("observations")
        for name in (landing_derivation(load_rule_pack()).name, COUNTS.name):
            assert files and None not in lake.derived(name, files), name
