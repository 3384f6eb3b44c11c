"""The ``hca_port`` python rule, end to end: a transceiver event names its HCA only by PCI
address; a later link line of the same node names the device and port, and the verdict's
culprit port is that port; without such a line, the topology's HCA port listed with that
PCI function is. Real line formats (``rules/fabric.yaml`` cites them), landed
through the Slurm connector and the files landing, attributed by a run."""

from __future__ import annotations

from datetime import date

from ingest.connectors.topology import TopologyConnector, TopologyOptions

from tests.end_to_end import ITERATION, syslog, verdicts_by_job

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
900|900|train|alice|FAILED|1:0|2026-11-20T08:00:00|2026-11-20T09:00:00|n1|gres/gpu=8,node=1
"""

MODULE = "kernel: mlx5_core 0000:9c:00.0: mlx5_port_module_event:1131:(pid 0): Port module event[error]: module 2, Cable error, High Temperature"
NETDEV_DOWN = "kernel: mlx5_core 0000:9c:00.0 enp156s0np0: Link down"
PORT_DOWN = "kernel: mlx5_core 0000:9c:00.0 mlx5_2: Port: 1 Link DOWN"


def test_a_module_event_takes_the_port_its_hca_names_elsewhere(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "n1.log").write_text(syslog("n1", ("08:40:00", MODULE), ("08:41:03", NETDEV_DOWN), ("08:41:03", PORT_DOWN)))
    (logs / "slurm-900.out").write_text(f"[2026-11-20 08:10:00,000] {ITERATION}\n")
    v = verdicts_by_job(tmp_path, SACCT, logs, date(2026, 11, 20))["900"]
    assert (v["cause"], v["culprit_nodes"], v["culprit_ports"]) == ("network.transceiver_error", ["n1"], ["mlx5_2:1"])


def test_a_module_event_takes_the_port_the_topology_lists_for_its_pci_function(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "n1.log").write_text(syslog("n1", ("08:40:00", MODULE), ("08:41:03", NETDEV_DOWN)))
    (logs / "slurm-900.out").write_text(f"[2026-11-20 08:10:00,000] {ITERATION}\n")
    ports = tmp_path / "hca_ports.csv"
    ports.write_text("node,hca,port,switch,switch_port,pci\nn1,mlx5_0,1,leaf01,1,0000:18:00.0\n"
                     "n1,mlx5_2,1,leaf01,3,0000:9C:00.0\nn2,mlx5_2,1,leaf01,4,0000:9c:00.0\n")
    topology = TopologyConnector(TopologyOptions(hca_ports_file=ports), "c1")
    v = verdicts_by_job(tmp_path, SACCT, logs, date(2026, 11, 20), connectors=(topology,))["900"]
    # the cabling names the switch port at the other end too
    assert (v["cause"], v["culprit_nodes"], v["culprit_ports"]) == (
        "network.transceiver_error", ["n1"], ["mlx5_2:1", "switch:leaf01/3"])
