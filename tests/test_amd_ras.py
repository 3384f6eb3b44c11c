"""AMD Instinct RAS errors, end to end: the driver announces a fatal event, then counts the
errors block by block; the block (``umc``: the HBM, ``xgmi_wafl``: the GPU link) is what
failed, so it is the root and the announcement its confirmation. An announcement with no
block count is the GPU's own uncorrectable error. Real lines (their sources beside them),
landed through the Slurm connector and the files landing, attributed by a run."""

from __future__ import annotations

from datetime import date

import pytest

from tests.end_to_end import ITERATION, syslog, verdicts_by_job

# ROCm/legacy-rocm-build#4021 (MI300X: the announcement behind its {N} event number)
NOTICE = "kernel: amdgpu 0000:e6:00.0: {1}uncorrectable hardware error(ERREVENT_ATHUB_INTERRUPT) detected!"
# amdgpu_ras.c's RAS_EVENT_LOG(..., "socket: %d, die: %d, %lld new uncorrectable hardware
# errors detected in %s block") and dev_info(..., "%ld uncorrectable hardware errors detected
# in %s block")
UMC = "kernel: amdgpu 0000:e6:00.0: amdgpu: {1}socket: 0, die: 2, 1 new uncorrectable hardware errors detected in umc block"
XGMI = "kernel: amdgpu 0000:e6:00.0: amdgpu: 2 uncorrectable hardware errors detected in xgmi_wafl block"

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
900|900|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|mz[1-2]|gres/gpu=16,node=2
901|901|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|mz[3-4]|gres/gpu=16,node=2
902|902|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|mz[5-6]|gres/gpu=16,node=2
"""


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("amd_ras")
    logs = root / "logs"
    logs.mkdir()
    for node, block in (("mz2", UMC), ("mz4", XGMI), ("mz6", None)):
        lines = [("10:00:05", "kernel: ok"), ("10:20:00", NOTICE)] + ([("10:20:00", block)] if block else [])
        (logs / f"{node}.log").write_text(syslog(node, *lines))
    for node in ("mz1", "mz3", "mz5"):
        (logs / f"{node}.log").write_text(syslog(node, ("10:00:05", "kernel: ok")))
    for job in ("900", "901", "902"):
        (logs / f"slurm-{job}.out").write_text(f"0: [2026-11-20 10:10:00,000] {ITERATION}\n")
    return verdicts_by_job(root, SACCT, logs, date(2026, 11, 20))


@pytest.mark.parametrize(("job", "node", "domain", "cause"), [
    ("900", "mz2", "gpu_memory", "gpu_memory.uncorrectable_ecc"),
    ("901", "mz4", "nvlink", "nvlink.link_error"),
    ("902", "mz6", "gpu", "gpu.uncorrectable_hw_error"),
])
def test_the_block_that_counted_the_errors_is_what_failed(verdicts, job, node, domain, cause):
    v = verdicts[job]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == (domain, cause, [node])
    assert v["alternatives"] == []
    notice = [e["role"] for e in v["evidence"] if "ERREVENT_ATHUB_INTERRUPT" in e["message"]]
    assert notice == (["root_candidate"] if job == "902" else ["confirmation"])
