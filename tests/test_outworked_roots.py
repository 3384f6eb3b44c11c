"""A fault the job went on training through is not what ended it: progress reports for more
than ``fail_at_once`` after it, and another root printed more than ``fail_at_once`` after it,
make the fault context and the later root the verdict (another user's GPU on a shared node
falling off the bus, 40 minutes before this job's CUDA out-of-memory error). With no later
root, or a later root close behind the fault, the fault stays. Real lines, landed through the
Slurm connector and the files landing, attributed by a run."""

from __future__ import annotations

from datetime import date

import pytest

from tests.end_to_end import CUDA_OOM, XID_79, progress, role_of, syslog, verdicts_by_job

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
920|920|train|frank|FAILED|1:0|2026-11-20T08:00:00|2026-11-20T09:41:00|n1|gres/gpu=4,node=1
921|921|train|frank|FAILED|1:0|2026-11-20T08:00:00|2026-11-20T09:41:00|n2|gres/gpu=4,node=1
922|922|train|frank|FAILED|1:0|2026-11-20T08:00:00|2026-11-20T09:06:00|n3|gres/gpu=4,node=1
"""
XID_RULE = "gpu_xid"


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("outworked")
    logs = root / "logs"
    logs.mkdir()
    # 920: a GPU of the node fell off the bus at 09:00; the job reported progress until 09:40,
    #      then ran out of GPU memory.
    # 921: the same fault and progress, and no other error: nothing else explains the failure.
    # 922: the fault at 09:00, progress until 09:03, the out-of-memory error at 09:05.
    oom = f"0: [2026-11-20 {{clock}},000] {CUDA_OOM}\n"
    (logs / "slurm-920.out").write_text(progress("09:40") + oom.format(clock="09:40:30"))
    (logs / "slurm-921.out").write_text(progress("09:40"))
    (logs / "slurm-922.out").write_text(progress("09:03", every_minutes=1, since="08:05") + oom.format(clock="09:05:00"))
    for node in ("n1", "n2", "n3"):
        (logs / f"{node}.log").write_text(
            syslog(node, ("07:50:00", "kernel: ok"), ("09:00:00", f"kernel: {XID_79}"), ("09:50:00", "kernel: ok")))
    return verdicts_by_job(root, SACCT, logs, date(2026, 11, 20), year=2026)


def test_a_fault_the_job_trained_through_is_context_beside_the_error_that_ended_it(verdicts):
    v = verdicts["920"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("workload", "workload.cuda_oom", [])
    assert role_of(v, XID_RULE) == "context"


def test_a_fault_the_job_trained_through_stays_the_root_when_nothing_else_explains_the_failure(verdicts):
    v = verdicts["921"]
    assert (v["domain"], v["culprit_nodes"]) == ("gpu", ["n2"])


def test_a_fault_close_before_the_next_error_stays_the_root(verdicts):
    """Progress up to three minutes after the fault and an error two minutes later: the job
    may well have died of the fault."""
    v = verdicts["922"]
    assert (v["domain"], v["culprit_nodes"]) == ("gpu", ["n3"])
