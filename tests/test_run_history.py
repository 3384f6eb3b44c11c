"""The past events a run hands its python rules (``context.history``): the events of the
whole lake that the rules' ``HISTORY_EVENTS`` name, read once per run and taken in again
day by day as the run rewrites days, earlier runs' node lines placed in the attempts they
fell in; plus the events earlier chunks located. Checked against a scan of the events
table of the sample fleet's lake, landed and attributed by the real pipeline, and end to
end: a GPU's XIDs in two jobs, attributed by one run or by two nightly runs."""

from __future__ import annotations

import shutil
from datetime import UTC, date, datetime, timedelta

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from engine.config import EngineConfig
from engine.oneshot import run_demo
from engine.rules.loader import load_rule_pack
from engine.run import LOCATED_COLUMNS, _PastEvents, landing_lake, run_attribution
from ingest.connectors import run_connector
from ingest.connectors.slurm import SlurmConnector, SlurmOptions
from ingest.files import land_log_files
from ingest.lake import Lake
from tests.end_to_end import ALIVE

NAMES = load_rule_pack().history_events()


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Lake:
    """The samples landed and attributed (read-only: tests that change it copy it)."""
    lake = Lake(tmp_path_factory.mktemp("history") / "lake")
    run_demo(lake)
    return lake


def scanned(lake: Lake) -> pl.DataFrame:
    """What a scan of the whole events table gives of the declared events."""
    return lake.scan("events").filter(pl.col("event").is_in(NAMES)).drop("day").collect()


AFTER = date(2026, 11, 30)
"""A run's first day after the samples' (2026-11-27 to 29): every line is an earlier run's."""


def history(lake: Lake, past: _PastEvents | None = None, first_day: date = AFTER) -> pl.DataFrame:
    past = past or _PastEvents(lake, NAMES, first_day, EngineConfig())
    return past.history(pl.DataFrame()).collect().sort("event_id", "attempt_id", nulls_last=True)


def test_the_bundled_rules_declare_what_they_look_up():
    assert {"host.node_boot", "xid_79_fallen_off_bus", "xid_31_mmu_fault", "host.rcu_stall"} <= set(NAMES)


def test_earlier_runs_lines_are_placed_in_the_attempts_they_fell_in(lake):
    got, lines = history(lake), scanned(lake)
    assert lines.height and set(got["event_id"]) == set(lines["event_id"])
    # Sample 1001: gpu003's GPU fell off the bus during the job; the lake's line is no job's.
    fell_off = (pl.col("event") == "xid_79_fallen_off_bus") & (pl.col("node") == "gpu003")
    assert lines.filter(fell_off)["attempt_id"].to_list() == [None]
    assert got.filter(fell_off)["attempt_id"].to_list() == ["static/demo/1001/0"]
    # Placed or not, each line keeps every other column as landed.
    assert_frame_equal(got.drop("attempt_id").unique().sort("event_id"), lines.drop("attempt_id").sort("event_id"))


def test_lines_of_the_runs_own_days_or_older_than_the_repeat_window_stay_no_attempts(lake):
    for first_day in (date(2026, 11, 27), AFTER + timedelta(days=8)):
        got = history(lake, first_day=first_day)
        assert_frame_equal(got, scanned(lake).sort("event_id", "attempt_id", nulls_last=True))


def test_a_line_in_no_attempts_window_stays_no_attempts(lake, tmp_path):
    copy = Lake(shutil.copytree(lake.root, tmp_path / "lake"))
    line = copy.scan("events").filter(pl.col("event") == "xid_79_fallen_off_bus").head(1).collect()
    # Two days earlier, when no sample attempt ran.
    moved = line.with_columns(pl.col("ts", "last_ts").dt.offset_by("-2d"))
    copy.replace_partitions("events", moved.drop("cluster", "day"), cluster=line["cluster"].item(),
                            days=[moved["ts"].dt.date().item()])
    got = history(copy).filter(pl.col("ts") == moved["ts"].item())
    assert got["attempt_id"].to_list() == [None]


def test_a_day_the_run_rewrites_replaces_its_rows(lake, tmp_path):
    copy = Lake(shutil.copytree(lake.root, tmp_path / "lake"))
    past = _PastEvents(copy, NAMES, date(2026, 11, 27), EngineConfig())
    before = history(copy, past)
    # The day and cluster of a declared event: rewritten without it, as another pack would.
    cluster, day = copy.scan("events").filter(pl.col("event").is_in(NAMES)).select("cluster", "day").first().collect().row(0)
    kept = copy.scan("events", clusters=[cluster], days=[day]).collect().filter(~pl.col("event").is_in(NAMES))
    copy.replace_partitions("events", kept.drop("cluster", "day"), cluster=cluster, days=[day])
    past.rewritten(day, kept.drop("day"), {cluster})
    after = history(copy, past)
    assert after.height < before.height
    assert_frame_equal(after, history(copy, first_day=date(2026, 11, 27)))


def test_events_earlier_chunks_located_count_when_declared(lake):
    # Two GPU events of an attempt of another cluster, as a chunk passes them on.
    located = pl.DataFrame(
        {"cluster": "c9", "node": "n1", "gpu": "0000:06:00", "attempt_id": "slurm/c9/1/0",
         "ts": datetime(2026, 11, 20, tzinfo=UTC), "rule_id": "gpu_xid", "role": "root_candidate",
         "event": ["xid_31_mmu_fault", "xid_94_contained_ecc"]},
    ).with_columns(pl.lit(None).alias("port"), pl.lit(None).alias("rank"))
    schema = lake.scan("events").collect_schema()
    located = located.select(pl.col(c).cast(schema[c]) for c in LOCATED_COLUMNS)
    got = _PastEvents(lake, NAMES, AFTER, EngineConfig()).history(located).filter(pl.col("cluster") == "c9").collect()
    assert got["event"].to_list() == ["xid_31_mmu_fault"]


def test_a_pack_whose_rules_declare_nothing_reads_no_history(lake):
    assert _PastEvents(lake, (), AFTER, EngineConfig()).history(pl.DataFrame()).collect().is_empty()


# https://github.com/leptonai/gpud/blob/4a8de33a3f02e207f39e9023d67125592d599731/components/memory/testdata/dmesg.decode.iso.log
XID_13 = ("NVRM: Xid (PCI:0000:38:00): 13, pid='<unknown>', name=<unknown>, Graphics Exception: "
          "ESR 0x546fb0=0x11f000e 0x546fb4=0x24 0x546fa8=0xf81eb60 0x546fac=0x1174")
# Two users' jobs on n1, on two days; each hit XID 13 on the same GPU.
SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
901|901|train|bob|FAILED|1:0|2026-11-20T09:00:00|2026-11-20T10:05:00|n1|gres/gpu=8,node=1
902|902|finetune|alice|FAILED|1:0|2026-11-{second}T09:00:00|2026-11-{second}T10:05:00|n1|gres/gpu=8,node=1
"""


def _two_days_of_xids(root, second: str = "22") -> Lake:
    (root / "logs").mkdir(parents=True)
    (root / "logs" / "n1.log").write_text("".join(
        f"2026-11-{day}T{clock}.000000+00:00 n1 {message}\n" for day in ("20", second)
        for clock, message in (("08:00:00", ALIVE), ("10:00:00", f"kernel: {XID_13}"), ("11:00:00", ALIVE))
    ))
    (root / "sacct.txt").write_text(SACCT.format(second=second))
    lake = landing_lake(root / "lake")
    report = run_connector(lake, SlurmConnector(SlurmOptions(sacct_file=[root / "sacct.txt"], timezone="UTC"), "c1"), None)
    assert report.error is None, report.error
    land_log_files(lake, [root / "logs"], cluster="c1")
    return lake


def _cause(lake: Lake, job: str) -> str:
    results = lake.scan("results").filter(pl.col("job_id") == job).collect()
    return results["cause"].item()


@pytest.mark.parametrize("chunk_attempts", [1, 100])
def test_one_run_over_both_days_sees_the_gpu_in_two_jobs(tmp_path, chunk_attempts):
    lake = _two_days_of_xids(tmp_path)
    run_attribution(lake, date(2026, 11, 20), date(2026, 11, 22), config=EngineConfig(chunk_attempts=chunk_attempts))
    assert _cause(lake, "902") == "gpu.repeated_xid"
    # An inference from the repeat, which the fleet's repeat-offender note (the same two
    # jobs) does not make definitive.
    quality = lake.scan("results").filter(pl.col("job_id").is_in(["901", "902"])).collect()["quality"]
    assert set(quality.to_list()) == {"probable"}


@pytest.mark.parametrize("second", ["22", "21"])
def test_nightly_runs_see_the_gpu_in_two_jobs(tmp_path, second):
    """The second night's run finds the first night's XID in the lake's events, where it is
    no job's: the run places it in the attempt it fell in, as it places its own events. So
    it does when the first night is the next day's lookback, a day the run reads again
    (its own lines are attached only to the run's attempts)."""
    lake = _two_days_of_xids(tmp_path, second)
    run_attribution(lake, date(2026, 11, 20), date(2026, 11, 20))
    assert _cause(lake, "901") == "workload.gpu_illegal_address"
    run_attribution(lake, date(2026, 11, int(second)), date(2026, 11, int(second)))
    assert _cause(lake, "902") == "gpu.repeated_xid"
