"""A port that bounced again and again and then stayed down: the kernel's repeated
link-downs fold into one event (the flood dedupe keeps its first and last stamps), and so do
its link-ups; the port came back only if a link-up followed the last link-down, so a port
whose last word was down is the root of the hang that followed, while one that came back
after its last bounce, long before the job failed of something else, is not. Real lines,
landed through the Slurm connector and the files landing, attributed by a run."""

from __future__ import annotations

from datetime import date

import pytest

from tests.end_to_end import CUDA_OOM, ITERATION, role_of, syslog, verdicts_by_job, watchdog_timeout
from tests.test_fail_slow import PORT_DOWN, PORT_UP

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
870|870|train|alice|FAILED|1:0|2026-11-20T04:00:00|2026-11-20T04:28:00|p[1-2]|gres/gpu=16,node=2
871|871|train|alice|FAILED|1:0|2026-11-20T04:00:00|2026-11-20T04:41:00|p[3-4]|gres/gpu=16,node=2
"""


def _bounces(last_up: bool) -> tuple[tuple[str, str], ...]:
    """Four bounces of one port 100 s apart from 04:10:46, then a fifth link-down at
    04:16:45, followed by a link-up ten seconds later when ``last_up``."""
    lines = [line for start, up in (("04:10:46", "04:10:57"), ("04:12:26", "04:12:37"), ("04:14:06", "04:14:17"),
                                    ("04:15:46", "04:15:57")) for line in ((start, PORT_DOWN), (up, PORT_UP))]
    lines.append(("04:16:45", PORT_DOWN))
    if last_up:
        lines.append(("04:16:55", PORT_UP))
    return tuple(lines)


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("flap_flood")
    logs = root / "logs"
    logs.mkdir()
    # 870: p1's port stayed down after its last bounce; every rank's collective hung then
    # and timed out ten minutes later.
    (logs / "p1.log").write_text(syslog("p1", ("04:05:00", "kernel: ok"), *_bounces(last_up=False)))
    (logs / "p2.log").write_text(syslog("p2", ("04:05:00", "kernel: ok"), ("04:27:00", "kernel: ok")))
    (logs / "slurm-870.out").write_text(
        f"0: [2026-11-20 04:16:30,000] {ITERATION}\n" + "".join(watchdog_timeout(r, "04:26:50") + "\n" for r in (0, 8)))
    # 871: p3's port came back after its last bounce; the job ran on and died of a CUDA OOM
    # at 04:40.
    (logs / "p3.log").write_text(syslog("p3", ("04:05:00", "kernel: ok"), *_bounces(last_up=True)))
    (logs / "p4.log").write_text(syslog("p4", ("04:05:00", "kernel: ok"), ("04:40:00", "kernel: ok")))
    (logs / "slurm-871.out").write_text(
        f"0: [2026-11-20 04:39:00,000] {ITERATION}\n0: [2026-11-20 04:40:00,000] {CUDA_OOM}\n")
    return verdicts_by_job(root, SACCT, logs, date(2026, 11, 20))


def test_a_port_whose_last_word_was_down_is_the_root(verdicts):
    v = verdicts["870"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("network", "network.link_down", ["p1"])


def test_a_port_that_came_back_after_its_last_bounce_is_context(verdicts):
    v = verdicts["871"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("workload", "workload.cuda_oom", [])
    assert role_of(v, "fabric.mlx5_link_state") == "context"
