"""The ``collective_mismatch`` python rule, end to end: when every rank timed out at one
collective sequence number but not in one operation, the ranks' code took different paths
(a workload root, no node to take out); one operation, or several sequence numbers (ranks
of several process groups), say nothing of the kind, and a fault line outranks the
inference; a send and the receive of it are one transfer, not two operations. Real lines,
landed through the Slurm connector and the files landing."""

from __future__ import annotations

from datetime import date

import pytest

from tests.end_to_end import XID_79, role_of, syslog, verdicts_by_job

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
950|950|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|p[1-2]|gres/gpu=8,node=2
951|951|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|p[3-4]|gres/gpu=8,node=2
952|952|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|p[5-6]|gres/gpu=8,node=2
953|953|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|p[7-8]|gres/gpu=8,node=2
954|954|serve|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|p[9-10]|gres/gpu=8,node=2
"""


def timeout(rank: int, seq: int, op: str) -> str:
    """PyTorch 2.x's watchdog report of ``rank`` (behind its ``srun --label`` task id), as
    pytorch/pytorch#118369 and hiyouga/LlamaFactory#6269 show it: a 600 s timeout at 10:40."""
    return (f"{rank}: [rank{rank}]:[E1120 10:40:00.754724246 ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught "
            f"collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn=4194304, NumelOut=4194304, "
            f"Timeout(ms)=600000) ran for {600034 + rank} milliseconds before timing out.\n")


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("mismatch")
    logs = root / "logs"
    logs.mkdir()
    # 950: p1's ranks in an all-reduce, p2's in an all-gather, at collective 1142.
    # 951: every rank in the same all-reduce. 952: the tensor-parallel group's ranks in an
    # all-reduce at 1142, the data-parallel group's in an all-gather at 388 (two process
    # groups). 953: 950, but p8's GPU fell off the bus first.
    (logs / "slurm-950.out").write_text("".join(timeout(r, 1142, "ALLREDUCE" if r < 4 else "ALLGATHER") for r in range(8)))
    (logs / "slurm-951.out").write_text("".join(timeout(r, 1142, "ALLREDUCE") for r in range(8)))
    (logs / "slurm-952.out").write_text("".join(
        timeout(r, 1142, "ALLREDUCE") if r < 4 else timeout(r, 388, "ALLGATHER") for r in range(8)))
    (logs / "slurm-953.out").write_text("".join(timeout(r, 1142, "ALLREDUCE" if r < 4 else "ALLGATHER") for r in range(8)))
    # 954: two pipeline stages, p9's ranks sending to p10's, which wait to receive, at the
    # same number: one transfer seen from both ends.
    (logs / "slurm-954.out").write_text("".join(timeout(r, 2210931, "SEND" if r < 4 else "RECV") for r in range(8)))
    for i in range(1, 11):
        lines = [("09:55:00", "kernel: ok"), ("10:45:00", "kernel: ok")]
        if i == 8:
            lines.insert(1, ("10:29:00", f"kernel: {XID_79}"))
        (logs / f"p{i}.log").write_text(syslog(f"p{i}", *lines))
    return verdicts_by_job(root, SACCT, logs, date(2026, 11, 20), year=2026)


def test_ranks_in_different_collectives_at_one_number_diverged(verdicts):
    v = verdicts["950"]
    assert (v["domain"], v["cause"], v["quality"]) == ("workload", "workload.collective_mismatch", "probable")
    assert (v["culprit_nodes"], v["recommended_action"]) == ([], "fix_workload")
    root = next(e for e in v["evidence"] if e["rule_id"] == "collective_mismatch")
    assert "SeqNum=1142: ALLGATHER (4 ranks), ALLREDUCE (4 ranks)" in root["message"]
    # The collective began when the timeout started counting.
    assert v["first_fault_ts"].isoformat() == "2026-11-20T10:30:00.754724+00:00"


def test_one_operation_or_several_numbers_say_nothing_of_a_mismatch(verdicts):
    """Nor do a pipeline stage's sends and the next stage's receives of them."""
    for job in ("951", "952", "954"):
        assert verdicts[job]["cause"] == "unknown.symptoms_only", job
        assert not any(e["rule_id"] == "collective_mismatch" for e in verdicts[job]["evidence"]), job


def test_a_fault_line_outranks_the_inference(verdicts):
    v = verdicts["953"]
    assert (v["domain"], v["culprit_nodes"]) == ("gpu", ["p8"])
    assert role_of(v, "comm.nccl_watchdog_timeout") == "cascade"
    assert not any(e["rule_id"] == "collective_mismatch" for e in v["evidence"])
