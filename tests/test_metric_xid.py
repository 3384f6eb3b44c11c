"""dcgm-exporter's XID gauge (``rules/metric_xid.py``): the only word of a GPU's fault on a node
whose kernel log was not shipped is its root, with its code's meaning from the kernel XID
table; beside the kernel's own XID line it is context; an application's XID, a code the
catalog calls context and a gauge falling back to 0 blame no GPU; the device plugin's word of
an XID the previous job left is context as the XID is. Samples in the metrics
table's shape (as the Prometheus connector lands them), with the Slurm connector and the
files landing, attributed by a run."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import polars as pl
import pytest

from engine.run import landing_lake, run_attribution
from ingest.connectors import run_connector
from ingest.connectors.slurm import SlurmConnector, SlurmOptions
from ingest.files import land_log_files
from tests.end_to_end import ALIVE, ITERATION, XID_79, syslog, watchdog_timeout

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
850|850|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|m[1-2]|gres/gpu=16,node=2
851|851|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|m[3-4]|gres/gpu=16,node=2
852|852|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|m[5-6]|gres/gpu=16,node=2
853|853|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|m[7-8]|gres/gpu=16,node=2
854|854|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|m[9-10]|gres/gpu=16,node=2
855|855|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|m[11-12]|gres/gpu=16,node=2
856|856|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|m[13-14]|gres/gpu=16,node=2
857|857|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|m[15-16]|gres/gpu=16,node=2
858|858|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|m[17-18]|gres/gpu=16,node=2
"""
# An NVLink error, as NVIDIA's XID catalog describes 74, and the device plugin's word of it.
XID_74 = ("NVRM: Xid (PCI:0000:ba:00): 74, pid=509, name=python3, NVLink: fatal error detected on link 5"
          "(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)")
PLUGIN_74 = ("nvidia-device-plugin[2211]: 2026/11/20 09:40:00 XidCriticalError: Xid=74 "
             "on Device=GPU-4a413db8-fbd5-6af7-b2c1-42dbb288b458, the device will go unhealthy.")
T0 = datetime(2026, 11, 20, 9, 50, tzinfo=UTC)
# dcgm-exporter's label set (etc/default-counters.csv; the Hostname label names the node)
LABELS = '{"DCGM_FI_DRIVER_VERSION":"550.90.07","Hostname":"%s","gpu":"2","modelName":"NVIDIA H100 80GB HBM3"}'


def _gauge(node: str, codes: list[int]) -> list[dict]:
    """The XID gauge of GPU 2 of ``node``, one sample a minute from 09:50."""
    return [
        {"ts": T0 + timedelta(minutes=i), "node": node, "metric": "DCGM_FI_DEV_XID_ERRORS", "gpu": "2", "hca": None,
         "port": None, "value": float(code), "labels": LABELS % node, "origin": f"prom:{node}:{i}", "input_id": "prom"}
        for i, code in enumerate(codes)
    ]


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("metric_xid")
    (root / "sacct.txt").write_text(SACCT)
    lake = landing_lake(root / "lake")
    assert run_connector(lake, SlurmConnector(SlurmOptions(sacct_file=[root / "sacct.txt"], timezone="UTC"), "c1"),
                         None).error is None
    # 850: m2's GPU 2 hung at 10:20 (XID 119), its logs not shipped: the gauge says so.
    # 851: m4's kernel log has its XID 79 line; the gauge repeats it.
    # 852: m6's gauge shows the job's own illegal access (XID 13), then its restart's 0.
    # 853: m8's gauge shows a double-bit ECC error (XID 48), its logs not shipped.
    # 854: m10's gauge shows a high single-bit error rate (XID 92): context in the catalog.
    # 855: m12's gauge shows a code the catalog does not list yet.
    quiet = [0] * 30
    rows = (_gauge("m2", quiet + [119] * 11) + _gauge("m4", quiet + [79] * 11)
            + _gauge("m6", [0] * 29 + [13, 0] + [0] * 10) + _gauge("m8", quiet + [48] * 11)
            + _gauge("m10", quiet + [92] * 11) + _gauge("m12", quiet + [250] * 11))
    lake.land("metrics", pl.DataFrame(rows, schema_overrides={"hca": pl.String, "port": pl.String}),
              cluster="c1", input_id="prom")
    logs = root / "logs"
    logs.mkdir()
    # 856: m14's device plugin took a GPU out of service for XID 94 (its message as
    # NVIDIA/k8s-device-plugin#189 shows it); the kernel's line is not in the journal.
    # 857: the job before it left an NVLink error on m15 at 09:40 (the kernel's line and the
    # device plugin's); this job trained on m15 and m16 until m16's GPU fell off the bus.
    # 858: m18's device plugin took a GPU out of service for XID 79 (the kernel's line not in
    # the journal); a second later rank 8's watchdog died of the CUDA error it caused (its
    # line as vllm-project/vllm#27430 quotes it).
    for node in ("m1", "m3", "m4", "m5", "m6", "m7", "m9", "m10", "m11", "m13", "m14", "m15", "m16", "m17", "m18"):
        lines = [("10:05:00", ALIVE), ("10:25:00", ALIVE)]
        if node == "m15":
            lines[:0] = [("09:40:00", f"kernel: {XID_74}"), ("09:40:00", PLUGIN_74)]
        if node == "m16":
            lines.insert(1, ("10:20:00", f"kernel: {XID_79}"))
        if node == "m4":
            lines.insert(1, ("10:20:00", f"kernel: {XID_79}"))
        if node == "m14":
            lines.insert(1, ("10:20:00", "nvidia-device-plugin[2211]: 2026/11/20 10:20:00 XidCriticalError: Xid=94 "
                             "on Device=GPU-7540a9b3-eeb9-1214-1526-f93c9ea826a8, the device will go unhealthy."))
        if node == "m18":
            lines.insert(1, ("10:20:00", "nvidia-device-plugin[2211]: 2026/11/20 10:20:00 XidCriticalError: Xid=79 "
                             "on Device=GPU-7540a9b3-eeb9-1214-1526-f93c9ea826a8, the device will go unhealthy."))
        (logs / f"{node}.log").write_text(syslog(node, *lines))
    launch_failure = ("8: [rank8]:[E1120 10:20:01.022239569 ProcessGroupNCCL.cpp:2068] [PG ID 0 PG GUID 0(default_pg) "
                      "Rank 8] Process group watchdog thread terminated with exception: CUDA error: unspecified launch "
                      "failure\n")
    for job in ("850", "851", "852", "853", "854", "855", "856", "857", "858"):
        (logs / f"slurm-{job}.out").write_text(
            f"0: [2026-11-20 10:10:00,000] {ITERATION}\n" + (launch_failure if job == "858" else "")
            + "".join(watchdog_timeout(r, "10:29:00") + "\n" for r in range(8)))
    land_log_files(lake, [logs], cluster="c1")
    day = date(2026, 11, 20)
    return {row["job_id"]: row for row in run_attribution(lake, day, day).verdicts.to_dicts()}


def test_a_metric_xid_alone_is_the_gpus_root(verdicts):
    v = verdicts["850"]
    assert (v["domain"], v["cause"], v["culprit_nodes"], v["culprit_gpus"]) == ("gpu", "gpu.gsp_timeout", ["m2"], ["2"])
    assert v["quality"] == "probable"  # m2's syslog is missing


def test_a_metric_xid_takes_its_codes_domain(verdicts):
    v = verdicts["853"]
    assert (v["domain"], v["cause"], v["culprit_nodes"], v["culprit_gpus"]) == (
        "gpu_memory", "gpu_memory.uncorrectable_ecc", ["m8"], ["2"])


def test_a_code_the_catalog_calls_context_blames_no_gpu(verdicts):
    assert verdicts["854"]["culprit_gpus"] == [] and verdicts["854"]["domain"] != "gpu_memory"


def test_a_code_the_catalog_does_not_list_is_still_the_gpus(verdicts):
    v = verdicts["855"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("gpu", "gpu.xid_reported", ["m12"])


def test_the_kernel_line_outranks_the_metric_that_repeats_it(verdicts):
    v = verdicts["851"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("gpu", "gpu.fallen_off_bus", ["m4"])


def test_an_applications_xid_and_a_reset_gauge_blame_no_gpu(verdicts):
    v = verdicts["852"]
    assert v["domain"] != "gpu" and v["culprit_gpus"] == []


def test_the_device_plugins_xid_takes_its_codes_domain(verdicts):
    v = verdicts["856"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("gpu_memory", "gpu_memory.uncorrectable_ecc", ["m14"])


def test_the_device_plugins_xid_explains_the_cuda_error_on_its_node(verdicts):
    """As the kernel's XID line does: the launch failure a second later is its symptom, no
    rival explanation."""
    v = verdicts["858"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("gpu", "gpu.fallen_off_bus", ["m18"])
    assert v["quality"] != "ambiguous"
    assert {e["role"] for e in v["evidence"] if e["rule_id"] == "cuda.unspecified_launch_failure"} == {"confirmation"}


def test_the_device_plugins_word_of_an_earlier_jobs_xid_is_that_jobs_too(verdicts):
    """The kernel's XID 74 from before the start is the previous job's; so is the device
    plugin's report of it, which it confirmed."""
    v = verdicts["857"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("gpu", "gpu.fallen_off_bus", ["m16"])
    assert {e["role"] for e in v["evidence"] if "Xid=74" in e["message"] or ": 74," in e["message"]} == {"context"}
