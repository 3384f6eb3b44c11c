"""Fleet simulator: raw inputs in real formats plus ground truth, and their ingestion.

:func:`simulate` writes, under ``out``::

    <cluster>/sacct.txt                      sacct --parsable2 (job, .batch and .0 rows), UTC
    <cluster>/topology.csv                   host port ↔ leaf switch port, GPU index ↔ PCI bus
    <cluster>/jobs/<k>/slurm-<jobid>.out     per-job Slurm output (srun --label or torchrun)
    <cluster>/nodes/<node>/syslog.<chunk>    RFC 3339 high-precision syslog (some RFC 3164)
    <cluster>/nodes/<node>/dmesg.<chunk>     kernel ring buffer of the nodes that only keep it
    truth.parquet                            attempt → domain, cause, culprits, quality
    inputs.json                              how to land every input (parser, year, boot time)

Attempts are generated in chunks (by start time) so memory stays bounded at a million
attempts; every chunk's lines are built as columns and laid end to end in one buffer per
batch of files, which a writer thread writes (one ``open``/``write``/``close`` per file)
while the rest is built: file creation, not string building, bounds the run.
Same ``seed`` → same bytes.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from benchmarks.fleet import EPOCH, GPU_PCI, HCA_PCI, HOSTS_PER_LEAF, FleetShape, finish, fmt, node_names, schedule
from benchmarks.lines import LINE_COLUMNS, common, noise, ranks, scenario_lines

CHUNK = 100_000
BOOT = EPOCH - timedelta(days=3)
KMSG_NODE = r"/nodes/([^/]+)/dmesg\.\d+$"
"""Where a simulated kernel log's node is in its path (``<cluster>/nodes/<node>/dmesg.<chunk>``)."""


@dataclass(frozen=True)
class SimReport:
    """What :func:`simulate` wrote: counts and paths."""

    out: Path
    attempts: int
    lines: int
    files: int
    truth: Path


def _node_style(node: pl.Expr) -> pl.Expr:
    """Per-node log style from a hash of the name: ``iso`` (most), ``bsd`` (RFC 3164),
    ``kmsg`` (dmesg only), ``none`` (syslog missing)."""
    h = node.hash(seed=7) % 100
    return pl.when(h < 4).then(pl.lit("kmsg")).when(h < 12).then(pl.lit("bsd")).when(h < 14).then(pl.lit("none")).otherwise(pl.lit("iso"))


def _skew(node: pl.Expr) -> pl.Expr:
    """Clock skew of a node (a few seconds on 5% of nodes)."""
    return pl.when(node.hash(seed=11) % 20 == 0).then(pl.duration(milliseconds=1500)).otherwise(pl.duration(milliseconds=0))


def _app_lines(att: pl.DataFrame, app: pl.DataFrame) -> pl.Series:
    """The printed line of each ``app`` row (its attempt is row ``a - a[0]`` of ``att``),
    newline ended, as its launcher prefixes it: ``srun --label`` with a task per rank (the
    task id padded to the width of the largest one), torchrun ``--tee`` on one node
    (``[defaultN]:``), or ``srun --label`` with one torchrun per node (``3: [default5]:``,
    the node's task id before the local rank); launcher lines get no prefix. The prefix
    pieces are built per attempt and gathered per line."""
    torch = pl.col("torchrun")
    single = pl.col("n_nodes") == 1
    per_attempt = att.select(
        (torch & single).alias("_tee"), (torch & ~single).alias("_per_node"),
        pl.when(torch & ~single).then(pl.col("n_nodes") - 1).otherwise(pl.col("n_nodes") * 8 - 1)
        .cast(pl.String).str.len_chars().alias("width"),
    )
    row = app["a"] - att["a"][0]
    lines = pl.concat([app.select("rank", "text"), per_attempt.select(pl.all().gather(row))], how="horizontal")
    ranked = pl.col("rank").is_not_null()
    task = pl.when(pl.col("_per_node")).then(pl.col("rank") // 8).otherwise(pl.col("rank"))
    label = pl.concat_str([task.cast(pl.String).str.pad_start(pl.col("width")), pl.lit(": ")])
    prefix = (
        pl.when(pl.col("_tee")).then(pl.concat_str([pl.lit("[default"), pl.col("rank").cast(pl.String), pl.lit("]:")]))
        .when(pl.col("_per_node")).then(pl.concat_str([label, pl.lit("[default"), (pl.col("rank") % 8).cast(pl.String), pl.lit("]:")]))
        .otherwise(label)
    )
    return lines.select(pl.concat_str([pl.when(ranked).then(prefix), pl.col("text"), pl.lit("\n")], ignore_nulls=True)).to_series()


@dataclass(frozen=True)
class _Files:
    """Files to write: ``paths[i]`` gets bytes ``bounds[i]:bounds[i + 1]`` of ``data``,
    ``lines`` lines in all."""

    paths: list[str]
    bounds: np.ndarray
    data: pa.Buffer
    lines: int


def _files(line: pl.Series, key: pl.Series, paths: pl.Series) -> _Files:
    """The files of newline-ended lines ``line``: a file is a run of rows with the same
    ``key``, named ``paths[key]``. The lines lie end to end in one Arrow buffer, so a file's
    body is a slice of it — no per-file join or copy."""
    text = line.to_arrow()
    if text.null_count:
        raise ValueError(f"{text.null_count} simulated lines are null (a null field in their format)")
    offsets = np.frombuffer(text.buffers()[1], dtype=np.int64)[text.offset:text.offset + len(text) + 1]
    starts = (key != key.shift()).fill_null(True).arg_true()
    return _Files(paths.gather(key.gather(starts)).to_list(), offsets[np.append(starts.to_numpy(), len(line))], text.buffers()[2], len(line))


def _write_files(files: _Files) -> None:
    """Write every file of ``files`` as a new file.

    The per-file cost is the system calls, so there is one ``mkdir`` per folder and a bare
    ``open``/``write``/``close`` per file (no text layer). ``O_EXCL``: every file of a run is
    written once, by one chunk, from one run of rows.
    """
    for folder in dict.fromkeys(os.path.dirname(p) for p in files.paths):
        os.makedirs(folder, exist_ok=True)
    data = memoryview(files.data)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    for path, lo, hi in zip(files.paths, files.bounds[:-1].tolist(), files.bounds[1:].tolist()):
        fd = os.open(path, flags, 0o644)
        try:
            while lo < hi:  # a regular file may take a large write in several calls
                lo += os.write(fd, data[lo:hi])
        finally:
            os.close(fd)


def _nodes(shape: FleetShape, protected: pl.DataFrame, out: Path) -> pl.DataFrame:
    """Every node of the fleet (``nid`` = row): cluster, name, 0-based index ``i``, log
    ``style`` (a node holding a fault's root line keeps its syslog), clock ``skew`` and the
    ``stem`` of its log files (the chunk number completes it)."""
    nodes = pl.DataFrame({"cluster": list(shape.clusters)}).with_columns(
        pl.int_ranges(0, shape.nodes_per_cluster).alias("i")).explode("i")
    nodes = nodes.with_columns(fmt("{}{}", pl.col("cluster").str.slice(0, 3), (pl.col("i") + 1).cast(pl.String).str.pad_start(4, "0")).alias("node"))
    nodes = nodes.join(protected, on=["cluster", "node"], how="left", maintain_order="left").with_columns(_node_style(pl.col("node")).alias("style"))
    nodes = nodes.with_columns(
        pl.when(pl.col("protect").fill_null(False) & (pl.col("style") == "none")).then(pl.lit("iso")).otherwise("style").alias("style"),
        _skew(pl.col("node")).alias("skew"),
    )
    return nodes.with_row_index("nid").select(
        pl.col("nid").cast(pl.Int64), "cluster", "node", "i", "style", "skew",
        fmt("{}/{}/nodes/{}/{}.", pl.lit(str(out)), "cluster", "node",
            pl.when(pl.col("style") == "kmsg").then(pl.lit("dmesg")).otherwise(pl.lit("syslog"))).alias("stem"),
    )


CRON_SESSION = (
    "pam_unix(cron:session): session opened for user root(uid=0) by (uid=0)",
    "(root) CMD (cd / && run-parts --report /etc/cron.hourly)",
    "pam_unix(cron:session): session closed for user root",
)
"""What cron logs each hour on a Debian/Ubuntu node: the PAM session around the command."""


def _cron(nodes: pl.DataFrame, lo, hi) -> pl.DataFrame:
    """Hourly cron lines between ``lo`` and ``hi`` on every node that keeps a syslog (cron
    is no kernel line, so dmesg-only nodes have none), with the node's ``nid``, ``style``
    and ``skew``."""
    hours = pl.datetime_range(lo.replace(minute=17, second=1, microsecond=0), hi, "1h", eager=True, time_zone="UTC")
    steps = pl.DataFrame({"seq": list(range(len(CRON_SESSION))), "say": list(CRON_SESSION)}, schema_overrides={"seq": pl.Int32})
    syslog = nodes.filter(pl.col("style").is_in(["iso", "bsd"]))
    cron = syslog.join(pl.DataFrame({"ts": hours}), how="cross").join(steps, how="cross")
    return cron.select(
        pl.lit(None, pl.Int64).alias("a"), pl.lit("node").alias("kind"), "cluster", "node",
        (pl.col("ts") + pl.duration(microseconds=pl.col("i") * 997)).alias("ts"), "seq",
        pl.lit(None, pl.Int32).alias("rank"),
        fmt("CRON[{}]: {}", 2000 + (pl.col("i") * 7919 + pl.col("ts").dt.epoch("s") // 3600 * 104729) % 4_000_000, "say").alias("text"),
        "nid", "style", "skew",
    )


def _node_line(style: str) -> pl.Expr:
    """The printed line of a node log row in ``style``, newline ended: RFC 3339 or RFC 3164
    syslog, or dmesg (seconds since boot, no ``kernel:`` tag)."""
    if style == "iso":
        return fmt("{} {} {}\n", pl.col("ts").dt.strftime("%Y-%m-%dT%H:%M:%S%.6f+00:00"), "node", "text")
    if style == "bsd":
        return fmt("{} {} {}\n", pl.col("ts").dt.strftime("%b %e %H:%M:%S"), "node", "text")
    us = (pl.col("ts") - pl.lit(BOOT)).dt.total_microseconds()
    return fmt("[{}.{}] {}\n", (us // 1_000_000).cast(pl.String).str.pad_start(5),
               (us % 1_000_000).cast(pl.String).str.pad_start(6, "0"), pl.col("text").str.strip_prefix("kernel: "))


def _chunk_files(att: pl.DataFrame, chunk: int, out: Path, nodes: pl.DataFrame, hi) -> Iterator[_Files]:
    """Build every line of one chunk of attempts (rows ``a[0]…`` of the run, in order) and
    yield the files to write as they are ready: the job outputs, then the node logs by style."""
    parts = [p.select(list(LINE_COLUMNS)).cast(LINE_COLUMNS) for p in common(att) + noise(att) + scenario_lines(att) if p.height]
    # every builder frame holds one kind of line, so the kinds split without a filter
    app = pl.concat([p for p in parts if p["kind"][0] == "app"]).sort("a", "ts", "seq", "rank", maintain_order=True)
    node = pl.concat([p for p in parts if p["kind"][0] == "node"])
    del parts
    jobs = att.select(fmt("{}/{}/jobs/{}/slurm-{}.out", pl.lit(str(out)), "cluster", pl.col("job_id").cast(pl.Int64) // 1000, "job_id")).to_series()
    yield _files(_app_lines(att, app), app["a"] - att["a"][0], jobs)
    del app
    node = node.join(nodes.select("cluster", "node", "nid", "style", "skew"), on=["cluster", "node"], how="left", maintain_order="left")
    node = node.filter((pl.col("style") != "none") & ((pl.col("style") != "kmsg") | pl.col("text").str.starts_with("kernel: ")))
    node = pl.concat([node, _cron(nodes, att["start_ts"].min(), hi).cast(LINE_COLUMNS)]).with_columns(pl.col("ts") + pl.col("skew"))
    stems = nodes["stem"] + str(chunk)
    for (style,), part in node.partition_by("style", as_dict=True, maintain_order=True).items():
        part = part.sort("nid", "ts", "seq", maintain_order=True)
        yield _files(part.select(_node_line(style)).to_series(), part["nid"], stems)


def _sacct(att: pl.DataFrame) -> pl.DataFrame:
    """sacct --parsable2 rows: the job, its batch step and its srun step, times in UTC."""
    stamp = "%Y-%m-%dT%H:%M:%S"
    submit = (pl.col("start_ts") - pl.duration(seconds=(pl.col("u") * 600).cast(pl.Int64))).dt.strftime(stamp)
    start, end = pl.col("start_ts").dt.strftime(stamp), pl.col("end_ts").dt.strftime(stamp)
    state = pl.col("raw_state").str.replace("{uid}", pl.col("user_id").cast(pl.String), literal=True)
    base = dict(Submit=submit, Start=start, End=end, NodeList=pl.col("hostlist"), AllocNodes=pl.col("n_nodes"), NNodes=pl.col("n_nodes"))
    tres = fmt("billing={},cpu={},gres/gpu={},mem=2000G,node={}", pl.col("n_nodes") * 8, pl.col("n_nodes") * 96, pl.col("n_nodes") * 8, "n_nodes")
    # One torchrun per node is one task per node; otherwise srun starts a task per GPU.
    tasks = pl.when(pl.col("torchrun") & (pl.col("n_nodes") > 1)).then(pl.col("n_nodes")).otherwise(pl.col("n_nodes") * 8)
    step_state = pl.when(pl.col("raw_state").str.starts_with("CANCELLED") | pl.col("raw_state").is_in(["TIMEOUT", "PREEMPTED"])).then(pl.lit("CANCELLED")).otherwise(state)
    rows = [
        att.select(JobID="job_id", JobIDRaw="job_id", JobName=fmt("train-{}", pl.col("user_id") % 17), User=fmt("u{}", "user_id"), Partition=pl.lit("gpu"),
                   State=state, ExitCode="exit_code", NTasks=tasks, AllocTRES=tres, **base, _o=pl.lit(0)),
        att.select(JobID=fmt("{}.batch", "job_id"), JobIDRaw=fmt("{}.batch", "job_id"), JobName=pl.lit("batch"), User=pl.lit(""),
                   Partition=pl.lit(""), State=step_state, ExitCode=pl.when(step_state == "CANCELLED").then(pl.lit("0:15")).otherwise("exit_code"),
                   NTasks=pl.lit(1), AllocTRES=tres, **{**base, "NodeList": pl.col("hostlist").str.replace(r"\[(\d+)-\d+\]", "$1"), "AllocNodes": pl.lit(1), "NNodes": pl.lit(1)}, _o=pl.lit(1)),
        att.select(JobID=fmt("{}.0", "job_id"), JobIDRaw=fmt("{}.0", "job_id"), JobName=pl.lit("python"), User=pl.lit(""),
                   Partition=pl.lit(""), State=step_state, ExitCode="exit_code", NTasks=tasks, AllocTRES=tres, **base, _o=pl.lit(2)),
    ]
    cols = ["JobID", "JobIDRaw", "JobName", "User", "Partition", "Submit", "Start", "End", "State", "ExitCode", "NodeList", "AllocNodes", "NNodes", "NTasks", "AllocTRES"]
    return pl.concat([r.with_columns(att["a"].alias("_a")) for r in rows], how="vertical_relaxed").select(cols + ["_a", "_o"])


def _topology(shape: FleetShape, cluster: str) -> pl.DataFrame:
    """Host HCA port ↔ leaf switch port (one leaf per rail per 16 hosts), GPU ↔ PCI bus."""
    i = pl.int_range(0, shape.nodes_per_cluster, eager=True).alias("i").to_frame()
    node = fmt("{}{}", pl.lit(cluster[:3]), (pl.col("i") + 1).cast(pl.String).str.pad_start(4, "0"))
    hca = i.join(pl.DataFrame({"h": list(range(len(HCA_PCI)))}), how="cross").select(
        pl.lit("hca_port").alias("kind"), node.alias("node"), fmt("mlx5_{}", "h").alias("hca"), pl.lit("1").alias("port"),
        fmt("leaf-{}-r{}-{}", pl.lit(cluster), "h", (pl.col("i") // HOSTS_PER_LEAF).cast(pl.String).str.pad_start(3, "0")).alias("switch"),
        (pl.col("i") % HOSTS_PER_LEAF + 1).cast(pl.String).alias("switch_port"), pl.lit(None, pl.String).alias("gpu"),
        fmt("0000:{}:00.0", pl.col("h").replace_strict(list(range(4)), list(HCA_PCI), return_dtype=pl.String)).alias("pci"))
    gpu = i.join(pl.DataFrame({"g": list(range(8))}), how="cross").select(
        pl.lit("gpu").alias("kind"), node.alias("node"), pl.lit(None, pl.String).alias("hca"), pl.lit(None, pl.String).alias("port"),
        pl.lit(None, pl.String).alias("switch"), pl.lit(None, pl.String).alias("switch_port"), pl.col("g").cast(pl.String).alias("gpu"),
        fmt("0000:{}:00", pl.col("g").replace_strict(list(range(8)), list(GPU_PCI), return_dtype=pl.String)).alias("pci"))
    return pl.concat([hca, gpu])


def truth_frame(att: pl.DataFrame) -> pl.DataFrame:
    """The ground truth of every attempt (see the module docstring of ``faults``)."""
    sc = pl.col("scenario")
    gpu_fault = sc.is_in(["gpu_fallen_off_bus", "hbm_uncorrectable_ecc", "gsp_timeout", "nvlink_fatal", "gpu_broken_as_oom", "two_faults",
                          "clock_ahead_xid"])
    pci = fmt("0000:{}:00", pl.col("culprit_gpu").cast(pl.Int64).replace_strict(list(range(8)), list(GPU_PCI), return_dtype=pl.String))
    none_s, none_i = pl.lit([], pl.List(pl.String)), pl.lit([], pl.List(pl.Int32))
    return att.select(
        "attempt_id", "cluster", "job_id", "scenario", "domain", "cause", "also_accept", "expect_quality",
        (sc == "two_faults").alias("ambiguous"),
        pl.when(sc == "two_faults").then(pl.concat_list("culprit_node", "second_node"))
        # A workload fault names the failing rank, not a node to take out of service.
        .when(pl.col("has_culprit") & (pl.col("domain") != "workload")).then(pl.concat_list("culprit_node"))
        .otherwise(none_s).alias("culprit_nodes"),
        pl.when(gpu_fault).then(pl.concat_list(pci)).otherwise(none_s).alias("culprit_gpus"),
        pl.when(sc == "ib_link_down").then(pl.concat_list(fmt("mlx5_{}/1", "hca"))).otherwise(none_s).alias("culprit_ports"),
        pl.when(pl.col("has_culprit") & ~sc.is_in(["kernel_panic", "node_failure", "ib_link_down", "nic_fatal", "two_faults"]))
        .then(pl.concat_list("culprit_rank")).otherwise(none_i).alias("culprit_ranks"),
    )


def simulate(out: str | Path, attempts: int, seed: int = 0, shape: FleetShape | None = None) -> SimReport:
    """Write a simulated fleet of ``attempts`` attempts under ``out`` (replaced if present)."""
    if attempts < 1:
        raise ValueError(f"attempts must be at least 1, got {attempts}")
    out = Path(out).resolve()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    shape = shape or FleetShape.for_attempts(attempts)
    rng = np.random.default_rng(seed)
    att = finish(schedule(attempts, shape, rng), shape)
    stuck = pl.col("scenario") == "dataloader_stuck"
    att = att.with_columns(
        pl.when(stuck).then(0).otherwise("culprit_rank").cast(pl.Int32).alias("culprit_rank"),
        pl.when(stuck).then(0).otherwise("culprit_gpu").cast(pl.Int8).alias("culprit_gpu"),
        pl.when(stuck).then(pl.col("cluster").str.slice(0, 3) + (pl.col("first") + 1).cast(pl.String).str.pad_start(4, "0"))
        .otherwise("culprit_node").alias("culprit_node"),
        pl.when(stuck).then(0).otherwise("culprit_idx").alias("culprit_idx"),
    ).sort("start_ts", "lane").with_row_index("a").with_columns(pl.col("a").cast(pl.Int64))
    protected = pl.concat([
        att.filter(pl.col("node_root")).select("cluster", pl.col("culprit_node").alias("node")),
        att.filter(pl.col("scenario") == "two_faults").select("cluster", pl.col("second_node").alias("node")),
        # Every client reports a shared filesystem's outage: none of them is the culprit.
        ranks(att.filter(pl.col("scenario") == "lustre_outage")).filter(pl.col("local") == 0)
        .select("cluster", pl.col("rnode").alias("node")),
    ]).unique().with_columns(pl.lit(True).alias("protect"))
    nodes = _nodes(shape, protected, out)
    n_lines = n_files = 0
    bounds = list(range(0, att.height, CHUNK)) + [att.height]
    # Writing files is system calls (they release the GIL): one writer thread writes each
    # batch as soon as it is built, while the rest is built. Once a chunk is built, the
    # writes of the chunk before it are waited for, so at most two chunks are held.
    with ThreadPoolExecutor(max_workers=1) as writer:
        previous: list[Future] = []
        for k, (lo, hi) in enumerate(zip(bounds, bounds[1:])):
            end = att["start_ts"][hi] if hi < att.height else att["end_ts"].max() + timedelta(hours=1)
            current = []
            for files in _chunk_files(att.slice(lo, hi - lo), k, out, nodes, end):
                current.append(writer.submit(_write_files, files))
                n_lines += files.lines
                n_files += len(files.paths)
            for written in previous:
                written.result()
            previous = current
        for written in previous:
            written.result()
    for cluster in shape.clusters:
        rows = att.filter(pl.col("cluster") == cluster)
        (out / cluster).mkdir(exist_ok=True)
        _sacct(rows).sort("_a", "_o").drop("_a", "_o").write_csv(out / cluster / "sacct.txt", separator="|", quote_style="never")
        _topology(shape, cluster).write_csv(out / cluster / "topology.csv")
    truth = truth_frame(att)
    truth.write_parquet(out / "truth.parquet")
    _write_inputs(out, shape)
    return SimReport(out, att.height, n_lines, n_files, out / "truth.parquet")


def _write_inputs(out: Path, shape: FleetShape) -> None:
    """``inputs.json``: for each cluster its sacct file, job folder and node logs by parser."""
    inputs = []
    for cluster in shape.clusters:
        base = out / cluster
        nodes = sorted((base / "nodes").glob("*/*")) if (base / "nodes").exists() else []
        names = pl.Series("node", node_names(cluster, shape.nodes_per_cluster))
        bsd = set(names.to_frame().filter(_node_style(pl.col("node")) == "bsd")["node"])
        inputs.append({
            "cluster": cluster, "sacct": str(base / "sacct.txt"), "jobs": str(base / "jobs"),
            "syslog_iso": [str(p) for p in nodes if p.name.startswith("syslog") and p.parent.name not in bsd],
            "syslog_bsd": [str(p) for p in nodes if p.name.startswith("syslog") and p.parent.name in bsd],
            "kmsg": [{"path": str(p), "node": p.parent.name} for p in nodes if p.name.startswith("dmesg")],
            "year": EPOCH.year, "boot_time": BOOT.isoformat(),
        })
    (out / "inputs.json").write_text(json.dumps({"clusters": inputs}, indent=1))


def ingest(lake, out: str | Path) -> dict:
    """Land a simulated fleet with the real connectors: the Slurm connector per cluster
    (``sacct --parsable2`` in UTC), then node logs and job outputs through the files
    connector. Returns per-cluster counts."""
    from ingest.connectors import run_connector
    from ingest.connectors.slurm import SlurmConnector, SlurmOptions
    from ingest.files import land_log_files

    spec = json.loads((Path(out) / "inputs.json").read_text())
    counts: dict = {}
    for c in spec["clusters"]:
        cluster = c["cluster"]
        report = run_connector(lake, SlurmConnector(SlurmOptions(sacct_file=[c["sacct"]], timezone="UTC"), cluster), None)
        if report.error:
            raise RuntimeError(f"slurm connector on {c['sacct']}: {report.error}")
        read = landed = rejected = 0
        batches = [dict(paths=c["syslog_iso"], source="syslog"), dict(paths=c["syslog_bsd"], source="syslog", year=c["year"])]
        # Every node's dmesg in one landing: the node is the folder the file sits in.
        batches.append(dict(paths=[k["path"] for k in c["kmsg"]], source="kmsg", node_pattern=KMSG_NODE,
                            boot_time=datetime.fromisoformat(c["boot_time"])))
        batches.append(dict(paths=[c["jobs"]], source="app"))
        for b in batches:
            if b["paths"]:
                r = land_log_files(lake, b.pop("paths"), cluster=cluster, **b)
                read, landed, rejected = read + r.read, landed + r.landed, rejected + r.rejected
        counts[cluster] = {"attempts": report.landed, "lines_read": read, "landed": landed, "rejected": rejected}
    return counts
