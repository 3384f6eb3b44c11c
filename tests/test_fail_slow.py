"""A time-limited job whose one GPU DCGM reported slowed by heat over most of its run is a
fail-slow GPU (``rules/fail_slow.py``), named as ``probable``, and so is a node whose CPUs
the kernel reported throttled by heat over most of it, a GPU or an adapter whose link
trained narrower than it can run (reported at a boot long before the job too), a port that
went down and came back up all run, and the rank Megatron-LM's straggler detector names
slowest all run; a throttle in passing, a narrow link the node booted away from or only
the PCI core reported, bounces early in the run, a slowest rank that changes, or a
slowdown beside another root, leaves the verdict alone. Real lines, landed through the
Slurm connector and the files landing, attributed by a run."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import polars as pl

from engine.run import landing_lake, run_attribution
from ingest.connectors import run_connector
from ingest.connectors.slurm import SlurmConnector, SlurmOptions
from ingest.files import land_log_files
from tests.end_to_end import ALIVE, BOOT, ITERATION, progress, syslog, verdicts_by_job

# https://github.com/NVIDIA/DCGM/issues/270 (nv-hostengine's health watch, GPU by index)
THERMAL = ("nv-hostengine[33903]: ERROR [1514002:1514004] [[Health]] Detected a WARNING in health system Thermal: "
           "'Detected clocks event due to thermal violation in GPU 2. Verify that the cooling on this machine is "
           "functional, including external, thermal material interface, fans, and any other components.")
# slurmstepd's banner (https://github.com/SchedMD/slurm/blob/master/src/slurmd/slurmstepd/req.c)
TIME_LIMIT = "slurmstepd: error: *** JOB {job} ON f1 CANCELLED AT 2026-11-20T14:00:00 DUE TO TIME LIMIT ***"
# arch/x86/kernel/cpu/mce/therm_throt.c since 5.5 (throttle_active_work())
CPU_HOT = "kernel: CPU47: Package temperature is above threshold, cpu clock is throttled (total events = {n})"
# The kernel's link notice (__pcie_print_link_status, drivers/pci/pci.c) under the driver
# bound to the device: a GPU, then an HCA, trained at x8 of x16 when the node booted.
NARROW = ("kernel: {driver} 0000:5d:00.0: 126.024 Gb/s available PCIe bandwidth, limited by 16.0 GT/s PCIe x8 link "
          "at 0000:5c:00.0 (capable of 504.112 Gb/s with 32.0 GT/s PCIe x16 link)")
# Megatron-LM's StragglerDetector report as megatron/core/README_STRAGGLER.md shows it,
# printed by rank 0 each logging interval (the slowest rank after MxRtt/Rnk).
STRAGGLER = ("0: INFO:megatron.core.utils:[2026-11-20 {hour}:30:05] | MnRtt/Rnk: 4567.20ms/3 | "
             "MxRtt/Rnk: 6341.67ms/{rank} | MnPwr/Rnk: 427.56W/{rank} | MxPwr/Rnk: 695.47W/7 | MnTmp/Rnk: 38.09C/1 | "
             "MxTmp/Rnk: 88.19C/{rank} | MnUtl/Rnk: 100.00%/2 | MxUtl/Rnk: 100.00%/0 | "
             "MnClk/Rnk: 1141.39MHz/{rank} | MxClk/Rnk: 1980.00MHz/4 | MnDRtt/Rnk: 1.01ms/6 | MxDRtt/Rnk: 21.91ms/9 | "
             "MnEtpt/Rnk: 298.85TF/{rank} | MxEtpt/Rnk: 414.52TF/10")
# https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1151
XID_79 = "kernel: NVRM: Xid (PCI:0000:06:00): 79, GPU has fallen off the bus."
# An HCA port's state changes as mlx5_core prints them (https://github.com/leptonai/gpud/pull/1209).
PORT_DOWN = "kernel: mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link DOWN"
PORT_UP = "kernel: mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link ACTIVE"

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
{job}|{job}|train|alice|TIMEOUT|0:0|2026-11-20T10:00:00|2026-11-20T14:00:30|f[1-2]|gres/gpu=16,node=2
"""


def _verdict(tmp_path, job: str, f2_lines: tuple[tuple[str, str], ...], reports: str | None = None) -> dict:
    """The verdict of a two-node run that hit its time limit at 14:00, f2's log holding
    ``f2_lines``; ``reports``: the output's progress lines (two iteration lines without a
    loss by default)."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "f1.log").write_text(syslog("f1", ("10:05:00", ALIVE), ("13:55:00", ALIVE)))
    (logs / "f2.log").write_text(syslog("f2", ("10:05:00", ALIVE), *f2_lines, ("13:55:00", ALIVE)))
    if reports is None:
        reports = f"0: [2026-11-20 10:10:00,000] {ITERATION}\n0: [2026-11-20 13:59:00,000] {ITERATION}\n"
    (logs / f"slurm-{job}.out").write_text(f"{reports}{TIME_LIMIT.format(job=job)}\n")
    return verdicts_by_job(tmp_path, SACCT.format(job=job), logs, date(2026, 11, 20))[job]


def test_a_gpu_slowed_over_most_of_a_timed_out_run_is_its_probable_root(tmp_path):
    slowed = tuple((f"{h}:35:20", THERMAL) for h in range(10, 14))
    v = _verdict(tmp_path, "700", slowed)
    assert (v["domain"], v["cause"], v["quality"]) == ("gpu", "gpu.thermal_power_slowdown", "probable")
    assert (v["culprit_nodes"], v["culprit_gpus"]) == (["f2"], ["2"])


def test_a_throttle_in_passing_leaves_the_time_limit(tmp_path):
    # Three reports within an hour of a four-hour run: not the run's pace.
    passing = (("11:00:00", THERMAL), ("11:20:00", THERMAL), ("11:40:00", THERMAL))
    v = _verdict(tmp_path, "701", passing)
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("scheduler", "scheduler.time_limit", [])


def test_another_root_outranks_a_slowdown(tmp_path):
    slowed = tuple((f"{h}:35:20", THERMAL) for h in range(10, 14))
    v = _verdict(tmp_path, "702", (*slowed, ("13:50:00", XID_79)))
    assert (v["domain"], v["cause"]) == ("gpu", "gpu.fallen_off_bus")



def test_a_node_whose_cpus_ran_hot_over_most_of_a_timed_out_run_is_its_probable_root(tmp_path):
    hot = tuple((f"{h}:{m:02d}:00", CPU_HOT.format(n=h * 100 + m)) for h in range(10, 14) for m in (10, 40))
    v = _verdict(tmp_path, "703", hot)
    assert (v["domain"], v["cause"], v["quality"], v["culprit_nodes"]) == (
        "host", "host.cpu_thermal_throttle", "probable", ["f2"])


def test_a_node_hot_all_run_while_the_job_kept_reporting_progress_is_still_its_root(tmp_path):
    """The job trained through the throttle only in the sense that it never stopped: the
    throttle lasted until the end, so it is no fault the job outlived."""
    hot = tuple((f"{h}:{m:02d}:00", CPU_HOT.format(n=h * 100 + m)) for h in range(10, 14) for m in (10, 40))
    v = _verdict(tmp_path, "709", hot, reports=progress("13:55", every_minutes=5, since="10:05"))
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("host", "host.cpu_thermal_throttle", ["f2"])


def test_a_gpu_dcgm_measured_hot_over_most_of_a_timed_out_run_is_its_probable_root(tmp_path):
    """No log line at all: DCGM's temperature gauge (dcgm-exporter's labels) shows GPU 5 of
    f2 above its slowdown point from 10:40 to the time limit, the others cool."""
    (tmp_path / "sacct.txt").write_text(SACCT.format(job="704"))
    lake = landing_lake(tmp_path / "lake")
    assert run_connector(lake, SlurmConnector(SlurmOptions(sacct_file=[tmp_path / "sacct.txt"], timezone="UTC"), "c1"),
                         None).error is None
    labels = '{"Hostname":"%s","gpu":"%s","modelName":"NVIDIA H100 80GB HBM3"}'
    start = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
    rows = [
        {"ts": start + timedelta(minutes=5 * i), "node": node, "metric": "DCGM_FI_DEV_GPU_TEMP", "gpu": gpu,
         "hca": None, "port": None, "value": 93.0 if (node, gpu) == ("f2", "5") and i >= 8 else 61.0,
         "labels": labels % (node, gpu), "origin": f"prom:{node}:{gpu}:{i}", "input_id": "prom"}
        for node in ("f1", "f2") for gpu in ("4", "5") for i in range(49)
    ]
    lake.land("metrics", pl.DataFrame(rows, schema_overrides={"hca": pl.String, "port": pl.String}),
              cluster="c1", input_id="prom")
    logs = tmp_path / "logs"
    logs.mkdir()
    for node in ("f1", "f2"):
        (logs / f"{node}.log").write_text(syslog(node, ("10:05:00", ALIVE), ("13:55:00", ALIVE)))
    (logs / "slurm-704.out").write_text(
        f"0: [2026-11-20 10:10:00,000] {ITERATION}\n0: [2026-11-20 13:59:00,000] {ITERATION}\n"
        f"{TIME_LIMIT.format(job='704')}\n")
    land_log_files(lake, [logs], cluster="c1")
    day = date(2026, 11, 20)
    v = run_attribution(lake, day, day).verdicts.to_dicts()[0]
    assert (v["domain"], v["cause"], v["quality"]) == ("gpu", "gpu.thermal", "probable")
    assert (v["culprit_nodes"], v["culprit_gpus"]) == (["f2"], ["5"])


def test_a_gpu_whose_link_trained_narrow_at_boot_is_a_timed_out_runs_probable_root(tmp_path):
    v = _verdict(tmp_path, "705", (("09:58:00", NARROW.format(driver="nvidia")),))
    assert (v["domain"], v["cause"], v["quality"]) == ("host", "host.pcie_link_degraded", "probable")
    assert v["culprit_nodes"] == ["f2"]


def test_an_adapters_link_trained_narrow_at_a_boot_long_before_the_run_is_its_probable_root(tmp_path):
    """Reported at boot 70 minutes before the job started, outside its window: the link
    stays narrow until the next boot. The adapter's PCI function is no GPU."""
    v = _verdict(tmp_path, "706", (("08:50:00", NARROW.format(driver="mlx5_core")),))
    assert (v["domain"], v["cause"], v["quality"]) == ("host", "host.pcie_link_degraded", "probable")
    assert (v["culprit_nodes"], v["culprit_gpus"]) == (["f2"], [])


def test_a_narrow_link_the_node_booted_away_from_leaves_the_time_limit(tmp_path):
    v = _verdict(tmp_path, "707", (("08:20:00", NARROW.format(driver="nvidia")), ("09:30:00", f"kernel: {BOOT}")))
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("scheduler", "scheduler.time_limit", [])


def test_the_pci_cores_own_narrow_link_notice_leaves_the_time_limit(tmp_path):
    v = _verdict(tmp_path, "708", (("09:58:00", NARROW.format(driver="pci")),))
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("scheduler", "scheduler.time_limit", [])


def test_a_port_that_bounced_all_run_is_a_timed_out_runs_probable_root(tmp_path):
    """Each bounce was outlived (the job reported steps after it), but together they
    slowed it past its limit."""
    bounces = tuple(line for h in range(10, 14) for line in ((f"{h}:30:00", PORT_DOWN), (f"{h}:30:09", PORT_UP)))
    v = _verdict(tmp_path, "710", bounces, reports=progress("13:55", every_minutes=5, since="10:05"))
    assert (v["domain"], v["cause"], v["quality"]) == ("network", "network.link_down", "probable")
    assert (v["culprit_nodes"], v["culprit_ports"]) == (["f2"], ["mlx5_5:1"])


def test_a_port_that_bounced_all_run_outranks_another_nodes_link_narrow_since_boot(tmp_path):
    """f1's adapter trained narrow at a boot before the job and the job ran with it from its
    first step; f2's port then went down and up all run: what changed is the port."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "f1.log").write_text(syslog("f1", ("08:50:00", NARROW.format(driver="mlx5_core")), ("10:05:00", ALIVE),
                                        ("13:55:00", ALIVE)))
    bounces = tuple(line for h in range(10, 14) for line in ((f"{h}:30:00", PORT_DOWN), (f"{h}:30:09", PORT_UP)))
    (logs / "f2.log").write_text(syslog("f2", ("10:05:00", ALIVE), *bounces, ("13:55:00", ALIVE)))
    (logs / "slurm-712.out").write_text(progress("13:55", every_minutes=5, since="10:05") + TIME_LIMIT.format(job="712") + "\n")
    v = verdicts_by_job(tmp_path, SACCT.format(job="712"), logs, date(2026, 11, 20))["712"]
    assert (v["domain"], v["cause"], v["culprit_nodes"], v["quality"]) == ("network", "network.link_down", ["f2"], "probable")
    assert {e["role"] for e in v["evidence"] if e["event"] == "pcie_bandwidth_limited"} <= {"context"}


def test_bounces_early_in_the_run_leave_the_time_limit(tmp_path):
    bounces = tuple(line for m in (20, 35, 50) for line in ((f"10:{m}:00", PORT_DOWN), (f"10:{m}:09", PORT_UP)))
    v = _verdict(tmp_path, "711", bounces, reports=progress("13:55", every_minutes=5, since="10:05"))
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("scheduler", "scheduler.time_limit", [])


def _megatron_verdict(tmp_path, job: str, slowest: list[int], every_minutes: int = 60) -> dict:
    """A two-node Megatron run (eight ranks a node) that hit its time limit, rank 0 printing
    a straggler report every ``every_minutes`` from 10:30 naming ``slowest[i]`` the slowest
    rank."""
    logs = tmp_path / "logs"
    logs.mkdir()
    for node in ("f1", "f2"):
        (logs / f"{node}.log").write_text(syslog(node, ("10:05:00", ALIVE), ("13:55:00", ALIVE)))
    stamps = [datetime(2026, 11, 20, 10, 30) + timedelta(minutes=every_minutes * i) for i in range(len(slowest))]
    reports = "".join(
        f"0: [{at:%Y-%m-%d %H:%M}:00,000] {ITERATION}\n"
        + STRAGGLER.replace("{hour}:30:05", f"{at:%H:%M}:05").format(rank=rank) + "\n"
        for at, rank in zip(stamps, slowest, strict=True)
    )
    (logs / f"slurm-{job}.out").write_text(f"{reports}{TIME_LIMIT.format(job=job)}\n")
    return verdicts_by_job(tmp_path, SACCT.format(job=job), logs, date(2026, 11, 20))[job]


def test_the_rank_megatron_reports_slowest_all_run_is_its_gpus_probable_root(tmp_path):
    v = _megatron_verdict(tmp_path, "707", [13, 13, 13, 13])
    assert (v["domain"], v["cause"], v["quality"]) == ("gpu", "gpu.straggler", "probable")
    assert (v["culprit_nodes"], v["culprit_gpus"]) == (["f2"], ["5"])


def test_a_slowest_rank_that_changes_leaves_the_time_limit(tmp_path):
    v = _megatron_verdict(tmp_path, "708", [13, 2, 9, 5])
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("scheduler", "scheduler.time_limit", [])


def test_reports_every_logging_interval_each_count_for_the_rank_they_name(tmp_path):
    # Reports a minute apart are not a flood of one: folded, the first report's rank would
    # stand for all of them.
    v = _megatron_verdict(tmp_path, "709", [2] * 5 + [13] * 175, every_minutes=1)
    assert (v["domain"], v["cause"], v["quality"]) == ("gpu", "gpu.straggler", "probable")
    assert (v["culprit_nodes"], v["culprit_gpus"]) == (["f2"], ["5"])


def test_a_rank_slowest_now_and_then_over_the_whole_run_leaves_the_time_limit(tmp_path):
    # Rank 13 is slowest in a fifth of the reports, from the first hour to the last.
    v = _megatron_verdict(tmp_path, "710", [13, 2, 9, 5, 4] * 36, every_minutes=1)
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("scheduler", "scheduler.time_limit", [])
