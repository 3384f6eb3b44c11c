"""An uncorrectable memory error the kernel recovered from, killing nothing, ended nothing.

EDAC reports an uncorrectable DRAM error (``EDAC MC2: 1 UE …``, a root candidate of its
own: usually a process or the node dies of it). The kernel's memory-failure handler then
says what became of the page: a free page, or a clean one it could drop, is ``Recovered``
with no process touched; a page a process had mapped makes it kill that process ("Sending
SIGBUS to", "Killing"), or it could not contain it (``Ignored``, ``Failed``). When the
handler recovered a page on the node within :data:`WINDOW` of the UE and killed nothing
and failed nothing there in that time, the error hit memory no one was using: the UE is
``context``, and a job that failed then failed of something else (its quota, its code).

Declared in ``host.yaml``. Contract: :mod:`engine.rules.python_rules`.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from engine.rules.python_rules import at_rows, with_role

UNCORRECTABLE = "host.memory_uncorrectable_ecc"
"""The event of EDAC's uncorrectable error line (``host.edac_memory_error``)."""
RECOVERED = "host.memory_failure_recovered"
"""The memory-failure handler's ``Recovered``/``Delayed`` summary (``host.memory_failure``)."""
HARMED = ("host.memory_failure_kill", "host.memory_failure_unrecovered")
"""Its reports of a process killed, or a page it could not contain."""
WINDOW = timedelta(minutes=1)
"""How near one error EDAC's report and the handler's are stamped (both print within
milliseconds of the firmware's record; the node's syslog may batch them)."""


def apply(events: pl.DataFrame, context) -> pl.DataFrame:
    """Make each UE the handler recovered from without harm ``context`` (see the module docstring)."""
    ue = (pl.col("event") == UNCORRECTABLE) & (pl.col("role") == "root_candidate")
    if events.is_empty() or not events.select(ue.any()).item():
        return events
    rows = events.with_row_index("_row")
    errors = rows.filter(ue).select("_row", "attempt_id", "node", "ts")
    handled = rows.filter(pl.col("event").is_in([RECOVERED, *HARMED])).select(
        "attempt_id", "node", pl.col("ts").alias("_handled_ts"), (pl.col("event") == RECOVERED).alias("_recovered"))
    outcome = (
        errors.join(handled, on=["attempt_id", "node"])
        .filter((pl.col("_handled_ts") - pl.col("ts")).abs() <= WINDOW)
        .group_by("_row").agg(pl.col("_recovered").all().alias("_harmless"))
        .filter("_harmless")
    )
    return with_role(events, at_rows(events, outcome["_row"]), "context")
