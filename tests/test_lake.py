"""Batched landing of by-input tables: idempotence, re-landing across batches, crashes."""

from __future__ import annotations

import os
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import polars as pl
import pytest

from ingest.lake import Derivation, Lake, LakeError, batch_key
from ingest.schema import OBSERVATIONS
from tests.engine_frames import at, attempts

CLUSTER = "c1"
DAY1 = datetime(2026, 3, 2, 10, tzinfo=timezone.utc)
DAY2 = DAY1 + timedelta(days=1)


def rows(input_id: str, n: int, *, start: datetime = DAY1, tag: str = "v1") -> pl.DataFrame:
    """``n`` observation rows of one input, an hour apart from ``start``."""
    return pl.DataFrame({
        "ts": [start + timedelta(hours=i) for i in range(n)],
        "ts_source": ["line"] * n,
        "node": ["gpu-1"] * n,
        "attempt_id": [None] * n,
        "rank": [None] * n,
        "program": ["kernel"] * n,
        "message": [f"{tag} line {i} of {input_id}" for i in range(n)],
        "origin": [f"{input_id}:{i + 1}" for i in range(n)],
        "seq": list(range(1, n + 1)),
        "input_id": [input_id] * n,
    }, schema=pl.from_arrow(OBSERVATIONS.empty_table()).schema)


def land(lake: Lake, *frames: pl.DataFrame, input_ids=None):
    return lake.land_inputs("observations", pl.concat(frames), cluster=CLUSTER, source="syslog",
                            input_ids=input_ids)


def stored(lake: Lake) -> pl.DataFrame:
    return lake.scan("observations").collect().sort("input_id", "seq")


def per_input(lake: Lake) -> dict[str, int]:
    counts = stored(lake).group_by("input_id").len()
    return dict(zip(counts["input_id"], counts["len"]))


def data_files(lake: Lake) -> list[str]:
    return sorted(str(p.relative_to(lake.root)) for p in lake.files("observations"))


def leftovers(lake: Lake) -> list[str]:
    """Temporary or journal files still on disk."""
    return sorted(p.name for p in lake.root.rglob("*") if p.name.startswith(".") or p.name.startswith("pending-"))


def test_relanding_a_batch_is_idempotent_and_writes_one_file_per_day(tmp_path):
    lake = Lake(tmp_path / "lake")
    batch = [rows("a", 30), rows("b", 2), rows("c", 1, start=DAY2)]
    report = land(lake, *batch)
    files = data_files(lake)
    key = batch_key(["a", "b", "c"])
    # 33 rows of three inputs over two days: two files, named by the batch
    assert files == [
        f"observations/cluster=c1/day=2026-03-02/source=syslog/part-{key}.parquet",
        f"observations/cluster=c1/day=2026-03-03/source=syslog/part-{key}.parquet",
    ]
    assert report.rows == 33 and len(report.files) == 2
    first = stored(lake)
    land(lake, *reversed(batch))
    assert data_files(lake) == files
    assert stored(lake).equals(first)
    assert leftovers(lake) == []


def test_relanding_one_input_alone_moves_it_and_leaves_the_others(tmp_path):
    lake = Lake(tmp_path / "lake")
    land(lake, rows("a", 3), rows("b", 4), rows("c", 5))
    before = stored(lake).filter(pl.col("input_id") != "b")
    lake.land("observations", rows("b", 2, tag="v2"), cluster=CLUSTER, input_id="b", source="syslog")
    assert per_input(lake) == {"a": 3, "b": 2, "c": 5}
    assert stored(lake).filter(pl.col("input_id") != "b").equals(before)
    assert set(stored(lake).filter(pl.col("input_id") == "b")["message"].str.slice(0, 2)) == {"v2"}
    assert f"part-{batch_key(['b'])}.parquet" in {p.name for p in lake.files("observations")}
    # landing the whole batch again pulls b back into the batch file and drops its own file
    land(lake, rows("a", 3), rows("b", 4), rows("c", 5))
    assert per_input(lake) == {"a": 3, "b": 4, "c": 5}
    assert {p.name for p in lake.files("observations")} == {f"part-{batch_key(['a', 'b', 'c'])}.parquet"}


def test_a_batch_whose_input_set_changes(tmp_path):
    lake = Lake(tmp_path / "lake")
    land(lake, rows("a", 3), rows("b", 3), rows("c", 3))
    land(lake, rows("a", 1), rows("b", 1))  # c is not part of this batch: its rows stay
    assert per_input(lake) == {"a": 1, "b": 1, "c": 3}
    land(lake, rows("b", 2), rows("c", 2), rows("d", 2, start=DAY2))
    assert per_input(lake) == {"a": 1, "b": 2, "c": 2, "d": 2}
    # the first batch's file held only c at the end: it is gone, not left empty
    names = {p.name for p in lake.files("observations")}
    assert f"part-{batch_key(['a', 'b', 'c'])}.parquet" not in names
    assert len(names) == 2  # {a, b} and {b, c, d}
    assert leftovers(lake) == []


def test_an_input_listed_without_rows_loses_its_old_rows(tmp_path):
    lake = Lake(tmp_path / "lake")
    land(lake, rows("a", 3), rows("b", 3, start=DAY2))
    land(lake, rows("a", 2), input_ids=["a", "b"])
    assert per_input(lake) == {"a": 2}
    assert len(lake.files("observations")) == 1
    report = lake.land_inputs("observations", rows("a", 0), cluster=CLUSTER, source="syslog", input_ids=["a"])
    assert report.rows == 0 and lake.files("observations") == []


def test_the_same_input_can_move_to_another_source(tmp_path):
    lake = Lake(tmp_path / "lake")
    land(lake, rows("a", 3))
    lake.land_inputs("observations", rows("a", 3), cluster=CLUSTER, source="app")
    assert lake.scan("observations").collect()["source"].unique().to_list() == ["app"]


def test_crash_before_the_index_is_written_is_repaired_by_the_next_landing(tmp_path, monkeypatch):
    """A crash after the batch's data files are written and before the index is: every
    visible file is complete, nothing is lost, and the next landing absorbs the journal."""
    lake = Lake(tmp_path / "lake")
    land(lake, rows("a", 3), rows("b", 3))
    real_write_index = Lake._write_index

    def crash_on_index(self, frame, path):
        if path.name == "index.parquet":
            raise OSError("disk pulled")
        real_write_index(self, frame, path)

    monkeypatch.setattr(Lake, "_write_index", crash_on_index)
    with pytest.raises(OSError, match="disk pulled"):
        land(lake, rows("a", 3, tag="v2"), rows("c", 3))
    monkeypatch.undo()
    assert not list(lake.root.rglob("*.tmp"))
    assert all(pl.read_parquet(p).height for p in lake.files("observations"))
    assert per_input(lake) == {"a": 3, "b": 3, "c": 3}
    assert leftovers(lake) == [f"pending-{batch_key(['a', 'c'])}.parquet"]

    lake.land("observations", rows("c", 1, tag="v3"), cluster=CLUSTER, input_id="c", source="syslog")
    assert per_input(lake) == {"a": 3, "b": 3, "c": 1}
    assert set(stored(lake).filter(pl.col("input_id") == "a")["message"].str.slice(0, 2)) == {"v2"}
    assert leftovers(lake) == []


def test_crash_before_old_rows_are_removed_duplicates_until_relanded(tmp_path, monkeypatch):
    """A crash between writing the batch's files and removing its inputs from older files
    leaves those inputs twice (never lost); the journal keeps both places known, so landing
    an input again, alone or in any batch, leaves it once."""
    lake = Lake(tmp_path / "lake")
    land(lake, rows("a", 3), rows("b", 3))
    old_file = lake.files("observations")[0]
    real_write = Lake._write

    def crash_on_cleanup(self, frame, table, target):
        if target == old_file:
            raise OSError("killed")
        real_write(self, frame, table, target)

    monkeypatch.setattr(Lake, "_write", crash_on_cleanup)
    with pytest.raises(OSError, match="killed"):
        land(lake, rows("a", 3, tag="v2"), rows("c", 3))
    monkeypatch.undo()
    assert not list(lake.root.rglob("*.tmp"))
    assert per_input(lake) == {"a": 6, "b": 3, "c": 3}
    lake.land("observations", rows("c", 2), cluster=CLUSTER, input_id="c", source="syslog")
    assert per_input(lake) == {"a": 6, "b": 3, "c": 2}
    land(lake, rows("a", 3, tag="v3"), rows("b", 3))
    assert per_input(lake) == {"a": 3, "b": 3, "c": 2}
    assert set(stored(lake).filter(pl.col("input_id") == "a")["message"].str.slice(0, 2)) == {"v3"}
    assert leftovers(lake) == []


def test_crash_while_writing_a_data_file_leaves_no_partial_file(tmp_path, monkeypatch):
    lake = Lake(tmp_path / "lake")
    land(lake, rows("a", 2))
    calls = []
    real_write = Lake._write

    def crash_mid_file(self, frame, table, target):
        calls.append(target)
        if len(calls) == 2:  # the second day's file: the first is already in place
            def broken(fh):
                fh.write(b"PAR1 half a file")
                raise OSError("killed")
            from ingest import lake as lake_module
            lake_module._atomic_write_bytes(target, broken)
        real_write(self, frame, table, target)

    monkeypatch.setattr(Lake, "_write", crash_mid_file)
    with pytest.raises(OSError, match="killed"):
        land(lake, rows("a", 2, tag="v2"), rows("b", 2, start=DAY2))
    monkeypatch.undo()
    assert not [p for p in lake.root.rglob("*") if p.name.endswith(".tmp")]
    assert all(pl.read_parquet(p).height for p in lake.files("observations"))
    land(lake, rows("a", 2, tag="v2"), rows("b", 2, start=DAY2))
    assert per_input(lake) == {"a": 2, "b": 2}
    assert leftovers(lake) == []


def test_bad_batches_are_refused_before_anything_is_written(tmp_path):
    lake = Lake(tmp_path / "lake")
    cases = [
        (dict(data=rows("a", 1), input_ids=["b"]), r"rows of inputs outside the batch, e\.g\. a; add them to input_ids"),
        (dict(data=rows("a", 1).with_columns(pl.lit(None, pl.String).alias("input_id"))), r"1 rows have no input_id"),
        (dict(data=rows("a", 1).with_columns(pl.lit(None, pl.Datetime("us", "UTC")).alias("ts"))), r"have no timestamp"),
        (dict(data=rows("a", 1).drop("message")), r"missing columns \['message'\]"),
    ]
    for kwargs, message in cases:
        with pytest.raises(LakeError, match=message):
            lake.land_inputs("observations", cluster=CLUSTER, source="syslog", **kwargs)
    with pytest.raises(LakeError, match="needs a source"):
        lake.land_inputs("observations", rows("a", 1), cluster=CLUSTER)
    with pytest.raises(LakeError, match="not a by-input table"):
        lake.land_inputs("attempts", rows("a", 1), cluster=CLUSTER)
    assert not lake.root.exists()


def count_rows(frame: pl.DataFrame) -> pl.DataFrame:
    """A derivation's function: rows per input and partition (the partition columns must
    be there)."""
    return frame.group_by("input_id", "cluster", "day", "source").len().sort("input_id")


COUNTS = Derivation("counts", "observations", count_rows)


def derivatives(lake: Lake) -> dict[str, pl.DataFrame | None]:
    """Each data file's derivative (None when it has none), checked against the file: a
    derivative that exists always describes the file's current rows."""
    files = lake.files("observations")
    found = {}
    for path, derived in zip(files, lake.derived(COUNTS.name, files), strict=True):
        rel = str(path.relative_to(lake.root))
        found[rel] = None if derived is None else pl.read_parquet(derived)
        if derived is not None:
            assert found[rel].equals(count_rows(lake.scan_files("observations", [path]).collect()).drop("day")), rel
    return found


def orphans(lake: Lake) -> list[str]:
    """Derivatives whose data file is gone."""
    folder = lake.root / "_derived" / COUNTS.name
    return sorted(str(p) for p in folder.rglob("*.parquet") if not (lake.root / p.relative_to(folder)).exists())


def test_derivatives_are_written_with_their_files_and_follow_every_change(tmp_path):
    lake = Lake(tmp_path / "lake", [COUNTS])
    land(lake, rows("a", 30), rows("b", 2), rows("c", 1, start=DAY2))
    first = derivatives(lake)  # "a" runs into DAY2: one file per day
    assert len(first) == 2 and all(d is not None for d in first.values())
    assert sum(d["len"].sum() for d in first.values()) == 30 + 2 + 1
    # Landing "a" again alone rewrites the batch's files without it: their derivatives follow.
    land(lake, rows("a", 2, tag="v2"))
    after = derivatives(lake)
    assert len(after) == 3 and all(d is not None for d in after.values())
    assert sum(d["len"].sum() for d in after.values()) == 2 + 2 + 1
    # A lake opened without the derivation writes none, and a file it empties loses its
    # derivative with it.
    Lake(lake.root).land("observations", rows("b", 1, tag="v3"), cluster=CLUSTER, input_id="b", source="syslog")
    assert sum(d is None for d in derivatives(lake).values()) == 1
    assert per_input(lake) == {"a": 2, "b": 1, "c": 1}
    land(lake, rows("c", 0), input_ids=["c"])
    assert len(derivatives(lake)) == 2 and orphans(lake) == [] and leftovers(lake) == []


def test_a_file_rewritten_without_the_derivation_loses_its_derivative(tmp_path):
    lake = Lake(tmp_path / "lake", [COUNTS])
    land(lake, rows("a", 3), rows("b", 3))
    Lake(lake.root).land("observations", rows("b", 1, tag="v2"), cluster=CLUSTER, input_id="b", source="syslog")
    assert list(derivatives(lake).values()) == [None, None]  # "a" rewritten alone, "b" in its own file
    assert per_input(lake) == {"a": 3, "b": 1}


def test_a_failing_derivation_lands_nothing(tmp_path):
    def broken(frame: pl.DataFrame) -> pl.DataFrame:
        raise ValueError("bad derivation")

    lake = Lake(tmp_path / "lake", [COUNTS])
    land(lake, rows("a", 2), rows("b", 2))
    before = derivatives(lake)
    with pytest.raises(ValueError, match="bad derivation"):
        land(Lake(lake.root, [Derivation("counts", "observations", broken)]), rows("a", 2, tag="v2"))
    assert set(stored(lake)["message"].str.slice(0, 2)) == {"v1"}
    assert derivatives(lake).keys() == before.keys() and leftovers(lake) == []


def test_a_crash_between_a_file_and_its_derivative_leaves_no_derivative(tmp_path, monkeypatch):
    """A crash after a data file changed and before its derivative was written leaves that
    file without one (never a stale one); landing again restores it."""
    lake = Lake(tmp_path / "lake", [COUNTS])
    land(lake, rows("a", 2), rows("b", 2))

    def crash(self, rel, derived):
        raise OSError("killed")

    monkeypatch.setattr(Lake, "_write_derived", crash)
    with pytest.raises(OSError, match="killed"):
        land(lake, rows("a", 2, tag="v2"), rows("b", 2, tag="v2"))
    monkeypatch.undo()
    assert list(derivatives(lake).values()) == [None]
    land(lake, rows("a", 2, tag="v2"), rows("b", 2, tag="v2"))
    assert all(d is not None for d in derivatives(lake).values())
    assert per_input(lake) == {"a": 2, "b": 2} and leftovers(lake) == []


def test_the_next_write_deletes_the_temporary_files_a_killed_writer_left(tmp_path):
    """A writer killed between creating a temporary file and renaming it leaves the file
    behind: the next write through any Lake object deletes every such file, wherever it
    is, and nothing else."""
    lake = Lake(tmp_path / "lake")
    land(lake, rows("a", 2), rows("b", 1, start=DAY2))
    lake.write_manifest("run-1", {"kind": "run"})
    index = lake.root / "_inputs" / "observations" / f"cluster={CLUSTER}" / "index.parquet"
    targets = [*lake.files("observations"), index, lake.root / "runs" / "run-1.json"]
    stale = []
    for target in targets:  # what _atomic_write_bytes names them, as a SIGKILL leaves them
        fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        os.close(fd)
        stale.append(Path(name))
    kept = [targets[0].parent / name for name in ("notes.tmp", ".part-x.parquet.tmp", ".hidden.parquet")]
    for path in kept:
        path.write_bytes(b"not the lake's")
    before = stored(lake)

    Lake(lake.root).land("observations", rows("c", 1), cluster=CLUSTER, input_id="c", source="syslog")
    assert [path for path in stale if path.exists()] == []
    assert all(path.exists() for path in kept)
    assert stored(lake).filter(pl.col("input_id") != "c").equals(before)


def test_an_attempts_file_written_before_a_column_was_added_reads_and_merges(tmp_path):
    """A lake landed before ``relaunch_ts`` existed (LATER_COLUMNS) is read with the column
    null, and landing the same attempt again merges into it instead of failing; a producer
    that gives no such column lands too."""
    lake = Lake(tmp_path / "lake")
    older = attempts({"attempt_id": "static/c1/1/0", "exit_code": 3}).drop("cluster", "relaunch_ts")
    lake.land("attempts", older, cluster=CLUSTER)
    # Rewrite the file as a writer of the older schema left it.
    (path,) = lake.files("attempts")
    pl.read_parquet(path).drop("relaunch_ts").write_parquet(path)
    assert "relaunch_ts" not in pl.read_parquet(path).columns
    read = lake.scan("attempts").collect()
    assert read["relaunch_ts"].to_list() == [None] and read["exit_code"].to_list() == [3]
    again = attempts({"attempt_id": "static/c1/1/0", "exit_code": None, "relaunch_ts": [at(30)]}).drop("cluster")
    lake.land("attempts", again, cluster=CLUSTER)
    merged = lake.scan("attempts").collect()
    assert merged.select("exit_code", "relaunch_ts").rows() == [(3, [at(30)])]
