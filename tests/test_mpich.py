"""MPICH's error stack end to end (Cray MPICH, as Slingshot machines print it): a rank's
failed MPI call names its rank and node and is a symptom; with a GPU that fell off the bus
on the other node, it is that root's cascade (which makes the verdict definitive), and alone it says the job failed without
saying why. Hydra's report of a killed process is the cascade of the OOM kill. Real lines (``rules/hpc.yaml`` cites them), landed through the Slurm connector
and the files landing, attributed by a run."""

from __future__ import annotations

from datetime import date

import pytest

from tests.end_to_end import ALIVE, CGROUP_OOM, ITERATION, XID_79, syslog, verdicts_by_job

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
950|950|train|alice|FAILED|1:0|2026-11-20T08:00:00|2026-11-20T09:00:00|nid[001-002]|gres/gpu=8,node=2
951|951|train|alice|FAILED|1:0|2026-11-20T08:00:00|2026-11-20T09:00:00|nid[003-004]|gres/gpu=8,node=2
952|952|train|alice|FAILED|9:0|2026-11-20T08:00:00|2026-11-20T09:00:00|nid005|gres/gpu=4,node=1
"""

# Hydra's frame around a process that died, as openai/jukebox#155 shows it.
HYDRA = """===================================================================================
=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES
=   PID 9665 RUNNING AT nid005
=   EXIT CODE: 9
=   CLEANING UP REMAINING PROCESSES
=   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES
===================================================================================
YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Killed (signal 9)
"""


def error_stack(rank: int, node: str) -> str:
    """The first and last lines of a Cray MPICH error stack, as ofiwg/libfabric#11307 shows
    them, for ``rank`` on ``node`` (each behind its ``srun --label`` task id)."""
    return (
        f"{rank}: MPICH ERROR [Rank {rank}] [job id 950.0] [Fri Nov 20 08:50:11 2026] [{node}] - Abort(2695311) "
        f"(rank {rank} in comm 0): Fatal error in PMPI_Allreduce: Other MPI error, error stack:\n"
        f"{rank}: MPIDI_OFI_handle_cq_error(1075)......: OFI poll failed "
        "(ofi_events.c:1077:MPIDI_OFI_handle_cq_error:Input/output error - CANCELED)\n"
    )


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("mpich")
    logs = root / "logs"
    logs.mkdir()
    (logs / "slurm-950.out").write_text(f"0: [2026-11-20 08:40:00,000] {ITERATION}\n" + error_stack(0, "nid001"))
    (logs / "nid002.log").write_text(syslog("nid002", ("08:49:00", f"kernel: {XID_79}")))
    (logs / "nid001.log").write_text(syslog("nid001", ("08:30:00", ALIVE)))
    (logs / "slurm-951.out").write_text(f"0: [2026-11-20 08:40:00,000] {ITERATION}\n" + error_stack(0, "nid003"))
    (logs / "slurm-952.out").write_text(f"[2026-11-20 08:40:00,000] {ITERATION}\n" + HYDRA)
    (logs / "nid005.log").write_text(syslog("nid005", ("08:41:00", f"kernel: {CGROUP_OOM}")))
    return verdicts_by_job(root, SACCT, logs, date(2026, 11, 20))


def test_a_ranks_failed_mpi_call_is_the_cascade_of_the_fault_on_another_node(verdicts):
    v = verdicts["950"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("gpu", "gpu.fallen_off_bus", ["nid002"])
    mpi = [e for e in v["evidence"] if e["rule_id"].startswith("hpc.mpich_")]
    assert {(e["rule_id"], e["node"], e["role"]) for e in mpi} == {
        ("hpc.mpich_fatal_error", "nid001", "cascade"), ("hpc.mpich_ofi_cq_error", "nid001", "cascade")}
    assert v["affected_nodes"] == ["nid001"]
    # the rank's report corroborates the fault: both nodes' logs are there
    assert v["quality"] == "definitive"


def test_a_failed_mpi_call_alone_is_a_symptom_without_a_cause(verdicts):
    v = verdicts["951"]
    assert (v["domain"], v["cause"], v["quality"]) == ("unknown", "unknown.symptoms_only", "insufficient")
    assert {e["rule_id"] for e in v["evidence"]} >= {"hpc.mpich_fatal_error", "hpc.mpich_ofi_cq_error"}


def test_hydras_report_of_a_killed_process_is_the_cascade_of_what_killed_it(verdicts):
    v = verdicts["952"]
    assert (v["domain"], v["cause"]) == ("host", "host.oom_killer")
    hydra = [e for e in v["evidence"] if e["rule_id"] == "hpc.hydra_bad_termination"]
    assert {(e["node"], e["role"]) for e in hydra} == {("nid005", "cascade")}
