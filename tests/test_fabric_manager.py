"""A node whose fabric manager never came up, end to end: the fabric manager's own log
(its ``[Mon DD YYYY hh:mm:ss]`` stamps are the lines' times, in the node's zone), systemd's
report and CUDA error 802 in the job's output all name the node's NVLink fabric, not the
job. Real lines, landed through the Slurm connector and the files landing."""

from __future__ import annotations

from datetime import date

import polars as pl

from engine.run import landing_lake, run_attribution
from ingest.connectors import run_connector
from ingest.connectors.slurm import SlurmConnector, SlurmOptions
from ingest.files import land_log_files

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
800|800|train|alice|FAILED|1:0|2024-11-07T08:50:00|2024-11-07T08:51:10|gn0305|gres/gpu=8,node=1
"""
# The fabric manager's log format (NVIDIA/nccl#1043) around gpud's topology-mismatch line
# (leptonai/gpud fabric-manager log_matcher.go).
FM_LOG = ("[Nov 07 2024 09:41:43] [ERROR] [tid 4412] detected number of NVSwitches don't match with any "
          "supported system topology, aborting fabric manager\n")
# NVIDIA/gpu-operator#610
SYSTEMD = ("Nov  7 09:41:44 gn0305 systemd[1]: nvidia-fabricmanager.service: Control process exited, "
           "code=exited, status=1/FAILURE\n")
# microsoft/lisa#2823, haotian-liu/LLaVA#683
OUTPUT = """[2024-11-07 08:50:20,000] starting
/usr/local/lib/python3.10/dist-packages/torch/cuda/__init__.py:128: UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have already set an error? Error 802: system not yet initialized (Triggered internally at ../c10/cuda/CUDAFunctions.cpp:108.)
RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have already set an error? Error 802: system not yet initialized
"""


def test_a_fabric_manager_that_never_started_is_the_nodes_nvlink_fault(tmp_path):
    (tmp_path / "sacct.txt").write_text(SACCT)
    (tmp_path / "fm.log").write_text(FM_LOG)
    (tmp_path / "gn0305.log").write_text(SYSTEMD)
    (tmp_path / "slurm-800.out").write_text(OUTPUT)
    lake = landing_lake(tmp_path / "lake")
    run_connector(lake, SlurmConnector(SlurmOptions(sacct_file=[tmp_path / "sacct.txt"], timezone="UTC"), "c1"), None)
    for path, options in ((tmp_path / "fm.log", {"node": "gn0305"}), (tmp_path / "gn0305.log", {"year": 2024}),
                          (tmp_path / "slurm-800.out", {})):
        land_log_files(lake, [path], cluster="c1", timezone="Europe/Berlin", **options)
    fm = lake.scan("observations").filter(pl.col("input_id").str.ends_with("fm.log")).collect()
    assert (fm["ts"][0].isoformat(), fm["ts_source"][0]) == ("2024-11-07T08:41:43+00:00", "line")
    v = run_attribution(lake, date(2024, 11, 7), date(2024, 11, 7)).verdicts.row(0, named=True)
    assert (v["domain"], v["culprit_nodes"]) == ("nvlink", ["gn0305"])
    assert v["cause"] in {"nvlink.fabric_topology_mismatch", "nvlink.fabric_manager_down"}
    assert v["quality"] != "ambiguous"
