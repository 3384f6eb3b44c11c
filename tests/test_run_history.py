"""The past events a run hands its python rules (``context.history``): the events of the
whole lake that the rules' ``HISTORY_EVENTS`` name, read once per run and taken in again
day by day as the run rewrites days; plus the events earlier chunks located. Checked
against a scan of the events table of the sample fleet's lake, landed and attributed by
the real pipeline."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from engine.oneshot import run_demo
from engine.rules.loader import load_rule_pack
from engine.run import LOCATED_COLUMNS, _PastEvents
from ingest.lake import Lake

NAMES = load_rule_pack().history_events()


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Lake:
    """The samples landed and attributed (read-only: tests that change it copy it)."""
    lake = Lake(tmp_path_factory.mktemp("history") / "lake")
    run_demo(lake)
    return lake


def scanned(lake: Lake) -> pl.DataFrame:
    """What a scan of the whole events table gives of the declared events."""
    return lake.scan("events").filter(pl.col("event").is_in(NAMES)).drop("day").collect().sort("event_id")


def test_the_bundled_rules_declare_what_they_look_up():
    assert {"host.node_boot", "xid_79_fallen_off_bus", "xid_31_mmu_fault", "host.rcu_stall"} <= set(NAMES)


def test_history_holds_the_declared_events_of_the_whole_lake(lake):
    got = _PastEvents(lake, NAMES).history(pl.DataFrame()).collect().sort("event_id")
    assert got.height and set(got["event"]) <= set(NAMES)
    assert_frame_equal(got, scanned(lake))


def test_a_day_the_run_rewrites_replaces_its_rows(lake, tmp_path):
    copy = Lake(shutil.copytree(lake.root, tmp_path / "lake"))
    past = _PastEvents(copy, NAMES)
    before = past.history(pl.DataFrame()).collect()
    # The day and cluster of a declared event: rewritten without it, as another pack would.
    cluster, day = copy.scan("events").filter(pl.col("event").is_in(NAMES)).select("cluster", "day").first().collect().row(0)
    rows = copy.scan("events", clusters=[cluster], days=[day]).collect()
    copy.replace_partitions("events", rows.filter(~pl.col("event").is_in(NAMES)).drop("cluster", "day"),
                            cluster=cluster, days=[day])
    past.rewritten([day])
    after = past.history(pl.DataFrame()).collect().sort("event_id")
    assert after.height < before.height
    assert_frame_equal(after, scanned(copy))


def test_events_earlier_chunks_located_count_when_declared(lake):
    # Two GPU events of an attempt of another cluster, as a chunk passes them on.
    located = pl.DataFrame(
        {"cluster": "c9", "node": "n1", "gpu": "0000:06:00", "attempt_id": "slurm/c9/1/0",
         "ts": datetime(2026, 11, 20, tzinfo=UTC), "rule_id": "gpu_xid", "role": "root_candidate",
         "event": ["xid_31_mmu_fault", "xid_94_contained_ecc"]},
    ).with_columns(pl.lit(None).alias("port"), pl.lit(None).alias("rank"))
    schema = lake.scan("events").collect_schema()
    located = located.select(pl.col(c).cast(schema[c]) for c in LOCATED_COLUMNS)
    got = _PastEvents(lake, NAMES).history(located).filter(pl.col("cluster") == "c9").collect()
    assert got["event"].to_list() == ["xid_31_mmu_fault"]


def test_a_pack_whose_rules_declare_nothing_reads_no_history(lake):
    assert _PastEvents(lake, ()).history(pl.DataFrame()).collect().is_empty()
