"""A local NVMe drive that timed out, was reset and then disabled: the disabled device is the
verdict's cause (the disk failed: replace it), its earlier timeouts its confirmations; a
timeout the driver recovered from stays the timeout; md failing a RAID member outranks the
block layer's I/O errors that made it give up; a drive disabled after the hang began is the
hang's root from its first timeout, and a rival of another node's fault between its first
timeout and its disabling. Real lines (leptonai/gpud's kmsg matcher
tests), landed through the Slurm connector and the files landing, attributed by a run."""

from __future__ import annotations

from datetime import date

import pytest

from tests.end_to_end import ITERATION, XID_79, role_of, syslog, verdicts_by_job, watchdog_timeout

TIMEOUT = "kernel: nvme nvme4: I/O tag 22 (2016) opcode 0x2 (Admin Cmd) QID 0 timeout, reset controller"
DISABLED = "kernel: nvme nvme4: Disabling device after reset failure: -19"
# https://github.com/pytorch/pytorch/issues/48580 (the error a read on a failing disk raises)
EIO = "OSError: [Errno 5] Input/output error"
# The block layer's failed request (oxidecomputer/crucible#408) and md failing the
# member it came from (leptonai/gpud's kmsg matcher tests).
BLOCK_EIO = ("kernel: blk_update_request: I/O error, dev nvme1n1, sector 823872 op 0x0:(READ) flags 0x80700 "
             "phys_seg 1 prio class 0")
RAID_FAILED = "kernel: md/raid0md0: Disk failure on nvme1n1p1 detected, failing array."

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
860|860|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:21:00|q1|gres/gpu=8,node=1
861|861|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:21:00|q2|gres/gpu=8,node=1
862|862|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:21:00|q3|gres/gpu=8,node=1
863|863|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:21:00|q[4-5]|gres/gpu=4,node=2
864|864|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:21:00|q[6-7]|gres/gpu=16,node=2
865|865|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:21:00|q[8-9]|gres/gpu=16,node=2
"""


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("nvme")
    logs = root / "logs"
    logs.mkdir()
    # 860: the drive timed out at 10:20:00 and was disabled two seconds later. 861: the same
    # timeout, and the reset brought the drive back.
    (logs / "q1.log").write_text(syslog("q1", ("10:05:00", "kernel: ok"), ("10:20:00", TIMEOUT), ("10:20:02", DISABLED)))
    (logs / "q2.log").write_text(syslog("q2", ("10:05:00", "kernel: ok"), ("10:20:00", TIMEOUT)))
    # 862: a read failed at 10:20:00 and md failed the array's member a moment later.
    (logs / "q3.log").write_text(syslog("q3", ("10:05:00", "kernel: ok"), ("10:20:00", BLOCK_EIO), ("10:20:01", RAID_FAILED)))
    # 863: q5's drive timed out at 10:10:00, as q5's ranks stopped joining the collective
    # that began at 10:10:00; the driver disabled it at 10:13:00, after the hang began.
    (logs / "q5.log").write_text(syslog("q5", ("10:05:00", "kernel: ok"), ("10:10:00", TIMEOUT), ("10:13:00", DISABLED)))
    (logs / "slurm-863.out").write_text("".join(watchdog_timeout(r, "10:20:00") + "\n" for r in (0, 1)))
    # 864: q7's drive timed out at 10:20:00, half a second before q6's GPU fell off the bus,
    # and was disabled thirty seconds later: two faults on two nodes at once.
    (logs / "q6.log").write_text("2026-11-20T10:20:00.500000+00:00 q6 kernel: " + XID_79 + "\n")
    (logs / "q7.log").write_text(syslog("q7", ("10:05:00", "kernel: ok"), ("10:20:00", TIMEOUT), ("10:20:30", DISABLED)))
    # 865: q9's drive timed out at 10:19:30 and was disabled at 10:20:00; q8's GPU fell off
    # the bus two seconds after the disabling: two faults under way at once.
    (logs / "q8.log").write_text(syslog("q8", ("10:05:00", "kernel: ok"), ("10:20:02", f"kernel: {XID_79}")))
    (logs / "q9.log").write_text(syslog("q9", ("10:05:00", "kernel: ok"), ("10:19:30", TIMEOUT), ("10:20:00", DISABLED)))
    for job in ("860", "861", "862", "864", "865"):
        (logs / f"slurm-{job}.out").write_text(f"[2026-11-20 10:19:00,000] {ITERATION}\n[2026-11-20 10:20:05,000] {EIO}\n")
    return verdicts_by_job(root, SACCT, logs, date(2026, 11, 20))


def test_a_disabled_drive_is_the_cause_its_timeouts_confirm(verdicts):
    v = verdicts["860"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("storage", "storage.disk_failure", ["q1"])


def test_a_drive_disabled_after_the_hang_began_dates_from_its_first_timeout(verdicts):
    """The disabled drive is the end of the story its timeout began before the hang: the
    hang's root, not a report after it."""
    v = verdicts["863"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("storage", "storage.disk_failure", ["q5"])
    assert {e["event"]: e["role"] for e in v["evidence"] if e["rule_id"] == "host.nvme_failure"} == {
        "storage.nvme_disabled": "root_candidate", "storage.nvme_timeout": "confirmation"}


def test_a_drive_that_only_timed_out_stays_a_timeout(verdicts):
    v = verdicts["861"]
    assert (v["cause"], v["culprit_nodes"]) == ("storage.disk_timeout", ["q2"])
    assert role_of(v, "host.nvme_failure") == "root_candidate"


def test_a_failed_raid_member_is_the_cause_its_io_errors_confirm(verdicts):
    v = verdicts["862"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("storage", "storage.disk_failure", ["q3"])
    assert role_of(v, "host.raid_disk_failure") == "root_candidate"


def test_a_drive_that_began_failing_just_before_another_nodes_gpu_is_its_rival(verdicts):
    """Disabled after the GPU fell off, but timing out since half a second before it: the
    drive's story began first, and nothing orders two nodes' faults half a second apart. So
    is a GPU lost on another node while the drive was failing, up to its disabling."""
    for job, nodes in (("864", {"q6", "q7"}), ("865", {"q8", "q9"})):
        v = verdicts[job]
        assert (v["cause"], v["quality"], set(v["culprit_nodes"])) == ("storage.disk_failure", "ambiguous", nodes), job
