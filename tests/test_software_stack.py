"""The software under the job, end to end through the Slurm connector, the files landing
and a run: a driver too old for the job's CUDA on every node of a job is the job's build,
on some nodes those nodes'; the NVIDIA container hook's reason outranks the enroot hook and
pyxis's generic failure; a node's image import failing, which the job output prints without a
node, is on the node whose task srun reports first, on every node where every node's slurmstepd
relayed it; a node out of loop devices, or its /tmp too full for Apptainer to unpack the image,
is the node's; a registry refusing the image is the job's; PyTorch finding no
driver on one node names it; cuBLAS failing to start and a missing shared library are the
job's."""

from __future__ import annotations

from datetime import date

import pytest

from tests.end_to_end import ITERATION, role_of, syslog, verdicts_by_job

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
950|950|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:01:00|s[1-2]|gres/gpu=16,node=2
951|951|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:01:00|s[3-4]|gres/gpu=16,node=2
952|952|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:01:00|s[5-6]|gres/gpu=16,node=2
953|953|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:01:00|s[7-8]|gres/gpu=16,node=2
954|954|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:01:00|s[9-10]|gres/gpu=16,node=2
955|955|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:01:00|s[11-12]|gres/gpu=16,node=2
956|956|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:01:00|s[13-14]|gres/gpu=16,node=2
957|957|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:01:00|s[15-16]|gres/gpu=16,node=2
958|958|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:01:00|s[17-18]|gres/gpu=16,node=2
959|959|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:16:00|s[19-20]|gres/gpu=2,node=2
960|960|train|alice|OUT_OF_MEMORY|0:125|2026-11-20T10:00:00|2026-11-20T10:20:00|s[21-22]|gres/gpu=2,node=2
961|961|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:01:00|s[23-24]|gres/gpu=16,node=2
962|962|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:01:00|s[25-26]|gres/gpu=16,node=2
963|963|train|alice|FAILED|255:0|2026-11-20T10:00:00|2026-11-20T10:01:00|s[27-28]|gres/gpu=16,node=2
964|964|train|alice|FAILED|255:0|2026-11-20T10:00:00|2026-11-20T10:01:00|s[29-30]|gres/gpu=16,node=2
965|965|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:01:00|s31|gres/gpu=8,node=1
"""

# https://github.com/pytorch/pytorch/blob/main/c10/cuda/CUDAFunctions.cpp (CUDA error 35)
TOO_OLD = "RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version"
NO_DRIVER = ("RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU "
             "and installed a driver from http://www.nvidia.com/Download/index.aspx")
# https://github.com/SyneRBI/PETRIC2/issues/27, behind pyxis's relay of enroot's log
# (https://github.com/NVIDIA/pyxis/issues/101)
REQUIREMENT = ("slurmstepd: error: pyxis:     nvidia-container-cli: requirement error: unsatisfied condition: "
               "cuda>=12.8, please update your driver to a newer version, or use an earlier cuda container")
HOOK = "slurmstepd: error: pyxis:     [ERROR] /etc/enroot/hooks.d/98-nvidia.sh exited with return code 1"
PYXIS_FAILED = "slurmstepd: error: pyxis: couldn't start container"
DISK_FULL = "slurmstepd: error: pyxis:     Write failed because No space left on device"
# tar's own words for a write that ran out of space, as pyxis relays enroot's log
# (https://github.com/NVIDIA/pyxis/issues/101), then srun's report of the task that ended.
TAR_FULL = ("slurmstepd: error: pyxis:     tar: usr/local/lib/python3.10/dist-packages/torch/lib/libtorch_cuda.so: "
            "Cannot write: No space left on device")
RENDEZVOUS_TIMEOUT = "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError: "
# slurmstepd's step OOM report (src/plugins/task/cgroup/task_cgroup_memory.c)
STEP_OOM = "slurmstepd: error: Detected 1 oom_kill event in StepId=960.0. Some of the step tasks have been OOM Killed."
# https://github.com/NVIDIA/pyxis/issues/101
NO_CLI = ("slurmstepd: error: pyxis:     [ERROR] Command not found: nvidia-container-cli, see "
          "https://github.com/NVIDIA/libnvidia-container")
# https://github.com/Gabaldonlab/perSVade/issues/9
SANDBOX_FULL = ("FATAL:   while extracting /home/u/md.sif: root filesystem extraction failed: failed to copy content in "
                "staging file: write /tmp/rootfs-645513470/archive-2796493803: no space left on device")
# https://github.com/ncbi/pgap/issues/145
RATE_LIMITED = ("FATAL:   Unable to handle docker://ncbi/pgap:2021-01-11.build5132 uri: failed to get checksum for "
                "docker://ncbi/pgap:2021-01-11.build5132: Error reading manifest 2021-01-11.build5132 in docker.io/ncbi/"
                "pgap: toomanyrequests: You have reached your pull rate limit. You may increase the limit by "
                "authenticating and upgrading: https://www.docker.com/increase-rate-limit")
# https://github.com/wheaton5/souporcell/issues/201
NO_LOOP = ("FATAL:   container creation failed: mount /proc/self/fd/3->/var/lib/apptainer/mnt/session/rootfs error: "
           "while mounting image /proc/self/fd/3: failed to find loop device: could not attach image file to loop "
           "device: no loop devices available")
# Apptainer's launcher (internal/pkg/runtime/launcher/native/launcher_linux.go)
NO_NV_FILES = "WARNING: Could not find any nv files on this host!"
# https://github.com/WXinlong/SOLO/issues/180
CUBLAS = "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_INITIALIZED when calling `cublasCreate(handle)`"
# https://github.com/OpenTalker/SadTalker/issues/323
CUDNN_MISSING = ("Could not load library libcudnn_cnn_infer.so.8. Error: libcudnn_cnn_infer.so.8: "
                 "cannot open shared object file: No such file or directory")
# https://github.com/NVIDIA/open-gpu-kernel-modules (NVRM's API mismatch, as stackhpc/ansible-slurm-appliance#287 shows it)
API_MISMATCH = "kernel: NVRM: API mismatch: the client has the version 535.54.03, but"


def _both(line: str) -> str:
    """``line`` printed by the first task of each of a job's two nodes (a task per GPU:
    tasks 0–7 on the first, 8–15 on the second)."""
    return f"0: [2026-11-20 10:00:30,000] {line}\n8: [2026-11-20 10:00:30,000] {line}\n"


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("stack")
    logs = root / "logs"
    logs.mkdir()
    (logs / "slurm-950.out").write_text(_both(TOO_OLD))
    (logs / "slurm-951.out").write_text(f"0: [2026-11-20 10:00:20,000] {ITERATION}\n8: [2026-11-20 10:00:30,000] {TOO_OLD}\n")
    (logs / "slurm-952.out").write_text(_both(TOO_OLD))
    (logs / "s5.log").write_text(syslog("s5", ("10:00:29", API_MISMATCH)))
    (logs / "slurm-953.out").write_text(_both(REQUIREMENT) + _both(HOOK) + _both(PYXIS_FAILED))
    (logs / "slurm-954.out").write_text(f"0: [2026-11-20 10:00:20,000] {ITERATION}\n8: {NO_LOOP}\n")
    (logs / "slurm-955.out").write_text(
        f"0: [2026-11-20 10:00:20,000] {ITERATION}\n8: {NO_NV_FILES}\n8: [2026-11-20 10:00:30,000] {NO_DRIVER}\n")
    (logs / "slurm-956.out").write_text(_both(CUBLAS))
    (logs / "slurm-957.out").write_text(_both(CUDNN_MISSING))
    (logs / "slurm-958.out").write_text(f"0: [2026-11-20 10:00:20,000] {ITERATION}\n8: {DISK_FULL}\n8: {PYXIS_FAILED}\n")
    # 959: one task per node; s20's image import ran out of space, s19 waited in the rendezvous.
    (logs / "slurm-959.out").write_text(
        "0: pyxis: importing docker image: nvcr.io#nvidia/pytorch:24.10-py3\n"
        "1: pyxis: importing docker image: nvcr.io#nvidia/pytorch:24.10-py3\n"
        f"0: [2026-11-20 10:01:00,000] {ITERATION}\n{TAR_FULL}\n{PYXIS_FAILED}\n"
        "srun: error: s20: task 1: Exited with exit code 1\n"
        f"0: {RENDEZVOUS_TIMEOUT}\nsrun: error: s19: task 0: Exited with exit code 1\n")
    # 960: the step's OOM report, then srun's reports of both nodes' tasks, s21's first.
    (logs / "slurm-960.out").write_text(
        f"0: [2026-11-20 10:19:00,000] {ITERATION}\n{STEP_OOM}\n"
        "srun: error: s21: task 0: Killed\nsrun: error: s22: task 1: Out Of Memory\n")
    # 961: both nodes' slurmstepd relay the same refusal, each before srun's report of its
    # own node's tasks exiting: the image needs a newer driver than every node has.
    refused = f"{REQUIREMENT}\n{HOOK}\n{PYXIS_FAILED}\n"
    (logs / "slurm-961.out").write_text(
        f"{refused}srun: error: s23: tasks 0-7: Exited with exit code 1\n"
        f"{refused}srun: error: s24: tasks 8-15: Exited with exit code 1\n")
    # 962: s25's enroot hook lacks nvidia-container-cli (two lines of one rule); srun then
    # terminates s26's tasks, which had started.
    (logs / "slurm-962.out").write_text(
        f"{NO_CLI}\n{HOOK}\n{PYXIS_FAILED}\nsrun: error: s25: tasks 0-7: Exited with exit code 1\n"
        "srun: Terminating StepId=962.0\nsrun: error: s26: tasks 8-15: Terminated\n")
    # 963: Apptainer on s28 could not unpack the image into its full /tmp; s27's tasks started.
    (logs / "slurm-963.out").write_text(
        f"0: [2026-11-20 10:00:20,000] {ITERATION}\n8: {SANDBOX_FULL}\n9: {SANDBOX_FULL}\n"
        "srun: error: s28: tasks 8-15: Exited with exit code 255\n")
    # 964: Docker Hub refused every task's anonymous pull.
    (logs / "slurm-964.out").write_text(f"0: {RATE_LIMITED}\n8: {RATE_LIMITED}\n"
                                        "srun: error: s29: tasks 0-7: Exited with exit code 255\n"
                                        "srun: error: s30: tasks 8-15: Exited with exit code 255\n")
    # 965: a one-node job whose image import filled the node's enroot data path.
    (logs / "slurm-965.out").write_text(f"{TAR_FULL}\n{PYXIS_FAILED}\nsrun: error: s31: tasks 0-7: Exited with exit code 1\n")
    return verdicts_by_job(root, SACCT, logs, date(2026, 11, 20))


def test_a_driver_too_old_on_every_node_is_the_jobs_build(verdicts):
    v = verdicts["950"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("workload", "workload.cuda_newer_than_driver", [])


def test_a_driver_too_old_on_one_node_is_that_nodes(verdicts):
    v = verdicts["951"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("gpu", "gpu.driver_mismatch", ["s4"])


def test_a_node_that_says_its_own_driver_is_broken_keeps_it_the_nodes(verdicts):
    v = verdicts["952"]
    assert (v["domain"], v["cause"]) == ("gpu", "gpu.driver_mismatch")
    assert "s5" in v["culprit_nodes"]


def test_an_image_every_node_refused_is_the_jobs(verdicts):
    v = verdicts["953"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("workload", "workload.cuda_newer_than_driver", [])
    # The hook and pyxis only relay what nvidia-container-cli said.
    assert role_of(v, "scheduler.enroot_runtime_error") == "confirmation"
    assert role_of(v, "scheduler.pyxis_container_failed") == "confirmation"


def test_a_node_out_of_loop_devices_is_the_nodes(verdicts):
    v = verdicts["954"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("host", "host.container_runtime", ["s10"])


def test_no_driver_found_on_one_node_names_it(verdicts):
    v = verdicts["955"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("gpu", "gpu.init_failure", ["s12"])


def test_cublas_failing_to_start_is_the_jobs(verdicts):
    v = verdicts["956"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("workload", "workload.cublas_failure", [])


def test_a_missing_shared_library_is_the_jobs(verdicts):
    v = verdicts["957"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("workload", "workload.missing_library", [])


def test_a_full_disk_enroot_reports_outranks_pyxis_failing(verdicts):
    v = verdicts["958"]
    assert (v["domain"], v["cause"]) == ("storage", "storage.disk_full")
    assert v["quality"] != "ambiguous"


def test_a_nodes_image_import_failing_is_on_the_node_srun_reports_first(verdicts):
    v = verdicts["959"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("storage", "storage.disk_full", ["s20"])


def test_a_one_node_jobs_image_import_filling_its_disk_names_the_node(verdicts):
    v = verdicts["965"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("storage", "storage.disk_full", ["s31"])


def test_a_steps_oom_report_is_not_placed_by_the_first_task_report(verdicts):
    assert "s21" not in verdicts["960"]["culprit_nodes"]


def test_a_refusal_every_nodes_slurmstepd_relayed_is_the_jobs(verdicts):
    v = verdicts["961"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("workload", "workload.cuda_newer_than_driver", [])


def test_a_setup_failure_of_the_node_srun_reported_first_stays_that_nodes(verdicts):
    v = verdicts["962"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("host", "host.container_runtime", ["s25"])


def test_apptainer_unpacking_into_a_full_tmp_is_that_nodes_disk(verdicts):
    v = verdicts["963"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("storage", "storage.disk_full", ["s28"])


def test_a_registry_refusing_every_tasks_pull_is_the_jobs_image(verdicts):
    v = verdicts["964"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("workload", "workload.container_failed", [])
