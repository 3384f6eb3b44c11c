"""An AMD GPU that left the bus right after a fatal PCIe error on its node is the GPU's
failure (``precedence.amdgpu_lost_from_bus_over_pcie_error``), as an XID 79 after an NVIDIA
GPU's AER line is; a fatal PCIe error with no GPU gone stays the host's. Real lines (their
sources beside them), landed through the Slurm connector and the files landing, attributed
by a run."""

from __future__ import annotations

from datetime import date

import pytest

from tests.end_to_end import ITERATION, syslog, verdicts_by_job

# The AER report of the erring device under the prefix of the driver bound to it
# (aer_print_error() in drivers/pci/pcie/aer.c prints through pci_err(); the same line under
# the nvidia driver: https://wenku.csdn.net/answer/26sjj6j1cb).
AER_FATAL = "kernel: amdgpu 0000:b3:00.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Receiver ID)"
# dev_err(tmp_adev->dev, "device lost from bus!") in amdgpu_device.c, as rules/gpu_amd.yaml tests it
LOST = "kernel: amdgpu 0000:b3:00.0: amdgpu: device lost from bus!"

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
910|910|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|mz[1-2]|gres/gpu=16,node=2
911|911|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|mz[3-4]|gres/gpu=16,node=2
"""


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("amd_bus")
    logs = root / "logs"
    logs.mkdir()
    for node in ("mz1", "mz3"):
        (logs / f"{node}.log").write_text(syslog(node, ("10:00:05", "kernel: ok")))
    (logs / "mz2.log").write_text(syslog("mz2", ("10:00:05", "kernel: ok"), ("10:20:00", AER_FATAL),
                                         ("10:20:01", LOST)))
    (logs / "mz4.log").write_text(syslog("mz4", ("10:00:05", "kernel: ok"), ("10:20:00", AER_FATAL)))
    for job in ("910", "911"):
        (logs / f"slurm-{job}.out").write_text(f"0: [2026-11-20 10:10:00,000] {ITERATION}\n")
    return verdicts_by_job(root, SACCT, logs, date(2026, 11, 20))


def test_a_gpu_gone_from_the_bus_after_a_fatal_pcie_error_is_the_gpus_failure(verdicts):
    v = verdicts["910"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("gpu", "gpu.fallen_off_bus", ["mz2"])
    assert [e["role"] for e in v["evidence"] if "PCIe Bus Error" in e["message"]] == ["confirmation"]


def test_a_fatal_pcie_error_with_no_gpu_gone_stays_the_hosts(verdicts):
    v = verdicts["911"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("host", "host.pcie_fatal_error", ["mz4"])
