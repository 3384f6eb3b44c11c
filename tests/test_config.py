"""lake.yaml validation (located errors), the nightly ingest, and the connector registry."""

from __future__ import annotations

import shutil
from datetime import date
from importlib.metadata import EntryPoint
from pathlib import Path

import polars as pl
import pytest

import ingest.connectors as registry
from ingest.config import ConfigError, day_window, ingest_from_config, load_config
from ingest.connectors import RegistryError, get_connector, run_connector
from ingest.connectors.base import Batch, Connector, ConnectorError, ConnectorOptions, TransientError
from ingest.connectors.slurm import SlurmConnector
from ingest.lake import Lake

FIXTURES = Path(__file__).parent / "fixtures"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "lake.yaml"
    path.write_text(text)
    return path


def problems(path: Path) -> list[tuple[int | None, str, str]]:
    with pytest.raises(ConfigError) as info:
        load_config(path)
    return info.value.problems


def test_example_config_loads_with_paths_relative_to_it():
    config = load_config(FIXTURES / "lake.example.yaml")
    assert config.lake == FIXTURES.resolve() / "lake"
    kinds = [(c.cluster, c.type) for c in config.connectors]
    assert kinds == [("lab", "slurm"), ("prod", "slurm"), ("prod", "prometheus")]
    lab = config.connectors[0]
    assert lab.options.sacct_file == [FIXTURES.resolve() / "slurm" / "parsable2_all_steps_D.txt",
                                      FIXTURES.resolve() / "slurm" / "sacct_json_all.json"]
    assert (lab.line, config.connectors[1].options.timezone) == (8, "Europe/Berlin")


def test_every_problem_is_reported_with_its_line_and_field(tmp_path):
    path = write(tmp_path, """\
lake: ./lake
clusters:
  lab:
    connectors:
      - type: slurm
        options:
          sacct_bin: sacct
          timezone: Mars/Base
          sacct_binary: x
      - type: slrum
      - type: prometheus
        options:
          url: http://p:9090
          token: hunter2
""")
    found = problems(path)
    located = {(line, field) for line, field, _ in found}
    assert (8, "clusters.lab.connectors[0].options.timezone") in located
    assert (9, "clusters.lab.connectors[0].options.sacct_binary") in located
    assert (10, "clusters.lab.connectors[1].type") in located
    assert (14, "clusters.lab.connectors[2].options.token") in located
    messages: dict[str, str] = {}
    for _, field, message in found:
        messages[field] = messages.get(field, "") + message + "\n"
    assert "did you mean 'slurm'?" in messages["clusters.lab.connectors[1].type"]
    assert "token_env" in messages["clusters.lab.connectors[2].options.token"]
    assert "unknown time zone 'Mars/Base'" in messages["clusters.lab.connectors[0].options.timezone"]
    text = str(ConfigError(path, found))
    assert f"{path}:10: clusters.lab.connectors[1].type: unknown connector type 'slrum'" in text


def test_structure_errors_and_duplicate_keys(tmp_path):
    found = problems(write(tmp_path, "lake: ./l\nlake: ./m\nclusterz: {}\n"))
    located = {(line, field) for line, field, _ in found}
    assert (2, "lake") in located  # duplicate
    assert (3, "clusterz") in located  # unknown key
    assert any(field == "clusters" and "required" in msg.lower() for _, field, msg in found)
    bad_yaml = problems(write(tmp_path, "lake: [\n"))
    assert bad_yaml[0][2].startswith("not valid YAML")


def test_cluster_names_must_be_directory_safe(tmp_path):
    found = problems(write(tmp_path, "lake: l\nclusters:\n  'a/b':\n    connectors: [{type: slurm}]\n"))
    assert found[0][:2] == (3, "clusters.a/b")


class Exploding(Connector):
    """A connector with a bug (not a ConnectorError)."""

    name = "exploding"
    Options = ConnectorOptions

    def fetch(self, window):
        raise ZeroDivisionError("bug")
        yield


def test_ingest_from_config_runs_every_connector_and_survives_failures(tmp_path, monkeypatch):
    shutil.copytree(FIXTURES / "slurm", tmp_path / "slurm")
    monkeypatch.setitem(registry.REGISTRY, "exploding", f"{__name__}:Exploding")
    path = write(tmp_path, """\
lake: lake
clusters:
  lab:
    connectors:
      - type: exploding
      - type: slurm
        options: {sacct_bin: /nonexistent/sacct}
      - type: slurm
        options: {sacct_file: [slurm/parsable2_alloc_D.txt]}
""")
    reports = ingest_from_config(path, date(2026, 11, 30))
    assert [r.error is None for r in reports] == [False, False, True]
    assert reports[0].error == "ZeroDivisionError: bug"
    assert "not found" in reports[1].error and reports[1].landed == 0
    assert (reports[2].landed, reports[2].rejected, reports[2].cluster) == (14, 0, "lab")
    assert Lake(tmp_path / "lake").scan("attempts", clusters=["lab"]).collect().height == 14
    assert reports[2].to_dict()["inputs"] == [str(tmp_path / "slurm" / "parsable2_alloc_D.txt")]


def test_topology_lands_first_so_its_aliases_name_the_nights_logs(tmp_path):
    """A node's syslog under its old hostname, listed before the topology that names the
    alias: the nightly ingest lands the topology first, so the log's lines name the node."""
    (tmp_path / "aliases.csv").write_text("node,alias\ngpu-b12,ml-node-23\n")
    # drivers/net/ethernet/mellanox/mlx5/core: a port's link going down (leptonai/gpud#1209)
    (tmp_path / "messages").write_text(
        "2026-11-30T10:00:00+00:00 ml-node-23 kernel: mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link DOWN\n")
    path = write(tmp_path, """\
lake: lake
clusters:
  lab:
    connectors:
      - type: files
        options: {paths: [messages], source: syslog}
      - type: topology
        options: {aliases_file: aliases.csv}
""")
    reports = ingest_from_config(path, date(2026, 11, 30))
    assert [r.error for r in reports] == [None, None]
    assert Lake(tmp_path / "lake").scan("observations").collect()["node"].to_list() == ["gpu-b12"]


def test_day_window_is_utc_midnight_to_midnight():
    window = day_window(date(2026, 11, 30))
    assert (window.start.isoformat(), window.end.isoformat()) == (
        "2026-11-30T00:00:00+00:00", "2026-12-01T00:00:00+00:00")


# ------------------------------------------------------------------ registry


def test_get_connector_imports_lazily_and_suggests_names():
    assert get_connector("slurm") is SlurmConnector
    with pytest.raises(RegistryError, match="unknown connector type 'prometeus' — did you mean 'prometheus'"):
        get_connector("prometeus")


def test_missing_optional_module_only_breaks_its_own_connector(monkeypatch):
    monkeypatch.setitem(registry.REGISTRY, "ghost", "ingest.connectors.no_such_module:Ghost")
    with pytest.raises(RegistryError, match="needs module ingest.connectors.no_such_module"):
        get_connector("ghost")
    assert get_connector("slurm") is SlurmConnector


def _entry_points(*eps: EntryPoint):
    return lambda group: [ep for ep in eps if ep.group == group]


def test_entry_point_connectors_are_found_and_clashes_refused(monkeypatch):
    extra = EntryPoint("exploding", f"{__name__}:Exploding", registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(registry, "entry_points", _entry_points(extra))
    assert get_connector("exploding") is Exploding
    clash = EntryPoint("slurm", f"{__name__}:Exploding", registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(registry, "entry_points", _entry_points(clash))
    with pytest.raises(RegistryError, match="connector 'slurm' .* clashes with ingest.connectors.slurm:SlurmConnector"):
        get_connector("slurm")


class HalfWay(Connector):
    """Yields one complete batch, then fails on the next input."""

    name = "halfway"
    Options = ConnectorOptions

    def fetch(self, window):
        good = pl.select(
            pl.datetime(2026, 11, 30, time_zone="UTC").dt.cast_time_unit("us").alias("ts_ingest"),
            pl.lit("x").alias("source"), pl.lit("a:1").alias("origin"), pl.lit("r").alias("reason"),
            pl.lit("raw").alias("raw"), pl.lit("a").alias("input_id"),
        )
        yield Batch("rejects", good, self.cluster, "a", source="x", fetched=3)
        raise TransientError("halfway: HTTP 503 from the server")


def test_run_connector_keeps_complete_batches_and_records_the_error(tmp_path):
    lake = Lake(tmp_path / "lake")
    report = run_connector(lake, HalfWay(ConnectorOptions(), "c"), day_window(date(2026, 11, 30)))
    assert (report.fetched, report.rejected, report.landed, report.inputs) == (3, 1, 0, ["a"])
    assert report.transient and report.error == "halfway: HTTP 503 from the server"
    assert lake.scan("rejects").collect().height == 1


def test_run_connector_records_a_terminal_error(tmp_path):
    class Broken(Connector):
        name = "broken"
        Options = ConnectorOptions

        def fetch(self, window):
            raise ConnectorError("broken: bad credentials")
            yield

    report = run_connector(Lake(tmp_path), Broken(ConnectorOptions(), "c"), None)
    assert (report.ok, report.transient, report.error) == (False, False, "broken: bad credentials")


def test_the_cli_prints_a_bad_config_in_one_message_and_exits_2(tmp_path):
    from typer.testing import CliRunner

    from engine.cli import app

    (tmp_path / "lake.yaml").write_text("lake: ./l\nclusters:\n  lab:\n    conectors: []\n")
    result = CliRunner().invoke(app, ["ingest", "--config", str(tmp_path / "lake.yaml"), "--day", "2026-11-30"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "lake.yaml:4: clusters.lab.conectors" in result.output
