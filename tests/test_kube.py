"""Kueue workloads → attempts, and pod logs → observations.

Kueue tests read Workload/Pod JSON in the real API shape (``tests/fixtures/kube/``, see its
README). No real Kubernetes runs here: the pod-log tests serve the Kubernetes API's
``/api/v1/namespaces/{ns}/pods/{pod}/log`` (``text/plain``) and the pod object from a small
``http.server`` on 127.0.0.1 started by the test.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from ingest.connectors.base import ConnectorError, FetchWindow
from engine.cli import app
from engine.extract import extract_lines
from engine.rules.loader import load_rule_pack
from ingest.connectors import run_connector
from ingest.connectors.kube import (
    KueueConnector, KueueOptions, KueueSnapshot, PodLogsConnector, PodLogsOptions, kueue_attempts, kueue_evidence,
)
from ingest.lake import Lake
from ingest.schema import ATTEMPTS, OBSERVATIONS, REJECTS, STATES
from tests.local_http import serve

FIXTURES = Path(__file__).parent / "fixtures" / "kube"


def _utc(*args) -> datetime:
    return datetime(*args, tzinfo=timezone.utc)


@pytest.fixture
def attempts() -> pl.DataFrame:
    opts = KueueOptions(workloads_file=FIXTURES / "workloads.json", pods_file=FIXTURES / "pods.json")
    batches = list(KueueConnector(opts, cluster="k1").fetch(None))
    assert [b.table for b in batches] == ["attempts", "observations"] and batches[0].fetched == 4
    return batches[0].rows


def _by_id(rows: pl.DataFrame) -> dict[str, dict]:
    return {r["attempt_id"]: r for r in rows.iter_rows(named=True)}


def test_attempt_rows_have_the_attempts_columns(attempts):
    assert attempts.columns == ATTEMPTS.names
    assert set(attempts["state"]) <= set(STATES)
    assert attempts["scheduler"].unique().to_list() == ["kueue"]


def test_eviction_then_oom_gives_two_attempts(attempts):
    rows = _by_id(attempts)
    first = rows["kueue/k1/ml/job-train-llama-5d8f2/0"]
    second = rows["kueue/k1/ml/job-train-llama-5d8f2/1"]
    assert first["state"] == "preempted" and first["raw_state"] == "Evicted:Preempted"
    # Readmitted: the Evicted condition is False again and no longer dates the eviction,
    # which came before the readmission (Kueue sets it "Previously: …" then).
    assert first["end_ts"] == second["start_ts"] and first["nodes"] == []
    assert second["attempt_index"] == 1
    assert second["state"] == "out_of_memory" and second["raw_state"] == "Finished:Failed"
    assert second["start_ts"] == _utc(2026, 11, 30, 14, 20)
    assert second["end_ts"] == _utc(2026, 11, 30, 15, 32, 41)
    assert second["exit_code"] == 137 and second["signal"] == 9
    assert second["nodes"] == ["gpu-node-001", "gpu-node-002"] and second["n_nodes"] == 2
    assert second["job_id"] == "ml/train-llama" and second["job_name"] == "train-llama"
    assert second["partition"] == "team-a"
    assert second["submit_ts"] == _utc(2026, 11, 30, 14)
    assert second["origin"].endswith("workloads.json#ml/job-train-llama-5d8f2")


def test_success_is_completed_with_its_node(attempts):
    row = _by_id(attempts)["kueue/k1/ml/job-bert-ft-9a1b3/0"]
    assert row["state"] == "completed" and row["exit_code"] is None and row["signal"] is None
    assert row["nodes"] == ["gpu-node-003"]


def test_requeued_after_pods_ready_timeout_without_scheduling_stats(attempts):
    rows = attempts.filter(pl.col("job_id") == "ml/eval").sort("attempt_index")
    assert rows["attempt_index"].to_list() == [0, 1]
    # The pods did not become ready in time: a failed attempt, not a preemption.
    assert rows["state"].to_list() == ["failed", "failed"]
    assert rows["raw_state"].to_list() == ["Evicted:PodsReadyTimeout"] * 2
    assert rows["end_ts"].to_list() == [None, _utc(2026, 11, 30, 12, 40)]


def test_pod_deleted_by_taint_manager_means_node_failure(attempts):
    row = _by_id(attempts)["kueue/k1/ml/job-pretrain-0f3e9/0"]
    assert row["state"] == "node_fail"
    assert row["exit_code"] == 143 and row["signal"] == 15
    assert row["nodes"] == ["gpu-node-004", "gpu-node-005"] and row["end_ts"] is None


def test_attempts_land_and_relanding_is_idempotent(attempts, tmp_path):
    lake = Lake(tmp_path / "lake")
    lake.land("attempts", attempts, cluster="k1")
    lake.land("attempts", attempts, cluster="k1")
    assert lake.scan("attempts").collect().height == attempts.height == 6


def test_a_later_snapshot_without_the_pods_erases_nothing(attempts, tmp_path):
    lake = Lake(tmp_path / "lake")
    lake.land("attempts", attempts, cluster="k1")
    # Taken after the pods were deleted: no nodes, no exit code, no OOM, no taint manager.
    later = next(KueueConnector(KueueOptions(workloads_file=FIXTURES / "workloads.json"), cluster="k1")
                 .fetch(None)).rows
    lake.land("attempts", later, cluster="k1")
    lake.land("attempts", later, cluster="k1")
    stored = lake.scan("attempts").drop("cluster", "day").collect().sort("attempt_id")
    assert stored.equals(attempts.sort("attempt_id"))
    # And the other way round: the snapshot that saw the pods adds what it knows.
    other = Lake(tmp_path / "other")
    other.land("attempts", later, cluster="k1")
    other.land("attempts", attempts, cluster="k1")
    assert other.scan("attempts").drop("cluster", "day").collect().sort("attempt_id").equals(stored)


def test_a_later_snapshot_after_a_lost_nodes_pod_was_deleted_keeps_that_node(tmp_path):
    """The taint manager deleted the dead node's pod: the next snapshot lists only the
    survivor's. The attempt ran on both; the node list is the union of what was seen."""
    lake = Lake(tmp_path / "lake")
    values = {
        "attempt_id": "a", "scheduler": "kueue", "job_id": "ml/j", "job_name": None, "user": None,
        "partition": None, "attempt_index": 0, "submit_ts": None, "start_ts": _utc(2026, 11, 30, 10),
        "end_ts": None, "raw_state": "Admitted", "state": "running", "exit_code": None, "signal": None,
        "nodes": ["n1", "n2"], "n_nodes": 2, "ranks_per_node": None, "gpus_per_node": None, "relaunch_ts": None, "origin": "o",
    }
    both = pl.DataFrame({c: [v] for c, v in values.items()}, schema=pl.from_arrow(ATTEMPTS.empty_table()).schema)
    lake.land("attempts", both, cluster="k1")
    lake.land("attempts", both.with_columns(nodes=pl.lit(["n2"]), n_nodes=pl.lit(1)), cluster="k1")
    row = lake.scan("attempts").collect().row(0, named=True)
    assert (row["nodes"], row["n_nodes"]) == (["n1", "n2"], 2)


def test_a_later_report_updates_a_running_attempt(tmp_path):
    lake = Lake(tmp_path / "lake")
    values = {
        "attempt_id": "a", "scheduler": "kueue", "job_id": "ml/j", "job_name": None, "user": None,
        "partition": None, "attempt_index": 0, "submit_ts": None, "start_ts": _utc(2026, 11, 30, 10),
        "end_ts": None, "raw_state": "Admitted", "state": "running", "exit_code": None, "signal": None,
        "nodes": ["n1"], "n_nodes": 1, "ranks_per_node": None, "gpus_per_node": None, "relaunch_ts": None, "origin": "o",
    }
    running = pl.DataFrame({c: [v] for c, v in values.items()}, schema=pl.from_arrow(ATTEMPTS.empty_table()).schema)
    lake.land("attempts", running, cluster="k1")
    ended = running.with_columns(end_ts=pl.lit(_utc(2026, 11, 30, 12)), state=pl.lit("failed"),
                                 raw_state=pl.lit("Finished:Failed"))
    lake.land("attempts", ended, cluster="k1")
    row = lake.scan("attempts").collect().row(0, named=True)
    assert row["state"] == "failed" and row["end_ts"] == _utc(2026, 11, 30, 12) and row["nodes"] == ["n1"]
    assert lake.scan("attempts").collect().height == 1


def test_an_eviction_an_earlier_snapshot_dated_keeps_its_time_over_the_readmission(tmp_path):
    """The snapshot taken while the workload stood evicted dates the eviction; one taken
    after its readmission only bounds it. Landed in either order, the earlier end stands."""
    values = {
        "attempt_id": "a", "scheduler": "kueue", "job_id": "ml/j", "job_name": None, "user": None,
        "partition": None, "attempt_index": 0, "submit_ts": None, "start_ts": _utc(2026, 11, 30, 10),
        "end_ts": _utc(2026, 11, 30, 14, 5), "raw_state": "Evicted:Preempted", "state": "preempted", "exit_code": None,
        "signal": None, "nodes": ["n1"], "n_nodes": 1, "ranks_per_node": None, "gpus_per_node": None,
        "relaunch_ts": None, "origin": "o",
    }
    seen = pl.DataFrame({c: [v] for c, v in values.items()}, schema=pl.from_arrow(ATTEMPTS.empty_table()).schema)
    bounded = seen.with_columns(end_ts=pl.lit(_utc(2026, 11, 30, 14, 20)), start_ts=pl.lit(None, pl.Datetime("us", "UTC")))
    for order, name in (((seen, bounded), "lake"), ((bounded, seen), "other")):
        lake = Lake(tmp_path / name)
        for rows in order:
            lake.land("attempts", rows, cluster="k1")
        row = lake.scan("attempts").collect().row(0, named=True)
        assert (row["start_ts"], row["end_ts"]) == (_utc(2026, 11, 30, 10), _utc(2026, 11, 30, 14, 5))


def test_a_run_says_which_attempts_it_skipped_for_want_of_an_end(attempts, tmp_path):
    lake = Lake(tmp_path / "lake")
    lake.land("attempts", attempts, cluster="k1")
    result = CliRunner().invoke(app, ["run", "--lake", str(lake.root), "--day", "2026-11-30"])
    assert result.exit_code == 0, result.output
    # An eviction Kueue no longer dates (another came after it) and a pod deleted by the
    # taint manager, not ended yet; the eviction before the readmission ended by then.
    assert ("skipped 2 attempts without an end time (1 failed, 1 node_fail)"
            in " ".join(result.output.split()))
    manifest = json.loads(next((lake.root / "runs").glob("run-*.json")).read_text())
    assert manifest["counts"]["skipped_without_end"] == {"failed": 1, "node_fail": 1}


def test_workloads_without_pods_still_give_attempts():
    opts = KueueOptions(workloads_file=FIXTURES / "workloads.json")
    rows = next(KueueConnector(opts, cluster="k1").fetch(None)).rows
    second = _by_id(rows)["kueue/k1/ml/job-train-llama-5d8f2/1"]
    assert second["state"] == "failed" and second["nodes"] == [] and second["exit_code"] is None


def _condition(ctype: str, status: str, when: str, reason: str, message: str = "") -> dict:
    return {"type": ctype, "status": status, "lastTransitionTime": when, "reason": reason,
            "message": message, "observedGeneration": 1}


def _workload(name: str, owner: tuple[str, str, str], conditions: list[dict], **metadata) -> dict:
    """A Workload as `kubectl get workloads -o json` prints it (the fields the connector reads)."""
    api, kind, owner_name = owner
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
        "metadata": {"name": name, "namespace": "ml", "uid": f"{name}-uid",
                     "creationTimestamp": "2026-11-30T09:59:00Z",
                     "ownerReferences": [{"apiVersion": api, "kind": kind, "name": owner_name,
                                          "uid": "o", "controller": True}], **metadata},
        "spec": {"queueName": "team-a", "active": True},
        "status": {"conditions": [_condition("QuotaReserved", "True", "2026-11-30T10:00:00Z", "QuotaReserved"),
                                  _condition("Admitted", "True", "2026-11-30T10:00:00Z", "Admitted"),
                                  *conditions]},
    }


def _pod(name: str, node: str, labels: dict, owner: tuple[str, str, str], status: dict | None = None,
         gpus: str = "8", **metadata) -> dict:
    """A running Pod as `kubectl get pods -o json` prints it; ``status`` adds to its status."""
    api, kind, owner_name = owner
    resources = {"cpu": "96", "memory": "1600Gi", "nvidia.com/gpu": gpus}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "uid": f"{name}-uid", "labels": labels,
                     "ownerReferences": [{"apiVersion": api, "kind": kind, "name": owner_name,
                                          "uid": "o", "controller": True}], **metadata},
        "spec": {"nodeName": node, "containers": [{"name": "trainer", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                                                   "resources": {"limits": resources, "requests": resources}}]},
        "status": {"phase": "Running", "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-30T10:00:01Z"}],
            "containerStatuses": [{"name": "trainer", "state": {"running": {"startedAt": "2026-11-30T10:00:05Z"}}}],
            **(status or {})},
    }


def _jobset_pod(jobset: str, index: int, node: str, **kwargs) -> dict:
    """A JobSet's pod: owned by the child Job ``<jobset>-workers-<index>``."""
    child = f"{jobset}-workers-{index}"
    labels = {"batch.kubernetes.io/job-name": child, "job-name": child,
              "jobset.sigs.k8s.io/jobset-name": jobset, "jobset.sigs.k8s.io/replicatedjob-name": "workers",
              "jobset.sigs.k8s.io/job-index": str(index)}
    return _pod(f"{child}-0-x{index}k2p", node, labels, ("batch/v1", "Job", child), **kwargs)


JOBSET = ("jobset.x-k8s.io/v1alpha2", "JobSet", "nemo")
PYTORCHJOB = ("kubeflow.org/v1", "PyTorchJob", "llama")


def _kubeflow_pod(job: str, replica: str, node: str, **kwargs) -> dict:
    """A Kubeflow training job's pod (PyTorchJob, MPIJob…), owned by the job."""
    labels = {"training.kubeflow.org/job-name": job, "training.kubeflow.org/replica-type": replica,
              "training.kubeflow.org/replica-index": "0"}
    return _pod(f"{job}-{replica}-0", node, labels, PYTORCHJOB[:2] + (job,), **kwargs)


def _kueue_rows(workloads: list[dict], pods: list[dict]) -> dict[str, dict]:
    return _by_id(kueue_attempts(KueueSnapshot.of(workloads, pods), "k1", "wl.json"))


def test_jobset_pods_are_linked_through_their_child_jobs():
    rows = _kueue_rows([_workload("jobset-nemo-8tg9k", JOBSET, [])],
                       [_jobset_pod("nemo", 0, "gpu-node-001"), _jobset_pod("nemo", 1, "gpu-node-002")])
    row = rows["kueue/k1/ml/jobset-nemo-8tg9k/0"]
    assert row["nodes"] == ["gpu-node-001", "gpu-node-002"] and row["job_id"] == "ml/nemo"


def test_a_rayjobs_pods_are_linked_through_the_cluster_kuberay_made_for_it():
    """KubeRay runs a RayJob on a RayCluster it names ``<rayjob>-raycluster-<5 random>``:
    the pods' owner is that cluster, the Workload's the RayJob. A RayCluster Kueue admitted
    itself keeps its own pods, whatever its name."""
    ray = {"ray.io/cluster": "rl-ppo-raycluster-wsjd2", "ray.io/is-ray-node": "yes"}
    cluster = ("ray.io/v1", "RayCluster", "rl-ppo-raycluster-wsjd2")
    rows = _kueue_rows([_workload("rayjob-rl-ppo-n24b6", ("ray.io/v1", "RayJob", "rl-ppo"), [])],
                       [_pod("rl-ppo-raycluster-wsjd2-head-45vjb", "cpu-node-004", ray, cluster, gpus="0"),
                        _pod("rl-ppo-raycluster-wsjd2-gpu-worker-8kq2d", "gpu-node-051", ray, cluster)])
    assert rows["kueue/k1/ml/rayjob-rl-ppo-n24b6/0"]["nodes"] == ["cpu-node-004", "gpu-node-051"]
    own = ("ray.io/v1", "RayCluster", "serve-raycluster-ab12c")
    rows = _kueue_rows([_workload("raycluster-serve-raycluster-ab12c-x1", own, [])],
                       [_pod("serve-raycluster-ab12c-head-1", "cpu-node-001", {}, own, gpus="0")])
    assert rows["kueue/k1/ml/raycluster-serve-raycluster-ab12c-x1/0"]["nodes"] == ["cpu-node-001"]


def test_gpus_per_node_come_from_the_pods_gpu_limits():
    rows = _kueue_rows([_workload("jobset-nemo-8tg9k", JOBSET, [])],
                       [_jobset_pod("nemo", 0, "gpu-node-001"), _jobset_pod("nemo", 1, "gpu-node-002")])
    row = rows["kueue/k1/ml/jobset-nemo-8tg9k/0"]
    # One pod per node, a launcher (torchrun) for its 8 GPUs, as one Slurm task per node.
    assert row["ranks_per_node"] == 1 and row["gpus_per_node"] == 8
    shared = [_jobset_pod("nemo", i, "gpu-node-001", gpus="4") for i in (0, 1)]
    row = _kueue_rows([_workload("jobset-nemo-8tg9k", JOBSET, [])], shared)["kueue/k1/ml/jobset-nemo-8tg9k/0"]
    assert row["ranks_per_node"] == 2 and row["gpus_per_node"] == 8


def test_a_container_oom_killed_and_restarted_does_not_end_a_running_workload():
    """The kubelet restarted the OOM-killed container (restartCount 1, the kill in its
    ``lastState``) and the job trained on: the attempt is still running, and it completes
    when the workload finishes. A container whose current state is the kill ended it."""
    restarted = {"containerStatuses": [{
        "name": "trainer", "restartCount": 1, "state": {"running": {"startedAt": "2026-11-30T10:40:12Z"}},
        "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled", "startedAt": "2026-11-30T10:00:05Z",
                                     "finishedAt": "2026-11-30T10:40:01Z"}}}]}
    killed = {"phase": "Failed", "containerStatuses": [{
        "name": "trainer", "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled",
                                                    "startedAt": "2026-11-30T10:00:05Z",
                                                    "finishedAt": "2026-11-30T10:40:01Z"}}}]}
    pod = _kubeflow_pod("llama", "master", "gpu-node-001", status=restarted)
    running = _kueue_rows([_workload("pytorchjob-llama-1a2b3", PYTORCHJOB, [])], [pod])
    done = _kueue_rows([_workload("pytorchjob-llama-1a2b3", PYTORCHJOB, [
        _condition("Finished", "True", "2026-11-30T11:30:03Z", "Succeeded", "PyTorchJob llama is successfully completed.")
    ])], [pod])
    oom = _kueue_rows([_workload("pytorchjob-llama-1a2b3", PYTORCHJOB, [])],
                      [_kubeflow_pod("llama", "master", "gpu-node-001", status=killed)])
    key = "kueue/k1/ml/pytorchjob-llama-1a2b3/0"
    assert (running[key]["state"], done[key]["state"], oom[key]["state"]) == ("running", "completed", "out_of_memory")


def test_mpijob_launcher_pod_is_linked_by_its_kubeflow_label():
    # mpi-operator v2 runs the launcher as a batch Job of its own (`<name>-launcher`); the
    # workers are the MPIJob's own pods.
    launcher = _kubeflow_pod("llama", "launcher", "gpu-node-001")
    launcher["metadata"]["labels"] |= {"batch.kubernetes.io/job-name": "llama-launcher", "job-name": "llama-launcher"}
    launcher["metadata"]["ownerReferences"][0] |= {"apiVersion": "batch/v1", "kind": "Job", "name": "llama-launcher"}
    pods = [launcher, _kubeflow_pod("llama", "worker", "gpu-node-002")]
    rows = _kueue_rows([_workload("mpijob-llama-q7kqw", ("kubeflow.org/v2beta1", "MPIJob", "llama"), [])], pods)
    assert rows["kueue/k1/ml/mpijob-llama-q7kqw/0"]["nodes"] == ["gpu-node-001", "gpu-node-002"]


def test_a_deleted_workload_is_a_cancelled_attempt_ending_at_the_deletion():
    deleting = {"deletionTimestamp": "2026-11-30T11:48:10Z", "deletionGracePeriodSeconds": 0}
    pods = [_kubeflow_pod("llama", "master", "gpu-node-001", **deleting)]
    rows = _kueue_rows([_workload("pytorchjob-llama-q7kqw", PYTORCHJOB, [], **deleting)], pods)
    row = rows["kueue/k1/ml/pytorchjob-llama-q7kqw/0"]
    assert row["state"] == "cancelled" and row["raw_state"] == "Deleted"
    assert row["end_ts"] == _utc(2026, 11, 30, 11, 48, 10) and row["nodes"] == ["gpu-node-001"]


def test_a_finished_workload_deleted_later_keeps_its_end():
    finished = _condition("Finished", "True", "2026-11-30T11:00:00Z", "Succeeded", "Job finished successfully")
    rows = _kueue_rows([_workload("job-bert-9a1b3", ("batch/v1", "Job", "bert"), [finished],
                                  deletionTimestamp="2026-11-30T12:00:00Z")], [])
    row = rows["kueue/k1/ml/job-bert-9a1b3/0"]
    assert row["state"] == "completed" and row["end_ts"] == _utc(2026, 11, 30, 11)


def _evicted(reason: str, message: str, evictions: list[dict] | None = None) -> dict:
    """A Workload Kueue has just evicted: no longer admitted, Evicted True."""
    evicted = _condition("Evicted", "True", "2026-11-30T11:15:33Z", reason, message)
    wl = _workload("jobset-nemo-8tg9k", JOBSET, [evicted])
    wl["status"]["conditions"][:2] = [
        _condition("QuotaReserved", "False", "2026-11-30T11:15:33Z", "Pending", message),
        _condition("Admitted", "False", "2026-11-30T11:15:33Z", "NoReservation", "The workload has no reservation")]
    if evictions is not None:
        wl["status"]["schedulingStats"] = {"evictions": evictions}
    return wl


@pytest.mark.parametrize(("reason", "cause", "state"), [
    ("Preempted", "InClusterQueue", "preempted"),
    ("ClusterQueueStopped", "", "preempted"),
    ("PodsReadyTimeout", "WaitForRecovery", "failed"),
    ("NodeFailures", "", "node_fail"),
    ("InactiveWorkload", "", "cancelled"),
    ("Deactivated", "", "cancelled"),
    ("Deactivated", "MaximumExecutionTimeExceeded", "timeout"),
    ("InactiveWorkloadMaximumExecutionTimeExceeded", "", "timeout"),
    ("Deactivated", "RequeuingLimitExceeded", "failed"),
    # Kueue's integration tests' spelling (kubernetes-sigs/kueue, "DeactivatedDueTo<cause>").
    ("DeactivatedDueToMaximumExecutionTimeExceeded", "", "timeout"),
    ("DeactivatedDueToRequeuingLimitExceeded", "", "failed"),
    ("DeactivatedDueToAdmissionCheck", "", "preempted"),
])
def test_each_eviction_reason_has_its_state(reason, cause, state):
    wl = _evicted(reason, "The workload is deactivated", [{"reason": reason, "underlyingCause": cause, "count": 1}])
    row = _kueue_rows([wl], [])["kueue/k1/ml/jobset-nemo-8tg9k/0"]
    assert row["state"] == state and row["raw_state"] == f"Evicted:{reason}"
    assert row["end_ts"] == _utc(2026, 11, 30, 11, 15, 33)


KUBELET_PRESSURE = ("The node was low on resource: memory. Threshold quantity: 100Mi, available: 92344Ki. "
                    "Container trainer was using 494123008Ki, request is 400Gi, has larger consumption of memory. ")


def _failed(name: str, owner: tuple[str, str, str]) -> dict:
    return _workload(name, owner, [_condition("Finished", "True", "2026-11-30T11:33:12Z", "Failed",
                                              "PyTorchJob llama is failed because 1 Worker replica(s) failed.")])


def _disrupted(disruption: str, message: str, status: dict | None = None) -> dict:
    terminated = {"terminated": {"exitCode": 137, "reason": "Error", "finishedAt": "2026-11-30T11:33:11Z"}}
    return _kubeflow_pod("llama", "worker", "gpu-node-002", status={
        "phase": "Failed", "conditions": [{"type": "DisruptionTarget", "status": "True", "reason": disruption,
                                           "message": message, "lastTransitionTime": "2026-11-30T11:33:10Z"}],
        "containerStatuses": [{"name": "trainer", "state": terminated}], **(status or {})})


def test_a_kubelet_pressure_eviction_is_no_preemption():
    pod = _disrupted("TerminationByKubelet", KUBELET_PRESSURE, {"reason": "Evicted", "message": KUBELET_PRESSURE})
    row = _kueue_rows([_failed("pytorchjob-llama-q7kqw", PYTORCHJOB)], [pod])["kueue/k1/ml/pytorchjob-llama-q7kqw/0"]
    assert row["state"] == "failed" and row["exit_code"] == 137 and row["nodes"] == ["gpu-node-002"]


@pytest.mark.parametrize(("reason", "state"), [
    ("PreemptionByScheduler", "preempted"), ("EvictionByEvictionAPI", "preempted"),
    ("DeletionByTaintManager", "node_fail"), ("DeletionByPodGC", "node_fail"),
])
def test_pod_disruption_reasons_have_their_state(reason, state):
    pod = _disrupted(reason, "Taint manager: deleting due to NoExecute taint")
    row = _kueue_rows([_failed("pytorchjob-llama-q7kqw", PYTORCHJOB)], [pod])["kueue/k1/ml/pytorchjob-llama-q7kqw/0"]
    assert row["state"] == state


def test_kubernetes_says_why_in_evidence_the_rules_read():
    pods = [_kubeflow_pod("llama", "master", "gpu-node-001"),
            _disrupted("TerminationByKubelet", KUBELET_PRESSURE, {"reason": "Evicted", "message": KUBELET_PRESSURE})]
    timeout = _evicted("PodsReadyTimeout", "Exceeded the PodsReady timeout ml/jobset-nemo-8tg9k")
    snapshot = KueueSnapshot.of([_failed("pytorchjob-llama-q7kqw", PYTORCHJOB), timeout], pods)
    rows = kueue_evidence(snapshot, "k1", "wl.json")
    assert rows.columns == OBSERVATIONS.names and rows["input_id"].is_unique().all()
    by_attempt = {r["attempt_id"]: r for r in rows.filter(pl.col("program") != "kueue").iter_rows(named=True)}
    # The DisruptionTarget repeats the pod's status message: one line, on the pod's node.
    evicted = by_attempt["kueue/k1/ml/pytorchjob-llama-q7kqw/0"]
    assert rows.filter(pl.col("program") == "kubernetes").height == 1
    assert evicted["node"] == "gpu-node-002" and evicted["ts"] == _utc(2026, 11, 30, 11, 33, 10)
    assert "The node was low on resource: memory" in evicted["message"]
    told = rows.filter(pl.col("attempt_id") == "kueue/k1/ml/jobset-nemo-8tg9k/0").row(0, named=True)
    assert told["ts"] == _utc(2026, 11, 30, 11, 15, 33) and told["node"] is None
    causes = extract_lines(rows["message"].to_list(), load_rule_pack())["cause"].to_list()
    assert {"host.memory_pressure", "scheduler.pods_ready_timeout"} <= set(causes)


def test_evidence_of_an_earlier_snapshot_stays_in_the_lake(tmp_path):
    first, later = tmp_path / "first", tmp_path / "later"
    first.mkdir(), later.mkdir()
    pod = _disrupted("DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint")
    for folder, pods in ((first, [pod]), (later, [])):
        workloads = [_failed("pytorchjob-llama-q7kqw", PYTORCHJOB)]
        (folder / "workloads.json").write_text(json.dumps({"kind": "List", "items": workloads}))
        (folder / "pods.json").write_text(json.dumps({"kind": "List", "items": pods}))
    lake = Lake(tmp_path / "lake")
    for folder in (first, later, first):
        opts = KueueOptions(workloads_file=folder / "workloads.json", pods_file=folder / "pods.json")
        assert run_connector(lake, KueueConnector(opts, cluster="k1"), None).ok
    lines = lake.scan("observations", sources=["k8s"]).collect().sort("program")
    assert lines["program"].to_list() == ["kubernetes", "kueue"]
    assert "NoExecute taint" in lines["message"][0] and lines["node"][0] == "gpu-node-002"


def test_not_a_list_is_a_clear_error(tmp_path):
    bad = tmp_path / "wl.json"
    bad.write_text(json.dumps({"items": "nope"}))
    with pytest.raises(ConnectorError, match="not a Kubernetes list"):
        next(KueueConnector(KueueOptions(workloads_file=bad), cluster="k1").fetch(None))


# --- pod logs -------------------------------------------------------------------------

# Lines as `kubectl logs --timestamps` prints them; the texts are real PyTorch/NCCL lines:
# https://github.com/pytorch/pytorch/issues/74235 (watchdog) and
# https://github.com/NVIDIA/nccl/issues/2241 (NCCL WARN).
LOG = (
    "2026-11-30T15:32:38.123456789Z [rank3]:[E1130 15:32:38.123 ProcessGroupNCCL.cpp:1575] "
    "[PG 0 Rank 3] Process group watchdog thread terminated with exception\n"
    "continuation line without a stamp\n"
    "2026-11-30T15:32:39.000000001Z NCCL WARN NET/IB : Got completion from peer with error 12\n"
)


@pytest.fixture
def kube_api():
    """A stand-in Kubernetes API on 127.0.0.1: the pod object and its log (text/plain)."""
    seen: list[dict] = []

    def answer(path: str, query: dict, headers: dict) -> tuple[int, dict, bytes]:
        seen.append({"path": path, "query": query, "auth": headers.get("authorization")})
        if headers.get("authorization") != "Bearer kube-secret-token":
            return 401, {"Content-Type": "application/json"}, json.dumps({
                "kind": "Status", "apiVersion": "v1", "status": "Failure",
                "message": "Unauthorized", "reason": "Unauthorized", "code": 401}).encode()
        if path == "/api/v1/namespaces/ml/pods/train-llama-0-x7k2p/log":
            return 200, {"Content-Type": "text/plain"}, LOG.encode()
        if path == "/api/v1/namespaces/ml/pods/train-llama-0-x7k2p":
            return 200, {"Content-Type": "application/json"}, json.dumps(
                {"kind": "Pod", "spec": {"nodeName": "gpu-node-001"}}).encode()
        return 404, {"Content-Type": "application/json"}, b'{"kind":"Status","code":404}'

    with serve(answer) as url:
        yield url, seen


def test_pod_log_lines_become_observations(kube_api, monkeypatch, tmp_path):
    url, seen = kube_api
    monkeypatch.setenv("KUBE_TOKEN", "kube-secret-token")
    opts = PodLogsOptions(url=url, namespace="ml", pod="train-llama-0-x7k2p", container="trainer",
                          previous=True, attempt_id="kueue/k1/ml/job-train-llama-5d8f2/1")
    batches = list(PodLogsConnector(opts, cluster="k1").fetch(None))
    obs, rejects = batches
    assert obs.source == "k8s" and obs.rows.columns == OBSERVATIONS.names
    assert obs.rows["ts"].to_list() == [_utc(2026, 11, 30, 15, 32, 38, 123456), _utc(2026, 11, 30, 15, 32, 39)]
    assert obs.rows["message"][1] == "NCCL WARN NET/IB : Got completion from peer with error 12"
    assert obs.rows["node"].unique().to_list() == ["gpu-node-001"]
    assert obs.rows["program"][0] == "trainer" and obs.rows["seq"].to_list() == [1, 3]
    # The container's own prefixes are peeled as a kubectl file's are: PyTorch's [rank3]:
    # and its glog stamp (the kubelet's stamp is the time).
    assert obs.rows["rank"][0] == 3
    assert obs.rows["message"][0] == "[PG 0 Rank 3] Process group watchdog thread terminated with exception"
    assert obs.rows["origin"][1].endswith(":3") and "previous=true" in obs.rows["origin"][1]
    assert rejects.table == "rejects" and rejects.rows.columns == REJECTS.names
    assert rejects.rows["raw"].to_list() == ["continuation line without a stamp"]
    log_request = seen[-1]
    assert log_request["query"] == {"timestamps": "true", "container": "trainer", "previous": "true"}
    lake = Lake(tmp_path / "lake")
    lake.land("observations", obs.rows, cluster="k1", input_id=obs.input_id, source="k8s")
    lake.land("rejects", rejects.rows, cluster="k1", input_id=rejects.input_id)
    assert lake.scan("observations", sources=["k8s"]).collect().height == 2


def test_pod_log_window_keeps_lines_inside_it(kube_api, monkeypatch):
    url, _ = kube_api
    monkeypatch.setenv("KUBE_TOKEN", "kube-secret-token")
    opts = PodLogsOptions(url=url, namespace="ml", pod="train-llama-0-x7k2p", node="gpu-node-001")
    window = FetchWindow(start=_utc(2026, 11, 30, 15, 32, 39), end=_utc(2026, 11, 30, 16))
    obs = next(PodLogsConnector(opts, cluster="k1").fetch(window))
    assert obs.rows.height == 1 and obs.rows["message"][0].startswith("NCCL WARN")


def test_wrong_token_is_reported_without_the_token(kube_api, monkeypatch, caplog):
    url, seen = kube_api
    monkeypatch.setenv("KUBE_TOKEN", "not-the-right-token-123")
    caplog.set_level(logging.DEBUG)
    opts = PodLogsOptions(url=url, namespace="ml", pod="train-llama-0-x7k2p", node="n")
    with pytest.raises(ConnectorError, match="HTTP 401.*token_env") as err:
        list(PodLogsConnector(opts, cluster="k1").fetch(None))
    assert seen[0]["auth"] == "Bearer not-the-right-token-123"
    assert "not-the-right-token-123" not in str(err.value)
    assert all("not-the-right-token-123" not in r.getMessage() for r in caplog.records)
