"""Nodes whose logs use another name than the scheduler's, end to end: the topology's
``node_alias`` rows (``ingest topology --aliases``) map a node's old hostname, or a Cray
blade's xname, to its Slurm name as its logs land, so the kernel's XID on it attaches to the
job that ran there. Without the map the XID reaches no attempt; logs landed before the map
keep the alias until they are landed again."""

from __future__ import annotations

from datetime import date

import pytest
from typer.testing import CliRunner

from engine.cli import app
from engine.run import landing_lake, run_attribution
from ingest.connectors import run_connector
from ingest.connectors.base import ConnectorError
from ingest.connectors.slurm import SlurmConnector, SlurmOptions
from ingest.connectors.topology import TopologyConnector, TopologyOptions
from ingest.files import land_log_files
from tests.end_to_end import ALIVE, ITERATION, syslog, verdicts_by_job, watchdog_timeout

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
501|501|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|gpu-b[11-12]|gres/gpu=16,node=2
502|502|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|nid[001235-001236]|gres/gpu=8,node=2
"""
# https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1151
XID_79 = "kernel: NVRM: Xid (PCI:0000:06:00): 79, GPU has fallen off the bus."
ALIASES = "node,alias\ngpu-b12,ml-node-23\nnid001236,x1000c1s2b0n0\n"


def _logs(root):
    """gpu-b12's syslog under its old hostname, nid001236's under its xname (a Cray blade's
    console name), each with an XID 79 at 10:12; every rank timed out ten minutes later."""
    logs = root / "logs"
    logs.mkdir()
    for node, host in (("gpu-b11", "gpu-b11"), ("gpu-b12", "ml-node-23"), ("nid001235", "nid001235"),
                       ("nid001236", "x1000c1s2b0n0")):
        lines = [("10:05:00", ALIVE), ("10:25:00", ALIVE)]
        if host != node:
            lines.insert(1, ("10:12:00", XID_79))
        (logs / f"{node}.log").write_text(syslog(host, *lines))
    for job, ranks in (("501", 16), ("502", 8)):
        (logs / f"slurm-{job}.out").write_text(f"0: [2026-11-20 10:11:00,000] {ITERATION}\n" + "".join(
            watchdog_timeout(r, "10:22:00") + "\n" for r in range(ranks)))
    return logs


def _aliases(root):
    path = root / "aliases.csv"
    path.write_text(ALIASES)
    return TopologyConnector(TopologyOptions(aliases_file=path), "c1")


def test_a_nodes_xid_under_another_name_is_that_nodes(tmp_path):
    verdicts = verdicts_by_job(tmp_path, SACCT, _logs(tmp_path), date(2026, 11, 20), connectors=(_aliases(tmp_path),))
    for job, node in (("501", "gpu-b12"), ("502", "nid001236")):
        v = verdicts[job]
        assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("gpu", "gpu.fallen_off_bus", [node])


def test_without_the_map_the_xid_reaches_no_attempt(tmp_path):
    verdicts = verdicts_by_job(tmp_path, SACCT, _logs(tmp_path), date(2026, 11, 20))
    assert verdicts["501"]["cause"] != "gpu.fallen_off_bus"
    assert "gpu-b12" not in verdicts["501"]["culprit_nodes"]


def test_logs_landed_before_the_map_take_it_when_landed_again(tmp_path):
    (tmp_path / "sacct.txt").write_text(SACCT)
    lake = landing_lake(tmp_path / "lake")
    run_connector(lake, SlurmConnector(SlurmOptions(sacct_file=[tmp_path / "sacct.txt"], timezone="UTC"), "c1"), None)
    logs = _logs(tmp_path)
    land_log_files(lake, [logs], cluster="c1")
    assert run_connector(lake, _aliases(tmp_path), None).ok
    assert run_attribution(lake, date(2026, 11, 20), date(2026, 11, 20)).verdicts.filter(
        job_id="501")["cause"].item() != "gpu.fallen_off_bus"
    land_log_files(lake, [logs], cluster="c1")
    verdict = run_attribution(lake, date(2026, 11, 20), date(2026, 11, 20)).verdicts.filter(job_id="501")
    assert verdict.select("cause", "culprit_nodes").row(0) == ("gpu.fallen_off_bus", ["gpu-b12"])


def test_the_cli_lands_aliases(tmp_path):
    (tmp_path / "aliases.csv").write_text(ALIASES)
    lake = tmp_path / "lake"
    result = CliRunner().invoke(app, ["ingest", "topology", "--lake", str(lake), "--cluster", "c1",
                                      "--aliases", str(tmp_path / "aliases.csv")])
    assert result.exit_code == 0, result.output
    rows = landing_lake(lake).scan("topology").collect()
    assert sorted(rows.select("node", "alias").rows()) == [("gpu-b12", "ml-node-23"), ("nid001236", "x1000c1s2b0n0")]


@pytest.mark.parametrize(("text", "message"), [
    ("node,alias\ngpu-b12,GPU-B12.cluster.local\n", "names its own node"),
    ("node,alias\ngpu-b12,old-7\ngpu-b13,old-7\n", "given for two nodes"),
    ("node,name\ngpu-b12,old-7\n", r"missing \['alias'\]"),
])
def test_bad_alias_files_fail_with_the_reason(tmp_path, text, message):
    path = tmp_path / "aliases.csv"
    path.write_text(text)
    with pytest.raises(ConnectorError, match=message):
        list(TopologyConnector(TopologyOptions(aliases_file=path), "c1").fetch(None))
