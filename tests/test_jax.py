"""JAX's distributed runtime end to end: the tasks that outlive a dead one print the
coordination service's heartbeat and barrier timeouts (``XlaRuntimeError:
DEADLINE_EXCEEDED``). They are symptoms: with a GPU that fell off the bus on another node
they are its cascade, and alone they say the job failed without saying why — never a
workload exception of the job's own. Real lines (``rules/communication.yaml`` cites them),
landed through the Slurm connector and the files landing, attributed by a run."""

from __future__ import annotations

from datetime import date

import pytest

from tests.end_to_end import ALIVE, ITERATION, XID_79, syslog, verdicts_by_job

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
960|960|train|alice|FAILED|1:0|2026-11-20T08:00:00|2026-11-20T09:00:00|g[001-002]|gres/gpu=16,node=2
961|961|train|alice|FAILED|1:0|2026-11-20T08:00:00|2026-11-20T09:00:00|g[003-004]|gres/gpu=16,node=2
962|962|train|alice|FAILED|1:0|2026-11-20T08:00:00|2026-11-20T09:00:00|g[005-006]|gres/gpu=16,node=2
963|963|train|alice|FAILED|1:0|2026-11-20T08:00:00|2026-11-20T09:00:00|g[007-008]|gres/gpu=16,node=2
"""

# The service's log naming the task whose heartbeats stopped (jax-ml/jax#23599), the
# surviving task's own termination (jax-ml/jax#39095's fault-tolerance notes) and the
# exception a task waiting at a barrier raises (marin-community/marin#1933).
HEARTBEAT = ("E1120 08:50:11.568412 2841 coordination_service.cc:1170] /job:jax_worker/replica:0/task:1 has been "
             "set to ERROR in coordination service: UNAVAILABLE: Task /job:jax_worker/replica:0/task:1 heartbeat "
             "timeout. This indicates that the remote task has failed, got preempted, or crashed unexpectedly. Check "
             "the task logs for an earlier error to debug further.")
TERMINATING = ("F1120 08:50:11.594200 2841 client.h:77] Terminating process because the JAX distributed service "
               "detected fatal errors. This most likely indicates that another task died; see the other task logs "
               "for more details.")
BARRIER = ("jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed out. Barrier_id: "
           "multihost_broadcast_sync0. Timed out task names:")


# XLA raises a collective's NCCL failure as its own exception (the wrapper of
# jax-ml/jax#22747, the NCCL result and last warning NCCL 2.21 prints, NVIDIA/nccl#2076).
XLA_NCCL = ("jaxlib.xla_extension.XlaRuntimeError: INTERNAL: external/xla/xla/service/gpu/nccl_utils.cc:305: NCCL "
            "operation ncclGroupEnd() failed: remote process exited or there was a network error. Last NCCL "
            "warning(error) log entry (may be unrelated) 'socketProgressOpt: Call to recv from 10.1.0.6<41234> "
            "failed : Connection reset by peer'.")


def xla_output() -> str:
    """Task 0's output when a collective failed under it."""
    return "".join(f"0: {line}\n" for line in (f"[2026-11-20 08:40:00,000] {ITERATION}",
                                               "[2026-11-20 08:49:05,000] Traceback (most recent call last):",
                                               XLA_NCCL))


def output() -> str:
    """Task 0's output (``srun --label``) after task 1 died."""
    return "".join(f"0: {line}\n" for line in (f"[2026-11-20 08:40:00,000] {ITERATION}", HEARTBEAT, TERMINATING,
                                               "Traceback (most recent call last):", BARRIER))


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("jax")
    logs = root / "logs"
    logs.mkdir()
    (logs / "slurm-960.out").write_text(output())
    (logs / "g002.log").write_text(syslog("g002", ("08:49:00", f"kernel: {XID_79}")))
    (logs / "g001.log").write_text(syslog("g001", ("08:30:00", ALIVE)))
    (logs / "slurm-961.out").write_text(output())
    (logs / "slurm-962.out").write_text(xla_output())
    (logs / "g006.log").write_text(syslog("g006", ("08:49:00", f"kernel: {XID_79}")))
    (logs / "g005.log").write_text(syslog("g005", ("08:30:00", ALIVE)))
    (logs / "slurm-963.out").write_text(xla_output())
    return verdicts_by_job(root, SACCT, logs, date(2026, 11, 20))


def test_the_survivors_timeouts_are_the_cascade_of_the_fault_on_the_other_node(verdicts):
    v = verdicts["960"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("gpu", "gpu.fallen_off_bus", ["g002"])
    jax = {(e["rule_id"], e["role"]) for e in v["evidence"] if e["rule_id"].startswith("comm.jax_")}
    assert jax == {("comm.jax_heartbeat_timeout", "cascade"), ("comm.jax_barrier_timeout", "cascade")}


def test_the_timeouts_alone_are_symptoms_not_the_jobs_own_exception(verdicts):
    v = verdicts["961"]
    assert (v["domain"], v["cause"], v["quality"]) == ("unknown", "unknown.symptoms_only", "insufficient")
    assert "framework.python_exception" not in {e["rule_id"] for e in v["evidence"]}


def test_xlas_nccl_failure_is_the_collectives_report_not_a_workload_exception(verdicts):
    """The exception XLA raises for a failed NCCL call carries NCCL's result: the peer's
    GPU that fell off the bus seconds before is the root, unrivalled; alone, the failure
    says only that a peer or the network went away."""
    v = verdicts["962"]
    assert (v["domain"], v["cause"], v["culprit_nodes"], v["quality"]) == (
        "gpu", "gpu.fallen_off_bus", ["g006"], "definitive")
    roles = {(e["rule_id"], e["role"]) for e in v["evidence"]}
    assert ("framework.python_exception", "root_candidate") not in roles
    alone = verdicts["963"]
    assert alone["domain"] != "workload"
    assert "workload.exception" not in {e["cause"] for e in alone["evidence"] if e["role"] == "root_candidate"}
