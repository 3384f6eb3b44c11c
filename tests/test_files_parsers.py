"""Parsers of the log-files connector against real lines in their real file formats.

Every message below is verbatim from the shared corpus (``shared/corpus`` beside the
repository; URL beside it); the wrappers around it (syslog header, dmesg stamp, journald JSON, kubectl stamp, srun label) are the
formats those tools write, built around the real line.
"""

from __future__ import annotations

import gzip
import json
import os
from datetime import datetime, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import polars as pl
import pytest

from ingest.files import FilesError, read_log_file
from ingest.files.detect import detect_source
from ingest.schema import OBSERVATIONS, REJECTS

FIXTURES = Path(__file__).parent / "fixtures" / "logs"
UTC = timezone.utc

# (line, source URL)
SYSLOG_3164 = [
    ("Dec  2 11:38:27 worker4 kernel: [  199.234935] NVRM: GPU 0000:0a:00.0: rm_init_adapter failed, device minor number 5",
     "https://github.com/NVIDIA/gpu-operator/issues/1146"),
    ("Dec 02 09:56:04 node1 kernel: mlx5_core 0000:d2:00.0: mlx5_cmd_out_err:838:(pid 1441871): ACCESS_REG(0x805) op_mod(0x1) failed, status bad operation(0x2), syndrome (0x9a6171), err(-22)",
     "https://github.com/leptonai/gpud/issues/1164"),
    ("Feb 14 05:03:41 000-000-00000-1-gpu-1 kernel: mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link INIT",
     "https://github.com/leptonai/gpud/pull/1209"),
]
MLX5_LINK = ("mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link INIT", "https://github.com/leptonai/gpud/pull/1209")
NVLINK_XID = ("NVRM: Xid (PCI:0000:b9:00): 71, NVLink: fatal error detected on link 6",
              "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-resiliency-health-monitoring-agent.html")
FALLEN_OFF = ("NVRM: GPU 0000:06:00.0: GPU has fallen off the bus.",
              "https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1151")
DMESG_T = ("[Sun Feb 23 16:24:18 2025] NVRM: GPU at PCI:0000:9b:00: GPU-509665ad-b600-ac93-3616-d754b23d636d",
           "https://github.com/leptonai/gpud/blob/4a8de33a3f02e207f39e9023d67125592d599731/components/accelerator/nvidia/xid/testdata/dmesg-with-xid-119.log")
DMESG_ISO = ("kern  :warn  : 2025-01-21T04:41:44,283390+00:00 NVRM: Xid (PCI:0000:38:00): 13, pid='<unknown>', name=<unknown>, Graphics Exception: ESR 0x546fb0=0x11f000e 0x546fb4=0x24 0x546fa8=0xf81eb60 0x546fac=0x1174",
             "https://github.com/leptonai/gpud/blob/4a8de33a3f02e207f39e9023d67125592d599731/components/memory/testdata/dmesg.decode.iso.log")
RAW_KMSG = ("6,3964,206764307,-;nvidia-nvswitch2: open (major=510)",
            "https://github.com/leptonai/gpud/blob/4a8de33a3f02e207f39e9023d67125592d599731/pkg/kmsg/testdata/kmsg.1.log")
DMESG_DELTA = ("[  +0.000004] pcieport 0000:00:03.0:    [12] Timeout", "https://github.com/rwth-i6/returnn/issues/1486")
# tests/fixtures/logs/dmesg-gpu.txt, line by line
DMESG_GPU = [
    ("[   84.300451] NVRM: GPU6 _threadNodeCheckTimeout: _threadNodeCheckTimeout: currentTime: f420db7018cc0 >= f420db7018cc0",
     "https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1230"),
    ("[   84.300463] NVRM: GPU6 _threadNodeCheckTimeout: _threadNodeCheckTimeout: Timeout was set to: 4000 msecs!",
     "https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1230"),
    ("[   84.300476] NVRM: GPU6 kbusSendSysmembarSingle_GH100: - timeout error waiting for startToken = 0x3 cnt=24105122",
     "https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1230"),
    ("[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0", "https://github.com/NVIDIA/NVSentinel/issues/155"),
    ("               NVRM: (PCI ID: 10de:26b5) installed in this system has", "https://github.com/NVIDIA/NVSentinel/issues/155"),
    ("               NVRM: fallen off the bus and is not responding to commands.", "https://github.com/NVIDIA/NVSentinel/issues/155"),
]
# tests/fixtures/logs/slurm-4242.out, line by line (srun --label prefixes added where shown)
SLURM_4242 = [
    ("Traceback (most recent call last):", "https://github.com/aioz-ai/GCD/issues/6"),
    ("  0: [rank0]:[E1206 18:44:12.715588844 ProcessGroupNCCL.cpp:1664] [PG 1 Rank 0] Exception (either an error or timeout) detected by watchdog at work: 7753, last enqueued NCCL work: 7755, last completed NCCL work: 7752.",
     "https://github.com/hiyouga/LlamaFactory/issues/6269"),
    ("  4: [rank4]:[E1206 18:44:12.755262105 ProcessGroupNCCL.cpp:607] [Rank 4] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7753, OpType=_REDUCE_SCATTER_BASE, NumelIn=544997376, NumelOut=68124672, Timeout(ms)=600000) ran for 600099 milliseconds before timing out.",
     "https://github.com/hiyouga/LlamaFactory/issues/6269"),
    ("  5: kp-ddp-worker-0:3468:3905 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer 10.216.210.236<54862> with status=12 opcode=32616 len=0 vendor err 129 (Recv) localGid fd00:1148:9000:5000:4:200:3:ff21 remoteGidsfd00:1148:9000:5000:4:200:3:ff20",
     "https://github.com/NVIDIA/nccl/issues/1405"),
    ("[default7]: iteration   42784/ 115311 | consumed samples:    71463856 | consumed tokens: 146357977088 | elapsed time per iteration (s): 111.14 | learning",
     "https://github.com/bigscience-workshop/bigscience/blob/9e64edec2ad1fb9263bf39ba616a84ff64b4d947/train/tr11-176B-ml/chronicles.md"),
    ("slurmstepd: error: *** STEP 32233190.0 ON nid01934 CANCELLED AT 2020-07-03T02:59:56 DUE TO TIME LIMIT ***",
     "https://github.com/desihub/desitarget/issues/628"),
    ("srun: error: nid01934: tasks 2,4-5,7: Terminated", "https://github.com/desihub/desitarget/issues/628"),
]
PY_LOGGING = ("[2024-05-08 08:47:31,877] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: 1) local_rank: 2 (pid: 5939) of binary: /home/ubuntu/anaconda3/envs/salience_detr/bin/python",
              "https://github.com/xiuqhou/Salience-DETR/issues/4")
GLOG_SIGTERM = ("W0726 10:59:50.786825 140538811684672 torch/distributed/elastic/multiprocessing/api.py:858] Sending process 147865 closing signal SIGTERM",
                "https://github.com/huggingface/accelerate/issues/2960")
TF_ISO = ("2019-02-19 13:19:12.200064: E tensorflow/stream_executor/event.cc:34] error destroying CUDA event in context 000001A6735E4ED0: CUDA_ERROR_LAUNCH_FAILED: unspecified launch failure",
          "https://github.com/tensorflow/tensorflow/issues/25866")
PID_RANK = ("[1833] [rank4]:[E602 11:18:52.536602063 ProcessGroupNCCL.cpp:1896] [PG ID 1 PG GUID 1 Rank 4] Process group watchdog thread terminated with exception: [Rank 4] Watchdog",
            "https://github.com/hiyouga/LlamaFactory/issues/8261")
CUDA_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 29.76 GiB",
            "https://github.com/lllyasviel/FramePack/issues/369")
ECC = ("RuntimeError: CUDA error: uncorrectable ECC error encountered", "https://github.com/vllm-project/vllm/issues/5222")


def write(path: Path, lines: list[str], *, mtime: datetime | None = None) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    if mtime is not None:
        os.utime(path, (mtime.timestamp(), mtime.timestamp()))
    return path


def accounted(parsed) -> None:
    """Every non-blank line is in exactly one of observations or rejects."""
    seqs = pl.concat([
        parsed.observations["seq"],
        parsed.rejects["origin"].str.extract(r":(\d+)$").cast(pl.Int64),
    ])
    assert seqs.len() == parsed.lines
    assert seqs.n_unique() == parsed.lines
    assert parsed.observations.columns == OBSERVATIONS.names
    assert parsed.rejects.columns == REJECTS.names


def test_fixture_files_hold_exactly_the_listed_real_lines():
    for name, rows in [("dmesg-gpu.txt", DMESG_GPU), ("slurm-4242.out", SLURM_4242)]:
        assert (FIXTURES / name).read_text().splitlines() == [line for line, _ in rows]


def test_syslog_rfc3164_iso_and_rfc5424(tmp_path):
    lines = [line for line, _ in SYSLOG_3164] + [
        f"2026-11-30T15:32:38.123456+01:00 gpu-7 kernel: {MLX5_LINK[0]}",
        # RFC 5424 example message, https://datatracker.ietf.org/doc/html/rfc5424#section-6.5
        "<165>1 2003-10-11T22:14:15.003Z mymachine.example.com evntslog - ID47 "
        '[exampleSDID@32473 iut="3" eventSource="Application" eventID="1011"] An application event log entry...',
        "    wrapped continuation of the event entry",
        "this line is garbage",
        # A relay that writes addresses instead of names.
        f"2026-11-30T15:32:39.5+01:00 10.0.0.5 kernel: {MLX5_LINK[0]}",
    ]
    parsed = read_log_file(write(tmp_path / "messages", lines), year=2025)
    assert parsed.source == "syslog"
    accounted(parsed)
    obs = parsed.observations
    first = obs.row(0, named=True)
    assert first["ts"] == datetime(2025, 12, 2, 11, 38, 27, tzinfo=UTC)
    assert (first["node"], first["program"], first["ts_source"]) == ("worker4", "kernel", "line")
    assert first["message"] == "NVRM: GPU 0000:0a:00.0: rm_init_adapter failed, device minor number 5"
    assert first["origin"] == f"{parsed.input_id}:1" and first["input_id"] == parsed.input_id
    iso = obs.filter(pl.col("node") == "gpu-7").row(0, named=True)
    assert iso["ts"] == datetime(2026, 11, 30, 14, 32, 38, 123456, tzinfo=UTC)
    assert iso["message"] == MLX5_LINK[0]
    # Fully qualified host names become the short names schedulers use; addresses stay.
    rfc5424 = obs.filter(pl.col("node") == "mymachine").row(0, named=True)
    assert rfc5424["program"] == "evntslog"
    assert rfc5424["message"] == "An application event log entry..."
    wrapped = obs.filter(pl.col("seq") == 6).row(0, named=True)
    assert (wrapped["ts_source"], wrapped["ts"], wrapped["node"]) == ("inferred", rfc5424["ts"], "mymachine")
    assert obs.filter(pl.col("seq") == 8)["node"].to_list() == ["10.0.0.5"]
    assert parsed.rejects["raw"].to_list() == ["this line is garbage"]
    assert "no syslog header" in parsed.rejects["reason"][0]


def test_opensm_log_lines_are_the_subnet_managers_not_a_host_named_by_their_microseconds(tmp_path):
    """opensm writes its own log with syslog's month-day-time, then microseconds, thread and
    level where a host would be (osm_log.c: "%s %02d %02d:%02d:%02d %06d [%04X] 0x%02x -> "):
    the lines are the subnet manager's, on ``--node``'s host, to the microsecond."""
    lines = ["Nov 25 14:07:33 121004 [4E8006C0] 0x01 -> log_trap_info: Received Generic Notice type:1 num:128 "
             "(Link state change) Producer:2 (Switch) from LID:5 TID:0x0000000200000080",
             "Nov 25 14:07:33 159004 [4E8006C0] 0x02 -> SUBNET UP"]
    parsed = read_log_file(write(tmp_path / "opensm.log", lines), year=2026, default_node="kes-sm01")
    obs = parsed.observations
    assert parsed.source == "syslog" and parsed.rejects.is_empty()
    assert obs.select("node", "program").unique().rows() == [("kes-sm01", "opensm")]
    assert obs["ts"].to_list() == [datetime(2026, 11, 25, 14, 7, 33, 121004, tzinfo=UTC),
                                   datetime(2026, 11, 25, 14, 7, 33, 159004, tzinfo=UTC)]
    assert obs["message"][1] == "SUBNET UP"


def test_opensm_sweep_banner_rows_continue_the_line_above_them(tmp_path):
    """opensm boxes a sweep's banner in rows of asterisks under ``do_sweep:`` (its log as
    ibsim's walkthrough prints it): they are that line's, not lines without a header."""
    stars = "*" * 66
    lines = ["Jun 17 17:21:28 923669 [3DA006C0] 0x02 -> do_sweep:", "", "", stars,
             "*********************** HEAVY SWEEP START ************************", stars, "", "",
             "Jun 17 17:21:28 924124 [3DA006C0] 0x02 -> do_sweep: Entering heavy sweep with flags: "
             "force_heavy_sweep 1, coming out of standby 0, subnet initialization error 0, sm port change 0"]
    parsed = read_log_file(write(tmp_path / "opensm.log", lines), year=2026, default_node="sm01")
    assert parsed.rejects.is_empty()
    obs = parsed.observations
    assert obs.select("node", "program").unique().rows() == [("sm01", "opensm")]
    assert obs.filter(pl.col("message").str.contains("HEAVY SWEEP START"))["ts_source"].to_list() == ["inferred"]


def test_syslog_year_rollover_with_explicit_year(tmp_path):
    lines = [f"Dec 31 23:59:58 node1 kernel: {FALLEN_OFF[0]}", f"Jan  1 00:00:03 node1 kernel: {NVLINK_XID[0]}"]
    parsed = read_log_file(write(tmp_path / "syslog", lines), year=2025)
    assert parsed.observations["ts"].to_list() == [
        datetime(2025, 12, 31, 23, 59, 58, tzinfo=UTC), datetime(2026, 1, 1, 0, 0, 3, tzinfo=UTC),
    ]


def test_syslog_year_from_mtime_rolls_over_and_never_lands_in_the_future(tmp_path):
    lines = [f"Dec 31 23:59:58 node1 kernel: {FALLEN_OFF[0]}", f"Jan  1 00:00:03 node1 kernel: {NVLINK_XID[0]}"]
    mtime = datetime(2027, 1, 5, tzinfo=UTC)
    parsed = read_log_file(write(tmp_path / "syslog", lines, mtime=mtime))
    assert [t.year for t in parsed.observations["ts"]] == [2026, 2027]
    # A December line in a file last written in January is from the previous December.
    only_dec = read_log_file(write(tmp_path / "syslog.1", lines[:1], mtime=mtime))
    assert only_dec.observations["ts"][0] == datetime(2026, 12, 31, 23, 59, 58, tzinfo=UTC)


def test_journald_json_export_with_byte_array_message(tmp_path):
    entries = [
        {"__REALTIME_TIMESTAMP": "1764516758123456", "_HOSTNAME": "gpu-3", "SYSLOG_IDENTIFIER": "kernel",
         "_COMM": "kworker", "MESSAGE": NVLINK_XID[0]},
        {"__REALTIME_TIMESTAMP": "1764516759000000", "_HOSTNAME": "gpu-3", "_COMM": "python3",
         "MESSAGE": list(b"\x1b[31m" + ECC[0].encode() + b"\xff")},
    ]
    lines = [json.dumps(e) for e in entries] + ["{not json", json.dumps({"_HOSTNAME": "gpu-3", "MESSAGE": "x"})]
    parsed = read_log_file(write(tmp_path / "journal.json", lines))
    assert parsed.source == "journald"
    accounted(parsed)
    obs = parsed.observations
    assert obs["ts"].to_list() == [
        datetime(2025, 11, 30, 15, 32, 38, 123456, tzinfo=UTC), datetime(2025, 11, 30, 15, 32, 39, tzinfo=UTC),
    ]
    assert obs["node"].to_list() == ["gpu-3", "gpu-3"]
    assert obs["program"].to_list() == ["kernel", "python3"]
    assert obs["message"].to_list() == [NVLINK_XID[0], "\x1b[31m" + ECC[0] + "\ufffd"]
    assert sorted(parsed.rejects["reason"]) == [
        "missing or non-numeric __REALTIME_TIMESTAMP",
        "not a journald JSON object (journalctl -o json writes one per line)",
    ]


def test_kmsg_without_boot_time_rejects_monotonic_lines_and_says_how_to_fix():
    parsed = read_log_file(FIXTURES / "dmesg-gpu.txt", default_node="gpu-9")
    assert parsed.source == "kmsg"
    accounted(parsed)
    assert parsed.rejects.height == 4
    assert parsed.rejects["reason"].str.contains("--boot-time").all()
    # the two wrapped lines have nothing to inherit from: dated at ingest, never dropped
    assert parsed.observations["ts_source"].to_list() == ["ingest", "ingest"]


def test_kmsg_with_boot_time_converts_monotonic_stamps():
    boot = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
    parsed = read_log_file(FIXTURES / "dmesg-gpu.txt", boot_time=boot, default_node="gpu-9")
    accounted(parsed)
    assert parsed.rejects.height == 0
    obs = parsed.observations
    assert obs["ts"][0] == datetime(2026, 11, 30, 10, 1, 24, 300451, tzinfo=UTC)
    assert obs["ts_source"].to_list() == ["monotonic"] * 4 + ["inferred"] * 2
    assert obs["ts"][5] == datetime(2026, 11, 30, 10, 30, 43, 308145, tzinfo=UTC)
    assert obs["message"][3] == "NVRM: The NVIDIA GPU 0000:b3:00.0"
    assert set(obs["node"]) == {"gpu-9"} and set(obs["program"]) == {"kernel"}


def test_kmsg_detects_boot_time_from_a_syslog_kernel_line(tmp_path):
    lines = [
        SYSLOG_3164[0][0],  # Dec  2 11:38:27 … kernel: [  199.234935] …
        "[  200.234935] " + FALLEN_OFF[0],
    ]
    parsed = read_log_file(write(tmp_path / "kern.txt", lines), source="kmsg", year=2026)
    accounted(parsed)
    assert parsed.observations["ts"].to_list() == [
        datetime(2026, 12, 2, 11, 38, 27, tzinfo=UTC), datetime(2026, 12, 2, 11, 38, 28, tzinfo=UTC),
    ]
    assert parsed.observations["ts_source"].to_list() == ["line", "monotonic"]


def test_dmesg_wall_clock_formats_and_relative_stamps(tmp_path):
    lines = [DMESG_T[0], DMESG_ISO[0], RAW_KMSG[0], DMESG_DELTA[0]]
    parsed = read_log_file(write(tmp_path / "dmesg.txt", lines), boot_time=datetime(2026, 1, 1))
    assert parsed.source == "kmsg"
    accounted(parsed)
    obs = parsed.observations
    assert obs["ts"].to_list() == [
        datetime(2025, 2, 23, 16, 24, 18, tzinfo=UTC),
        datetime(2025, 1, 21, 4, 41, 44, 283390, tzinfo=UTC),
        datetime(2026, 1, 1, 0, 3, 26, 764307, tzinfo=UTC),
    ]
    assert obs["message"][1].startswith("NVRM: Xid (PCI:0000:38:00): 13,")
    assert obs["message"][2] == "nvidia-nvswitch2: open (major=510)"
    assert "dmesg -T" in parsed.rejects["reason"][0]


def test_app_prefixes_ranks_nccl_host_and_stamps():
    parsed = read_log_file(FIXTURES / "slurm-4242.out", year=2026)
    assert parsed.source == "app"
    accounted(parsed)
    assert parsed.rejects.height == 0
    obs = parsed.observations
    assert obs["rank"].to_list() == [None, 0, 4, 5, 7, None, None]
    assert obs["node"].to_list() == [None, None, None, "kp-ddp-worker-0", None, None, None]
    assert obs["program"].to_list() == [None, None, None, "nccl", None, "slurmstepd", "srun"]
    assert obs["message"][1].startswith("[PG 1 Rank 0] Exception (either an error or timeout)")
    assert obs["message"][3].startswith("ib_plugin.c:1615 NCCL WARN NET/IB : Got completion")
    assert obs["message"][4].startswith("iteration   42784/ 115311")
    stamp = datetime(2026, 12, 6, 18, 44, 12, 715588, tzinfo=UTC)
    # the traceback before the first stamp takes the next stamp; later lines inherit, but
    # slurmstepd's banner carries its own time (wall time, here UTC)
    assert obs["ts"][0] == stamp and obs["ts"][1] == stamp
    assert obs["ts"][5] == datetime(2020, 7, 3, 2, 59, 56, tzinfo=UTC)
    assert obs["ts_source"].to_list() == ["inferred", "line", "line", "inferred", "inferred", "line", "inferred"]


def test_app_timestamp_styles_and_broken_prefixes(tmp_path):
    lines = [
        PY_LOGGING[0], GLOG_SIGTERM[0], TF_ISO[0], PID_RANK[0],
        "[2026-13-45 15:32:38,123] " + CUDA_OOM[0],
        "[rank]: " + CUDA_OOM[0],
    ]
    parsed = read_log_file(write(tmp_path / "train.log", lines), year=2026, source="app")
    accounted(parsed)
    obs = parsed.observations
    assert obs["ts"].to_list() == [
        datetime(2024, 5, 8, 8, 47, 31, 877000, tzinfo=UTC),
        datetime(2026, 7, 26, 10, 59, 50, 786825, tzinfo=UTC),
        datetime(2019, 2, 19, 13, 19, 12, 200064, tzinfo=UTC),
        datetime(2026, 6, 2, 11, 18, 52, 536602, tzinfo=UTC),  # PyTorch's unpadded month: E602
    ]
    assert obs["message"][1] == "Sending process 147865 closing signal SIGTERM"
    assert obs["message"][3].startswith("[PG ID 1 PG GUID 1 Rank 4] Process group watchdog")
    assert obs["rank"][3] == 4
    assert sorted(parsed.rejects["reason"].str.slice(0, 20)) == ["invalid date in the ", "torchrun prefix with"]


def test_megatron_iteration_stamp_after_its_leading_space(tmp_path):
    # Megatron-LM prints f" [{datetime.now():%Y-%m-%d %H:%M:%S}]" + " iteration …" (a leading
    # space: megatron/training/training.py, NVIDIA/Megatron-LM@86df799); the line below is
    # built from that format, behind an srun --label prefix and alone.
    iteration = " iteration      539/  500000 | consumed samples:       275968 |"
    lines = [f"15:  [2026-05-23 00:21:30]{iteration}", f" [2026-05-23 00:41:30]{iteration}", f"15:  File {iteration}"]
    parsed = read_log_file(write(tmp_path / "slurm-9.out", lines), source="app")
    obs = parsed.observations
    assert obs["ts"].to_list()[:2] == [datetime(2026, 5, 23, 0, 21, 30, tzinfo=UTC), datetime(2026, 5, 23, 0, 41, 30, tzinfo=UTC)]
    assert obs["ts_source"].to_list() == ["line", "line", "inferred"]
    assert obs["rank"].to_list() == [15, None, 15]
    assert obs["message"][0].startswith("iteration      539/")
    assert obs["message"][2] == f" File {iteration}"  # spaces before text that is not a stamp stay


def test_detectron2_stamps_without_a_year(tmp_path):
    lines = [
        # https://github.com/facebookresearch/detectron2/issues/5037 (console format)
        "[07/21 10:31:18 d2.utils.events]:  eta: 0:02:03  iter: 1039  total_loss: 3.114  loss_cls: 0.8566",
        # https://github.com/facebookresearch/detectron2/issues/3023 (log file format)
        "[05/10 04:24:12] d2.utils.events INFO:  eta: 1:21:58  iter: 1959  total_loss: 0  time: 0.6119",
        # An error line, the level before the stamp (a detectron2 console log in a public
        # parsing_engine repository's notes: "ERROR [05/17 23:21:41 d2.engine.train_loop]: …").
        "ERROR [05/17 23:21:41 d2.engine.train_loop]: Exception during training:",
    ]
    parsed = read_log_file(write(tmp_path / "train.log", ["3: " + line for line in lines]), year=2026, source="app")
    obs = parsed.observations
    assert obs["ts"].to_list() == [datetime(2026, 7, 21, 10, 31, 18, tzinfo=UTC), datetime(2026, 5, 10, 4, 24, 12, tzinfo=UTC),
                                   datetime(2026, 5, 17, 23, 21, 41, tzinfo=UTC)]
    assert obs["ts_source"].to_list() == ["line", "line", "line"]
    assert obs["message"].to_list() == [
        " eta: 0:02:03  iter: 1039  total_loss: 3.114  loss_cls: 0.8566",  # one of detectron2's two spaces
        "d2.utils.events INFO:  eta: 1:21:58  iter: 1959  total_loss: 0  time: 0.6119",
        "Exception during training:",
    ]


def test_torchtitan_stamps_behind_its_logger_tag(tmp_path):
    lines = [
        # https://github.com/pytorch/torchtitan/pull/4628
        "[rank0]:[titan] 2026-09-11 23:05:41,719 - torchtitan.distributed.utils - WARNING - ENV[TORCH_NCCL_ASYNC_ERROR_HANDLING] = 1 will be overridden to 3 based on job config",
        "[rank0]:[titan] 2026-09-11 23:05:44,762 - torchtitan.trainer - INFO - Building llama3 debugmodel",
        # a bracketed tag with no stamp behind it stays on the line
        "[rank0]:[titan] Building llama3 debugmodel",
    ]
    obs = read_log_file(write(tmp_path / "train.log", lines), source="app").observations
    building = datetime(2026, 9, 11, 23, 5, 44, 762000, tzinfo=UTC)
    assert obs["ts"].to_list() == [datetime(2026, 9, 11, 23, 5, 41, 719000, tzinfo=UTC), building, building]
    assert obs["ts_source"].to_list() == ["line", "line", "inferred"]
    assert obs["message"][1] == "- torchtitan.trainer - INFO - Building llama3 debugmodel"
    assert obs["message"][2] == "[titan] Building llama3 debugmodel"


def test_vllm_stamps_and_process_tags(tmp_path):
    """vLLM stamps its lines ``LEVEL MM-DD HH:MM:SS [file:line]`` (no year; the bracket
    came with its v1 engine) behind the process tag its workers and Ray print."""
    lines = [
        # https://github.com/vllm-project/vllm/pull/11721
        "INFO 01-03 18:47:35 core.py:48] Initializing an LLM engine (v0.6.4.post2.dev364+gea7bd68d1.d20241214) with config: model='deepseek-ai/DeepSeek-V3'",
        # https://github.com/vllm-project/vllm/issues/45784
        "(EngineCore pid=1362711) ERROR 06-22 10:58:02 [core.py:1195] Exception: WorkerProc initialization failed due to an exception in a background process. See stack trace for root cause.",
        # https://github.com/vllm-project/vllm/issues/17756
        "(VllmWorker rank=3 pid=406) INFO 07-23 19:34:49 [pynccl.py:70] vLLM is using nccl==2.26.2",
    ]
    obs = read_log_file(write(tmp_path / "serve.log", lines), year=2026, source="app").observations
    assert obs["ts"].to_list() == [
        datetime(2026, 1, 3, 18, 47, 35, tzinfo=UTC), datetime(2026, 6, 22, 10, 58, 2, tzinfo=UTC),
        datetime(2026, 7, 23, 19, 34, 49, tzinfo=UTC),
    ]
    assert obs["ts_source"].to_list() == ["line"] * 3
    assert obs["message"].to_list() == [
        "Initializing an LLM engine (v0.6.4.post2.dev364+gea7bd68d1.d20241214) with config: model='deepseek-ai/DeepSeek-V3'",
        "Exception: WorkerProc initialization failed due to an exception in a background process. See stack trace for root cause.",
        "vLLM is using nccl==2.26.2",
    ]


def test_open_mpi_tag_output_gives_the_rank(tmp_path):
    """``mpirun --tag-output`` (what ``horovodrun`` runs) prefixes ``[<job>,<rank>]<stream>:``."""
    lines = [
        # https://github.com/open-mmlab/mmcv/issues/1240
        "[1,1]<stderr>:2021-08-04 11:52:22,414 - mmdet - INFO - Epoch [1][7400/14659]\tlr: 1.000e-02, eta: 12:00:40",
        # https://github.com/horovod/horovod/issues/1410
        "[1,0]<stderr>:WARNING:tensorflow:From train_model.py:283: The name tf.app.run is deprecated. Please use tf.compat.v1.app.run instead.",
        # https://github.com/horovod/horovod/issues/3871
        "[1,1]<stdout>:-------------------------",
    ]
    obs = read_log_file(write(tmp_path / "hvd.log", lines), year=2026, source="app").observations
    assert obs["rank"].to_list() == [1, 0, 1]
    assert obs["ts"][0] == datetime(2021, 8, 4, 11, 52, 22, 414000, tzinfo=UTC)
    assert obs["message"].to_list() == [
        "- mmdet - INFO - Epoch [1][7400/14659]\tlr: 1.000e-02, eta: 12:00:40",
        "WARNING:tensorflow:From train_model.py:283: The name tf.app.run is deprecated. Please use tf.compat.v1.app.run instead.",
        "-------------------------",
    ]


def test_pdsh_host_labels_give_the_node(tmp_path):
    """DeepSpeed's multi-node launcher runs ``pdsh -S -w <hosts>``, which labels each remote
    line ``<host>: ``; the host is the line's node and the rest is peeled as usual."""
    lines = [
        # https://github.com/hiyouga/LlamaFactory/issues/2470
        "gpu004: Traceback (most recent call last):",
        "gpu004: RuntimeError: [14] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: Connection reset by peer. This may indicate a possible application crash on rank 0 or a network set up issue.",
        "gpu004: 02/11/2024 22:38:41 - INFO - llmtuner.data.template - Replace eos token: <|im_end|>",
        # Tags that are not host labels: no name ending in a digit before ": ".
        # https://github.com/pjlab-sys4nlp/llama-moe/issues/54
        "srun: error: Invalid generic resource (gres) specification",
        # https://github.com/sgl-project/sglang/issues/4289
        "node17-2:36748:36748 [0] NCCL INFO Using network IB",
        # https://github.com/NVIDIA/DeepLearningExamples/issues/1386
        "[rank7]: Traceback (most recent call last):",
        # An IP label stays on the line: nothing maps the address to a node.
        # https://github.com/huggingface/accelerate/issues/2249
        "9.91.4.251: Now using node v12.18.3 (npm v6.14.6)",
    ]
    obs = read_log_file(write(tmp_path / "ds.log", lines), year=2026, source="app").observations
    assert obs["node"].to_list()[:6] == ["gpu004", "gpu004", "gpu004", None, "node17-2", None]
    assert obs["rank"].to_list()[5] == 7
    assert obs["message"].to_list()[:2] == ["Traceback (most recent call last):", lines[1].removeprefix("gpu004: ")]
    assert obs["message"].to_list()[3] == lines[3]
    assert obs["message"].to_list()[6] == lines[6]


def test_kubectl_timestamps_and_container_prefixes(tmp_path):
    lines = [
        f"2026-11-30T15:32:38.123456789Z [default0]:[rank0]: {CUDA_OOM[0]}",
        f"2026-11-30T15:32:39.000000001Z {ECC[0]}",
        "2026-11-30T15:32:39.500000000Z",
        ECC[0],
    ]
    parsed = read_log_file(write(tmp_path / "pod.log", lines), default_node="pod-w0")
    assert parsed.source == "kubectl"
    accounted(parsed)
    obs = parsed.observations
    assert obs["ts"][0] == datetime(2026, 11, 30, 15, 32, 38, 123456, tzinfo=UTC)
    assert obs["rank"].to_list() == [0, None, None]
    assert obs["message"].to_list() == [CUDA_OOM[0], ECC[0], ""]
    assert set(obs["node"]) == {"pod-w0"}
    assert "kubectl logs --timestamps" in parsed.rejects["reason"][0]


@pytest.mark.parametrize("node", ["gpu-node-006", None])
def test_the_pod_hostname_in_a_kubectl_nccl_line_is_no_node(tmp_path, node):
    # A container's NCCL names its own host, which is the pod's (kp-ddp-worker-0), not the node's.
    nccl = SLURM_4242[3][0].removeprefix("  5: ")
    parsed = read_log_file(write(tmp_path / "pod.log", [f"2026-11-30T15:32:39.000000001Z {nccl}"]), default_node=node)
    obs = parsed.observations
    assert obs["node"].to_list() == [node] and obs["program"].to_list() == ["nccl"]
    assert obs["message"][0].startswith("ib_plugin.c:1615 NCCL WARN")


def test_a_ray_workers_line_a_heads_pod_log_forwards_is_on_no_node(tmp_path):
    """The head pod's log holds what its workers on other nodes printed, behind Ray's tag
    with the worker's address (verl's WorkerDict, as in the test above), and Ray's word that
    another node died: neither is the head's node; its own lines are."""
    worker = ("(WorkerDict pid=78830, ip=10.20.0.33) [rank14]:[E909 09:55:29.307629539 ProcessGroupNCCL.cpp:607] "
              "[Rank 14] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2070, OpType=REDUCE, "
              "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600034 milliseconds before timing out.")
    # Ray's GCS warning (python/ray/_private/worker.py), forwarded under the raylet's tag
    dead = ("(raylet) The node with node id: 9426f4c1 and address: 10.20.0.33 and node name: 10.20.0.33 has been "
            "marked dead because the detector has missed too many heartbeats from it.")
    lines = [f"2026-11-30T15:32:39.000000001Z {line}" for line in (worker, dead, ECC[0])]
    obs = read_log_file(write(tmp_path / "head.log", lines), default_node="cpu-node-004").observations
    assert obs["node"].to_list() == [None, None, "cpu-node-004"]


def test_gzip_is_read_by_magic_and_bad_utf8_is_replaced(tmp_path):
    body = (SYSLOG_3164[2][0] + "\n").encode() + b"Feb 14 05:03:42 gpu-1 kernel: bad \xff\xfe bytes\n"
    (tmp_path / "kern.log.gz").write_bytes(gzip.compress(body))
    (tmp_path / "rotated.1").write_bytes(gzip.compress(body))
    for name in ("kern.log.gz", "rotated.1"):
        parsed = read_log_file(tmp_path / name, year=2026)
        assert parsed.source == "syslog"
        assert parsed.observations["message"].to_list() == [MLX5_LINK[0], "bad \ufffd\ufffd bytes"]


def test_a_byte_order_mark_is_no_part_of_the_first_line(tmp_path):
    syslog = "".join(line + "\n" for line, _ in SYSLOG_3164).encode()
    app = f"{CUDA_OOM[0]}\n".encode()
    bom = b"\xef\xbb\xbf"
    for name, body, source in [("kern.log", syslog, "syslog"), ("train.log", app, "app")]:
        (tmp_path / name).write_bytes(body)
        (tmp_path / f"bom-{name}").write_bytes(bom + body)
        (tmp_path / f"bom-{name}.gz").write_bytes(gzip.compress(bom + body))
        at = {"year": 2026, "ingest_time": datetime(2026, 12, 4, tzinfo=UTC)}
        plain = read_log_file(tmp_path / name, **at)
        for marked in (f"bom-{name}", f"bom-{name}.gz"):
            parsed = read_log_file(tmp_path / marked, **at)
            assert (parsed.source, parsed.rejects.height) == (source, 0)
            assert parsed.observations.drop("origin", "input_id").equals(plain.observations.drop("origin", "input_id"))


def test_nul_bytes_are_replaced_in_valid_and_invalid_utf8(tmp_path):
    """Valid UTF-8 is checked by Polars, a batch with invalid bytes by Python: NUL becomes
    U+FFFD either way."""
    from ingest.files.common import lines_of

    valid, invalid = b"kernel: a \x00 b\n", b"kernel: c \xff d\n"
    assert lines_of(["v"], [valid], [0]).lines["line"].to_list() == ["kernel: a \ufffd b"]
    both = lines_of(["v", "i"], [valid, invalid], [0, 0]).lines["line"].to_list()
    assert both == ["kernel: a \ufffd b", "kernel: c \ufffd d"]


def test_a_line_redrawn_with_carriage_returns_keeps_what_a_terminal_shows(tmp_path):
    """tqdm redraws its bar with ``\\r`` (github.com/tqdm/tqdm: ``fp.write('\\r' + s)``) and
    never ends the line until it closes: an error printed right after the last redraw is
    the line's end, and its stamp, not the bar's first state, is the line's. srun's label
    and torchrun's tag at the start of the physical line stay; CRLF only loses its ``\\r``."""
    from ingest.files.common import lines_of

    bar = "".join(f"\r{p:3d}%|{'#' * (p // 10):<10}| {p}/100 [00:{p:02d}<00:00, 3.21it/s]" for p in range(0, 101, 5))
    error = "[2026-11-20 10:29:00,000] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 29.76 GiB"
    raw = (f"0: [default0]:{bar}\r{error}\n" + f"1: {bar}\n" + "2: plain line\r\n").encode()
    assert lines_of(["o"], [raw], [0]).lines["line"].to_list() == [
        f"0: [default0]:{error}", "1: 100%|##########| 100/100 [00:100<00:00, 3.21it/s]", "2: plain line"]


def test_detection_per_format(tmp_path):
    cases = {
        "syslog": [line for line, _ in SYSLOG_3164],
        "kmsg": [line for line, _ in DMESG_GPU],
        "app": [line for line, _ in SLURM_4242],
        "kubectl": [f"2026-11-30T15:32:39.000000001Z {ECC[0]}"],
        "journald": [json.dumps({"__REALTIME_TIMESTAMP": "1", "MESSAGE": ECC[0]})],
    }
    for expected, lines in cases.items():
        frame = pl.DataFrame({"seq": range(1, len(lines) + 1), "line": lines})
        assert detect_source(frame) == expected


# journalctl's short-precise (harvester/harvester#6043) and short-iso / short-iso-precise as
# systemd before 255 printed them, offset without a colon (systemd/systemd#29134).
JOURNALCTL_SHORT = [
    ("Jun 19 10:33:53.477371 harvester-node-1 kernel: loop2: detected capacity change from 0 to 2097152",
     datetime(2024, 6, 19, 10, 33, 53, 477371, tzinfo=UTC), "harvester-node-1"),
    ("2023-09-08T17:20:30+0200 tarta r710_fan_controller.sh[20911]: Highest drive temperature: 43 Celcius.",
     datetime(2023, 9, 8, 15, 20, 30, tzinfo=UTC), "tarta"),
    ("2023-09-08T17:20:30.655028+0200 tarta r710_fan_controller.sh[20911]: Highest drive temperature: 43 Celcius.",
     datetime(2023, 9, 8, 15, 20, 30, 655028, tzinfo=UTC), "tarta"),
]


@pytest.mark.parametrize(("line", "ts", "node"), JOURNALCTL_SHORT)
def test_journalctl_short_formats_are_syslog(tmp_path, line, ts, node):
    (tmp_path / "node.log").write_text(line + "\n")
    parsed = read_log_file(tmp_path / "node.log", year=2024)
    assert parsed.source == "syslog"
    assert parsed.observations.select("ts", "node", "ts_source").row(0) == (ts, node, "line")


def test_stamps_without_a_zone_are_read_in_the_given_zone(tmp_path):
    """Nodes that log local time: RFC 3164, ``dmesg -T``, glog and offset-less ISO stamps
    are wall time in ``timezone``; stamps with an offset keep it."""
    syslog = write(tmp_path / "syslog", [
        f"Aug 15 10:40:00 gpu-ch02 kernel: {FALLEN_OFF[0]}",
        f"Dec 15 10:40:00 gpu-ch02 kernel: {FALLEN_OFF[0]}",
        # The hour the clocks go back repeats: the earlier instant (CDT).
        f"Nov  1 01:30:00 gpu-ch02 kernel: {FALLEN_OFF[0]}",
        f"2025-08-15T10:40:00.5+02:00 gpu-ch02 kernel: {FALLEN_OFF[0]}",
    ])
    parsed = read_log_file(syslog, year=2026, timezone="America/Chicago")
    assert parsed.observations["ts"].to_list() == [
        datetime(2026, 8, 15, 15, 40, tzinfo=UTC), datetime(2026, 12, 15, 16, 40, tzinfo=UTC),
        datetime(2026, 11, 1, 6, 30, tzinfo=UTC), datetime(2025, 8, 15, 8, 40, 0, 500000, tzinfo=UTC),
    ]
    dmesg = write(tmp_path / "dmesg", [f"[Sat Aug 15 10:40:00 2026] {FALLEN_OFF[0]}"])
    assert read_log_file(dmesg, source="kmsg", timezone="Europe/Paris").observations["ts"].to_list() == [
        datetime(2026, 8, 15, 8, 40, tzinfo=UTC)]
    app = write(tmp_path / "train.log", ["2026-08-15 10:40:00,123 - INFO - step 1", "E0815 10:40:01.000000 1 x.cc:1] boom"])
    assert read_log_file(app, source="app", year=2026, timezone="Asia/Tokyo").observations["ts"].to_list() == [
        datetime(2026, 8, 15, 1, 40, 0, 123000, tzinfo=UTC), datetime(2026, 8, 15, 1, 40, 1, tzinfo=UTC)]



def test_stamps_that_go_back_in_the_repeated_hour_are_its_second_pass(tmp_path):
    """A node logging local time through the autumn change prints the repeated hour twice:
    once its stamps go back within that hour, they (and the rest of that hour's stamps in
    the file) are the second pass, CST, an hour after the same wall times' first pass; a
    job output's Megatron stamps likewise, through their unstamped lines."""
    syslog = write(tmp_path / "syslog", [
        f"Nov  1 00:50:00 gpu-ch02 kernel: {FALLEN_OFF[0]}",
        f"Nov  1 01:30:00 gpu-ch02 kernel: {FALLEN_OFF[0]}",
        f"Nov  1 01:59:00 gpu-ch02 kernel: {FALLEN_OFF[0]}",
        f"Nov  1 01:05:00 gpu-ch02 kernel: {FALLEN_OFF[0]}",
        f"Nov  1 01:45:00 gpu-ch02 kernel: {FALLEN_OFF[0]}",
        f"Nov  1 02:10:00 gpu-ch02 kernel: {FALLEN_OFF[0]}",
    ])
    got = read_log_file(syslog, year=2026, timezone="America/Chicago").observations["ts"].to_list()
    assert got == [datetime(2026, 11, 1, h, m, tzinfo=UTC) for h, m in ((5, 50), (6, 30), (6, 59), (7, 5), (7, 45), (8, 10))]
    app = write(tmp_path / "slurm-770206.out", [
        "0: [2026-11-01 01:58:00] iteration     7100/   50000 | consumed samples:      7270400 | lm loss: 3.06076",
        "0: [2026-11-01 01:00:00] iteration     7200/   50000 | consumed samples:      7372800 | lm loss: 3.05764",
        "0: Traceback (most recent call last):",
    ])
    got = read_log_file(app, source="app", year=2026, timezone="America/Chicago").observations["ts"].to_list()
    assert got == [datetime(2026, 11, 1, 6, 58, tzinfo=UTC), datetime(2026, 11, 1, 7, 0, tzinfo=UTC),
                   datetime(2026, 11, 1, 7, 0, tzinfo=UTC)]


def test_a_wall_time_the_spring_change_skipped_lands_with_the_offset_before_it(tmp_path):
    """02:30 on the last Sunday of March does not exist in Berlin: such a stamp comes from a
    clock that did not change (a node on UTC or standard time landed with the site's zone).
    It lands (no crash, no reject) with the offset in force before the change, like
    Python's ``zoneinfo``; the hours around it keep their own offsets."""
    syslog = write(tmp_path / "syslog", [
        f"Mar 29 01:30:00 gpu-ch02 kernel: {FALLEN_OFF[0]}",
        f"Mar 29 02:30:00 gpu-ch02 kernel: {FALLEN_OFF[0]}",
        f"Mar 29 03:30:00 gpu-ch02 kernel: {FALLEN_OFF[0]}",
    ])
    parsed = read_log_file(syslog, year=2026, timezone="Europe/Berlin")
    assert parsed.rejects.is_empty()
    assert parsed.observations["ts"].to_list() == [
        datetime(2026, 3, 29, 0, 30, tzinfo=UTC), datetime(2026, 3, 29, 1, 30, tzinfo=UTC),
        datetime(2026, 3, 29, 1, 30, tzinfo=UTC),
    ]
    app = write(tmp_path / "train.log", ["2026-03-29 02:30:00,000 - INFO - step 1"])
    assert read_log_file(app, source="app", timezone="Europe/Berlin").observations["ts"].to_list() == [
        datetime(2026, 3, 29, 1, 30, tzinfo=UTC)]

BANNERS = [
    ("slurmstepd: error: *** JOB 867816 ON c0700a-s1 CANCELLED AT 2021-05-11T12:06:17 DUE TO TIME LIMIT ***",
     "https://github.com/Nextomics/NextDenovo/issues/114"),
    ("slurmstepd: *** JOB 830329 CANCELLED AT 2018-08-06T17:21:44 DUE TO TIME LIMIT on n447 ***",
     "https://github.com/marbl/canu/issues/1067"),
    ("[2026-04-29T23:36:37.809] error: *** STEP 52222788.0 ON nid002888 CANCELLED AT 2026-04-29T23:36:37 DUE TO TASK FAILURE ***",
     "https://github.com/desihub/desispec/issues/2744"),
]


LAST_ITERATION = "E0510 09:00:00.000000 1 x.cc:1] last iteration logged"


@pytest.mark.parametrize(("lines", "year", "stamps", "sources", "program"), [
    # slurmstepd's banner, in the current and the older (host last) layout; a prefix stamp
    # still wins, and prose that merely says "cancelled at" inherits like any unstamped line.
    ([LAST_ITERATION, BANNERS[0][0], BANNERS[1][0], BANNERS[2][0], "the run was CANCELLED AT the user's request"],
     2021,
     [datetime(2021, 5, 10, 7, 0, tzinfo=UTC),
      datetime(2021, 5, 11, 10, 6, 17, tzinfo=UTC),  # 12:06:17 CEST
      datetime(2018, 8, 6, 15, 21, 44, tzinfo=UTC),
      datetime(2026, 4, 29, 21, 36, 37, 809000, tzinfo=UTC),
      datetime(2026, 4, 29, 21, 36, 37, 809000, tzinfo=UTC)],
     ["line", "line", "line", "line", "inferred"], "slurmstepd"),
    # Cray MPICH's error header (ofiwg/libfabric#11307), its day space-padded or not; the
    # stack's other lines inherit its time.
    ([LAST_ITERATION,
      "MPICH ERROR [Rank 11122] [job id 41595204.0] [Thu Aug 14 08:27:11 2025] [nid006700] - Abort(2695311) "
      "(rank 11122 in comm 0): Fatal error in PMPI_Allreduce: Other MPI error, error stack:",
      "MPIDI_Progress_test(97)..............:",
      "MPICH ERROR [Rank 0] [job id 9.0] [Mon Sep  1 08:00:05 2025] [nid000001] - Abort(1) (rank 0 in comm 0): "
      "Fatal error in PMPI_Recv: Other MPI error, error stack:"],
     2025,
     [datetime(2025, 5, 10, 7, 0, tzinfo=UTC),
      datetime(2025, 8, 14, 6, 27, 11, tzinfo=UTC),  # 08:27:11 CEST
      datetime(2025, 8, 14, 6, 27, 11, tzinfo=UTC),
      datetime(2025, 9, 1, 6, 0, 5, tzinfo=UTC)],
     ["line", "line", "inferred", "line"], None),
], ids=["slurmstepd", "cray_mpich"])
def test_a_banner_carries_its_own_time(tmp_path, lines, year, stamps, sources, program):
    """A banner's time (the node's wall clock, read in the landing's zone) stamps a line
    that has no prefix stamp."""
    obs = read_log_file(write(tmp_path / "slurm-1.out", lines), source="app", year=year,
                        timezone="Europe/Berlin").observations
    assert obs["ts"].to_list() == stamps
    assert obs["ts_source"].to_list() == sources
    assert obs["program"][1] == program


def test_bad_inputs_raise_clear_errors(tmp_path):
    with pytest.raises(FilesError, match=r"unknown time zone 'Mars/Olympus'"):
        read_log_file(FIXTURES / "dmesg-gpu.txt", timezone="Mars/Olympus")
    with pytest.raises(FilesError, match=r"did you mean 'syslog'\? Valid sources: app, journald"):
        read_log_file(FIXTURES / "dmesg-gpu.txt", source="sylog")
    with pytest.raises(FilesError, match=r"nope\.log: no such file; check the path"):
        read_log_file(tmp_path / "nope.log")


@pytest.mark.parametrize("damage", ["flipped", "truncated"])
def test_corrupt_gzip_is_a_clear_error_naming_the_file(tmp_path, damage):
    data = bytearray(gzip.compress((SYSLOG_3164[2][0] + "\n").encode() * 200))
    if damage == "flipped":
        data[20:60] = bytes(b ^ 0xFF for b in data[20:60])
    else:
        data = data[: len(data) // 2]
    (tmp_path / "kern.log.gz").write_bytes(bytes(data))
    with pytest.raises(FilesError, match=r"kern\.log\.gz: corrupt gzip data"):
        read_log_file(tmp_path / "kern.log.gz", year=2026)


# journalctl's markers around its entries: the span header (thesofproject/sof-test#828, with
# the entry that followed it there), a boot separator (systemd/systemd#24950) and the older
# "-- Reboot --" (NixOS/nixpkgs#25820).
JOURNALCTL_EXPORT = [
    "-- Logs begin at Mon 2021-08-30 11:42:24 PDT, end at Thu 2021-12-09 18:37:18 PST. --",
    "Dec 09 18:28:37 up2 kernel: Linux version 9.9.9-rc9softest  (gcc (Ubuntu 9.3.0-17ubuntu1~20.04) 9.3.0, GNU ld ....",
    "-- Reboot --",
    "Dec 09 18:31:02 up2 kernel: Command line: BOOT_IMAGE=/vmlinuz-9.9.9-rc9softest root=/dev/mapper/ubuntu--vg-root ro",
    "-- Boot bc3fc4659c554110994ad36deade2c2c --",
    "Dec 09 18:35:40 up2 kernel: Command line: BOOT_IMAGE=/vmlinuz-9.9.9-rc9softest root=/dev/mapper/ubuntu--vg-root ro",
]


def test_journalctl_markers_land_on_the_node_of_the_entries_around_them(tmp_path):
    (tmp_path / "journal.txt").write_text("\n".join(JOURNALCTL_EXPORT) + "\n")
    parsed = read_log_file(tmp_path / "journal.txt", year=2021)
    assert parsed.source == "syslog"
    assert parsed.rejects.is_empty()
    rows = parsed.observations.select("seq", "node", "program", "ts", "ts_source").rows()
    header, _, reboot, second, boot, third = rows
    # The header dates from the first entry (the latest it can have been printed); a boot
    # marker lies between the entries it separates.
    assert header == (1, "up2", "journalctl", datetime(2021, 12, 9, 18, 28, 37, tzinfo=UTC), "inferred")
    assert reboot[1:] == ("up2", "journalctl", datetime(2021, 12, 9, 18, 28, 37, tzinfo=UTC), "inferred")
    assert boot[1:3] == ("up2", "journalctl") and second[2] == third[2] == "kernel"
    # A line that only looks like a marker is still no syslog line.
    (tmp_path / "other.txt").write_text(JOURNALCTL_EXPORT[1] + "\n-- not a journalctl marker --\n")
    assert read_log_file(tmp_path / "other.txt", year=2021).rejects.height == 1


def test_nemo_transformers_and_abseil_stamps(tmp_path):
    """NeMo's logger, the Transformers Trainer's and Hugging Face scripts' Python logging
    (local wall time), and abseil's epoch seconds before its logging is initialised (UTC
    whatever the node's zone)."""
    lines = [
        # NeMo's formatter, nemo/utils/formatters/base.py: "[NeMo %(levelname)1.1s %(asctime)s %(module)s:%(lineno)d]"
        "[NeMo I 2024-07-30 23:01:58 dist_ckpt_io:95] Using ('zarr', 1) dist-ckpt save strategy.",
        # https://github.com/huggingface/transformers/blob/main/src/transformers/trainer.py (its logger's format)
        "[INFO|trainer.py:734] 2025-01-01 16:12:18,785 >> Using auto half precision backend",
        # the datefmt of transformers' examples (run_glue.py: "%m/%d/%Y %H:%M:%S")
        "03/27/2024 07:07:33 - INFO - __main__ -   Num batches each epoch = 8",
        # https://github.com/hiero-ledger/hiero-sdk-python/issues/337
        "E0000 00:00:1756545841.079783 4245582 init.cc:229] grpc_wait_for_shutdown_with_timeout() timed out.",
    ]
    obs = read_log_file(write(tmp_path / "train.log", ["2: " + line for line in lines]), source="app",
                        timezone="America/Chicago").observations
    chicago = ZoneInfo("America/Chicago")
    assert obs["ts"].to_list() == [
        datetime(2024, 7, 30, 23, 1, 58, tzinfo=chicago).astimezone(UTC),
        datetime(2025, 1, 1, 16, 12, 18, 785000, tzinfo=chicago).astimezone(UTC),
        datetime(2024, 3, 27, 7, 7, 33, tzinfo=chicago).astimezone(UTC),
        datetime(2025, 8, 30, 9, 24, 1, 79783, tzinfo=UTC),
    ]
    assert obs["ts_source"].to_list() == ["line"] * 4
    assert obs["message"].to_list() == [
        "Using ('zarr', 1) dist-ckpt save strategy.",
        "Using auto half precision backend",
        "INFO - __main__ -   Num batches each epoch = 8",
        "grpc_wait_for_shutdown_with_timeout() timed out.",
    ]


def test_gpfs_mmfs_log_stamps(tmp_path):
    """GPFS's own log (``/var/adm/ras/mmfs.log.latest``) joins the date and the time with
    ``_`` and ends the stamp with ``:``; a collected copy may put pdsh's host label first."""
    # scitix/sichek components/gpfs/test/test_mmfs_log
    lines = [
        "2024-11-23_01:18:31.152+0800: [E] Lost membership in cluster DSS.dss01. Unmounting file systems.",
        "css2-g55-001: 2024-11-23_03:04:14.148+0800: [E] This node is being expelled from the cluster.",
    ]
    obs = read_log_file(write(tmp_path / "mmfs.log.latest", lines), source="app").observations
    assert obs["ts"].to_list() == [datetime(2024, 11, 22, 17, 18, 31, 152000, tzinfo=UTC),
                                   datetime(2024, 11, 22, 19, 4, 14, 148000, tzinfo=UTC)]
    assert obs["ts_source"].to_list() == ["line", "line"]
    assert obs["node"].to_list() == [None, "css2-g55-001"]
    assert obs["message"].to_list() == ["[E] Lost membership in cluster DSS.dss01. Unmounting file systems.",
                                        "[E] This node is being expelled from the cluster."]


def test_a_ray_process_tag_before_the_torchrun_prefix(tmp_path):
    """Ray puts its worker's tag before everything the worker prints, PyTorch's ``[rankN]:``
    and glog stamp included: both are still read behind it."""
    lines = [
        # https://github.com/vllm-project/vllm/issues/6042
        "(RayWorkerWrapper pid=489968) [rank1]:[E ProcessGroupNCCL.cpp:563] [Rank 1] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1572864, NumelOut=1572864, Timeout(ms)=600000) "
        "ran for 600021 milliseconds before timing out.",
        # Ray's tag with the worker's address (verl's WorkerDict), then the stamped form of
        # https://github.com/mila-iqia/milabench/pull/269
        "(WorkerDict pid=78830, ip=10.20.0.33) [rank14]:[E909 09:55:29.307629539 ProcessGroupNCCL.cpp:607] [Rank 14] "
        "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2070, OpType=REDUCE, NumelIn=1, NumelOut=1, "
        "Timeout(ms)=600000) ran for 600034 milliseconds before timing out.",
    ]
    obs = read_log_file(write(tmp_path / "verl.log", lines), year=2026, source="app").observations
    assert obs["rank"].to_list() == [1, 14]
    assert obs["ts"][1] == datetime(2026, 9, 9, 9, 55, 29, 307629, tzinfo=UTC)
    assert obs["message"][0].startswith("[E ProcessGroupNCCL.cpp:563] [Rank 1] Watchdog caught")
    assert obs["message"][1].startswith("[Rank 14] Watchdog caught")


def test_a_ray_workers_address_names_its_node_where_the_file_says_whose_it_is(tmp_path):
    """A Ray worker's tag carries its node's address, not its name: the node is read from
    the lines of the same file that say which node has that address (the echo of Ray's
    documented Slurm template before ``ray start``'s ``Local node IP``, NCCL's banner, or a
    tagged line behind NCCL's host prefix). An address nothing maps, or two nodes claim,
    names none."""
    lines = [
        # Ray's Slurm template (docs.ray.io "Deploy on Slurm": echo "Starting WORKER $i at
        # $node_i") and ray start's report (python/ray/scripts/scripts.py)
        "Starting HEAD at gn021",
        "2026-11-23 12:00:04,881\tINFO scripts.py:865 -- Local node IP: 172.16.4.21",
        "Starting WORKER 1 at gn022",
        "2026-11-23 12:00:16,172\tINFO scripts.py:1047 -- Local node IP: 172.16.4.22",
        # vLLM's worker error behind Ray's tag (vllm/worker/worker_base.py)
        "(RayWorkerWrapper pid=89382, ip=172.16.4.22) ERROR 11-23 12:00:41 [worker_base.py:620] Error executing "
        "method 'init_device'. This might cause deadlock in distributed execution.",
        # NCCL's banner naming gn023's address (https://github.com/alpa-projects/alpa/issues/506 shape)
        "(WorkerDict pid=6777, ip=172.16.4.23) gn023:6777:6777 [0] NCCL INFO Bootstrap : Using ens3:172.16.4.23<0>",
        "(WorkerDict pid=6777, ip=172.16.4.23) [rank9]:[E1123 12:01:02.307629 6777 ProcessGroupNCCL.cpp:607] "
        "[Rank 9] Watchdog caught collective operation timeout",
        "(WorkerDict pid=7001, ip=172.16.4.24) [rank17]:[E1123 12:01:02.307629 7001 ProcessGroupNCCL.cpp:607] "
        "[Rank 17] Watchdog caught collective operation timeout",
        "gn025:7:7 [0] NCCL INFO Bootstrap : Using ens3:172.16.4.26<0>",
        "gn026:7:7 [0] NCCL INFO Bootstrap : Using ens3:172.16.4.26<0>",
        "(WorkerDict pid=7002, ip=172.16.4.26) [rank18]:[E1123 12:01:02.307629 7002 ProcessGroupNCCL.cpp:607] "
        "[Rank 18] Watchdog caught collective operation timeout",
    ]
    obs = read_log_file(write(tmp_path / "slurm-2204133.out", lines), year=2026, source="app").observations

    def node(text: str) -> str | None:
        return obs.filter(pl.col("message").str.contains(text, literal=True))["node"].item()

    assert node("Error executing method") == "gn022"
    assert node("[Rank 9]") == "gn023"
    assert node("[Rank 17]") is None  # nothing says whose 172.16.4.24 is
    assert node("[Rank 18]") is None  # two nodes claim 172.16.4.26


def test_ray_starts_plain_report_of_its_address_names_its_node_too(tmp_path):
    """``ray start`` also prints its address bare, on a line of its own, as its CLI's plain
    output has it (``Local node IP: 10.94.16.4``, then ``Ray runtime started.``)."""
    lines = [
        "Starting HEAD at gn041", "Local node IP: 10.20.0.41", "", "--------------------", "Ray runtime started.",
        "Starting WORKER 1 at gn042", "Local node IP: 10.20.0.42",
        "(RayTrainWorker pid=70105, ip=10.20.0.42) RuntimeError: CUDA error: uncorrectable ECC error encountered",
        "(RayTrainWorker pid=70001, ip=10.20.0.41) RuntimeError: CUDA error: uncorrectable ECC error encountered",
        # Not a report of ray start's: a sentence that quotes it.
        "Copy the Local node IP: 10.20.0.43 for the next command",
        "(RayTrainWorker pid=70201, ip=10.20.0.43) RuntimeError: CUDA error: uncorrectable ECC error encountered",
    ]
    obs = read_log_file(write(tmp_path / "slurm-830406.out", lines), year=2026, source="app").observations
    errors = obs.filter(pl.col("message").str.contains("uncorrectable", literal=True))
    assert errors["node"].to_list() == ["gn042", "gn041", None]


def test_rays_word_that_a_node_died_is_on_that_node_not_the_printers(tmp_path):
    """The driver prints Ray's declaration that a node died (python/ray/_private/worker.py
    relaying the control store's error, as tensorflow/tpu's tools/ray_tpu/README.md shows
    it) about another node: the line is on the node its address names where the file says
    whose it is, and on no node (and no rank) where nothing does, never on the rank that
    printed it."""
    dead = ("{rank}2026-11-18 23:40:21,000\tWARNING worker.py:1866 -- The node with node id: "
            "9426f44574cce4866be798cfed308f2d3e21ba69487d422872cdd6e3 and address: {ip} and node name: {ip} has been "
            "marked dead because the detector has missed too many heartbeats from it. This can happen when a       "
            "(1) raylet crashes unexpectedly (OOM, preempted node, etc.)")
    lines = [
        "0: Starting HEAD at gn021",
        "0: 2026-11-18 23:20:04,881\tINFO scripts.py:865 -- Local node IP: 172.16.4.21",
        "1: Starting WORKER 1 at gn022",
        "1: 2026-11-18 23:20:16,172\tINFO scripts.py:1047 -- Local node IP: 172.16.4.22",
        dead.format(rank="0: ", ip="172.16.4.22"),
        dead.format(rank="0: ", ip="172.16.4.99"),
    ]
    obs = read_log_file(write(tmp_path / "slurm-91016.out", lines), year=2026, source="app").observations
    died = obs.filter(pl.col("message").str.contains("marked dead", literal=True))
    assert died["node"].to_list() == ["gn022", None]
    assert died["rank"].to_list() == [None, None]


def test_the_raylets_forwarded_lines_keep_their_stamp_and_name_their_node_by_address(tmp_path):
    """Ray's node daemon forwards its own lines to the driver behind ``(raylet, ip=…)`` (or
    ``(raylet)`` for the driver's node), each with its C++ logger's stamp, level, pid and
    thread: the stamp is the line's, and the address names the node as a worker's does."""
    lines = [
        "Starting WORKER 1 at gn022",
        "2026-11-23 12:00:16,172\tINFO scripts.py:1047 -- Local node IP: 10.0.6.140",
        # https://github.com/vllm-project/vllm/issues/738
        "(raylet, ip=10.0.6.140) [2023-08-11 10:13:54,613 E 30 30] (raylet) node_manager.cc:3084: 1 Workers (tasks / "
        "actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: "
        "73fcbc20ed501941efd210b9f60a78dbec0cf0f75fec41d65f19b505, IP: 10.0.6.140) over the last time period.",
        # https://github.com/hiyouga/EasyR1/issues/185
        "(raylet) [2025-04-02 15:02:00,117 E 135782 135782] (raylet) node_manager.cc:3069: 1 Workers (tasks / actors) "
        "killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: "
        "351e406b196f66bb45eaad02a3b8b4725babfa8cc12949432f7ad7d8, IP: 10.95.143.76) over the last time period.",
    ]
    obs = read_log_file(write(tmp_path / "slurm-738.out", lines), year=2026, source="app").observations
    assert obs["ts"].to_list()[-2:] == [datetime(2023, 8, 11, 10, 13, 54, 613000, tzinfo=UTC),
                                        datetime(2025, 4, 2, 15, 2, 0, 117000, tzinfo=UTC)]
    assert obs["node"].to_list()[-2:] == ["gn022", None]
    assert obs["message"][2].startswith("(raylet) node_manager.cc:3084: 1 Workers")


def test_a_script_that_starts_the_next_ray_node_before_the_last_reports_names_none(tmp_path):
    """``ray start`` runs in the background: when the next echo comes before the last
    node's report, the echo names the wrong node, and its addresses are not trusted."""
    lines = [
        "Starting WORKER 1 at gn022",
        "Starting WORKER 2 at gn023",
        "2026-11-23 12:00:16,172\tINFO scripts.py:1047 -- Local node IP: 172.16.4.22",
        "2026-11-23 12:00:16,980\tINFO scripts.py:1047 -- Local node IP: 172.16.4.23",
        "(RayWorkerWrapper pid=89382, ip=172.16.4.22) ERROR 11-23 12:00:41 [worker_base.py:620] Error executing "
        "method 'init_device'.",
    ]
    obs = read_log_file(write(tmp_path / "slurm-2204134.out", lines), year=2026, source="app").observations
    assert obs["node"].to_list()[-1] is None


def test_journalctl_short_unix_and_short_monotonic_keep_their_host_and_tag(tmp_path):
    """journalctl's ``-o short-unix`` (epoch seconds) is a syslog of every program, and
    ``-o short-monotonic`` puts the host and tag after a kernel-style monotonic stamp: both
    name the node and the program (systemd's journalctl(1) output modes)."""
    unix = read_log_file(write(tmp_path / "unix.log", [
        "1795167565.212709 kc-gpu040 kernel: mlx5_core 0000:9c:00.0 mlx5_6: Port: 1 Link DOWN",
        "1795167566.000001 kc-gpu040 CRON[1234]: (root) CMD (run-parts /etc/cron.hourly)",
    ])).observations
    assert unix.select("node", "program").rows() == [("kc-gpu040", "kernel"), ("kc-gpu040", "CRON")]
    assert unix["ts"][0] == datetime(2026, 11, 20, 9, 39, 25, 212709, tzinfo=timezone.utc)
    mono = read_log_file(write(tmp_path / "mono.log", [
        "[2138031.491413] kc-gpu010 kernel: NVRM: Xid (PCI:0000:db:00): 79, pid='<unknown>', name=<unknown>, "
        "GPU has fallen off the bus.",
        "[2138032.000000] kc-gpu010 slurmd[2233]: launch task StepId=71004.0 request from UID:1000 GID:1000",
        "[    3.100000] usb 1-1: new high-speed USB device number 2 using xhci_hcd",
    ]), boot_time=datetime(2026, 10, 27, tzinfo=timezone.utc)).observations
    assert mono.select("node", "program").rows() == [("kc-gpu010", "kernel"), ("kc-gpu010", "slurmd"), (None, "kernel")]
    assert mono["message"][0].startswith("NVRM: Xid (PCI:0000:db:00): 79")
    assert mono["message"][2].startswith("usb 1-1: new high-speed")  # a driver's own line stays the kernel's


def test_terminal_colour_codes_are_removed_and_richs_stamp_is_read(tmp_path):
    """loguru's ``colorize`` and rich's handler write ANSI colour codes around the stamp and
    level; rich stamps ``[%x %X]`` (two-digit year)."""
    lines = [
        "\x1b[32m2026-11-20 10:33:04.512\x1b[0m | \x1b[1mINFO    \x1b[0m | \x1b[36m__main__\x1b[0m - step 10",
        "[11/20/26 10:39:12] ERROR    RuntimeError: CUDA error: an illegal memory access was encountered   train.py:88",
    ]
    obs = read_log_file(write(tmp_path / "train.log", lines), source="app").observations
    assert obs["ts"].to_list() == [datetime(2026, 11, 20, 10, 33, 4, 512000, tzinfo=timezone.utc),
                                   datetime(2026, 11, 20, 10, 39, 12, tzinfo=timezone.utc)]
    assert "\x1b" not in "".join(obs["message"].to_list())
