"""An uncorrected PCIe error on a GPU and the XID that follows on that GPU are one failure:
the XID (or the driver's own fallen-off-the-bus report) is the root and the AER line its
confirmation (``precedence.xid_over_gpu_pcie_error``);
so is a fatal error the root port above it logged seconds before (``port_aer.py``);
on another device (a NIC's own function), or a minute before, the AER line stays a root
of its own. A non-fatal error the job ran on long after, failing of something else, passed.
A local NVMe drive's own uncorrected error confirms the drive's failure that follows (the
driver disabling it: ``port_aer.py``); alone, or before a command that only timed out, it
stays the root.
Landed through the Slurm connector
and the files landing, attributed by a run."""

from __future__ import annotations

from datetime import date

import pytest

from tests.end_to_end import CUDA_OOM, ITERATION, XID_79, role_of, syslog, verdicts_by_job

# The nvidia driver's AER line (https://wenku.csdn.net/answer/26sjj6j1cb prints its
# Correctable form) with the uncorrected severity aer.c prints.
AER_GPU = "kernel: nvidia 0000:06:00.0: PCIe Bus Error: severity=Uncorrected (Non-Fatal), type=Transaction Layer, (Requester ID)"
# wilicc/gpu-burn#1: the root port above the GPU logs the fatal error.
AER_PORT = ("kernel: pcieport 0000:00:02.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, "
            "id=0010(Receiver ID)")
# The pack's e1000e test line's fatal form, on the HCA's function.
AER_NIC_FATAL = ("kernel: mlx5_core 0000:41:00.0: AER: PCIe Bus Error: severity=Uncorrected (Fatal), "
                 "type=Transaction Layer, (Requester ID)")
# minisforum-docs/MS-02-Ultra#10: a chipset root port's non-fatal error.
AER_CHIPSET = ("kernel: pcieport 0000:80:1b.4: PCIe Bus Error: severity=Uncorrectable (Non-Fatal), "
               "type=Transaction Layer, (Receiver ID)")
# The nvme PCI driver's name (drivers/nvme/host/pci.c: .name = "nvme") before the
# function, and the AER line aer.c prints; then the driver's timeouts and its disable
# (the pack's host.nvme_failure test lines).
AER_NVME = "kernel: nvme 0000:c1:00.0: AER: PCIe Bus Error: severity=Uncorrected (Non-Fatal), type=Transaction Layer, (Requester ID)"
NVME_FAILING = (("10:20:31", "kernel: nvme nvme1: I/O 412 QID 37 timeout, aborting"),
                ("10:21:01", "kernel: nvme nvme1: I/O 412 QID 37 timeout, reset controller"),
                ("10:21:32", "kernel: nvme nvme1: Disabling device after reset failure: -19"))
AER_NIC = "kernel: mlx5_core 0000:41:00.0: PCIe Bus Error: severity=Uncorrected (Non-Fatal), type=Transaction Layer, (Requester ID)"

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
800|800|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|g1|gres/gpu=8,node=1
801|801|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|g2|gres/gpu=8,node=1
802|802|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|g3|gres/gpu=8,node=1
803|803|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|g4|gres/gpu=8,node=1
804|804|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|g5|gres/gpu=8,node=1
805|805|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|g6|gres/gpu=8,node=1
806|806|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|g7|gres/gpu=8,node=1
807|807|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|g8|gres/gpu=8,node=1
808|808|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:22:00|g9|gres/gpu=8,node=1
809|809|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:20:30|g10|gres/gpu=8,node=1
810|810|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:21:00|g11|gres/gpu=8,node=1
"""


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("pcie")
    logs = root / "logs"
    logs.mkdir()
    (logs / "g1.log").write_text(syslog("g1", ("10:20:00", AER_GPU), ("10:20:01", f"kernel: {XID_79}")))
    (logs / "g2.log").write_text(syslog("g2", ("10:20:00", AER_NIC), ("10:20:01", f"kernel: {XID_79}")))
    (logs / "g3.log").write_text(syslog("g3", ("10:20:00", AER_PORT), ("10:20:01", f"kernel: {XID_79}")))
    # A minute apart: two faults, not one.
    (logs / "g4.log").write_text(syslog("g4", ("10:19:00", AER_PORT), ("10:20:01", f"kernel: {XID_79}")))
    (logs / "g5.log").write_text(syslog("g5", ("10:20:00", AER_NIC_FATAL), ("10:20:02", f"kernel: {XID_79}")))
    # The older driver's report of the lost GPU, wrapped over three syslog lines
    # (NVIDIA/NVSentinel#155), a second after the GPU's own AER line.
    (logs / "g8.log").write_text(syslog("g8", ("10:20:00", AER_GPU),
                                        ("10:20:01", "kernel: NVRM: The NVIDIA GPU 0000:06:00.0"),
                                        ("10:20:01", "kernel: NVRM: (PCI ID: 10de:20b2) installed in this system has"),
                                        ("10:20:01", "kernel: NVRM: fallen off the bus and is not responding to commands.")))
    # 805 ran on 23 minutes after the chipset's non-fatal error and ran out of GPU memory;
    # 806 failed with nothing else to say why.
    for node in ("g6", "g7"):
        (logs / f"{node}.log").write_text(syslog(node, ("10:05:00", AER_CHIPSET),
                                                 ("10:05:00", "kernel: pcieport 0000:80:1b.4: AER: device recovery successful")))
    (logs / "g9.log").write_text(syslog("g9", ("10:20:00", AER_NVME), *NVME_FAILING))
    (logs / "g10.log").write_text(syslog("g10", ("10:20:00", AER_NVME)))
    # 810: the drive answered again: a command aborted, a read failed, no disable.
    (logs / "g11.log").write_text(syslog("g11", ("10:20:00", AER_NVME), NVME_FAILING[0],
                                         ("10:20:31", "kernel: I/O error, dev nvme1n1, sector 884201472 op 0x0:(READ) flags 0x80700 phys_seg 16 prio class 2")))
    for job in ("800", "801", "802", "803", "804", "806", "807", "808", "809", "810"):
        (logs / f"slurm-{job}.out").write_text(f"[2026-11-20 10:10:00,000] {ITERATION}\n")
    (logs / "slurm-805.out").write_text(f"[2026-11-20 10:10:00,000] {ITERATION}\n[2026-11-20 10:28:00,000] {CUDA_OOM}\n")
    return verdicts_by_job(root, SACCT, logs, date(2026, 11, 20))


def test_the_xid_on_the_gpu_with_the_pcie_error_is_the_root(verdicts):
    v = verdicts["800"]
    assert (v["domain"], v["cause"], v["culprit_gpus"]) == ("gpu", "gpu.fallen_off_bus", ["0000:06:00"])
    assert role_of(v, "pcie_aer_bus_error") == "confirmation"


def test_the_wrapped_driver_report_on_the_gpu_with_the_pcie_error_is_the_root(verdicts):
    v = verdicts["807"]
    assert (v["domain"], v["cause"], v["culprit_gpus"]) == ("gpu", "gpu.fallen_off_bus", ["0000:06:00"])
    assert role_of(v, "pcie_aer_bus_error") == "confirmation"


def test_a_pcie_error_of_another_device_stays_a_root(verdicts):
    assert role_of(verdicts["801"], "pcie_aer_bus_error") != "confirmation"


def test_a_gpu_lost_seconds_after_its_root_ports_fatal_error_is_the_root(verdicts):
    v = verdicts["802"]
    assert (v["domain"], v["cause"], v["culprit_gpus"]) == ("gpu", "gpu.fallen_off_bus", ["0000:06:00"])
    assert role_of(v, "pcie_aer_bus_error") == "confirmation"
    assert role_of(verdicts["803"], "pcie_aer_bus_error") != "confirmation"


def test_a_nics_own_fatal_error_before_a_gpu_loss_stays_a_root(verdicts):
    assert role_of(verdicts["804"], "pcie_aer_bus_error") == "root_candidate"


def test_a_recovered_non_fatal_error_the_job_outlived_is_context(verdicts):
    v = verdicts["805"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("workload", "workload.cuda_oom", [])
    assert role_of(v, "pcie_aer_bus_error") == "context"


def test_a_non_fatal_error_with_nothing_else_stays_the_root(verdicts):
    v = verdicts["806"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("host", "host.pcie_uncorrected_error", ["g7"])


def test_a_local_drives_own_pcie_error_confirms_the_drives_failure_after_it(verdicts):
    v = verdicts["808"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("storage", "storage.disk_failure", ["g9"])
    assert role_of(v, "pcie_aer_bus_error") == "confirmation"


@pytest.mark.parametrize("job, node", [("809", "g10"), ("810", "g11")])
def test_a_local_drives_own_pcie_error_alone_or_before_a_drive_that_answered_stays_the_root(verdicts, job, node):
    v = verdicts[job]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("host", "host.pcie_uncorrected_error", [node])
