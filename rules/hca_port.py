"""The port of an HCA line that names the device by its PCI address only.

mlx5 prints some lines under the PCI function alone (``mlx5_core 0000:9c:00.0:
mlx5_port_module_event:1131:(pid 0): Port module event[error]: module 2, Cable error, High
Temperature``; the netdev's ``mlx5_core 0000:9c:00.0 enp156s0np0: Link down``) and others
under the device and port too (``mlx5_core 0000:9c:00.0 mlx5_2: Port: 1 Link DOWN``). Each
PCI function of a ConnectX is one port, so a line of the same node and attempt that names
both says which port the others are about: they take it (``mlx5_2:1``), and an overheated
module's verdict names the port it took down. Without such a line, the topology's HCA port
of that node listed with that PCI function (``context.topology``, a ``pci`` column in the
HCA ports file) says it. The extract rules keep the PCI address as the ``pci`` parameter.
Contract: :mod:`engine.rules.python_rules`.
"""

from __future__ import annotations

import polars as pl


def apply(events: pl.DataFrame, context) -> pl.DataFrame:
    """Fill the ``port`` of events that name only their HCA's PCI function (see the module
    docstring)."""
    # Only the few rows whose parameters hold a PCI address are parsed.
    located = (
        events.with_row_index("_row")
        .filter(pl.col("params").str.contains('"pci"', literal=True).fill_null(False))
        .select("_row", "cluster", "attempt_id", "node", "port",
                pl.col("params").str.json_path_match("$.pci").str.to_lowercase().alias("_pci"))
        .drop_nulls(["attempt_id", "node", "_pci"])
    )
    known = located.drop_nulls("port").group_by("attempt_id", "node", "_pci").agg(pl.col("port").min().alias("_port"))
    filled = located.filter(pl.col("port").is_null()).join(known, on=["attempt_id", "node", "_pci"], how="left")
    # One port per PCI function (a file listing a function twice gives its first port).
    cabled = context.topology.filter((pl.col("kind") == "hca_port") & pl.col("pci").is_not_null()).select(
        "cluster", "node", pl.col("pci").alias("_pci"),
        pl.concat_str([pl.col("hca"), pl.col("port")], separator=":").alias("_cabled"),
    ).sort("cluster", "node", "_pci", "_cabled").unique(["cluster", "node", "_pci"], keep="first")
    filled = filled.join(cabled, on=["cluster", "node", "_pci"], how="left").with_columns(
        pl.coalesce("_port", "_cabled").alias("_port")).drop_nulls("_port")
    if filled.is_empty():
        return events
    return events.with_columns(events["port"].scatter(filled["_row"], filled["_port"]))
