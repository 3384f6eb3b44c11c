"""A job output's line printed below the scheduler's own report of the root came after the
root, though it carries no stamp: the kernel's OOM kill on one node, slurmstepd's count of it
in the job output, then a survivor's NCCL error naming the killed rank's node. The error is no
rival of the kill. Real lines, landed through the Slurm connector and the files landing,
attributed by a run."""

from __future__ import annotations

from datetime import date

from tests.end_to_end import ALIVE, CGROUP_OOM, ITERATION, syslog, verdicts_by_job
from tests.test_ib_peer import retry_exceeded

# https://github.com/chrisknewman/tusas/issues/149 (Slurm counts the step cgroup's OOM kills)
STEP_OOM = "slurmstepd: error: Detected 1 oom_kill event in StepId=620.0. Some of the step tasks have been OOM Killed."

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
620|620|train|alice|OUT_OF_MEMORY|0:125|2026-11-20T10:00:00|2026-11-20T10:22:00|m[1-2]|gres/gpu=16,node=2
"""


def test_a_line_below_the_schedulers_report_of_the_root_is_no_rival(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "m1.log").write_text(syslog("m1", ("10:00:00", ALIVE), ("10:20:35", f"kernel: {CGROUP_OOM}")))
    (logs / "m2.log").write_text(syslog("m2", ("10:00:00", ALIVE), ("10:30:00", ALIVE)))
    # The output's last stamp is older than the kill: both lines below it inherit it.
    (logs / "slurm-620.out").write_text(
        f"0: [2026-11-20 10:20:09,000] {ITERATION}\n{STEP_OOM}\n{retry_exceeded(9, 'm2', '10.22.0.1')}\n"
    )
    v = verdicts_by_job(tmp_path, SACCT, logs, date(2026, 11, 20))["620"]
    assert (v["domain"], v["cause"], v["quality"]) == ("host", "host.oom_killer", "definitive")
    assert v["alternatives"] == [] and v["responsibility"] == "workload"
