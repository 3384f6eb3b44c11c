"""Log lines of simulated attempts, built as columns.

Every builder takes the attempts of one scenario (or all of them) and returns a *line frame*:
``a`` (attempt row, null for node noise), ``kind`` (``app`` = the job's Slurm output,
``node`` = the node's kernel/syslog), ``cluster``, ``node``, ``ts``, ``seq`` (order among
lines with the same stamp), ``rank`` (srun/torchrun prefix; null for launcher lines) and
``text``. The line shapes are those of ``data/samples`` (NVRM Xid, mlx5, NCCL NET/IB with the
``host:pid:tid [dev]`` prefix, PyTorch watchdog lines with ``[rankN]:``, slurmstepd…); hosts,
times, pids and PCI addresses vary. Most lines are benign volume, as in a real fleet: NCCL
INFO banners, Megatron start-up and iteration lines (the node side's hourly cron is built
in ``simulate``).
"""

from __future__ import annotations

import polars as pl

from benchmarks.fleet import GPU_PCI, HCA_PCI, fmt

LINE_COLUMNS = {
    "a": pl.Int64, "kind": pl.String, "cluster": pl.String, "node": pl.String,
    "ts": pl.Datetime("us", "UTC"), "seq": pl.Int32, "rank": pl.Int32, "text": pl.String,
}
NETDEV = ("enp26s0np0", "enp60s0np0", "enp156s0np0", "enp188s0np0")


def secs(x) -> pl.Expr:
    """A duration of ``x`` seconds (expression or number)."""
    x = x if isinstance(x, pl.Expr) else pl.lit(x)
    return pl.duration(microseconds=(x * 1_000_000).cast(pl.Int64))


def host(index: pl.Expr) -> pl.Expr:
    """Host name of 0-based node ``index`` of the row's cluster."""
    return fmt("{}{}", pl.col("cluster").str.slice(0, 3), (index + 1).cast(pl.String).str.pad_start(4, "0"))


def gpu_pci(gpu: pl.Expr) -> pl.Expr:
    """``0000:<bus>:00`` of GPU index ``gpu``."""
    return fmt("0000:{}:00", gpu.cast(pl.Int64).replace_strict(list(range(8)), list(GPU_PCI), return_dtype=pl.String))


def hca_pci(hca: pl.Expr) -> pl.Expr:
    """``0000:<bus>:00.0`` of HCA index ``hca``."""
    return fmt("0000:{}:00.0", hca.cast(pl.Int64).replace_strict(list(range(4)), list(HCA_PCI), return_dtype=pl.String))


def rail_ip(hca: pl.Expr, index: pl.Expr) -> pl.Expr:
    """RoCE rail address of HCA ``hca`` on 0-based node ``index``."""
    return fmt("10.2{}.{}.{}", hca, (index + 1) // 256, (index + 1) % 256)


def glog(ts: pl.Expr, code: str = "E") -> pl.Expr:
    """A PyTorch glog stamp (``E305 10:51:07.201337``: month unpadded, no year)."""
    return ts.dt.strftime(f"{code}%-m%d %H:%M:%S%.6f")


def frame(df: pl.DataFrame, kind: str, ts: pl.Expr, text: pl.Expr, *, node: pl.Expr | None = None,
          rank: pl.Expr | None = None, seq: int = 0) -> pl.DataFrame:
    """A line frame from ``df`` (one line per row)."""
    return df.select(
        pl.col("a").cast(pl.Int64), pl.lit(kind).alias("kind"), pl.col("cluster"),
        (node if node is not None else pl.lit(None, pl.String)).alias("node"),
        ts.alias("ts"), pl.lit(seq, pl.Int32).alias("seq"),
        (rank if rank is not None else pl.lit(None, pl.Int32)).cast(pl.Int32).alias("rank"),
        text.alias("text"),
    )


def texts(df: pl.DataFrame, kind: str, ts: pl.Expr, lines: list[pl.Expr | str], **kw) -> list[pl.DataFrame]:
    """Several consecutive lines per row (same stamp, increasing ``seq``)."""
    return [frame(df, kind, ts, t if isinstance(t, pl.Expr) else pl.lit(t), seq=i, **kw) for i, t in enumerate(lines)]


def ranks(att: pl.DataFrame, gpus: int = 8) -> pl.DataFrame:
    """One row per rank of each attempt: ``rank``, ``node_idx``, ``local``, ``rnode``, ``pid``."""
    out = att.with_columns(pl.int_ranges(0, pl.col("n_nodes") * gpus, dtype=pl.Int32).alias("rank")).explode("rank")
    return out.with_columns(
        (pl.col("rank") // gpus).alias("node_idx"), (pl.col("rank") % gpus).alias("local"),
    ).with_columns(
        host(pl.col("first") + pl.col("node_idx")).alias("rnode"),
        (pl.col("pid_base") + pl.col("node_idx") * 131 + 2 * pl.col("local")).alias("pid"),
    )


def nccl_prefix(r: pl.DataFrame | None = None) -> pl.Expr:
    """``host:pid:tid [dev] `` of a rank row."""
    return fmt("{}:{}:{} [{}] ", "rnode", "pid", pl.col("pid") + 81, "local")


# ------------------------------------------------------------------ every attempt

def common(att: pl.DataFrame) -> list[pl.DataFrame]:
    """Header, NCCL start-up (when ``NCCL_DEBUG=INFO``), Megatron start-up, iteration logs
    up to the fault. All benign: they match no failure rule."""
    out = [frame(att, "app", pl.col("start_ts") + secs(1), fmt(
        "[{}] job {} ({}) attempt starting on {}", pl.col("start_ts").dt.strftime("%Y-%m-%dT%H:%M:%S+00:00"),
        "job_id", fmt("train-{}", pl.col("user_id") % 17), "hostlist"))]
    debug = ranks(att.filter(pl.col("nccl_debug")))
    t = pl.col("start_ts") + secs(5 + pl.col("rank") * 0.002)
    out += texts(debug, "app", t, [
        fmt("{}NCCL INFO Bootstrap : Using bond0:10.10.{}.{}<0>", nccl_prefix(),
                  (pl.col("first") + pl.col("node_idx") + 1) // 256, (pl.col("first") + pl.col("node_idx") + 1) % 256),
        fmt("{}NCCL INFO comm 0x7f3a8c{} rank {} nranks {} cudaDev {} nvmlDev {} busId {}000 commId 0x{} - Init COMPLETE",
                  nccl_prefix(), pl.col("rank").cast(pl.String).str.pad_start(6, "0"), "rank", pl.col("n_nodes") * 8,
                  "local", "local", gpu_pci(pl.col("local")).str.slice(5, 2), pl.col("job_id").str.pad_start(16, "a")),
    ], rank=pl.col("rank"))
    out.append(slurmd_launch(att))
    out.append(frame(att, "app", pl.col("start_ts") + secs(5), pl.when(pl.col("old_nccl"))
                     .then(pl.lit("NCCL version 2.18.5+cuda12.2")).otherwise(pl.lit("NCCL version 2.21.5+cuda12.4")),
                     rank=pl.lit(0), seq=9))
    out += megatron_startup(att)
    interval = pl.max_horizontal(pl.lit(180.0), pl.col("fault_after_s") / 40)
    n_iter = ((pl.col("fault_after_s") - 120) / interval).floor().clip(0, 40).cast(pl.Int32)
    it = att.with_columns(interval.alias("_iv"), pl.int_ranges(0, n_iter).alias("_i")).explode("_i").drop_nulls("_i")
    slow = pl.when(pl.col("scenario") == "fail_slow").then(1 + 0.4 * pl.col("_i") / 40).otherwise(1.0)
    ts = pl.col("start_ts") + secs(120 + pl.col("_i") * pl.col("_iv"))
    step = ((pl.col("_i") + 1) * pl.col("_iv") / 3.1).cast(pl.Int64)
    out.append(frame(it, "app", ts, fmt(
        " [{}] iteration {}/   50000 | consumed samples: {} | elapsed time per iteration (ms): {} | learning rate: 3.000E-04 | "
        "global batch size:   512 | lm loss: {}E+00 | loss scale: 1.0 | grad norm: 0.644 | number of skipped iterations:   0 | "
        "number of nan iterations:   0 |",
        ts.dt.strftime("%Y-%m-%d %H:%M:%S"), step.cast(pl.String).str.pad_start(8), (step * 512).cast(pl.String).str.pad_start(12),
        (3100 * slow).round(1), (7.3 - pl.col("_i") * 0.01).round(6)), rank=pl.col("n_nodes") * 8 - 1))
    return out


def slurmd_launch(att: pl.DataFrame) -> pl.DataFrame:
    """slurmd's launch of step 0 on every node of each attempt (Slurm 20.11+ syslog form),
    within a few milliseconds of each other; the culprit node of ``clock_ahead_xid`` stamps
    it by its clock, ``ahead_s`` ahead."""
    nodes = att.with_columns(pl.int_ranges(0, pl.col("n_nodes"), dtype=pl.Int32).alias("node_idx")).explode("node_idx")
    ahead = pl.when((pl.col("scenario") == "clock_ahead_xid") & (pl.col("node_idx") == pl.col("culprit_idx")))
    t = pl.col("start_ts") + secs(1.6 + pl.col("node_idx") * 0.0031 + ahead.then(pl.col("ahead_s")).otherwise(0.0))
    batch = pl.col("first") + 1
    return frame(nodes, "node", t, fmt(
        "slurmd[{}]: launch task StepId={}.0 request from UID:{} GID:{} HOST:10.10.{}.{} PORT:{}",
        3000 + (pl.col("first") + pl.col("node_idx")) % 2000, "job_id", "user_id", "user_id", batch // 256, batch % 256,
        30000 + pl.col("node_idx")), node=host(pl.col("first") + pl.col("node_idx")))


def megatron_startup(att: pl.DataFrame) -> list[pl.DataFrame]:
    """Megatron-LM start-up: rank 0 announces the init steps (``print_rank_0``, datetime
    lines with their trailing space), and every tensor-parallel rank of data-parallel rank 0
    (ranks 0–7: tensor parallel 8, pipeline 1) prints its parameter count."""
    def stamp(ts: pl.Expr, what: str) -> pl.Expr:
        return fmt(f"[{what}] datetime: {{}} ", ts.dt.strftime("%Y-%m-%d %H:%M:%S"))

    ready, built = pl.col("start_ts") + secs(6), pl.col("start_ts") + secs(9)
    out = texts(att, "app", pl.col("start_ts") + secs(2), ["> initializing torch distributed ..."], rank=pl.lit(0))
    out += texts(att, "app", ready, [
        "> initialized tensor model parallel with size 8",
        "> initialized pipeline model parallel with size 1",
        fmt("> setting random seeds to {} ...", pl.col("user_id") % 17 + 1234),
        stamp(ready, "after megatron is initialized"),
    ], rank=pl.lit(0))
    tp = att.with_columns(pl.int_ranges(0, 8, dtype=pl.Int32).alias("_tp")).explode("_tp")
    out.append(frame(tp, "app", ready + secs(1 + pl.col("_tp") * 0.003), fmt(
        " > number of parameters on (tensor, pipeline) model parallel rank ({}, 0): 1678049280", "_tp"), rank=pl.col("_tp")))
    out += texts(att, "app", built, [
        stamp(built, "after model, optimizer, and learning rate scheduler are built"),
        "training ...",
        stamp(built, "before the start of training step"),
    ], rank=pl.lit(0))
    return out


def noise(att: pl.DataFrame) -> list[pl.DataFrame]:
    """Benign node lines around completed attempts: a lone XID 63, another user's XID 13,
    and a link flap on the node after the attempt ended (idle: attaches to nothing)."""
    ok = att.filter(pl.col("scenario") == "success")
    x63 = ok.filter(pl.col("noise_u") < 0.01)
    x13 = ok.filter((pl.col("noise_u") >= 0.01) & (pl.col("noise_u") < 0.015))
    flap = ok.filter((pl.col("noise_u") >= 0.015) & (pl.col("noise_u") < 0.03))
    mid = pl.col("start_ts") + secs(pl.col("fault_after_s") / 2)
    out = [
        frame(x63, "node", mid, fmt("kernel: NVRM: Xid ({}): 63, pid={}, name=python, Row Remapper: New row marked for remapping, reset gpu to activate.",
                                          gpu_pci(pl.col("culprit_gpu")), "pid_base"), node=pl.col("culprit_node")),
        frame(x13, "node", mid, fmt("kernel: NVRM: Xid ({}): 13, pid={}, name=python3, Graphics SM Warp Exception on (GPC 1, TPC 0, SM 1): Out Of Range Address",
                                          gpu_pci(pl.col("culprit_gpu")), pl.col("pid_base") + 7), node=pl.col("culprit_node")),
    ]
    idle = pl.col("end_ts") + secs(12 * 60)
    dev = fmt("mlx5_core {} ", hca_pci(pl.col("hca")))
    out += texts(flap, "node", idle, [
        fmt("kernel: {}{}: Link down", dev, pl.col("hca").cast(pl.Int64).replace_strict(list(range(4)), list(NETDEV), return_dtype=pl.String)),
        fmt("kernel: {}mlx5_{}: Port: 1 Link DOWN", dev, "hca"),
    ], node=pl.col("culprit_node"))
    out += texts(flap, "node", idle + secs(10), [
        fmt("kernel: {}mlx5_{}: Port: 1 Link ACTIVE", dev, "hca"),
    ], node=pl.col("culprit_node"))
    return out


# ------------------------------------------------------------------ faults

def xid79(df: pl.DataFrame, ts: pl.Expr, node: pl.Expr) -> list[pl.DataFrame]:
    """A GPU falling off the bus (six kernel lines)."""
    pci = gpu_pci(pl.col("culprit_gpu"))
    return texts(df, "node", ts, [
        fmt("kernel: NVRM: GPU at PCI:{}: GPU-f5f6aff5-db14-022a-0b85-{}", pci, pl.col("job_id").str.pad_start(12, "0")),
        fmt("kernel: NVRM: Xid (PCI:{}): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.", pci),
        fmt("kernel: NVRM: GPU {}.0: GPU has fallen off the bus.", pci),
        "kernel: NVRM: A GPU crash dump has been created. If possible, please run",
        "kernel: NVRM: nvidia-bug-report.sh as root to collect this data before",
        "kernel: NVRM: the NVIDIA kernel module is unloaded.",
    ], node=node)


def link_down(df: pl.DataFrame, ts: pl.Expr, node: pl.Expr) -> list[pl.DataFrame]:
    """A bad cable: module error, netdev and IB port down."""
    dev = fmt("mlx5_core {}", hca_pci(pl.col("hca")))
    netdev = pl.col("hca").cast(pl.Int64).replace_strict(list(range(4)), list(NETDEV), return_dtype=pl.String)
    return texts(df, "node", ts, [
        fmt("kernel: {}: mlx5_port_module_event:1131:(pid 0): Port module event[error]: module 0, Cable error, Bad or shorted cable/module", dev),
        fmt("kernel: {} {}: Link down", dev, netdev),
        fmt("kernel: {} mlx5_{}: Port: 1 Link DOWN", dev, "hca"),
    ], node=node)


def watchdog(att: pl.DataFrame, skip_culprit: bool = True, culprit_clock_s: pl.Expr | None = None) -> list[pl.DataFrame]:
    """Every other rank hits the NCCL watchdog ``watchdog_s`` after the fault; the ranks of
    the culprit node stamp it ``culprit_clock_s`` later when that node's clock runs ahead
    (its ranks' logging reads it)."""
    r = ranks(att)
    if skip_culprit:
        r = r.filter(pl.col("rank") != pl.col("culprit_rank"))
    t = pl.col("t0") + secs(pl.col("watchdog_s") + pl.col("rank") * 0.0005)
    stamp = t if culprit_clock_s is None else t + secs(
        pl.when(pl.col("node_idx") == pl.col("culprit_idx")).then(culprit_clock_s).otherwise(0.0))
    ms = pl.col("watchdog_s") * 1000
    head = fmt("[rank{}]:[{} ProcessGroupNCCL.cpp:", "rank", glog(stamp))
    return texts(r, "app", t, [
        fmt("{}607] [Rank {}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=40417, OpType=ALLREDUCE, NumelIn=131334144, "
                  "NumelOut=131334144, Timeout(ms)={}) ran for {} milliseconds before timing out.", head, "rank", ms, ms + 12),
        fmt("{}1664] [PG 0 Rank {}] Exception (either an error or timeout) detected by watchdog at work: 40417, last enqueued NCCL work: 40418, last completed NCCL work: 40416.", head, "rank"),
        fmt("{}621] [Rank {}] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.", head, "rank"),
        fmt("{}627] [Rank {}] To avoid data inconsistency, we are taking the entire process down.", head, "rank"),
        "terminate called after throwing an instance of 'c10::DistBackendError'",
    ], rank=pl.col("rank"))


def ib_errors(att: pl.DataFrame, peer_idx: pl.Expr, delay: float) -> list[pl.DataFrame]:
    """NET/IB completion errors (retry exceeded) on the ranks of the other nodes that use
    rail ``hca``, naming the peer node's rail address."""
    r = ranks(att).filter((pl.col("node_idx") != peer_idx) & ((pl.col("local") // 2) == pl.col("hca")))
    t = pl.col("t0") + secs(delay + pl.col("local") * 0.01)
    peer = fmt("{}<{}>", rail_ip(pl.col("hca"), pl.col("first") + peer_idx), 45000 + pl.col("rank"))
    new = fmt("{}transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer {} with status=12 opcode=0 len=0 vendor err 129 (Send)", nccl_prefix(), peer)
    old = fmt("{}transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer {} with error 12, opcode 0, len 0, vendor err 129", nccl_prefix(), peer)
    version = pl.when(pl.col("old_nccl")).then(pl.lit("2.18.5")).otherwise(pl.lit("2.21.5"))
    return texts(r, "app", t, [
        pl.when(pl.col("old_nccl")).then(old).otherwise(new),
        "Traceback (most recent call last):",
        fmt("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1691, "
                  "remote process exited or there was a network error, NCCL version {}", version),
    ], rank=pl.col("rank"))


def step_killed(att: pl.DataFrame, culprit_exit: str = "Exited with exit code 1") -> list[pl.DataFrame]:
    """srun ends the step after the culprit task exits (``--kill-on-bad-exit``)."""
    t = pl.col("end_ts") - secs(3)
    return texts(att, "app", t, [
        fmt("srun: error: {}: task {}: {}", "culprit_node", "culprit_rank", pl.lit(culprit_exit)),
        fmt("srun: Terminating StepId={}.0", "job_id"),
        fmt("slurmstepd: error: *** STEP {}.0 ON {} CANCELLED AT {} ***", "job_id", host(pl.col("first")),
                  t.dt.strftime("%Y-%m-%dT%H:%M:%S")),
    ])


def traceback(att: pl.DataFrame, ts: pl.Expr, last: pl.Expr | str, frames: tuple[str, ...] = ()) -> list[pl.DataFrame]:
    """A Python traceback on the culprit rank (no stamps, as Python prints it)."""
    body = frames or ('  File "/workspace/train.py", line 412, in <module>', "    main(args)",
                      '  File "/workspace/train.py", line 377, in main', "    loss = step(model, batch)")
    return texts(att, "app", ts, ["Traceback (most recent call last):", *body, last], rank=pl.col("culprit_rank"))


def signal_echo(att: pl.DataFrame, ts: pl.Expr) -> list[pl.DataFrame]:
    """torchrun's agent, signalled by slurmstepd (scancel, time limit, preemption), raises
    ``SignalException``: an unstamped launcher traceback (no prefix) that the output may
    show before slurmstepd's banner."""
    return texts(att, "app", ts, [
        "Traceback (most recent call last):",
        '  File "/usr/local/bin/torchrun", line 8, in <module>',
        "    sys.exit(main())",
        '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/elastic/multiprocessing/api.py", line 62, '
        "in _terminate_process_handler",
        '    raise SignalException(f"Process {os.getpid()} got signal: {sigval}", sigval=sigval)',
        fmt("torch.distributed.elastic.multiprocessing.api.SignalException: Process {} got signal: 15", "pid_base"),
    ])


EXCEPTIONS = (
    "KeyError: 'attention_mask'",
    "ValueError: too many values to unpack (expected 2)",
    "ModuleNotFoundError: No module named 'flash_attn'",
    "AttributeError: 'NoneType' object has no attribute 'shape'",
    "TypeError: forward() got an unexpected keyword argument 'labels'",
)


def scenario_lines(att: pl.DataFrame) -> list[pl.DataFrame]:
    """Fault lines of every failed attempt in ``att`` (the cascade included)."""
    by = {k[0]: v for k, v in att.partition_by("scenario", as_dict=True).items()}
    get = lambda name: by.get(name, att.clear())  # noqa: E731
    t0 = pl.col("t0")
    culprit = pl.col("culprit_node")
    pci = gpu_pci(pl.col("culprit_gpu"))
    out: list[pl.DataFrame] = []

    df = get("gpu_fallen_off_bus")
    out += xid79(df, t0, culprit) + watchdog(df)
    out += [frame(df, "node", t0 + secs(pl.col("watchdog_s") + 1 + g * 0.011), fmt(
        "kernel: NVRM: Xid ({}): 45, pid={}, name=python, Ch 00000008", gpu_pci(pl.lit(g)), pl.col("pid_base") + 2 * g), node=culprit)
        for g in range(8)]
    df = get("gsp_timeout")
    out += [frame(df, "node", t0, fmt(
        "kernel: NVRM: Xid ({}): 119, pid={}, name=python, Timeout waiting for RPC from GSP! Expected function 76 (GSP_RM_CONTROL) (0x20800a4c 0x4).",
        pci, "pid_base"), node=culprit)] + watchdog(df)
    for name, xid in (("hbm_uncorrectable_ecc", "48"), ("gpu_broken_as_oom", "94")):
        df = get(name)
        msg = ("An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0."
               if xid == "48" else "Contained ECC error")
        out.append(frame(df, "node", t0, fmt(f"kernel: NVRM: Xid ({{}}): {xid}, pid={{}}, name=python, {msg}", pci, "pid_base"), node=culprit))
        last = ("RuntimeError: CUDA error: uncorrectable ECC error encountered" if xid == "48" else
                fmt("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB. GPU {} has a total capacity of 79.10 GiB "
                          "of which 1.12 GiB is free. Including non-PyTorch memory, this process has 77.97 GiB memory in use.", pl.col("culprit_gpu")))
        out += traceback(df, t0 + secs(1.5), last) + step_killed(df)
    df = get("nvlink_fatal")
    out += [frame(df, "node", t0 + secs(k * 0.0004), fmt(
        "kernel: NVRM: Xid ({}): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error detected on link {}(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
        pci, link), node=culprit, seq=k) for k, link in enumerate((14, 15))]
    cr = ranks(df).filter(pl.col("rank") == pl.col("culprit_rank"))
    out.append(frame(cr, "app", t0 + secs(0.8), fmt(
        "{}enqueue.cc:1559 NCCL WARN Cuda failure 'uncorrectable NVLink error detected during the execution'", nccl_prefix()), rank=pl.col("rank")))
    out += traceback(df, t0 + secs(0.9), "RuntimeError: CUDA error: uncorrectable NVLink error detected during the execution") + step_killed(df)
    flood = df.filter(pl.col("noise_u") < 0.5).with_columns(pl.int_ranges(0, 2000).alias("_k")).explode("_k")
    out.append(frame(flood, "node", t0 + secs(16 + pl.col("_k") * 0.009), fmt(
        "kernel: NVRM: Xid ({}): 45, pid={}, name=python, Ch {}", gpu_pci(pl.col("_k") % 8), pl.col("pid_base") + 2 * (pl.col("_k") % 8),
        (pl.col("_k") // 8 + 1).cast(pl.String).str.pad_start(8, "0")), node=culprit))
    df = get("ib_link_down")
    out += link_down(df, t0, culprit) + ib_errors(df, pl.col("culprit_idx"), 8.0) + step_killed(df)
    df = get("nic_fatal")
    # The HCA's firmware stops answering the health poller: its peers' sends to it fail.
    out.append(frame(df, "node", t0, fmt(
        "kernel: mlx5_core {}: poll_health:802:(pid 0): device's health compromised - reached miss count", hca_pci(pl.col("hca"))),
        node=culprit))
    out += ib_errors(df, pl.col("culprit_idx"), 8.0) + step_killed(df)
    for name in ("kernel_panic", "node_failure"):
        df = get(name)
        if name == "kernel_panic":
            out += texts(df, "node", t0, [
                fmt("kernel: watchdog: Watchdog detected hard LOCKUP on cpu {}", pl.col("pid_base") % 64),
                "kernel: Kernel panic - not syncing: Hard LOCKUP",
            ], node=culprit)
        out += ib_errors(df, pl.col("culprit_idx"), 8.0)
        out += texts(df, "app", pl.col("end_ts"), [
            fmt("srun: error: Node failure on {}", culprit),
            fmt("slurmstepd: error: *** JOB {} ON {} CANCELLED AT {} DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***",
                      "job_id", host(pl.col("first")), pl.col("end_ts").dt.strftime("%Y-%m-%dT%H:%M:%S")),
        ])
    df = get("host_oom")
    out += texts(df, "node", t0, [
        "kernel: python invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, oom_score_adj=0",
        fmt("kernel: oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=step_0,mems_allowed=0-1,global_oom,"
                  "task_memcg=/system.slice/slurmstepd.scope/job_{}/step_0/user/task_{},task=python,pid={},uid={}",
                  "job_id", "culprit_rank", pl.col("pid_base") + 9, "user_id"),
        fmt("kernel: Out of memory: Killed process {} (python) total-vm:1791288804kB, anon-rss:1742331904kB, file-rss:71232kB, "
                  "shmem-rss:1048576kB, UID:{} pgtables:3406544kB oom_score_adj:0", pl.col("pid_base") + 9, "user_id"),
    ], node=culprit)
    out += traceback(df, t0 + secs(0.5), fmt("RuntimeError: DataLoader worker (pid {}) is killed by signal: Killed. ", pl.col("pid_base") + 9),
                     ('  File "/workspace/prep/tokenize_corpus.py", line 141, in <module>', "    for batch in loader:"))
    out.append(frame(df, "app", t0 + secs(7), fmt(
        "slurmstepd: error: Detected 1 oom-kill event(s) in StepId={}.0 cgroup. Some of your processes may have been killed by the cgroup out-of-memory handler.", "job_id")))
    out += step_killed(df, "Out Of Memory")
    df = get("disk_full")
    out += traceback(df, t0, "OSError: [Errno 28] No space left on device", (
        '  File "/workspace/ckpt/train.py", line 388, in <module>', "    save_checkpoint(model, optimizer, step, args.ckpt_dir)",
        '  File "/workspace/ckpt/checkpoint.py", line 54, in save_checkpoint', "    f.write(buf.getbuffer())")) + step_killed(df)
    df = get("lustre_outage")
    # Every client of the job loses the OST, each at its own pace; a rank's checkpoint write
    # fails first.
    clients = ranks(df).filter(pl.col("local") == 0)
    out.append(frame(clients, "node", t0 + secs(pl.col("node_idx") * 0.7), fmt(
        "kernel: Lustre: scratch-OST0004-osc-ffff8c2f1a3e{}: Connection to scratch-OST0004 (at 10.9.0.14@o2ib) was lost; "
        "in progress operations using this service will wait for recovery to complete",
        (pl.col("pid_base") % 10000).cast(pl.String).str.pad_start(4, "0")), node=pl.col("rnode")))
    out += traceback(df, t0 + secs(2), "OSError: [Errno 108] Cannot send after transport endpoint shutdown", (
        '  File "/workspace/ckpt/train.py", line 388, in <module>', "    save_checkpoint(model, optimizer, step, args.ckpt_dir)",
        '  File "/workspace/ckpt/checkpoint.py", line 54, in save_checkpoint', "    f.write(buf.getbuffer())")) + step_killed(df)
    df = get("config_error")
    # A Hydra config that lacks a key the code reads (fairseq's, overwindows/PALM#2).
    out += traceback(df, t0, "omegaconf.errors.ConfigAttributeError: Key 'min_lr' is not in struct", (
        '  File "/workspace/train.py", line 95, in main', "    lr_min = cfg.optimization.min_lr"))
    out += texts(df, "app", t0, ["    full_key: optimization.min_lr", "    object_type=dict"], rank=pl.col("culprit_rank"))
    out += step_killed(df)
    df = get("python_exception")
    which = (pl.col("noise_u") * len(EXCEPTIONS)).floor().cast(pl.Int64)
    out += traceback(df, t0, which.replace_strict(list(range(len(EXCEPTIONS))), list(EXCEPTIONS), return_dtype=pl.String)) + step_killed(df)
    df = get("cuda_oom")
    out += traceback(df, t0, fmt(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB. GPU {} has a total capacity of 79.10 GiB of which 1.12 GiB is free. "
        "Including non-PyTorch memory, this process has 77.97 GiB memory in use.", pl.col("culprit_gpu"))) + step_killed(df)
    df = get("bad_path")
    out += traceback(df, t0, fmt("FileNotFoundError: [Errno 2] No such file or directory: '/lustre/datasets/{}/shard_00017.jsonl'", "job_id"),
                     ('  File "/workspace/eval.py", line 276, in main', "    batch = next(loader_iter)",
                      '  File "/workspace/data.py", line 88, in __next__', "    with open(self.shards[self.idx]) as f:")) + step_killed(df)
    df = get("dataloader_stuck")
    out += traceback(df, t0 + secs(300), "RuntimeError: DataLoader timed out after 300 seconds", (
        '  File "/workspace/train.py", line 377, in main', "    batch = next(loader_iter)")) + watchdog(df)
    for name, why in (("time_limit", " DUE TO TIME LIMIT"), ("preempted", " DUE TO PREEMPTION"), ("cancelled", ""),
                      ("nic_reset_survived", " DUE TO TIME LIMIT")):
        df = get(name)
        at = pl.col("end_ts") - secs(2)
        stamp = at.dt.strftime("%Y-%m-%dT%H:%M:%S")
        out += signal_echo(df.filter(pl.col("torchrun") & (pl.col("n_nodes") == 1)), at - secs(0.5))
        out += texts(df, "app", at, [
            fmt(f"slurmstepd: error: *** JOB {{}} ON {{}} CANCELLED AT {{}}{why} ***", "job_id", host(pl.col("first")), stamp),
            "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.",
            fmt(f"slurmstepd: error: *** STEP {{}}.0 ON {{}} CANCELLED AT {{}}{why} ***", "job_id", host(pl.col("first")), stamp),
        ])
    df = get("clock_ahead_xid")
    ahead = t0 + secs(pl.col("ahead_s"))
    out += xid79(df, ahead, culprit) + watchdog(df, culprit_clock_s=pl.col("ahead_s"))
    out += [frame(df, "node", ahead + secs(pl.col("watchdog_s") + 1 + g * 0.011), fmt(
        "kernel: NVRM: Xid ({}): 45, pid={}, name=python, Ch 00000008", gpu_pci(pl.lit(g)), pl.col("pid_base") + 2 * g), node=culprit)
        for g in range(8)]
    df = get("other_jobs_oom")
    other, victim = (pl.col("job_id").cast(pl.Int64) + 500_000).cast(pl.String), pl.col("pid_base") + 40_000
    out += texts(df, "node", t0 - secs(90), [
        "kernel: python3 invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, oom_score_adj=0",
        fmt("kernel: oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0-1,global_oom,"
            "task_memcg=/system.slice/slurmstepd.scope/job_{}/step_0/user/task_0,task=python3,pid={},uid={}", other, victim,
            pl.col("user_id") + 100),
        fmt("kernel: Out of memory: Killed process {} (python3) total-vm:991288804kB, anon-rss:942331904kB, file-rss:71232kB, "
            "shmem-rss:0kB, UID:{} pgtables:1906544kB oom_score_adj:0", victim, pl.col("user_id") + 100),
    ], node=culprit)
    out += traceback(df, t0, fmt(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB. GPU {} has a total capacity of 79.10 GiB of which 1.12 GiB is free. "
        "Including non-PyTorch memory, this process has 77.97 GiB memory in use.", pl.col("culprit_gpu"))) + step_killed(df)
    df = get("nic_reset_survived")
    mid = pl.col("start_ts") + secs(pl.col("fault_after_s") / 2)
    out += texts(df, "node", mid, [
        "kernel: ixgbe 0000:01:00.0 eno1: NETDEV WATCHDOG: CPU: 3: transmit queue 3 timed out 5250 ms",
        "kernel: ixgbe 0000:01:00.0 eno1: initiating reset due to tx timeout",
        "kernel: ixgbe 0000:01:00.0 eno1: Reset adapter",
    ], node=culprit)
    out += texts(df, "node", mid + secs(4.2), ["kernel: ixgbe 0000:01:00.0 eno1: NIC Link is Up 10 Gbps, Flow Control: RX/TX"],
                 node=culprit)
    df = get("two_faults")
    out += xid79(df, t0, culprit) + link_down(df, t0 + secs(pl.col("skew_s")), pl.col("second_node"))
    out += ib_errors(df, pl.col("second_idx"), 8.0) + step_killed(df)
    out += watchdog(get("fail_slow"))
    return out
