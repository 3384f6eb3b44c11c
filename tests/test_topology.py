"""Topology connector: CSV/YAML topology files and ``ibnetdiscover`` output.

Fixture sources are in ``tests/fixtures/topology/README.md``.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from ingest.connectors import get_connector, run_connector
from ingest.connectors.base import ConnectorError
from ingest.connectors.topology import (
    TopologyConnector,
    TopologyOptions,
    normalize_pci_expr,
    read_ibnetdiscover,
)
from ingest.lake import Lake
from ingest.schema import TOPOLOGY

FIXTURES = Path(__file__).parent / "fixtures" / "topology"


def _fetch(**files) -> list:
    return list(TopologyConnector(TopologyOptions(**files), cluster="c1").fetch(None))


def test_hca_ports_csv_and_gpus_yaml():
    ports, gpus = _fetch(hca_ports_file=FIXTURES / "hca_ports.csv", gpus_file=FIXTURES / "gpus.yaml")
    assert ports.rows.columns == TOPOLOGY.names and gpus.rows.columns == TOPOLOGY.names
    assert ports.rows.select("kind", "node", "hca", "port", "switch", "switch_port").row(0) == (
        "hca_port", "gpu-node-001", "mlx5_0", "1", "leaf-sw-01", "17")
    assert ports.rows["origin"][0].endswith("hca_ports.csv:2")
    assert gpus.rows.select("node", "gpu", "pci").rows() == [
        ("gpu-node-001", "0", "0000:18:00.0"),
        ("gpu-node-001", "1", "0000:2a:00.0"),
        ("gpu-node-002", "0", "0000:18:00.0"),
    ]
    assert gpus.rows["kind"].unique().to_list() == ["gpu"] and gpus.rows["hca"].is_null().all()


def test_pci_spellings_normalize_to_the_kernel_form():
    raw = pl.Series(["00000000:18:00.0", "PCI:0000:9B:00", "18:00.1", "0002:00:00", "not-pci"])
    out = pl.select(normalize_pci_expr(pl.lit(raw))).to_series().to_list()
    assert out == ["0000:18:00.0", "0000:9b:00.0", "0000:18:00.1", "0002:00:00.0", None]


def test_ibnetdiscover_ca_ports_to_switch_ports():
    rows = read_ibnetdiscover(FIXTURES / "ibnetdiscover.txt")
    got = rows.select("node", "hca", "port", "switch", "switch_port").rows()
    assert got == [
        ("Mellanox", "Technologies Aggregation Node", "1", "MF0;L0_R05_B16_I20:MQM8700/U1", "41"),
        ("H_32000", "HCA-1 (Mellanox HCA)", "1", "MF0;L0_R05_B16_I20:MQM8700/U1", "20"),
        ("gpu-node-001", "mlx5_0", "1", "Voltaire 4036 # v4036", "4"),
    ]
    assert rows["origin"][2].endswith("ibnetdiscover.txt:32")
    assert rows.columns == TOPOLOGY.names


def test_topology_lands_and_relanding_replaces_rows(tmp_path):
    lake = Lake(tmp_path / "lake")
    for batch in _fetch(hca_ports_file=FIXTURES / "hca_ports.csv", gpus_file=FIXTURES / "gpus.yaml"):
        lake.land("topology", batch.rows, cluster="c1")
    moved = tmp_path / "moved.csv"
    moved.write_text("node,hca,port,switch,switch_port\ngpu-node-001,mlx5_0,1,leaf-sw-09,3\n")
    for batch in _fetch(hca_ports_file=moved):
        lake.land("topology", batch.rows, cluster="c1")
    table = lake.scan("topology").collect()
    assert table.height == 6
    row = table.filter(pl.col("node") == "gpu-node-001", pl.col("hca") == "mlx5_0")
    assert row.select("switch", "switch_port").row(0) == ("leaf-sw-09", "3")


@pytest.mark.parametrize(("name", "text", "message"), [
    ("a.csv", "node,hca,port,switch\nn1,mlx5_0,1,s1\n", r"missing \['switch_port'\]"),
    ("b.csv", "node,hca,port,switch,switch_port,speed\nn1,mlx5_0,1,s1,2,HDR\n", r"unknown \['speed'\]"),
    ("c.csv", "node,hca,port,switch,switch_port\nn1,mlx5_0,1,,2\n", r"empty values in rows \[2\]"),
    ("d.csv", "node,hca,port,switch,switch_port\nn1,mlx5_0,1,s1,2\nn1,mlx5_0,1,s2,3\n", "listed twice"),
    ("e.yaml", "node: n1\n", "YAML list of mappings"),
    ("f.json", "[]", "unknown file type"),
])
def test_bad_hca_port_files_fail_with_the_reason(tmp_path, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConnectorError, match=message):
        _fetch(hca_ports_file=path)


def test_hca_ports_may_list_each_ports_pci_function(tmp_path):
    """The optional ``pci`` column: normalized like a GPU's, empty where unknown, an
    unreadable address an error naming the row."""
    ports = tmp_path / "p.csv"
    ports.write_text("node,hca,port,switch,switch_port,pci\nn1,mlx5_0,1,leaf01,1,00000000:9C:00.0\n"
                     "n1,mlx5_1,1,leaf01,2,\n")
    (batch,) = _fetch(hca_ports_file=ports)
    assert batch.rows.select("hca", "pci").rows() == [("mlx5_0", "0000:9c:00.0"), ("mlx5_1", None)]
    ports.write_text("node,hca,port,switch,switch_port,pci\nn1,mlx5_0,1,leaf01,1,9c\n")
    with pytest.raises(ConnectorError, match=r"unreadable PCI addresses at \['.*p.csv:2'\]"):
        _fetch(hca_ports_file=ports)


def test_bad_pci_and_bad_ibnetdiscover_are_errors(tmp_path):
    gpus = tmp_path / "g.csv"
    gpus.write_text("node,gpu,pci\nn1,0,zz:zz\n")
    with pytest.raises(ConnectorError, match="unreadable PCI addresses"):
        _fetch(gpus_file=gpus)
    notib = tmp_path / "x.txt"
    notib.write_text("hello\n")
    with pytest.raises(ConnectorError, match="is it `ibnetdiscover` output"):
        _fetch(ibnetdiscover_file=notib)
    with pytest.raises(ConnectorError, match="no file given"):
        _fetch()


def test_registered_connector_runs_into_the_lake(tmp_path):
    cls = get_connector("topology")
    connector = cls(cls.Options(ibnetdiscover_file=FIXTURES / "ibnetdiscover.txt"), cluster="c1")
    report = run_connector(Lake(tmp_path / "lake"), connector, None)
    assert report.ok and report.tables == {"topology": 3} and report.fetched == 3


def test_the_cli_lands_topology_files_and_says_what_is_missing(tmp_path):
    from typer.testing import CliRunner

    from engine.cli import app

    lake = tmp_path / "lake"
    args = ["ingest", "topology", "--lake", str(lake), "--cluster", "c1"]
    result = CliRunner().invoke(app, [*args, "--hca-ports", str(FIXTURES / "hca_ports.csv"),
                                      "--gpus", str(FIXTURES / "gpus.yaml")])
    assert result.exit_code == 0, result.output
    rows = Lake(lake).scan("topology").collect()
    assert set(rows["kind"]) == {"hca_port", "gpu"} and (rows["cluster"] == "c1").all()
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1 and "no file given" in result.output


def test_the_cli_warns_when_ibnetdiscover_names_hcas_by_ordinal(tmp_path):
    """Older OFED's node descriptions say ``<host> HCA-1``; the kernel and NCCL say
    ``mlx5_0``: such ports map to no culprit port, and the landing says so."""
    from typer.testing import CliRunner

    from engine.cli import app

    args = ["ingest", "topology", "--lake", str(tmp_path / "lake"), "--cluster", "c1",
            "--ibnetdiscover", str(FIXTURES / "ibnetdiscover.txt")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "1 node(s) (H_32000) name their HCAs 'HCA-<n>'" in " ".join(result.output.split())
