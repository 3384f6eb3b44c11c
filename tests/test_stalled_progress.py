"""An attempt whose training loop stopped reporting progress long before the scheduler ended
it, or slowed down until its limit: the time limit, the user's cancellation or a preemption only stopped
a job no longer working at its pace, so it is an ``insufficient`` root, the action to
investigate; watchdog timeouts without a stamp of their own, printed somewhere after the
last progress report, say the job hung long before its limit or its cancellation (more time
would not have helped; neither is a root then). A job that reported progress up to its
limit at a steady pace simply ran out of time. Real lines, landed through the Slurm
connector and the files landing, attributed by a run."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import polars as pl
import pytest

from engine.decide import HUNG_BEFORE_LIMIT, SLOWED_CENTER, slowed, stalled
from engine.run import _counts, _progress_of
from tests.end_to_end import LOSS_ITERATION, progress, syslog, verdicts_by_job

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
900|900|train|alice|TIMEOUT|0:0|2026-11-20T08:00:00|2026-11-20T12:00:05|m[1-2]|gres/gpu=4,node=2
901|901|train|alice|TIMEOUT|0:0|2026-11-20T08:00:00|2026-11-20T12:00:05|m[3-4]|gres/gpu=4,node=2
902|902|train|alice|TIMEOUT|0:0|2026-11-20T08:00:00|2026-11-20T12:00:05|m[5-6]|gres/gpu=4,node=2
903|903|train|alice|CANCELLED by 1000|0:15|2026-11-20T08:00:00|2026-11-20T10:40:05|m[7-8]|gres/gpu=4,node=2
904|904|train|alice|TIMEOUT|0:0|2026-11-20T08:00:00|2026-11-20T12:00:05|m[9-10]|gres/gpu=4,node=2
905|905|train|alice|CANCELLED by 1000|0:15|2026-11-20T08:00:00|2026-11-20T10:40:05|m[11-12]|gres/gpu=4,node=2
906|906|train|alice|TIMEOUT|0:0|2026-11-20T08:00:00|2026-11-20T12:00:05|m[13-14]|gres/gpu=4,node=2
907|907|train|alice|PREEMPTED|0:15|2026-11-20T08:00:00|2026-11-20T10:40:05|m[15-16]|gres/gpu=4,node=2
908|908|train|alice|PREEMPTED|0:15|2026-11-20T08:00:00|2026-11-20T10:40:05|m[17-18]|gres/gpu=4,node=2
909|909|train|alice|CANCELLED by 1000|0:15|2026-11-20T08:00:00|2026-11-20T12:00:05|m[19-20]|gres/gpu=4,node=2
"""
# PyTorch 2.1's watchdog line, which carries no stamp of its own (pytorch/pytorch#118369).
UNSTAMPED_TIMEOUT = ("{r}: [E ProcessGroupNCCL.cpp:475] [Rank {r}] Watchdog caught collective operation timeout: "
                     "WorkNCCL(SeqNum=11881, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for "
                     "1800033 milliseconds before timing out.")
LIMIT = "slurmstepd: error: *** JOB {job} ON {node} CANCELLED AT 2026-11-20T12:00:00 DUE TO TIME LIMIT ***"
CANCEL = "slurmstepd: error: *** JOB {job} ON {node} CANCELLED AT 2026-11-20T{clock} ***"
PREEMPTION = "slurmstepd: error: *** JOB {job} ON {node} CANCELLED AT 2026-11-20T10:40:00 DUE TO PREEMPTION ***"


def slowing_progress() -> str:
    """Rank 0's reports every 100 iterations from 08:05 until the limit, the time per 100
    growing from 2 to 5 minutes."""
    moment, lines, n = datetime(2026, 11, 20, 8, 5), [], 0
    while moment < datetime(2026, 11, 20, 12, 0):
        n += 100
        lines.append(LOSS_ITERATION.format(task=0, clock=moment.strftime("%H:%M:%S"), n=n, samples=n * 1024) + "\n")
        moment += timedelta(minutes=2 + 3 * (moment - datetime(2026, 11, 20, 8, 5)) / timedelta(hours=4))
    return "".join(lines)


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("stalled")
    logs = root / "logs"
    logs.mkdir()
    # 900: progress stopped at 09:50; nothing else was printed until the limit at 12:00.
    # 901: the same, with every rank's watchdog timeout (no stamp) after the last report.
    # 902: progress up to the limit: the job ran out of time.
    # 903: progress stopped at 09:50; the user cancelled at 10:40.
    # 904: reports every 40 minutes, the last 45 minutes before the limit: not a stall.
    # 905: progress stopped at 09:50, every rank's watchdog timed out, the user cancelled at 10:40.
    # 906: a report every 100 steps up to the limit, each 100 taking longer: 2 minutes at
    #      first, 5 by the end (a GPU slowing down, with no error line).
    # 907: progress stopped at 09:50; a preemption at 10:40.
    # 908: progress up to 10:39; a preemption at 10:40.
    # 909: the slowing reports of 906, and the user cancelled at 12:00.
    (logs / "slurm-900.out").write_text(progress("09:50") + LIMIT.format(job=900, node="m1") + "\n")
    (logs / "slurm-901.out").write_text(progress("09:50") + "".join(UNSTAMPED_TIMEOUT.format(r=r) + "\n" for r in range(4))
                                        + LIMIT.format(job=901, node="m3") + "\n")
    (logs / "slurm-902.out").write_text(progress("11:55") + LIMIT.format(job=902, node="m5") + "\n")
    (logs / "slurm-903.out").write_text(progress("09:50") + CANCEL.format(job=903, node="m7", clock="10:40:00") + "\n")
    (logs / "slurm-904.out").write_text(progress("11:15", every_minutes=40) + LIMIT.format(job=904, node="m9") + "\n")
    (logs / "slurm-905.out").write_text(progress("09:50") + "".join(UNSTAMPED_TIMEOUT.format(r=r) + "\n" for r in range(4))
                                        + CANCEL.format(job=905, node="m11", clock="10:40:00") + "\n")
    (logs / "slurm-906.out").write_text(slowing_progress() + LIMIT.format(job=906, node="m13") + "\n")
    (logs / "slurm-907.out").write_text(progress("09:50") + PREEMPTION.format(job=907, node="m15") + "\n")
    (logs / "slurm-908.out").write_text(progress("10:39") + PREEMPTION.format(job=908, node="m17") + "\n")
    (logs / "slurm-909.out").write_text(slowing_progress() + CANCEL.format(job=909, node="m19", clock="12:00:00") + "\n")
    for i in range(1, 21):
        (logs / f"m{i}.log").write_text(syslog(f"m{i}", ("07:50:00", "kernel: ok"), ("12:10:00", "kernel: ok")))
    return verdicts_by_job(root, SACCT, logs, date(2026, 11, 20), year=2026)


def test_a_time_limit_that_ended_a_stalled_job_says_nothing_of_why_it_stalled(verdicts):
    """More time might have helped a job in a long silent phase (an evaluation), so the
    limit stays its root; but the job had stopped reporting for two hours, and nothing
    says why: more time is not the answer to look for."""
    v = verdicts["900"]
    assert (v["domain"], v["cause"], v["quality"], v["recommended_action"]) == (
        "scheduler", "scheduler.time_limit", "insufficient", "investigate")


def test_unstamped_timeouts_after_the_progress_stopped_say_the_job_hung_long_before_its_limit(verdicts):
    v = verdicts["901"]
    assert (v["domain"], v["cause"], v["quality"]) == ("unknown", "unknown.symptoms_only", "insufficient")
    assert v["recommended_action"] != "increase_time_limit"


def test_a_job_that_made_progress_up_to_its_limit_ran_out_of_time(verdicts):
    for job in ("902", "904"):
        v = verdicts[job]
        assert (v["cause"], v["quality"], v["recommended_action"]) == (
            "scheduler.time_limit", "definitive", "increase_time_limit"), job


def test_a_cancellation_of_a_stalled_job_says_nothing_of_why_it_stalled(verdicts):
    v = verdicts["903"]
    assert (v["domain"], v["cause"], v["quality"], v["recommended_action"]) == (
        "scheduler", "scheduler.cancelled", "insufficient", "investigate")


def test_a_preemption_of_a_stalled_job_says_nothing_of_why_it_stalled(verdicts):
    """The scheduler took the nodes of a job that had printed nothing for 50 minutes: the
    preemption ended it, but it was no longer working. One still reporting when preempted
    was simply preempted."""
    stalled_job, working = verdicts["907"], verdicts["908"]
    assert (stalled_job["domain"], stalled_job["cause"], stalled_job["quality"], stalled_job["recommended_action"]) == (
        "scheduler", "scheduler.preempted", "insufficient", "investigate")
    assert (working["cause"], working["quality"]) == ("scheduler.preempted", "definitive")


def test_a_cancellation_of_a_job_whose_watchdogs_reported_it_hung_is_no_root(verdicts):
    """Someone stopped a job hung for long: what hung it is the question, and nothing says."""
    v = verdicts["905"]
    assert (v["domain"], v["cause"], v["quality"]) == ("unknown", "unknown.symptoms_only", "insufficient")
    assert v["recommended_action"] != "resubmit"


def test_a_time_limit_that_ended_a_job_slowing_down_says_nothing_of_why(verdicts):
    """The limit stopped it, but the job needed more time because its steps slowed: that is
    the question, and nothing in the logs answers it."""
    v = verdicts["906"]
    assert (v["cause"], v["quality"], v["recommended_action"]) == ("scheduler.time_limit", "insufficient", "investigate")


def test_a_cancellation_of_a_job_slowing_down_says_nothing_of_why(verdicts):
    """Someone stopped a job whose steps had been taking longer and longer: why they did is
    the question (a GPU slowing down prints no error), not a resubmission."""
    v = verdicts["909"]
    assert (v["cause"], v["quality"], v["recommended_action"]) == ("scheduler.cancelled", "insufficient", "investigate")


def test_progress_reports_are_counted_at_landing_by_distinct_second():
    """Every rank of a node prints the same report in one second: it counts once. Only
    reports stamped by their writer count, and only with the loss beside the step."""
    at = datetime(2026, 11, 20, 9, 0, 0)
    rows = pl.DataFrame({
        "cluster": "c1", "attempt_id": "a", "source": "app", "node": "m1",
        "ts": [at, at, at + timedelta(minutes=5), at + timedelta(minutes=9), at + timedelta(minutes=10)],
        "ts_source": ["line", "line", "line", "inferred", "line"],
        "message": ["iteration 1/ 9 | lm loss: 2.9", "iteration 1/ 9 | lm loss: 2.9", "step 2/9 loss=2.8",
                    "step 3/9 loss=2.7", "loss scale 65536 at iteration"],
    }).with_columns(pl.col("ts").dt.replace_time_zone("UTC"))
    counts = _counts(rows).row(0, named=True)
    assert (counts["rows"], counts["progress_seconds"]) == (5, 2)
    assert (counts["progress_first"].minute, counts["progress_last"].minute) == (0, 5)


def test_a_stall_is_long_against_both_the_reports_cadence_and_ten_minutes():
    end = datetime(2026, 11, 20, 12, 0)
    frame = pl.DataFrame({
        "end_ts": [end] * 4,
        "last_progress": [end - timedelta(minutes=30), end - timedelta(minutes=30), end - HUNG_BEFORE_LIMIT / 2,
                          end - timedelta(minutes=30)],
        "progress_interval": [timedelta(minutes=1), timedelta(minutes=10), timedelta(seconds=1), timedelta(minutes=1)],
        "progress_reports": [50, 50, 50, 4],
    })
    assert frame.select(stalled().alias("stalled"))["stalled"].to_list() == [True, False, False, False]


def test_reports_that_thin_out_say_the_job_slowed():
    """Centred well before the middle of their span: the reports thinned out. A few reports
    say nothing."""
    frame = pl.DataFrame({"progress_reports": [60, 60, 5], "progress_center": [0.40, 0.50, 0.30]})
    assert frame.select(slowed().alias("slowed"))["slowed"].to_list() == [True, False, False]
    assert 0.4 < SLOWED_CENTER < 0.5


def test_the_reports_centre_is_where_their_mean_moment_lies_in_their_span():
    """Counted at landing as a sum of seconds (it adds up over files and days), read back as
    a centre: steady reports centre at one half."""
    at = datetime(2026, 11, 20, 9, 0, 0, tzinfo=UTC)
    rows = pl.DataFrame({
        "cluster": "c1", "attempt_id": "a", "source": "app", "node": "m1",
        "ts": [at + timedelta(minutes=m) for m in (0, 10, 20, 30, 40)], "ts_source": "line",
        "message": [f"iteration {n}/ 9 | lm loss: 2.9" for n in range(5)],
    })
    counts = _counts(rows)
    assert _progress_of(counts)["progress_center"].to_list() == [0.5]
