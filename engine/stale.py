"""Which days' verdicts are older than what they were drawn from.

A nightly run attributes the day before; its logs, a node's rotated file delivered a night
late, or the accounting of a requeued run can land after it. A day's verdicts are stale
when the lake holds, for that day's attempts, anything newer than the run that wrote them:

* an attempt that ended that day and has no verdict (never attributed, or landed since);
* a verdict of another rule pack than the one installed (the rules changed);
* a data file of the ``attempts``, ``observations`` or ``metrics`` table, of the cluster and
  of a day the verdicts read (:func:`engine.run.coverage_days` of the day's attempts: from
  the earliest start less the lookback and the quiet horizon to the end plus the grace),
  written after that run started (:meth:`ingest.lake.Lake.landed_at`).

``causelake run --stale`` re-attributes only those days of its window, so a catch-up over
the last month costs what changed, not the month.
"""

from __future__ import annotations

from datetime import date, timedelta

import polars as pl

from engine.config import EngineConfig
from engine.run import coverage_days, days_between
from ingest.lake import Lake

INPUT_TABLES = ("attempts", "observations", "metrics")
"""The tables whose rows a verdict is drawn from (``events`` a run derives; ``topology``
has no day, and a change of it is re-attributed with an explicit window)."""


def stale_days(
    lake: Lake, since: date, until: date, *, pack_version: str, clusters: list[str] | None = None,
    config: EngineConfig | None = None,
) -> list[date]:
    """The UTC days of ``[since, until]`` whose verdicts are stale (see the module
    docstring), in order."""
    config = config or EngineConfig()
    window = days_between(since, until)
    attempts = (
        lake.scan("attempts", clusters=clusters, days=window)
        .filter(pl.col("end_ts").is_not_null())
        .select("cluster", "day", "attempt_id", "start_ts", "end_ts").collect()
    )
    if attempts.is_empty():
        return []
    verdicts = (
        lake.scan("results", clusters=clusters, days=window)
        .select("cluster", "day", "attempt_id", "rule_pack_version", "run_ts").collect()
    )
    unattributed = attempts.join(verdicts, on=["cluster", "day", "attempt_id"], how="anti").select("day")
    other_pack = verdicts.filter(pl.col("rule_pack_version") != pack_version).select("day")
    # Per (cluster, day): when its verdicts were written (the earliest run of them), and
    # the day span its attempts read.
    span = attempts.group_by("cluster", "day").agg(pl.col("start_ts").min(), pl.col("end_ts").max())
    written = verdicts.group_by("cluster", "day").agg(pl.col("run_ts").min())
    reads = []
    for cluster, day, start, end in span.iter_rows():
        scope = pl.DataFrame({"start_ts": [start], "end_ts": [end]})
        read = coverage_days(day, day, config, scope)
        reads.append((cluster, day, read[0], read[-1]))
    read_by_day = pl.DataFrame(reads, schema={"cluster": pl.String, "day": pl.Date, "lo": pl.Date, "hi": pl.Date},
                               orient="row").join(written, on=["cluster", "day"], how="inner")
    if read_by_day.is_empty():
        newer = pl.DataFrame(schema={"day": pl.Date})
    else:
        input_days = days_between(read_by_day["lo"].min(), read_by_day["hi"].max())
        landed = pl.concat([lake.landed_at(table, clusters=clusters, days=input_days) for table in INPUT_TABLES])
        newer = (
            read_by_day.join(landed.rename({"day": "_input_day"}), on="cluster")
            # A run's stamp is its start to the second: a file of that second came before it.
            .filter(pl.col("_input_day").is_between("lo", "hi")
                    & (pl.col("landed") >= pl.col("run_ts") + timedelta(seconds=1)))
            .select("day")
        )
    return sorted(set(pl.concat([unattributed, other_pack, newer])["day"].to_list()))


def spans(days: list[date]) -> list[tuple[date, date]]:
    """``days`` (sorted) as runs of consecutive days: one ``(first, last)`` per run."""
    out: list[tuple[date, date]] = []
    for day in days:
        if out and day == out[-1][1] + timedelta(days=1):
            out[-1] = (out[-1][0], day)
        else:
            out.append((day, day))
    return out
