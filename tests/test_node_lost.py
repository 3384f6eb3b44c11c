"""The ``node_lost`` python rule, end to end: a node of a NODE_FAIL attempt that booted soon
after the attempt ended is the node Slurm lost; a boot hours later, or no boot, names no one.
Real boot lines, landed through the Slurm connector and the files landing, attributed by a
run."""

from __future__ import annotations

from datetime import date

import pytest

from tests.end_to_end import verdicts_by_job

# https://github.com/velvet-os/imagebuilder/issues/36
BOOT = ("[    0.000000] Linux version 5.15.22-stb-mt8+ (root@aarch64) (gcc (Debian 10.2.1-6) 10.2.1 20210110, "
        "GNU ld (GNU Binutils for Debian) 2.35.2) #5 SMP PREEMPT Tue Feb 22 21:52:33 CET 2022")
# https://github.com/systemd/systemd/issues/14829 (an ordinary daemon line: the node is alive)
ALIVE = "systemd[1]: Started Session 3 of user root."
# https://github.com/bigscience-workshop/bigscience/blob/9e64edec2ad1fb9263bf39ba616a84ff64b4d947/train/tr11-176B-ml/chronicles.md
ITERATION = "iteration   42784/ 115311 | consumed samples:    71463856 | elapsed time per iteration (s): 111.14"

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
700|700|train|alice|NODE_FAIL|0:0|2026-11-20T08:00:00|2026-11-20T09:00:00|n[1-2]|gres/gpu=16,node=2
701|701|train|alice|NODE_FAIL|0:0|2026-11-20T08:00:00|2026-11-20T09:00:00|n[3-4]|gres/gpu=16,node=2
702|702|train|alice|NODE_FAIL|0:0|2026-11-20T08:00:00|2026-11-20T09:00:00|n[5-6]|gres/gpu=16,node=2
"""


def _syslog(node: str, *lines: tuple[str, str]) -> str:
    return "".join(f"2026-11-20T{clock}.000000+00:00 {node} {message}\n" for clock, message in lines)


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("lost")
    logs = root / "logs"
    logs.mkdir()
    for node in ("n1", "n3", "n5", "n6"):
        (logs / f"{node}.log").write_text(_syslog(node, ("07:50:00", ALIVE), ("09:30:00", ALIVE)))
    # n2 went silent during job 700 and booted 25 minutes after Slurm gave up on it.
    (logs / "n2.log").write_text(_syslog("n2", ("07:50:00", ALIVE), ("09:25:00", f"kernel: {BOOT}")))
    # n4 booted too, but three hours after job 701 ended: maintenance, not this failure.
    (logs / "n4.log").write_text(_syslog("n4", ("07:50:00", ALIVE), ("12:00:00", f"kernel: {BOOT}")))
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
