"""A run over one day reads back as far as its attempts started: a job that ran for days
before it ended in the window still sees the fault of its first day."""

from __future__ import annotations

from datetime import date

from engine.run import run_attribution
from ingest.files import land_log_files
from ingest.lake import Lake
from ingest.static import land_static_context


def test_long_attempt_sees_the_fault_of_its_first_day(tmp_path):
    lake = Lake(tmp_path / "lake")
    context = tmp_path / "ctx.yaml"
    context.write_text(
        "cluster: c\nattempts:\n  - job_id: '9'\n    start: 2026-11-25T08:00:00Z\n"
        "    end: 2026-11-28T02:00:00Z\n    state: FAILED\n    exit_code: '1:0'\n    nodes: 'n[1-2]'\n"
    )
    land_static_context(lake, context)
    syslog = tmp_path / "n2.log"
    # Line shape of a real XID 79 (NVIDIA open-gpu-kernel-modules#1150), rsyslog ISO stamp.
    syslog.write_text(
        "2026-11-25T09:00:00.000000+00:00 n2 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', "
        "name=<unknown>, GPU has fallen off the bus.\n"
    )
    land_log_files(lake, [syslog], cluster="c", source="syslog")
    summary = run_attribution(lake, date(2026, 11, 28), date(2026, 11, 28))
    verdict = summary.verdicts.row(0, named=True)
    assert (verdict["cause"], verdict["culprit_nodes"]) == ("gpu.fallen_off_bus", ["n2"])
