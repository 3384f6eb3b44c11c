"""The ``nvrm_wrapped_report`` python rule, end to end: the older driver's fall-off report,
written to syslog as three ``NVRM:`` lines of which only the first names the GPU, names
that GPU in the verdict; a first line of another report (another second, or lines away)
names none. The report's lines as NVIDIA/NVSentinel#155 shows them, each given an rsyslog
header; landed through the Slurm connector and the files landing, attributed by a run."""

from __future__ import annotations

from datetime import date

import pytest

from tests.end_to_end import ALIVE, ITERATION, role_of, syslog, verdicts_by_job

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
730|730|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|w1|gres/gpu=8,node=1
731|731|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|w2|gres/gpu=8,node=1
732|732|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|w3|gres/gpu=8,node=1
"""
FIRST = "kernel: NVRM: The NVIDIA GPU 0000:b3:00.0"
SECOND = "kernel: NVRM: (PCI ID: 10de:26b5) installed in this system has"
LAST = "kernel: NVRM: fallen off the bus and is not responding to commands."


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("nvrm")
    logs = root / "logs"
    logs.mkdir()
    (logs / "w1.log").write_text(syslog("w1", ("10:20:00", FIRST), ("10:20:00", SECOND), ("10:20:00", LAST)))
    # The first line came a minute before: another report (or a cut one), not this one's.
    (logs / "w2.log").write_text(syslog("w2", ("10:19:00", FIRST), ("10:20:00", SECOND), ("10:20:00", LAST)))
    # Other lines between: the first line is not this report's.
    (logs / "w3.log").write_text(
        syslog("w3", ("10:20:00", FIRST), ("10:20:00", ALIVE), ("10:20:00", ALIVE), ("10:20:00", SECOND), ("10:20:00", LAST))
    )
    for job in ("730", "731", "732"):
        (logs / f"slurm-{job}.out").write_text(f"[2026-11-20 10:19:50,000] {ITERATION}\n")
    return verdicts_by_job(root, SACCT, logs, date(2026, 11, 20))


def test_the_wrapped_report_names_the_gpu_its_first_line_names(verdicts):
    v = verdicts["730"]
    assert (v["domain"], v["cause"], v["culprit_nodes"], v["culprit_gpus"]) == (
        "gpu", "gpu.fallen_off_bus", ["w1"], ["0000:b3:00"],
    )
    assert role_of(v, "nvrm_report_first_line") == "context"


@pytest.mark.parametrize("job", ["731", "732"])
def test_a_first_line_of_another_report_names_no_gpu(verdicts, job):
    v = verdicts[job]
    assert (v["domain"], v["cause"], v["culprit_gpus"]) == ("gpu", "gpu.fallen_off_bus", [])
