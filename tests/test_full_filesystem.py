"""A checkpoint that could not be written because its filesystem was full reads
``storage.disk_full``: torch.save's "file write failed" hides the errno, the ``[Errno 28]``
the same save raised beside it names it. Real lines, landed through the Slurm connector and
the files landing, attributed by a run."""

from __future__ import annotations

from datetime import date

from tests.end_to_end import ALIVE, ITERATION, syslog, verdicts_by_job

# https://github.com/SWivid/F5-TTS/issues/458
WRITE_FAILED = ("[rank0]: RuntimeError: [enforce fail at inline_container.cc:778] . PytorchStreamWriter failed "
                "writing file data.pkl: file write failed")
# https://github.com/babysor/MockingBird/issues/774
ENOSPC = "OSError: [Errno 28] No space left on device"

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
630|630|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|f1|gres/gpu=8,node=1
"""


def test_the_full_filesystem_behind_a_failed_checkpoint_write_is_the_root(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "f1.log").write_text(syslog("f1", ("10:05:00", ALIVE), ("10:25:00", ALIVE)))
    (logs / "slurm-630.out").write_text(
        f"[2026-11-20 10:20:00,000] {ITERATION}\n{WRITE_FAILED}\n\n"
        "During handling of the above exception, another exception occurred:\n\n"
        f"[rank0]: Traceback (most recent call last):\n[rank0]: {ENOSPC}\n"
    )
    v = verdicts_by_job(tmp_path, SACCT, logs, date(2026, 11, 20))["630"]
    assert (v["domain"], v["cause"], v["quality"]) == ("storage", "storage.disk_full", "definitive")
