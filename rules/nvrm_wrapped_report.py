"""A driver report wrapped over several syslog lines names its GPU on the first line only.

Older NVIDIA drivers print the fall-off report as three ``NVRM:`` lines::

    NVRM: The NVIDIA GPU 0000:b3:00.0
    NVRM: (PCI ID: 10de:26b5) installed in this system has
    NVRM: fallen off the bus and is not responding to commands.

``dmesg`` keeps them as one message, which ``gpu_fallen_off_bus`` reads whole; syslog and
the journal give each line its own header, so the line that says "fallen off the bus"
names no GPU and the verdict could name the node but not the GPU to pull. This rule gives
such a ``gpu_fallen_off_bus`` row the GPU of the nearest ``nvrm_report_first_line`` above
it in the same file, printed on the same node within :data:`SAME_REPORT`: the lines of one
report are printed at one instant, while two GPUs' reports at one instant still come one
after the other. Contract: :mod:`engine.rules.python_rules`.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from engine.rules.python_rules import origin_position

FELL_OFF = "gpu_fallen_off_bus"
FIRST_LINE = "gpu.driver_report_first_line"
SAME_REPORT = timedelta(seconds=1)
"""How far apart the stamps of one report's lines may be."""
REPORT_LINES = 3
"""How many lines a report spans: its first line is at most this many lines above the last."""


def apply(events: pl.DataFrame, context) -> pl.DataFrame:
    """Fill the GPU of fall-off lines that name none from their report's first line (see the
    module docstring)."""
    bare = (pl.col("event") == FELL_OFF) & pl.col("gpu").is_null() & pl.col("node").is_not_null()
    if not events.select(bare.any()).item():
        return events
    firsts = (
        events.filter((pl.col("event") == FIRST_LINE) & pl.col("gpu").is_not_null())
        .select("attempt_id", "node", *origin_position(), pl.col("ts").alias("_first_ts"), pl.col("gpu").alias("_gpu"))
    )
    if firsts.is_empty():
        return events
    lines = events.with_row_index("_row").filter(bare).select("_row", "attempt_id", "node", "ts", *origin_position())
    found = (
        lines.join(firsts, on=["attempt_id", "node", "_file"], suffix="_first")
        .filter(
            pl.col("_line_first").is_between(pl.col("_line") - (REPORT_LINES - 1), pl.col("_line") - 1)
            & pl.col("_first_ts").is_between(pl.col("ts") - SAME_REPORT, pl.col("ts"))
        )
        # The nearest first line above: the report's own.
        .sort("_row", "_line_first", descending=[False, True])
        .group_by("_row", maintain_order=True)
        .first()
    )
    if found.is_empty():
        return events
    return events.with_columns(events["gpu"].scatter(found["_row"], found["_gpu"]))
