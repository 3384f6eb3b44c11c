"""A job's prolog that failed on a node: Slurm drained the node and requeued the job, which
then ran elsewhere. The health check that failed in the prolog says why (its check's family
gives the domain); slurmd's "prolog failed" is its echo. Real lines (``rules/host.yaml`` and
``rules/scheduler.yaml`` cite them), landed through the Slurm connector (``sacct
--duplicates`` lists both runs) and the files landing, attributed by a run."""

from __future__ import annotations

from datetime import date

import pytest

from tests.end_to_end import ALIVE, role_of, syslog, verdicts_by_attempt

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
730|730|train|alice|REQUEUED|0:0|2026-11-20T10:00:02|2026-11-20T10:00:09|p[1-2]|gres/gpu=16,node=2
730|730|train|alice|COMPLETED|0:0|2026-11-20T10:20:00|2026-11-20T11:00:00|p[2-3]|gres/gpu=16,node=2
731|731|train|alice|REQUEUED|0:0|2026-11-20T10:00:02|2026-11-20T10:00:09|p4|gres/gpu=8,node=1
731|731|train|alice|COMPLETED|0:0|2026-11-20T10:20:00|2026-11-20T11:00:00|p5|gres/gpu=8,node=1
"""
# stackhpc/ansible-slurm-appliance#913 (an automounted file system NHC found missing),
# under NHC's syslog tag; slurmd's report (slurmd/req.c's format).
NHC_FS = "nhc[882143]: ERROR:  nhc:  Health check failed:  check_fs_mount:  /lustre mounted from systemd-1"
PROLOG_FAILED = "slurmd[2411]: error: [job {job}] prolog failed status=1:0"


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("prolog")
    logs = root / "logs"
    logs.mkdir()
    # 730: p1's prolog failed on the missing file system; 731: p4's prolog failed, no why.
    (logs / "p1.log").write_text(syslog("p1", ("10:00:04", NHC_FS), ("10:00:05", PROLOG_FAILED.format(job=730))))
    (logs / "p4.log").write_text(syslog("p4", ("10:00:05", PROLOG_FAILED.format(job=731))))
    for node in ("p2", "p3", "p5"):
        (logs / f"{node}.log").write_text(syslog(node, ("10:00:00", ALIVE), ("10:30:00", ALIVE)))
    return verdicts_by_attempt(root, SACCT, logs, date(2026, 11, 20))


def test_the_health_check_that_failed_in_the_prolog_is_the_root(verdicts):
    v = verdicts["slurm/c1/730/0"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("storage", "storage.health_check_failed", ["p1"])
    assert role_of(v, "scheduler.prolog_failed") == "confirmation"
    assert verdicts["slurm/c1/730/1"]["domain"] == "none"


def test_a_prolog_failure_alone_is_the_nodes(verdicts):
    """Not a preemption: nobody preempted the job; its node could not start it."""
    v = verdicts["slurm/c1/731/0"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("host", "host.prolog_failure", ["p4"])
