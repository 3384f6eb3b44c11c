"""Application logs: Slurm output files and per-rank training logs.

Lines are free text behind optional prefixes, peeled off in this order:

1. ``srun --label``: ``  3: text`` (the Slurm task id → ``rank``), or Open MPI's
   ``--tag-output`` (``mpirun``, ``horovodrun``): ``[1,3]<stderr>:text`` (job, rank → ``rank``),
   or pdsh's host label (DeepSpeed's multi-node launcher): ``gpu004: text`` (→ ``node``);
2. a torchrun prefix, optionally after a ``[pid] `` tag: ``[default3]:`` (``--tee``:
   ``[<role><local rank>]:``, the index of the worker on its node) or PyTorch's own
   ``[rank3]:`` (the global rank, which wins over the task id); a second one
   (``[default0]:[rank0]:``, or ``[rank1]:[rank17]:`` under ``torchrun --role rank``: the
   first is then the local rank) is peeled too. The task id (``slot``) says which node the
   line ran on: node ``slot // tasks per node`` of the job, or node ``slot`` in front of a
   local rank (one torchrun per node), whose global rank is then ``slot × processes per
   node + local rank``, worked out once the line is tied to its attempt
   (:func:`ingest.files.land.tie_to_attempts`);
3. a stamp, after any spaces (Megatron-LM prints `` [2026-11-30 15:32:38] iteration …``):
   glog/PyTorch ``[E1130 15:32:38.123456 12345 file.cpp:123]`` (no year, rolled over like
   RFC 3164; PyTorch prints the month unpadded: ``E205`` is 5 February), Python logging
   ``[2026-11-30 15:32:38,123]``, any ISO-8601 stamp (also behind a logger's tag, as
   TorchTitan's ``[titan] 2026-09-11 23:05:40,871 - …`` and the Transformers Trainer's
   ``[INFO|trainer.py:734] 2025-01-01 16:12:18,785 >> …``, or inside NeMo's
   ``[NeMo I 2024-02-26 23:02:20 preprocess:289]``, or Ray's C++ daemons' ``[2023-08-11
   10:13:54,613 E 30 30]``, level, pid and thread after it; GPFS's ``mmfs.log`` joins date and
   time with ``_``: ``2024-11-23_01:18:31.152+0800: [E] …``), Python logging's US date
   ``05/10/2023 10:48:48 - INFO - …`` (Hugging Face's example scripts), rich's logging
   handler's ``[11/20/26 10:33:04]`` (its default ``[%x %X]``, two-digit year), abseil's
   ``E0000 00:00:1775556782.173781 2657 cuda_dnn.cc:8579]`` (seconds since the epoch,
   before its logging is set up: jaxlib, XLA), detectron2's
   ``[07/21 10:31:18 d2.utils.events]:`` (its console puts ``WARNING `` or ``ERROR `` before
   the stamp of those levels' lines) or vLLM's ``INFO 07-23 19:34:48 [file.py:289]``
   (no year either), after any process tag Ray and vLLM print (``(VllmWorker rank=3
   pid=406) ``; a Ray worker's tag comes before even the torchrun prefix:
   ``(WorkerDict pid=78830, ip=10.20.0.33) [rank9]:[E1123 …]``; Ray's node daemon's is
   ``(raylet, ip=10.0.6.140) ``; Ray's word that a node died, :data:`RAY_NODE_DEAD`, is on
   the node its address names, or on none);
4. NCCL's ``host:pid:tid [dev] `` (host → ``node``, program ``nccl``).

NVIDIA's fabric manager log stamps each line ``[Oct 31 2023 21:11:20] [ERROR] [tid 527118]
…`` (the node's wall clock, with a year): that stamp is the line's time and is cut off the
message.

slurmstepd's cancellation banner (``*** JOB 867816 ON c0700a-s1 CANCELLED AT
2021-05-11T12:06:17 DUE TO TIME LIMIT ***``) carries its own time, the node's wall clock
without a zone: a banner with no prefix stamp takes that time instead of inheriting the
previous line's (which may be hours older: the last iteration logged before the kill). So
does Cray MPICH's error header (``MPICH ERROR [Rank 0] [job id 208676.0] [Mon May 15
14:32:54 2023] [x1000c5s7b0n0] - Abort(…``), the rank's wall clock without a zone.

``srun:``/``slurmstepd:``/``salloc:``/``sbatch:`` lines get that tool as ``program`` (the
tag stays in ``message``: it is part of what those tools print). Only lines whose prefix is
broken are rejected: a stamp with an impossible date, a torchrun prefix without a rank.
"""

from __future__ import annotations

import polars as pl

from ingest.files.common import (
    PLACEMENT_COLUMNS, ZONELESS, ParseContext, epoch_stamps, iso_zoned, local_stamps, parse_iso, peel,
    stamps_without_year,
)

LABEL = r" *(?P<label>[0-9]+): "
MPI_TAG = r"\[[0-9]+,(?P<mpirank>[0-9]+)\]<(?:stdout|stderr|stddiag)>: ?"
"""Open MPI's ``--tag-output`` prefix, ``[<job>,<rank>]<stream>:`` (what ``horovodrun`` asks
``mpirun`` for): the number after the comma is the process's MPI rank."""
PDSH_HOST = r"(?P<phost>[A-Za-z][A-Za-z0-9_-]*[0-9](?:\.[A-Za-z][A-Za-z0-9-]*)*): "
"""pdsh's label (``%S: `` before each line of a remote command, which DeepSpeed's launcher
leaves on): the host as the hostfile names it. Only a name ending in a digit, as node names
do: ``RuntimeError: ``, ``srun: `` and ``NCCL INFO`` tags never end in one. An IP address
label is left on the line (the lake has no address → node map to read it with)."""
LAUNCHER = (
    r"(?:\[[0-9]+\] )?\[(?P<role>[A-Za-z_]+)(?P<trank>[0-9]+)\]: ?(?:\[rank(?P<grank>[0-9]+)\]: ?)?"
    r"(?:\[[A-Za-z_]+[0-9]+\]: ?)*"
)
BROKEN_LAUNCHER = r"^(?:\[[0-9]+\] )?\[(?:rank|default)[^\]]*\]:"
STAMP = (
    r" *(?:"
    r"[IWEF]0000 00:00:(?P<epoch>[0-9]{9,10}(?:\.[0-9]{1,6})?)(?: +[0-9]+)? [^\s\]]+:[0-9]+\]"
    r"|\[?[IWEF](?P<gmon>[0-9]{1,2})(?P<gday>[0-9]{2}) (?P<gtime>[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?)(?: +[0-9]+)? [^\s\]]+:[0-9]+\]"
    r"|(?:\[[A-Za-z][\w.|:-]*\] |\[NeMo [DIWEC] )?\[?(?P<iso>[0-9]{4}-[0-9]{2}-[0-9]{2}[T _][0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]{1,9})?(?:Z|[+-][0-9]{2}:?[0-9]{2})?)(?: [A-Za-z_][\w.]*:[0-9]+\]| >>| [DIWEF] [0-9]+ [0-9]+\])?\]?:?"
    r"|(?P<usdate>[0-9]{2}/[0-9]{2}/[0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2}) -"
    r"|\[(?P<richdate>[0-9]{2}/[0-9]{2}/[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2})\]"
    r"|(?:(?:WARNING|ERROR) )?\[(?P<dmon>[0-9]{2})/(?P<dday>[0-9]{2}) (?P<dtime>[0-9]{2}:[0-9]{2}:[0-9]{2})(?: [\w.]+)?\]:?"
    r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<vmon>[0-9]{2})-(?P<vday>[0-9]{2}) (?P<vtime>[0-9]{2}:[0-9]{2}:[0-9]{2})"
    r" \[?[^\s\]]+:[0-9]+\]"
    r") ?"
)
PROCESS = r"\((?:[A-Za-z][A-Za-z0-9_]*(?: rank=[0-9]+)? pid=[0-9]+|raylet)(?:, ip=(?P<{ip}>[0-9.]+))?\) "
"""The process tag Ray and vLLM put before a worker's lines (``(VllmWorker rank=3 pid=406) ``,
``(EngineCore_DP0 pid=2003562) ``, ``(train_rft pid=2657296) ``); a Ray worker on another
node than the driver's adds its address (``(RayWorkerWrapper pid=89382, ip=172.16.4.22) ``),
captured in the group named by ``{ip}``. Ray's node daemon forwards its own lines under
``(raylet) `` (the driver's node) or ``(raylet, ip=10.0.6.140) ``."""
NCCL_ADDRESS = r"(?:Bootstrap : Using|NET/IB : Using|NET/Socket : Using)(?:[^;<]*; OOB)? (?:\[[0-9]+\])?[\w.-]+:([0-9.]+)<"
"""NCCL's banner naming the node's own bootstrap or out-of-band address (``NCCL INFO
Bootstrap : Using ib0:10.0.0.3<0>``, ``NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.3<0>``):
group 1 the address."""
RAY_START_AT = r"^Starting (?:HEAD|WORKER [0-9]+) at ([A-Za-z0-9][A-Za-z0-9._-]*)\s*$"
"""The batch script's echo before each ``ray start`` in Ray's documented Slurm template
(``Starting HEAD at $head_node``, ``Starting WORKER $i at $node_i``): group 1 the node."""
RAY_LOCAL_IP = r"(?:^\s*|-- )Local node IP: ([0-9.]+)\s*$"
"""``ray start``'s report of the address it runs on, logged (``… INFO scripts.py:1047 -- Local
node IP: 172.16.4.22``) or printed bare on a line of its own (``Local node IP: 10.94.16.4``, its
CLI's plain output): group 1 the address, of the node the last :data:`RAY_START_AT` named."""
RAY_NODE_DEAD = r"The node with node id: [0-9a-f]+ and address: ([0-9.]+) and node name: \S+ has been marked dead\b"
"""Ray's control store declaring a node dead (``WARNING worker.py:1866 -- The node with
node id: 9426f4… and address: 10.130.0.113 and node name: 10.130.0.113 has been marked dead
because the detector has missed too many heartbeats from it.``), printed by the driver
about another node: group 1 that node's address."""
RAY_NODE_DEAD_LITERAL = "has been marked dead because"
"""A literal of :data:`RAY_NODE_DEAD`: the cheap test for lines that may hold it."""
NCCL_HOST = r"(?P<nhost>[A-Za-z0-9][A-Za-z0-9._-]*):[0-9]+:[0-9]+ \[[0-9]+\] "
SLURM_TOOL = r"^(?P<tool>srun|slurmstepd|salloc|sbatch)(?:\[[0-9]+\])?: "
CANCELLED_AT = r"\*\*\* (?:JOB|STEP) \S+ (?:ON \S+ )?CANCELLED AT ([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2})\b"
"""slurmstepd's banner (``*** STEP 1003.0 ON gpu007 CANCELLED AT 2026-11-28T12:20:41 ***``;
older Slurm prints the host at the end); group 1 is its time."""
JOB_CANCELLED = r"\*\*\* JOB \S+ (?:ON \S+ )?CANCELLED AT "
"""slurmstepd's banner for the whole job (not one step; older Slurm prints the host at the
end): the batch script was killed, so below the srun/slurmstepd teardown right under it,
the lines of the same output file were printed by a later run of the job."""
MPICH_ERROR_AT = (
    r"MPICH ERROR \[Rank [0-9]+\] \[job id [^\]]*\] "
    r"\[([A-Z][a-z]{2} [A-Z][a-z]{2} +[0-9]{1,2} [0-9]{2}:[0-9]{2}:[0-9]{2} [0-9]{4})\]"
)
"""Cray MPICH's error header; group 1 is its ``ctime``-style time (``Mon May 15 14:32:54
2023``, the day space-padded)."""
BANNER_WORDS = r"CANCELLED AT|MPICH ERROR \["
"""What a line carrying its own time in a banner holds: only those lines reach the banners' regexes."""
FABRIC_MANAGER_STAMP = r"^\[([A-Z][a-z]{2} [0-9]{2} [0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2})\] "
"""The fabric manager's ``[Oct 31 2023 21:11:20] `` stamp (group 1), at the start of a line."""
PREFIXES = (
    f"(?:{LABEL}|{MPI_TAG}|{PDSH_HOST})?(?:{PROCESS.format(ip='rayip')})?(?:{LAUNCHER})?"
    f"(?:{PROCESS.format(ip='rayip2')})?(?:{STAMP})?(?:{NCCL_HOST})?"
)
"""Every prefix in one regex: each optional part is taken whenever it matches where the
previous one ended, as peeling them one by one would, but the line is scanned once and
sliced once. Ray's process tag may come before the torchrun prefix (a Ray worker's own
``[rankN]:`` lines) or after it."""
BROKEN_AFTER_LABEL = r"^(?: *[0-9]+: )?" + BROKEN_LAUNCHER.removeprefix("^")
""":data:`BROKEN_LAUNCHER` after an optional ``srun --label`` prefix (the label regex can
only match one way, and a torchrun prefix cannot start with a space or a digit)."""


def peel_prefixes(frame: pl.DataFrame, text: str, ctx: ParseContext) -> pl.DataFrame:
    """Add ``rank``, ``local_rank``, ``slot``, ``node``, ``program``, ``message``, ``ts``,
    ``zoneless`` and ``reason`` columns by peeling the prefixes (see the module docstring)
    off column ``text``."""
    frame = peel(frame, text, PREFIXES, "_message")
    # glog, detectron2 and vLLM stamps carry no year: one year-less reading for all three.
    frame = frame.with_columns(
        pl.coalesce("gmon", "dmon", "vmon").cast(pl.Int32).alias("_month"),
        pl.concat_str(
            [pl.coalesce("gday", "dday", "vday"), pl.coalesce("gtime", "dtime", "vtime")], separator=" "
        ).alias("_rest"),
    )
    frame = frame.with_columns(stamps_without_year(frame, "_month", "_rest", ctx).alias("_yearless_ts"))
    # Only lines holding a banner's words reach its regex (the others as null), and only
    # lines opening with "[" the fabric manager's stamp.
    banner = pl.when(pl.col("_message").str.contains(BANNER_WORDS)).then(pl.col("_message"))
    mpich_at = banner.str.extract(MPICH_ERROR_AT, 1).str.replace(r" +", " ")
    banner_ts = pl.coalesce(
        local_stamps(banner.str.extract(CANCELLED_AT, 1), "%Y-%m-%dT%H:%M:%S", ctx.timezone),
        local_stamps(mpich_at, "%a %b %d %H:%M:%S %Y", ctx.timezone),
    )
    bracketed = pl.when(pl.col("_message").str.starts_with("[")).then(pl.col("_message"))
    frame = frame.with_columns(bracketed.str.extract(FABRIC_MANAGER_STAMP, 1).alias("_fm_stamp"))
    fm_ts = local_stamps(pl.col("_fm_stamp"), "%b %d %Y %H:%M:%S", ctx.timezone)
    if frame["_fm_stamp"].is_not_null().any():  # most batches hold none: no copy of every message
        frame = frame.with_columns(
            pl.when(pl.col("_fm_stamp").is_not_null())
            .then(pl.col("_message").str.slice(pl.col("_fm_stamp").str.len_bytes() + 3))
            .otherwise(pl.col("_message")).alias("_message")
        )
    # A column, not an expression: the reason reads it too, and would parse every stamp again.
    frame = frame.with_columns(
        pl.coalesce(
            # GPFS's mmfs.log joins the date and the time with "_".
            pl.col("_yearless_ts"), parse_iso(pl.col("iso").str.replace("_", " ", literal=True), ctx.timezone),
            local_stamps(pl.col("usdate"), "%m/%d/%Y %H:%M:%S", ctx.timezone),
            local_stamps(pl.col("richdate"), "%m/%d/%y %H:%M:%S", ctx.timezone),
            # abseil's stamp before its logging is initialised (jaxlib, XLA): epoch seconds
            epoch_stamps(pl.col("epoch")), fm_ts, banner_ts,
        ).alias("ts")
    )
    ts = pl.col("ts")
    message = pl.col("_message")
    has_stamp = (pl.col("_month").is_not_null() | pl.col("iso").is_not_null() | pl.col("usdate").is_not_null()
                 | pl.col("richdate").is_not_null())
    reason = (
        pl.when(has_stamp & ts.is_null()).then(pl.lit("invalid date in the line's timestamp prefix"))
        .when(pl.col("trank").is_null() & pl.col(text).str.contains(BROKEN_AFTER_LABEL))
        .then(pl.lit("torchrun prefix without a rank number (expected '[rank<N>]:' or '[<role><N>]:')"))
    )
    program = (
        pl.when(pl.col("nhost").is_not_null()).then(pl.lit("nccl"))
        .otherwise(message.str.extract(SLURM_TOOL, 1))
    )
    # PyTorch's ``[rankN]:`` alone is the global rank; any other role's number, and the
    # first of two prefixes (torchrun's ``--role rank`` tee before PyTorch's own
    # ``[rank17]:``), is the local rank.
    local = (pl.col("role") != "rank") | pl.col("grank").is_not_null()
    return frame.with_columns(
        pl.coalesce(
            "grank", pl.when(~local).then(pl.col("trank")),
            pl.when(pl.col("trank").is_null()).then(pl.col("mpirank")),
        ).cast(pl.Int32, strict=False).alias("rank"),
        pl.when(local).then(pl.col("trank")).cast(pl.Int32, strict=False).alias("local_rank"),
        pl.col("label").cast(pl.Int32, strict=False).alias("slot"),
        pl.coalesce("nhost", "phost").alias("node"),
        program.alias("program"),
        message.alias("message"),
        reason.cast(pl.String).alias("reason"),
        # Only an ISO-8601 stamp with its offset and abseil's epoch seconds carry a zone
        # (glog, detectron2, vLLM, Python's US dates, the fabric manager's and the banners'
        # stamps never do).
        (ts.is_not_null() & pl.col("epoch").is_null()
         & ~(pl.col("_yearless_ts").is_null() & iso_zoned(pl.col("iso")).fill_null(False)))
        .alias(ZONELESS),
    )


def ray_worker_nodes(frame: pl.DataFrame, dead: pl.Expr) -> pl.Expr:
    """The node each Ray worker's line ran on, from the address in its process tag
    (``rayip``/``rayip2`` of :data:`PREFIXES`), or the node a line of Ray's declaring a node
    dead is about (``dead``: its address, :data:`RAY_NODE_DEAD`), where its file tells which
    node has that address: a line holding both the tag and NCCL's host prefix, NCCL's banner
    naming a node's address (:data:`NCCL_ADDRESS`), or ``ray start``'s ``Local node IP``
    under the template's ``Starting WORKER i at <node>`` echo. An address two nodes of one
    file claim names neither. Null for every other line."""
    ip = pl.coalesce("rayip", "rayip2", dead)
    if frame.select(ip.is_null().all()).item():  # most files hold no Ray worker's line
        return pl.lit(None, dtype=pl.String)
    message = pl.col("message")
    nccl = pl.col("nhost").is_not_null()
    claims = frame.select(
        "file", "seq",
        pl.when(nccl).then(pl.coalesce(ip, message.str.extract(NCCL_ADDRESS, 1)))
        .otherwise(message.str.extract(RAY_LOCAL_IP, 1)).alias("_address"),
        pl.col("nhost"), message.str.extract(RAY_START_AT, 1).alias("_started_at"),
    ).sort("file", "seq")
    # ``ray start``'s own lines carry no host: its node is the one the last echo named,
    # unless the script started the next node before the last one reported (one node
    # then seems to have two addresses, and neither is trusted).
    echo = pl.col("nhost").is_null()
    claims = claims.with_columns(
        pl.coalesce("nhost", pl.col("_started_at").forward_fill().over("file")).alias("_host")
    ).drop_nulls(["_address", "_host"]).unique(["file", "_address", "_host"]).filter(
        ~echo | (pl.col("_address").n_unique().over("file", "_host", echo) == 1)
    )
    known = claims.filter(pl.len().over("file", "_address") == 1).select("file", "_address", "_host")
    nodes = frame.select("file", ip.alias("_address")).join(known, on=["file", "_address"], how="left",
                                                           maintain_order="left")
    return pl.lit(nodes["_host"])


def parse(lines: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """Parse application log lines (see the module docstring)."""
    frame = peel_prefixes(lines, "line", ctx)
    # Ray's word that a node died is about that node, whoever printed it: on the node its
    # address names, or on none (not on the printer's rank's, nor the landing's default).
    dead = (
        pl.col("message").str.extract(RAY_NODE_DEAD, 1)
        if frame["message"].str.contains(RAY_NODE_DEAD_LITERAL, literal=True).any()
        else pl.lit(None, dtype=pl.String)
    )
    frame = frame.with_columns(dead.alias("_dead"))
    about = pl.col("_dead").is_not_null()
    resolved = ray_worker_nodes(frame, pl.col("_dead"))
    frame = frame.with_columns(
        pl.when(about).then(resolved).otherwise(pl.coalesce(pl.col("node"), resolved)).alias("node"),
        *(pl.when(~about).then(pl.col(c)).alias(c) for c in ("rank", *PLACEMENT_COLUMNS)),
    )
    return frame.select(
        "file",
        "seq",
        "ts",
        pl.when(pl.col("ts").is_not_null()).then(pl.lit("line")).alias("ts_kind"),
        pl.when(about).then(pl.col("node"))
        .otherwise(pl.coalesce(pl.col("node"), pl.lit(ctx.default_node, dtype=pl.String))).alias("node"),
        "rank",
        "program",
        "message",
        "reason",
        *PLACEMENT_COLUMNS,
        ZONELESS,
    )
