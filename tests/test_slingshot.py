"""HPE Slingshot (the Cassini NIC's ``cxi_core`` kernel lines), end to end: a NIC whose HSN
link went down is the root of the UNDELIVERABLE errors Cray MPICH's ranks die of elsewhere;
a NIC's uncorrectable error is its node's NIC fault; a flap that came back long before the
job failed is context. Real lines (their sources beside them), landed through the Slurm
connector and the files landing, attributed by a run."""

from __future__ import annotations

from datetime import date

import pytest

from tests.end_to_end import CUDA_OOM, ITERATION, syslog, verdicts_by_job

# HewlettPackard/shs-docs: troubleshoot_hpl_benchmark_performance_issues.md (the flap),
# Common_CXI_core_error_messages.md (the PML flag beside it),
# troubleshoot_mpi_application_failure_hardware_error.md (the NIC error); the link coming
# back as cass_phy_link_up() prints it (HewlettPackard/shs-cxi-driver, cass_phy.c).
LINK_DOWN = "kernel: cxi_core 0000:c3:00.0: cxi3[hsn3] CXI_EVENT_LINK_DOWN"
PML_DOWN = ("kernel: cxi_core 0000:c3:00.0: cxi3[hsn3]: C_EC_TRNSNT_NS: C1_HNI_PML error: pcs_link_down (48) "
            "(was first error at 1795678800:993752891)")
LINK_UP = "kernel: cxi_core 0000:c3:00.0: cxi3[hsn3] CXI_EVENT_LINK_UP"
NIC_ERROR = ("kernel: cxi_core 0000:c3:00.0: cxi3[hsn3]: C_EC_UNCOR_NS: C1_PCT error: tct_cam_ucor (42) "
             "(was first error at 1795678800:290566940)")
# Cray MPICH's abort of a rank whose sends came back UNDELIVERABLE (BLAST-WarpX/warpx#4234).
MPICH_ABORT = ("MPICH ERROR [Rank 0] [job id {job}.0] [Fri Nov 20 10:20:31 2026] [{node}] - Abort(136982671) (rank 0 "
               "in comm 0): Fatal error in PMPI_Waitall: Other MPI error, error stack:")
UNDELIVERABLE = ("MPIDI_OFI_handle_cq_error(1062): OFI poll failed (ofi_events.c:1064:MPIDI_OFI_handle_cq_error:"
                 "Input/output error - UNDELIVERABLE)")

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
960|960|cfd|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:21:00|nid[001001-001002]|gres/gpu=8,node=2
961|961|cfd|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:21:00|nid[001003-001004]|gres/gpu=8,node=2
962|962|train|bob|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:45:00|nid[001005-001006]|gres/gpu=8,node=2
"""


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("slingshot")
    logs = root / "logs"
    logs.mkdir()
    # 960: nid001002's HSN link went down at 10:20; a rank on nid001001 died of UNDELIVERABLE.
    # 961: nid001004's NIC hit an uncorrectable error; the same abort on nid001003.
    # 962: nid001006's link flapped at 10:05 and came back; the job ran out of GPU memory at 10:44.
    (logs / "nid001002.log").write_text(syslog("nid001002", ("10:00:05", "kernel: ok"), ("10:20:00", LINK_DOWN),
                                               ("10:20:00", PML_DOWN)))
    (logs / "nid001004.log").write_text(syslog("nid001004", ("10:00:05", "kernel: ok"), ("10:20:00", NIC_ERROR)))
    (logs / "nid001006.log").write_text(syslog("nid001006", ("10:00:05", "kernel: ok"), ("10:05:00", LINK_DOWN),
                                               ("10:05:04", LINK_UP), ("10:30:00", "kernel: ok")))
    for node in ("nid001001", "nid001003", "nid001005"):
        (logs / f"{node}.log").write_text(syslog(node, ("10:00:05", "kernel: ok"), ("10:30:00", "kernel: ok")))
    for job, node in (("960", "nid001001"), ("961", "nid001003")):
        (logs / f"slurm-{job}.out").write_text(
            f"0: [2026-11-20 10:10:00,000] {ITERATION}\n0: {MPICH_ABORT.format(job=job, node=node)}\n0: {UNDELIVERABLE}\n")
    (logs / "slurm-962.out").write_text(f"0: [2026-11-20 10:40:00,000] {ITERATION}\n4: [2026-11-20 10:44:00,000] {CUDA_OOM}\n")
    return verdicts_by_job(root, SACCT, logs, date(2026, 11, 20))


def test_a_nic_whose_link_went_down_is_the_root_of_the_undeliverable_sends(verdicts):
    v = verdicts["960"]
    assert (v["domain"], v["cause"], v["culprit_nodes"], v["culprit_ports"]) == (
        "network", "network.link_down", ["nid001002"], ["cxi3"])


def test_a_nics_uncorrectable_error_is_its_nodes_nic_fault(verdicts):
    v = verdicts["961"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("network", "network.nic_hardware_fault", ["nid001004"])
    assert v["recommended_action"] == "drain_node_and_restart"


def test_a_flap_that_came_back_long_before_is_no_root(verdicts):
    v = verdicts["962"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("workload", "workload.cuda_oom", [])
