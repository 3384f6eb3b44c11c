"""Fleet shape and the schedule of attempts: clusters, nodes, GPUs, HCAs, leaf switches, and
which attempt runs where and when — all built as columns.

Nodes are split into *lanes*: fixed blocks of 1, 2–16 or 64–512 consecutive nodes. An
attempt runs on one lane, and the attempts of a lane run one after another with an idle gap
longer than the engine's lookback + grace (so the truth of one attempt never leaks into the
next through node logs), which keeps the schedule a cumulative sum instead of a bin-packing
loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np
import polars as pl

from benchmarks.faults import CATALOG, SIZE_CLASSES, catalog_frame, probabilities

GPU_PCI = ("18", "2a", "3a", "5d", "9a", "ab", "ba", "db")
"""PCI bus of GPU 0–7 (as in ``NVRM: Xid (PCI:0000:<bus>:00)``)."""
HCA_PCI = ("1a", "3c", "9c", "bc")
"""PCI bus of ``mlx5_0..3``; GPUs ``2k`` and ``2k+1`` use ``mlx5_k``."""
HOSTS_PER_LEAF = 16
EPOCH = datetime(2026, 3, 2, tzinfo=UTC)
MIN_GAP_S = 45 * 60
"""Idle time between two attempts of a lane: more than lookback (30 min) + grace (10 min)."""


@dataclass(frozen=True)
class FleetShape:
    """Clusters and their size. ``large_lanes``/``medium_lanes`` are the node counts of the
    big and mid-size lanes; the remaining nodes are single-node lanes."""

    clusters: tuple[str, ...] = ("alpha", "bravo", "coral")
    nodes_per_cluster: int = 2048
    gpus_per_node: int = 8
    large_lanes: tuple[int, ...] = (512, 256, 128, 64)
    medium_lanes: tuple[int, ...] = field(default=(16, 8, 4, 2))

    @staticmethod
    def for_attempts(attempts: int) -> FleetShape:
        """A fleet sized so that every lane sees several attempts: thousands of nodes for
        large runs, a few hundred for small ones."""
        if attempts >= 50_000:
            return FleetShape()
        if attempts >= 5_000:
            return FleetShape(nodes_per_cluster=512, large_lanes=(128, 64))
        return FleetShape(clusters=("alpha", "bravo"), nodes_per_cluster=96, large_lanes=(64,), medium_lanes=(4, 2))


def fmt(template: str, *args: pl.Expr | str) -> pl.Expr:
    """``template`` with each ``{}`` replaced by the next argument (an expression, or a column
    name when a string), as one :func:`polars.concat_str` — ``pl.format`` panicked once on
    multi-chunk input. Null in any argument gives null, as ``pl.format`` does."""
    pieces = template.split("{}")
    if len(pieces) != len(args) + 1:
        raise ValueError(f"{template!r} has {len(pieces) - 1} placeholders for {len(args)} arguments")
    parts: list[pl.Expr] = [pl.lit(pieces[0])] if pieces[0] else []
    for arg, text in zip(args, pieces[1:]):
        parts.append(pl.col(arg) if isinstance(arg, str) else arg)
        if text:
            parts.append(pl.lit(text))
    return pl.concat_str(parts)


def node_names(cluster: str, n: int) -> list[str]:
    """Host names of a cluster: ``<first 3 letters><index:04d>``, 1-based."""
    return [f"{cluster[:3]}{i:04d}" for i in range(1, n + 1)]


def lanes(shape: FleetShape) -> pl.DataFrame:
    """One row per lane: cluster, first node index (0-based), node count, size class."""
    rows = []
    for cluster in shape.clusters:
        n, first = shape.nodes_per_cluster, 0
        budget = n // 2
        for size in shape.large_lanes:
            if size <= budget:
                rows.append((cluster, first, size, "large"))
                first += size
                budget -= size
        for size in shape.medium_lanes:
            for _ in range((n // 16) // size):
                rows.append((cluster, first, size, "multi"))
                first += size
        rows.extend((cluster, i, 1, "single") for i in range(first, n))
    return pl.DataFrame(rows, schema=["cluster", "first", "n_nodes", "size_class"], orient="row").with_row_index("lane")


MEDIAN_HOURS = {"single": 0.75, "multi": 2.0, "large": 5.0}


def schedule(attempts: int, shape: FleetShape, rng: np.random.Generator) -> pl.DataFrame:
    """The attempts: lane, scenario, start/fault/end times, nodes, culprit, job ids.

    Lanes are drawn with weight ``1 / median duration`` so every lane covers about the same
    span of time. Every scenario the fleet can hold appears at least once.
    """
    ln = lanes(shape)
    weight = ln["size_class"].replace_strict(MEDIAN_HOURS).to_numpy()
    weight = 1 / weight
    lane = rng.choice(ln.height, size=attempts, p=weight / weight.sum())
    size_class = ln["size_class"].to_numpy()[lane]
    n_nodes = ln["n_nodes"].to_numpy()[lane]
    scenario = np.zeros(attempts, dtype=np.int16)
    for cls in SIZE_CLASSES:
        idx = np.flatnonzero(size_class == cls)
        scenario[idx] = rng.choice(len(CATALOG), size=idx.size, p=probabilities(cls))
    order = sorted(enumerate(CATALOG), key=lambda item: -item[1].min_nodes)
    for code, sc in order:  # a small run still holds every scenario once (most demanding first)
        if code and not (scenario == code).any():
            free = np.flatnonzero((scenario == 0) & (n_nodes >= max(sc.min_nodes, 2)))
            free = free if free.size else np.flatnonzero((scenario == 0) & (n_nodes >= sc.min_nodes))
            if free.size:
                scenario[rng.choice(free)] = code
    median_s = np.array([MEDIAN_HOURS[c] for c in size_class]) * 3600
    planned = np.clip(rng.lognormal(np.log(median_s), 0.7), 600, 48 * 3600)
    frame = pl.DataFrame({
        "lane": lane.astype(np.int64), "scenario_code": scenario, "planned_s": planned,
        "u": rng.random(attempts), "gap_s": rng.uniform(MIN_GAP_S, 3 * MIN_GAP_S, attempts),
        "culprit_node_u": rng.random(attempts), "culprit_gpu": rng.integers(0, shape.gpus_per_node, attempts).astype(np.int8),
        "second_node_u": rng.random(attempts), "hca": rng.integers(0, len(HCA_PCI), attempts).astype(np.int8),
        "watchdog_s": rng.choice([600, 1800], attempts, p=[0.7, 0.3]),
        "old_nccl": rng.random(attempts) < 0.25, "torchrun": rng.random(attempts) < 0.5,
        "nccl_debug": rng.random(attempts) < 0.5, "pid_base": rng.integers(20_000, 60_000, attempts),
        "skew_s": rng.uniform(0.2, 0.9, attempts), "noise_u": rng.random(attempts),
        "ahead_s": rng.uniform(120, 420, attempts),
        "user_id": rng.integers(1000, 1060, attempts),
    }).join(ln, on="lane", how="left").join(catalog_frame(), on="scenario_code", how="left")
    return _times(frame)


def _times(frame: pl.DataFrame) -> pl.DataFrame:
    """Fault time, end time and start time (lanes run their attempts back to back)."""
    planned = pl.col("planned_s")
    user_error = pl.col("domain").is_in(["workload", "storage"]) & (pl.col("scenario") != "dataloader_stuck")
    fault_after = (
        pl.when(user_error).then(60 + pl.col("u") * pl.min_horizontal(planned * 0.3, 1800))
        .when(pl.col("scenario").is_in(["time_limit", "nic_reset_survived"])).then(planned)
        .otherwise(planned * (0.1 + 0.8 * pl.col("u")))
    )
    scenario = pl.col("scenario")
    tail = (
        pl.when(scenario == "success").then(5.0)
        .when(scenario.is_in(["gpu_fallen_off_bus", "gsp_timeout", "fail_slow", "clock_ahead_xid"])).then(pl.col("watchdog_s") + 35.0)
        .when(scenario == "dataloader_stuck").then(pl.col("watchdog_s") + 35.0)
        .when(scenario.is_in(["kernel_panic", "node_failure"])).then(260.0)
        .when(scenario.is_in(["time_limit", "preempted", "cancelled", "nic_reset_survived"])).then(2.0)
        .otherwise(20.0)
    )
    frame = frame.with_columns(fault_after.alias("fault_after_s"), tail.alias("tail_s"))
    busy = pl.col("fault_after_s") + pl.col("tail_s") + pl.col("gap_s")
    offset = (busy.cum_sum().over("lane", order_by="u") - busy.over("lane", order_by="u"))
    frame = frame.with_columns(
        (pl.lit(EPOCH) + pl.duration(microseconds=(offset * 1e6 + pl.col("lane") * 7e6).cast(pl.Int64)))
        .dt.replace_time_zone("UTC").alias("start_ts")
    )
    return frame.with_columns(
        (pl.col("start_ts") + pl.duration(microseconds=(pl.col("fault_after_s") * 1e6).cast(pl.Int64))).alias("t0"),
        (pl.col("start_ts") + pl.duration(microseconds=((pl.col("fault_after_s") + pl.col("tail_s")) * 1e6).cast(pl.Int64)))
        .dt.truncate("1s").alias("end_ts"),
    )


def finish(frame: pl.DataFrame, shape: FleetShape) -> pl.DataFrame:
    """Job ids (per cluster, by start time), node lists, culprits and the truth columns."""
    frame = frame.sort("start_ts", "lane").with_columns(
        (100_000 + pl.int_range(pl.len()).over("cluster")).cast(pl.String).alias("job_id"),
    )
    prefix = pl.col("cluster").str.slice(0, 3)
    name = lambda idx: fmt("{}{}", prefix, (idx + 1).cast(pl.String).str.pad_start(4, "0"))  # noqa: E731
    culprit_idx = (pl.col("culprit_node_u") * pl.col("n_nodes")).floor().cast(pl.Int64)
    second_idx = (culprit_idx + 1 + (pl.col("second_node_u") * (pl.col("n_nodes") - 1)).floor().cast(pl.Int64)) % pl.col("n_nodes")
    last = pl.col("first") + pl.col("n_nodes") - 1
    return frame.with_columns(
        fmt("slurm/{}/{}/0", "cluster", "job_id").alias("attempt_id"),
        pl.when(pl.col("n_nodes") == 1).then(name(pl.col("first")))
        .otherwise(fmt("{}[{}-{}]", prefix, (pl.col("first") + 1).cast(pl.String).str.pad_start(4, "0"),
                             (last + 1).cast(pl.String).str.pad_start(4, "0"))).alias("hostlist"),
        culprit_idx.alias("culprit_idx"),
        second_idx.alias("second_idx"),
        name(pl.col("first") + culprit_idx).alias("culprit_node"),
        name(pl.col("first") + second_idx).alias("second_node"),
        (culprit_idx * shape.gpus_per_node + pl.col("culprit_gpu")).cast(pl.Int32).alias("culprit_rank"),
        pl.lit(shape.gpus_per_node).alias("gpus_per_node"),
    )
