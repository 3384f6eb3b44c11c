"""A node whose client lost its filesystem fails the I/O its processes had under way: the
job's EIO on that node is the outage seen by the program, its confirmation
(``precedence.filesystem_outage_over_program_io_error``), so the verdict is the outage,
corroborated. Real lines, landed through the Slurm connector and the files landing,
attributed by a run."""

from __future__ import annotations

from datetime import date

from tests.end_to_end import ITERATION, role_of, syslog, verdicts_by_job
from tests.test_earlier_outage import LUSTRE_LOST
from tests.test_nvme_failure import EIO

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
880|880|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:21:00|l[1-2]|gres/gpu=16,node=2
"""


def test_the_io_error_of_a_process_on_a_node_that_lost_its_filesystem_confirms_the_outage(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    for node in ("l1", "l2"):
        (logs / f"{node}.log").write_text(syslog(node, ("10:05:00", "kernel: ok"), ("10:20:02", LUSTRE_LOST)))
    (logs / "slurm-880.out").write_text(
        f"0: [2026-11-20 10:19:00,000] {ITERATION}\n0: [2026-11-20 10:20:09,000] {EIO}: '/lustre/scratch/ckpt/iter_9000.pt'\n")
    v = verdicts_by_job(tmp_path, SACCT, logs, date(2026, 11, 20))["880"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("storage", "storage.filesystem_unavailable", [])
    assert role_of(v, "framework.os_storage_error") == "confirmation"
    assert v["quality"] == "definitive"
