"""srun's and the launchers' teardown says which process ended, not why: it corroborates an
error the job printed itself (the process that printed it is the one that exited), never a
fault a node's log reports. A port that went down with nothing but srun's task exits after
it is ``probable``; the job's own traceback followed by the same exits is ``definitive``.
Real lines, landed through the Slurm connector and the files landing, attributed by a
run."""

from __future__ import annotations

from datetime import date

import pytest

from tests.end_to_end import syslog, verdicts_by_job

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
850|850|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:31:00|t[1-2]|gres/gpu=16,node=2
851|851|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:31:00|t[3-4]|gres/gpu=16,node=2
"""
# https://github.com/leptonai/gpud/pull/1209 (an IB port's state line)
LINK_DOWN = "kernel: mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link DOWN"
# srun's reports of its tasks ending (desihub/desitarget#628, huggingface/accelerate#2960)
EXITED = "srun: error: {node}: tasks {tasks}: Exited with exit code 1\n"
TERMINATED = "srun: error: {node}: tasks {tasks}: Terminated\n"


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("teardown")
    logs = root / "logs"
    logs.mkdir()
    # 850: t1's port went down at 10:30:00; the job's output holds only srun's exits.
    (logs / "t1.log").write_text(syslog("t1", ("10:00:05", "kernel: ok"), ("10:30:00", LINK_DOWN)))
    (logs / "t2.log").write_text(syslog("t2", ("10:00:05", "kernel: ok")))
    (logs / "slurm-850.out").write_text(
        "0: [2026-11-20 10:29:00,000] step 100\n"
        + EXITED.format(node="t1", tasks="0-7") + TERMINATED.format(node="t2", tasks="8-15"))
    # 851: rank 3's own error (the traceback's last line as NVIDIA/Megatron-LM#185 shows
    # it), then the same exits.
    for node in ("t3", "t4"):
        (logs / f"{node}.log").write_text(syslog(node, ("10:00:05", "kernel: ok")))
    (logs / "slurm-851.out").write_text(
        "3: [2026-11-20 10:30:00,000] step 100\n"
        "3: FileNotFoundError: [Errno 2] No such file or directory: "
        "'checkpoints/gpt2_345m/iter_0006000/mp_rank_00/model_optim_rng.pt'\n"
        + EXITED.format(node="t3", tasks="0-7") + TERMINATED.format(node="t4", tasks="8-15"))
    return verdicts_by_job(root, SACCT, logs, date(2026, 11, 20))


def test_a_port_down_that_only_srun_exits_follow_is_probable(verdicts):
    v = verdicts["850"]
    assert (v["domain"], v["cause"], v["culprit_nodes"], v["quality"]) == (
        "network", "network.link_down", ["t1"], "probable")


def test_the_jobs_own_error_that_srun_exits_follow_is_definitive(verdicts):
    v = verdicts["851"]
    assert (v["domain"], v["cause"], v["quality"]) == ("workload", "workload.file_not_found", "definitive")
