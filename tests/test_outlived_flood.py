"""A root candidate stamped before its attempt started is the attempt's root only if the
attempt failed at once (``demote_outlived_roots``), unless it went on repeating into the
attempt: a flood whose last repeat came after the start was still there while the attempt
ran. Real lines, landed through the Slurm connector and the files landing, attributed by a
run."""

from __future__ import annotations

from datetime import date

from tests.end_to_end import ALIVE, ITERATION, syslog, verdicts_by_job

# https://github.com/leptonai/gpud/blob/4a8de33a3f02e207f39e9023d67125592d599731/components/nfs/kmsg_matcher.go
NFS_DOWN = "kernel: nfs: server 7.247.192.16 not responding, still trying"
ONE_NODE = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
703|703|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:40:00|f1|gres/gpu=8,node=1
"""


def test_a_fault_repeated_from_before_the_start_into_the_attempt_is_not_outlived(tmp_path):
    # The server stopped answering before the job started and went on not answering while
    # it ran: the flood of reports (one landed row, first and last stamp) is still its root,
    # though the job only failed 40 minutes in.
    logs = tmp_path / "logs"
    logs.mkdir()
    # Every 20 s from 09:45 to 10:39: one flood, first stamped before the start.
    down = tuple((f"{9 + m // 60:02d}:{m % 60:02d}:{s:02d}", NFS_DOWN) for m in range(45, 100) for s in (0, 20, 40))
    (logs / "f1.log").write_text(syslog("f1", ("09:30:00", ALIVE), *down, ("10:45:00", ALIVE)))
    (logs / "slurm-703.out").write_text(f"[2026-11-20 10:10:00,000] {ITERATION}\n")
    v = verdicts_by_job(tmp_path, ONE_NODE, logs, date(2026, 11, 20))["703"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("storage", "storage.filesystem_unavailable", ["f1"])
