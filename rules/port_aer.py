"""A fatal PCIe error a root port reports, seconds before a GPU on its node falls off the
bus, is that GPU's link failing: the GPU is the root and the port's report its confirmation.
So is the GPU's own uncorrected error beside its loss.

The AER driver reports an uncorrectable error on the port that received it, often the root
port above the GPU (``pcieport 0000:97:01.0: PCIe Bus Error: severity=Uncorrected (Fatal),
…``), so the line names the port, not the GPU, and ``precedence.xid_over_gpu_pcie_error``
(scope ``gpu``) cannot pair it with the XID 79 that follows. A fatal error of another
device's own function (a NIC's ``mlx5_core``, a disk controller) before a GPU loss stays a
root of its own: two devices failing at once is the host's problem, and the verdict
should say so.

The GPU's own uncorrected error (the nvidia driver's AER line, which names the GPU) and its
loss are paired by ``precedence.xid_over_gpu_pcie_error``, which runs before the python
rules: an older driver's fall-off report wrapped over three syslog lines learns its GPU only
from ``nvrm_wrapped_report``, so this rule pairs those the same way (the AER line a
confirmation of the loss of its GPU, within :data:`SAME_GPU` either way).

A local NVMe drive's own uncorrected error (the ``nvme`` driver's AER line, ``nvme
0000:c1:00.0: AER: PCIe Bus Error: severity=Uncorrected …``) is the first sign of the drive
failing when the driver then gives a controller up (:data:`DRIVE_LOST`: disabled after its
reset failed, or down) on the node within :data:`DRIVE_FAILING` (its command timeout, 30 s,
then its reset): the drive's failure is the root and the AER line its confirmation. The
line names a PCI function, the later reports a controller (``nvme1``), and only a boot line
ties the two, so the first controller given up on the node stands for it. A command that
merely timed out and was aborted, a read that failed, leave the PCIe error the root: the
link failed under a drive that answered again.
Contract: :mod:`engine.rules.python_rules`.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from engine.rules.python_rules import link_to_roots

PORT_REPORT = "pcieport "
"""How the kernel names a PCIe port's own AER report (the ``pcieport`` driver)."""
FATAL = "pcie_aer_fatal"
"""The fatal AER event (``pcie_aer_bus_error`` in ``gpu_health.yaml``)."""
FELL_OFF = ("xid_79_fallen_off_bus", "gpu_fallen_off_bus")
"""Events of a GPU leaving the bus (``gpu_xid.yaml``, ``gpu_health.yaml``)."""
WITHIN = timedelta(seconds=10)
"""How soon after the port's report the GPU must fall off to be the device below it."""
PRINTED_BEFORE = timedelta(seconds=1)
"""How much earlier the GPU's loss may be stamped (one report, lines a moment apart)."""
UNCORRECTED = ("pcie_aer_uncorrected", FATAL)
"""The AER events that can take a GPU's link down (non-fatal and fatal)."""
SAME_GPU = timedelta(minutes=1)
"""How far apart a GPU's own AER line and its loss are one failure
(``precedence.xid_over_gpu_pcie_error``'s window)."""
NVME_REPORT = r"(?:^|\s)nvme [0-9a-fA-F]{4}:"
"""How the kernel names an NVMe drive's own AER report (the ``nvme`` PCI driver and the
function's address)."""
DRIVE_LOST = ("storage.nvme_disabled", "storage.nvme_controller_down")
"""Events of the NVMe driver giving a controller up (``host.yaml``, ``storage.yaml``)."""
DRIVE_FAILING = timedelta(minutes=5)
"""How soon after the drive's AER line the driver must give a controller up."""


def apply(events: pl.DataFrame, context) -> pl.DataFrame:
    """Link a root port's fatal AER report to the GPU fall-off that follows it on its node,
    a GPU's own uncorrected AER line to that GPU's loss, and an NVMe drive's own to the
    drive's failure that follows."""
    roots = pl.col("role") == "root_candidate"
    aer = events.filter(roots & pl.col("event").is_in(UNCORRECTED)).select(
        "attempt_id", "cluster", "node", "event_id", "event", "gpu", "message", pl.col("ts").alias("_aer"))
    if aer.is_empty():
        return events
    lost = events.filter(roots & pl.col("event").is_in(FELL_OFF)).select(
        "attempt_id", "cluster", "node", pl.col("event_id").alias("_root"), pl.col("gpu").alias("_lost"), "ts")
    from_port = (
        (pl.col("event") == FATAL)
        & pl.col("message").str.contains(PORT_REPORT, literal=True)
        & pl.col("ts").is_between(pl.col("_aer") - PRINTED_BEFORE, pl.col("_aer") + WITHIN)
    )
    own = (pl.col("gpu") == pl.col("_lost")) & pl.col("ts").is_between(pl.col("_aer") - SAME_GPU, pl.col("_aer") + SAME_GPU)
    drive = (
        aer.filter(pl.col("message").str.contains(NVME_REPORT))
        .join(events.filter(pl.col("event").is_in(DRIVE_LOST) & (pl.col("role") != "context"))
              .select("attempt_id", "cluster", "node", pl.col("event_id").alias("_root"), "ts"),
              on=["attempt_id", "cluster", "node"])
        .filter(pl.col("ts").is_between(pl.col("_aer"), pl.col("_aer") + DRIVE_FAILING))
    )
    links = (
        pl.concat([aer.join(lost, on=["attempt_id", "cluster", "node"]).filter(from_port | own).select(drive.columns),
                   drive])
        .sort("attempt_id", "event_id", "ts", "_root")
        .group_by("attempt_id", "event_id", maintain_order=True)
        .first()
        .select("attempt_id", "event_id", "_root")
    )
    return link_to_roots(events, links, "confirmation") if not links.is_empty() else events
