"""A task the kernel reports blocked inside the NVIDIA driver is the driver hung, not the host.

The kernel's hung-task report (``INFO: task python3:4711 blocked for more than 122
seconds.``, ``host.yaml``) is followed by the task's call trace, one frame a line. When those
frames are in the NVIDIA kernel modules (``os_acquire_mutex+0x34/0x40 [nvidia]``,
``rm_ioctl``, ``uvm_ioctl … [nvidia_uvm]``: ``gpu_health.yaml``'s
``gpu_driver_stack_frame``), the task is waiting on the driver, usually its resource
manager's lock held by a call that never returned: every process touching the GPUs then
hangs with it (the job's ranks, ``nvidia-smi``), and what helps is a GPU reset or a reboot,
not a look at the host. Such a report becomes ``gpu.driver_error`` (domain ``gpu``), its
role left as it was (a hung task is a symptom on its own; ``straggler.py`` makes it the root
of a hang it explains).

A frame belongs to the nearest hung-task report above it in the same file, within
:data:`TRACE_LINES` lines and :data:`SAME_REPORT` of its stamp. Contract:
:mod:`engine.rules.python_rules`.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from engine.rules.python_rules import at_rows, origin_position, with_values

HUNG_EVENT = "host.hung_task"
"""The kernel's hung-task report (``host.yaml``)."""
DRIVER_FRAME = "gpu.driver_stack_frame"
"""A call-trace frame in an NVIDIA kernel module (``gpu_health.yaml``)."""
TRACE_LINES = 80
"""How many lines below its report a frame of the report's call trace may be (the state
line, the registers and the frames of one task)."""
SAME_REPORT = timedelta(seconds=2)
"""How far apart the stamps of one report's lines may be."""

CAUSES = (("gpu.driver_error", "gpu", "cascade", HUNG_EVENT), ("gpu.driver_error", "gpu", "root_candidate", HUNG_EVENT))
"""A hung task in the driver, a symptom or (by ``straggler.py``) a root."""


def apply(events: pl.DataFrame, context) -> pl.DataFrame:
    """Make each hung-task report whose call trace runs through the NVIDIA driver a
    ``gpu.driver_error`` (see the module docstring)."""
    hung = pl.col("event") == HUNG_EVENT
    frame = pl.col("event") == DRIVER_FRAME
    if not events.select(hung.any() & frame.any()).item():
        return events
    rows = events.with_row_index("_row")
    key = ["attempt_id", "node", "_file"]
    reports = rows.filter(hung).select("_row", "attempt_id", "node", "ts", *origin_position())
    frames = rows.filter(frame).select("attempt_id", "node", pl.col("ts").alias("_frame_ts"),
                                       *(expr.alias(f"{name}_frame") for expr, name in zip(origin_position(), ("_file", "_line"))))
    traced = (
        reports.join(frames.rename({"_file_frame": "_file"}), on=key)
        .filter(pl.col("_line_frame").is_between(pl.col("_line") + 1, pl.col("_line") + TRACE_LINES)
                & pl.col("_frame_ts").is_between(pl.col("ts") - SAME_REPORT, pl.col("ts") + SAME_REPORT))
        # Each frame to the nearest report above it: a second task's report begins a new trace.
        .sort("_line_frame", "_line", descending=[False, True])
        .unique([*key, "_line_frame"], keep="first", maintain_order=True)
    )
    if traced.is_empty():
        return events
    return with_values(events, at_rows(events, traced["_row"]), domain="gpu", cause="gpu.driver_error",
                       action="drain_node_and_restart")
