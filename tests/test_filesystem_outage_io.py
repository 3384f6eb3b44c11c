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


# ptlrpc's eviction notice (lustre/ptlrpc/import.c, LCONSOLE_ERROR_MSG 0x167): each client
# names its own import of the target, its instance different on every node.
EVICTED = ("kernel: LustreError: 167-0: scratch-OST0003-osc-ffff8c2{i}3e1a9000: This client was evicted by "
           "scratch-OST0003; in progress operations using this service will fail.")
EVICTIONS = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
881|881|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:21:00|e[1-4]|gres/gpu=32,node=4
"""


def test_one_target_evicting_every_client_is_the_service_not_the_nodes(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    for i in range(1, 5):
        (logs / f"e{i}.log").write_text(syslog(f"e{i}", ("10:05:00", "kernel: ok"), (f"10:20:0{i}", EVICTED.format(i=i))))
    (logs / "slurm-881.out").write_text(f"0: [2026-11-20 10:19:00,000] {ITERATION}\n")
    v = verdicts_by_job(tmp_path, EVICTIONS, logs, date(2026, 11, 20))["881"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("storage", "storage.filesystem_unavailable", [])
