"""The ``node_lost`` python rule, end to end: a node of a NODE_FAIL attempt that booted soon
after the attempt ended is the node Slurm lost; a boot hours later, or no boot, names no one.
Real boot lines, landed through the Slurm connector and the files landing, attributed by a
run."""

from __future__ import annotations

from datetime import date

import pytest

from tests.end_to_end import ALIVE, BOOT, ITERATION, syslog, verdicts_by_job

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
700|700|train|alice|NODE_FAIL|0:0|2026-11-20T08:00:00|2026-11-20T09:00:00|n[1-2]|gres/gpu=16,node=2
701|701|train|alice|NODE_FAIL|0:0|2026-11-20T08:00:00|2026-11-20T09:00:00|n[3-4]|gres/gpu=16,node=2
702|702|train|alice|NODE_FAIL|0:0|2026-11-20T08:00:00|2026-11-20T09:00:00|n[5-6]|gres/gpu=16,node=2
"""


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("lost")
    logs = root / "logs"
    logs.mkdir()
    for node in ("n1", "n3", "n5", "n6"):
        (logs / f"{node}.log").write_text(syslog(node, ("07:50:00", ALIVE), ("09:30:00", ALIVE)))
    # n2 went silent during job 700 and booted 25 minutes after Slurm gave up on it.
    (logs / "n2.log").write_text(syslog("n2", ("07:50:00", ALIVE), ("09:25:00", f"kernel: {BOOT}")))
    # n4 booted too, but three hours after job 701 ended: maintenance, not this failure.
    (logs / "n4.log").write_text(syslog("n4", ("07:50:00", ALIVE), ("12:00:00", f"kernel: {BOOT}")))
    for job in ("700", "701", "702"):
        (logs / f"slurm-{job}.out").write_text(f"[2026-11-20 08:10:00,000] {ITERATION}\n")
    return verdicts_by_job(root, SACCT, logs, date(2026, 11, 20))


def test_the_node_that_booted_after_a_node_fail_is_the_lost_node(verdicts):
    v = verdicts["700"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("host", "host.node_failure", ["n2"])
    assert any(e["rule_id"] == "node_lost" and "booted again" in e["message"] for e in v["evidence"])


def test_a_boot_hours_later_names_no_node(verdicts):
    assert (verdicts["701"]["cause"], verdicts["701"]["culprit_nodes"]) == ("host.node_failure", [])


def test_without_a_boot_the_state_alone_names_no_node(verdicts):
    assert (verdicts["702"]["cause"], verdicts["702"]["culprit_nodes"]) == ("host.node_failure", [])
