"""Kubernetes connectors: Kueue workloads → attempts, pod logs → observations.

:class:`KueueConnector` reads Kueue ``Workload`` objects (``kubectl get workloads -A -o
json``, API ``kueue.x-k8s.io/v1beta1``) and the pods of their jobs (``kubectl get pods -A
-o json``), from files or by running ``kubectl``. A Workload is a snapshot: its conditions
(QuotaReserved, Admitted, PodsReady, Evicted, Preempted, Finished) hold only the latest
transition of each type, ``status.schedulingStats.evictions`` counts evictions by reason and
``status.requeueState.count`` counts requeues. Every eviction ended one attempt (its state
from the eviction's reason: :data:`EVICTED_STATES`, :data:`DEACTIVATED_STATES`), so a
workload evicted *n* times and admitted again has *n* + 1 attempts (``attempt_index`` per
admission); only the latest eviction and the current admission carry times. A pod belongs to
the Workload of the job at the top of its owner chain: a JobSet's pods (owned by its child
Jobs) by their ``jobset.sigs.k8s.io/jobset-name`` label, a Kubeflow job's (PyTorchJob,
MPIJob, whose launcher is a Job of its own) by ``training.kubeflow.org/job-name``, a batch
Job's by its ``job-name`` label, a RayJob's (owned by the RayCluster KubeRay made for it,
:data:`RAY_JOB_CLUSTER`) by that cluster's name, anything else by its owner reference. Pod status then
refines the current attempt: a container ``OOMKilled`` → ``out_of_memory`` (of a workload
still running, only a container whose current state is the kill: one the kubelet restarted
ran on); a
``DisruptionTarget`` condition → :data:`DISRUPTION_STATES` (``node_fail`` when the taint
manager or pod GC deleted the pod, ``preempted`` for the scheduler's preemption or a drain);
the failing container's exit code, the signal (exit code − 128 above 128) and the
nodes (``spec.nodeName``), the pods per node (``ranks_per_node``: each pod is one task, a
launcher for its GPUs) and the GPUs their containers ask for (``gpus_per_node``). A
Workload with a ``metadata.deletionTimestamp`` (its job was deleted) that has not finished
is a ``cancelled`` attempt ending at that time. What the conditions and pods say about why
lands as observations (:func:`kueue_evidence`).

:class:`PodLogsConnector` reads ``/api/v1/namespaces/{ns}/pods/{pod}/log?timestamps=true``
from the Kubernetes API (bearer token from the environment) and turns each
``2026-11-30T15:32:38.123456789Z text`` line into an observation (source ``k8s``); a line
without that stamp goes to ``rejects``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import ClassVar

import polars as pl
from pydantic import Field

from ingest.connectors.base import Batch, Connector, ConnectorError, ConnectorOptions, FetchWindow
from ingest.connectors.http import HttpClient
from ingest.files import kubectl
from ingest.files.common import ParseContext
from ingest.schema import ATTEMPTS, OBSERVATIONS, with_later_columns

_COND = pl.Struct({
    "type": pl.String, "status": pl.String, "reason": pl.String, "message": pl.String,
    "lastTransitionTime": pl.String,
})
_OWNERS = pl.List(pl.Struct({"kind": pl.String, "name": pl.String}))
WORKLOAD_SCHEMA = {
    "metadata": pl.Struct({
        "name": pl.String, "namespace": pl.String, "uid": pl.String,
        "creationTimestamp": pl.String, "deletionTimestamp": pl.String, "ownerReferences": _OWNERS,
    }),
    "spec": pl.Struct({"queueName": pl.String}),
    "status": pl.Struct({
        "conditions": pl.List(_COND),
        "requeueState": pl.Struct({"count": pl.Int64, "requeueAt": pl.String}),
        "schedulingStats": pl.Struct({"evictions": pl.List(pl.Struct({
            "reason": pl.String, "underlyingCause": pl.String, "count": pl.Int64,
        }))}),
    }),
}
"""The parts of a Workload this connector reads (everything else is ignored)."""

GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")
"""Extended resources a container asks GPUs by (device plugins' names)."""

_TERMINATED = pl.Struct({"terminated": pl.Struct({
    "reason": pl.String, "exitCode": pl.Int64, "finishedAt": pl.String,
})})
POD_SCHEMA = {
    "metadata": pl.Struct({
        "name": pl.String, "namespace": pl.String,
        "labels": pl.Struct({
            "batch.kubernetes.io/job-name": pl.String, "job-name": pl.String,
            "jobset.sigs.k8s.io/jobset-name": pl.String, "training.kubeflow.org/job-name": pl.String,
        }),
        "ownerReferences": _OWNERS,
    }),
    "spec": pl.Struct({"nodeName": pl.String, "containers": pl.List(pl.Struct({"resources": pl.Struct({
        kind: pl.Struct({gpu: pl.String for gpu in GPU_RESOURCES}) for kind in ("limits", "requests")
    })}))}),
    "status": pl.Struct({
        "reason": pl.String, "message": pl.String,
        "conditions": pl.List(_COND),
        "containerStatuses": pl.List(pl.Struct({
            "name": pl.String, "state": _TERMINATED, "lastState": _TERMINATED,
        })),
    }),
}

FINISHED_STATES = {"Succeeded": "completed", "Failed": "failed"}
"""``Finished`` condition reason → state; other reasons (AdmissionChecksRejected…) fail."""

EVICTED_STATES = {
    "Preempted": "preempted", "AdmissionCheck": "preempted",
    "ClusterQueueStopped": "preempted", "LocalQueueStopped": "preempted",
    "PodsReadyTimeout": "failed", "NodeFailures": "node_fail",
}
"""Kueue's ``Evicted`` reasons (and ``schedulingStats.evictions[].reason``) → state; others
are ``preempted``. Preemption, a rejected admission check and a stopped queue take the quota
back (``preempted``, as a Slurm requeue); ``PodsReadyTimeout`` means the pods did not start or
recover in time (``failed``, the pods' and nodes' logs say why); ``NodeFailures`` evicts from
a failed node. A deactivated Workload is :data:`DEACTIVATED_STATES`."""

DEACTIVATED_STATES = {
    "MaximumExecutionTimeExceeded": "timeout", "RequeuingLimitExceeded": "failed", "AdmissionCheck": "preempted",
}
"""Why Kueue deactivated a Workload (``spec.active: false``; Evicted reason ``Deactivated``
with it as ``underlyingCause``, ``DeactivatedDueTo`` followed by it, or ``InactiveWorkload``
followed by it, as Kueue's releases have spelled it) → state; a Workload deactivated for no
such reason was deactivated by a user: ``cancelled``."""

DISRUPTION_STATES = {
    "DeletionByTaintManager": "node_fail", "DeletionByPodGC": "node_fail",
    "PreemptionByScheduler": "preempted", "PreemptionByKubeScheduler": "preempted",
    "EvictionByEvictionAPI": "preempted",
}
"""Pod ``DisruptionTarget`` reasons → state: the taint manager (a ``NoExecute`` taint such as
an unreachable node) or the pod garbage collector (a deleted node) → ``node_fail``; the
scheduler's preemption or an API eviction (``kubectl drain``) → ``preempted``. The kubelet's
own ``TerminationByKubelet`` (node-pressure eviction, node shutdown) changes no state: its
message lands as evidence."""


class KueueOptions(ConnectorOptions):
    """Where the Workload and pod JSON come from: files, or ``kubectl`` when none is given."""

    workloads_file: Path | None = None
    pods_file: Path | None = None
    kubectl: str = "kubectl"
    context: str | None = None
    namespace: str | None = Field(None, description="all namespaces when unset")


class KueueConnector(Connector):
    """Attempts of Kueue workloads, refined by their pods' status."""

    name: ClassVar[str] = "kueue"
    Options: ClassVar[type[ConnectorOptions]] = KueueOptions
    options: KueueOptions

    def fetch(self, window: FetchWindow | None) -> Iterator[Batch]:
        """Yield one ``attempts`` batch for every workload in the snapshot, then an
        ``observations`` batch of its evidence (a snapshot has no history to cut by
        ``window``)."""
        opts = self.options
        workloads, wl_origin = self._load("workloads", opts.workloads_file)
        if opts.pods_file is not None or opts.workloads_file is None:
            pods, _ = self._load("pods", opts.pods_file)
        else:
            pods = []
        snapshot = KueueSnapshot.of(workloads, pods)
        rows = kueue_attempts(snapshot, self.cluster, wl_origin)
        yield Batch(table="attempts", rows=rows, cluster=self.cluster, input_id=wl_origin,
                    fetched=len(workloads))
        evidence = kueue_evidence(snapshot, self.cluster, wl_origin)
        if evidence.height:
            # Each text is an input of its own (the object, condition and time name it), so
            # a later snapshot that no longer shows it does not take it out of the lake.
            yield Batch(table="observations", rows=evidence, cluster=self.cluster, source="k8s",
                        input_id=f"kueue:{wl_origin}", input_ids=evidence["input_id"].unique().sort().to_list())

    def _load(self, kind: str, path: Path | None) -> tuple[list[dict], str]:
        opts = self.options
        if path is not None:
            try:
                doc = json.loads(Path(path).read_text())
            except (OSError, json.JSONDecodeError) as exc:
                raise ConnectorError(f"kueue: cannot read {kind} JSON {path}: {exc} — "
                                     f"write it with `kubectl get {kind} -A -o json > {path}`") from None
            return _items(doc, str(path)), str(path)
        if shutil.which(opts.kubectl) is None:
            raise ConnectorError(f"kueue: no {kind}_file given and {opts.kubectl!r} is not on PATH "
                                 f"— set {kind}_file or install kubectl")
        resource = "workloads.kueue.x-k8s.io" if kind == "workloads" else "pods"
        cmd = [opts.kubectl, "get", resource, "-o", "json"]
        cmd += ["-n", opts.namespace] if opts.namespace else ["-A"]
        cmd += ["--context", opts.context] if opts.context else []
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise ConnectorError(f"kueue: `{' '.join(cmd)}` failed: {done.stderr.strip()[:300]}")
        try:
            doc = json.loads(done.stdout)
        except json.JSONDecodeError as exc:
            raise ConnectorError(f"kueue: `{' '.join(cmd)}` did not print JSON: {exc}") from None
        return _items(doc, " ".join(cmd)), "kubectl:" + " ".join(cmd[1:])


def _items(doc: object, where: str) -> list[dict]:
    if isinstance(doc, dict) and isinstance(doc.get("items"), list):
        return doc["items"]
    if isinstance(doc, dict) and doc.get("kind") not in (None, "List") and "metadata" in doc:
        return [doc]
    raise ConnectorError(f"kueue: {where} is not a Kubernetes list (no 'items') — use `-o json`")


def _cond(conditions: pl.Expr, ctype: str) -> pl.Expr:
    return conditions.list.eval(pl.element().filter(pl.element().struct.field("type") == ctype)).list.first()


def _ts(text: pl.Expr) -> pl.Expr:
    return text.str.to_datetime("%Y-%m-%dT%H:%M:%S%.f%#z", time_unit="us", time_zone="UTC", strict=False)


@dataclass(frozen=True)
class KueueSnapshot:
    """A snapshot's Workload and pod objects as frames (:func:`_workload_frame`,
    :func:`_pod_frame`), built once for both its attempts and its evidence."""

    workloads: pl.DataFrame
    pods: pl.DataFrame

    @classmethod
    def of(cls, workloads: list[dict], pods: list[dict]) -> KueueSnapshot:
        """The frames of the objects ``kubectl get … -o json`` listed."""
        wl = _workload_frame(workloads)
        return cls(wl, _ray_job_pods(_pod_frame(pods), wl))


RAY_JOB_CLUSTER = r"^(.+)-raycluster-[a-z0-9]{5}$"
"""The RayCluster KubeRay creates for a RayJob: ``<rayjob>-raycluster-<5 random characters>``
(its ``GenerateRayClusterName``); group 1 the RayJob."""


def _ray_job_pods(pods: pl.DataFrame, wl: pl.DataFrame) -> pl.DataFrame:
    """``pods`` with the pods of a RayJob's cluster given to the RayJob: their owner is the
    RayCluster (:data:`RAY_JOB_CLUSTER`), the Workload's is the RayJob. A RayCluster Kueue
    admitted itself keeps its pods (its Workload's owner is the cluster)."""
    owners = wl.select("namespace", owner=pl.coalesce("owner", "name")).unique()
    ray_job = pl.col("owner").str.extract(RAY_JOB_CLUSTER, 1)
    return (
        pods.with_columns(ray_job.alias("_ray_job"))
        .join(owners.with_columns(_known=pl.lit(True)), on=["namespace", "owner"], how="left", maintain_order="left")
        .join(owners.rename({"owner": "_ray_job"}).with_columns(_ray_owner=pl.lit(True)), on=["namespace", "_ray_job"],
              how="left", maintain_order="left")
        .with_columns(pl.when(pl.col("_known").is_null() & pl.col("_ray_owner").fill_null(False))
                      .then(pl.col("_ray_job")).otherwise(pl.col("owner")).alias("owner"))
        .drop("_ray_job", "_known", "_ray_owner")
    )


def kueue_attempts(snapshot: KueueSnapshot, cluster: str, origin: str) -> pl.DataFrame:
    """A snapshot's Workloads and pods → rows with the ``attempts`` columns (see module docstring)."""
    wl = snapshot.workloads
    if wl.is_empty():
        return pl.from_arrow(ATTEMPTS.empty_table())
    evicted = _evicted_attempts(wl)
    current = wl.filter(pl.col("current")).select(
        "name", "namespace", "owner", "job_id", "queue", "submit_ts",
        attempt_index=pl.col("n_evicted"),
        start_ts=pl.col("admitted_ts"),
        # A Workload being deleted (its job deleted with `kubectl delete`, the garbage
        # collector following the owner) keeps its conditions until Kueue's finalizer lets it
        # go: an admitted one is the running attempt, cancelled at its deletionTimestamp.
        end_ts=pl.when(pl.col("finished")).then(pl.col("finished_ts")).otherwise(pl.col("deleted_ts")),
        raw_state=pl.when(pl.col("finished"))
        .then(pl.concat_str(pl.lit("Finished:"), pl.col("finished_reason").fill_null("")))
        .when(pl.col("deleted_ts").is_not_null()).then(pl.lit("Deleted"))
        .otherwise(pl.lit("Admitted")),
        state=pl.when(pl.col("finished"))
        .then(pl.col("finished_reason").replace_strict(FINISHED_STATES, default="failed"))
        .when(pl.col("deleted_ts").is_not_null()).then(pl.lit("cancelled"))
        .otherwise(pl.lit("running")),
    )
    attempts = pl.concat([evicted, current], how="diagonal_relaxed")
    attempts = _merge_pods(attempts, _pod_summary(snapshot.pods), wl)
    return attempts.select(
        attempt_id=_attempt_id(cluster, pl.col("attempt_index")),
        scheduler=pl.lit("kueue"),
        job_id="job_id",
        job_name=pl.coalesce(pl.col("owner"), pl.col("name")),
        user=pl.lit(None, dtype=pl.String),
        partition="queue",
        attempt_index=pl.col("attempt_index").cast(pl.Int32),
        submit_ts="submit_ts", start_ts="start_ts", end_ts="end_ts",
        raw_state="raw_state", state="state",
        exit_code=pl.col("exit_code").cast(pl.Int32),
        signal=pl.when(pl.col("exit_code") > 128).then(pl.col("exit_code") - 128).cast(pl.Int32),
        nodes=pl.col("nodes").fill_null(pl.lit([], dtype=pl.List(pl.String))),
        n_nodes=pl.col("nodes").list.len().fill_null(0).cast(pl.Int32),
        ranks_per_node=pl.col("ranks_per_node").cast(pl.Int32),
        gpus_per_node=pl.col("gpus_per_node").cast(pl.Int32),
        origin=pl.concat_str(pl.lit(f"{origin}#"), pl.col("namespace"), pl.lit("/"), pl.col("name")),
    ).pipe(with_later_columns, "attempts").sort("attempt_id")


def _attempt_id(cluster: str, index: pl.Expr) -> pl.Expr:
    """``kueue/<cluster>/<namespace>/<workload>/<index>``: the id of a Workload's attempt."""
    return pl.concat_str(pl.lit(f"kueue/{cluster}/"), pl.col("namespace"), pl.lit("/"), pl.col("name"), pl.lit("/"),
                         index.cast(pl.String))


def _workload_frame(workloads: list[dict]) -> pl.DataFrame:
    """One row per Workload: its owner, times, latest conditions and evictions counted."""
    wl = pl.from_dicts(workloads, schema=WORKLOAD_SCHEMA).select(
        name=pl.col("metadata").struct.field("name"),
        namespace=pl.col("metadata").struct.field("namespace"),
        owner=pl.col("metadata").struct.field("ownerReferences").list.first().struct.field("name"),
        submit_ts=_ts(pl.col("metadata").struct.field("creationTimestamp")),
        deleted_ts=_ts(pl.col("metadata").struct.field("deletionTimestamp")),
        queue=pl.col("spec").struct.field("queueName"),
        conditions=pl.col("status").struct.field("conditions"),
        requeues=pl.col("status").struct.field("requeueState").struct.field("count"),
        evictions=pl.col("status").struct.field("schedulingStats").struct.field("evictions"),
    ).with_columns(
        [_cond(pl.col("conditions"), t).alias(t) for t in ("Admitted", "Evicted", "Finished")]
    ).with_columns(
        admitted=pl.col("Admitted").struct.field("status") == "True",
        admitted_ts=_ts(pl.col("Admitted").struct.field("lastTransitionTime")),
        evicted_ts=_ts(pl.col("Evicted").struct.field("lastTransitionTime")),
        evicted_reason=pl.col("Evicted").struct.field("reason"),
        evicted_now=(pl.col("Evicted").struct.field("status") == "True").fill_null(False),
        finished=pl.col("Finished").struct.field("status") == "True",
        finished_ts=_ts(pl.col("Finished").struct.field("lastTransitionTime")),
        finished_reason=pl.col("Finished").struct.field("reason"),
        n_evicted=pl.coalesce(
            pl.col("evictions").list.eval(pl.element().struct.field("count")).list.sum().replace(0, None),
            pl.col("requeues"),
            pl.when(pl.col("Evicted").struct.field("status") == "True").then(pl.lit(1, pl.Int64)),
            pl.lit(0, pl.Int64),
        ),
        job_id=pl.concat_str(pl.col("namespace"), pl.lit("/"), pl.coalesce(pl.col("owner"), pl.col("name"))),
    )
    wl = wl.with_columns(current=(pl.col("admitted") | pl.col("finished")).fill_null(False))
    return wl.with_columns(
        latest=pl.when(pl.col("current")).then(pl.col("n_evicted")).otherwise(pl.col("n_evicted") - 1),
    )


def _evicted_attempts(wl: pl.DataFrame) -> pl.DataFrame:
    """One row per eviction, ``attempt_index`` 0…n−1; the latest carries the Evicted time,
    or, once the workload was admitted again, that admission's time as its end (the eviction
    came before it).

    Evictions are counted by reason, not ordered, so earlier ones keep only their reason; the
    Evicted condition's reason is placed last (it is the most recent eviction).
    """
    per_reason = wl.select(
        "name", "namespace", "owner", "job_id", "queue", "submit_ts", "n_evicted",
        "evicted_reason", "evicted_ts", "evicted_now", "current", "admitted_ts",
        ev=pl.when(pl.col("evictions").list.len() > 0).then(pl.col("evictions")).otherwise(
            pl.concat_list(pl.struct(
                reason=pl.col("evicted_reason"), underlyingCause=pl.lit(None, pl.String),
                count=pl.col("n_evicted"),
            ))
        ),
    ).filter(pl.col("n_evicted") > 0).explode("ev").unnest("ev")
    rows = per_reason.with_columns(
        rep=pl.int_ranges(0, pl.col("count").fill_null(0)),
        last_reason=(pl.col("reason") == pl.col("evicted_reason")).fill_null(False),
    ).explode("rep").drop_nulls("rep")
    rows = rows.sort(["namespace", "name", "last_reason"], maintain_order=True).with_columns(
        attempt_index=pl.int_range(pl.len()).over(["namespace", "name"]).cast(pl.Int64),
    )
    # Once readmitted, the Evicted condition turns False and its time becomes the time of
    # readmission ("Previously: …"): only a condition still True dates the latest eviction.
    # Readmitted, the workload was evicted by then: the current admission bounds the latest
    # eviction's end (an earlier snapshot that saw the eviction itself keeps its exact time,
    # :func:`ingest.states.merge_attempts`).
    latest = pl.col("attempt_index") == pl.col("n_evicted") - 1
    return rows.select(
        "name", "namespace", "owner", "job_id", "queue", "submit_ts", "attempt_index",
        start_ts=pl.lit(None, dtype=pl.Datetime("us", "UTC")),
        end_ts=pl.when(latest & pl.col("evicted_now")).then(pl.col("evicted_ts"))
        .when(latest & pl.col("current")).then(pl.col("admitted_ts")),
        raw_state=pl.concat_str(pl.lit("Evicted:"), pl.col("reason").fill_null("")),
        state=_eviction_state(pl.col("reason"), pl.col("underlyingCause")),
    )


def _eviction_state(reason: pl.Expr, cause: pl.Expr) -> pl.Expr:
    """An eviction's state from its reason and underlying cause (:data:`EVICTED_STATES`,
    :data:`DEACTIVATED_STATES`)."""
    deactivated = (
        reason.str.starts_with("InactiveWorkload") | reason.str.starts_with("DeactivatedDueTo") | (reason == "Deactivated")
    )
    why = pl.when(cause.is_in(list(DEACTIVATED_STATES))).then(cause).otherwise(
        reason.str.strip_prefix("InactiveWorkload").str.strip_prefix("DeactivatedDueTo"))
    return (
        pl.when(deactivated).then(why.replace_strict(DEACTIVATED_STATES, default="cancelled"))
        .otherwise(reason.replace_strict(EVICTED_STATES, default="preempted"))
    )


def _pod_frame(pods: list[dict]) -> pl.DataFrame:
    """One row per pod: its namespace, the job its Workload belongs to, node and status."""
    labels = pl.col("metadata").struct.field("labels")
    return pl.from_dicts(pods, schema=POD_SCHEMA).select(
        namespace=pl.col("metadata").struct.field("namespace"),
        pod=pl.col("metadata").struct.field("name"),
        # The Workload belongs to the top of the owner chain, so the labels that name it come
        # first: a JobSet's pods belong to its child Jobs (their job-name labels and owner
        # reference name those), a Kubeflow job's to the job itself.
        owner=pl.coalesce(
            labels.struct.field("jobset.sigs.k8s.io/jobset-name"),
            labels.struct.field("training.kubeflow.org/job-name"),
            labels.struct.field("batch.kubernetes.io/job-name"), labels.struct.field("job-name"),
            pl.col("metadata").struct.field("ownerReferences").list.first().struct.field("name"),
        ),
        node=pl.col("spec").struct.field("nodeName"),
        # Extended resources are never overcommitted: requests equal limits, and either
        # may be the one written.
        gpus=pl.col("spec").struct.field("containers").list.eval(pl.coalesce(
            pl.sum_horizontal(pl.element().struct.field("resources").struct.field(kind).struct.field(gpu)
                              .cast(pl.Int64, strict=False) for gpu in GPU_RESOURCES)
            .replace(0, None) for kind in ("limits", "requests")
        )).list.sum(),
        pod_reason=pl.col("status").struct.field("reason"),
        pod_message=pl.col("status").struct.field("message"),
        disruption=_cond(pl.col("status").struct.field("conditions"), "DisruptionTarget"),
        containers=pl.col("status").struct.field("containerStatuses"),
    )


def _pod_summary(frame: pl.DataFrame) -> pl.DataFrame:
    """Per (namespace, owner job) of the pods (:func:`_pod_frame`): nodes, OOM, first
    failing exit code, disruption reason."""
    schema = {"namespace": pl.String, "owner": pl.String, "nodes": pl.List(pl.String),
              "oom": pl.Boolean, "oom_now": pl.Boolean, "exit_code": pl.Int64, "disruption": pl.String,
              "ranks_per_node": pl.Int64, "gpus_per_node": pl.Int64}
    if frame.is_empty():
        return pl.DataFrame(schema=schema)
    containers = frame.select("namespace", "owner", "containers").explode("containers")
    # A container's current termination, and the one before its restart (``lastState``).
    terminated = pl.concat([
        containers.select("namespace", "owner", term=pl.col("containers").struct.field(field).struct.field("terminated"),
                          current=pl.lit(field == "state"))
        for field in ("state", "lastState")
    ]).unnest("term").drop_nulls("exitCode")
    failing = terminated.filter(pl.col("exitCode") != 0).sort("finishedAt", nulls_last=True)
    codes = failing.group_by("namespace", "owner", maintain_order=True).agg(
        exit_code=pl.col("exitCode").first(),
        oom=(pl.col("reason") == "OOMKilled").any(),
        oom_now=((pl.col("reason") == "OOMKilled") & pl.col("current")).any(),
    )
    per_job = frame.group_by("namespace", "owner").agg(
        nodes=pl.col("node").drop_nulls().unique().sort(),
        disruption=pl.col("disruption").filter(pl.col("disruption").struct.field("status") == "True")
        .struct.field("reason").first(),
    )
    # Each pod is one task on its node (a torchrun or MPI launcher starts the processes of
    # its GPUs), as a Slurm task per node is.
    per_node = frame.drop_nulls("node").group_by("namespace", "owner", "node").agg(
        ranks_per_node=pl.len(), gpus_per_node=pl.col("gpus").sum().replace(0, None),
    ).group_by("namespace", "owner").agg(pl.col("ranks_per_node").max(), pl.col("gpus_per_node").max())
    return per_job.join(codes, on=["namespace", "owner"], how="left") \
        .join(per_node, on=["namespace", "owner"], how="left").select(list(schema))


def _merge_pods(attempts: pl.DataFrame, pods: pl.DataFrame, wl: pl.DataFrame) -> pl.DataFrame:
    """Pod facts belong to the latest attempt of their workload (earlier pods are gone)."""
    latest = wl.select("namespace", "name", attempt_index="latest", is_latest=pl.lit(True))
    merged = attempts.with_columns(join_owner=pl.coalesce(pl.col("owner"), pl.col("name"))).join(
        latest, on=["namespace", "name", "attempt_index"], how="left"
    ).join(
        pods.rename({"owner": "join_owner"}), on=["namespace", "join_owner"], how="left"
    )
    mine = pl.col("is_latest").fill_null(False)
    # A running workload's container OOM-killed and restarted (``lastState``) is no end: only
    # one whose current state is the OOM kill ended the attempt before Kueue saw it.
    ended_by_oom = (
        pl.when(pl.col("state") == "running").then(pl.col("oom_now")).otherwise(pl.col("oom")).fill_null(False)
        & pl.col("state").is_in(["failed", "running", "preempted"])
    )
    disrupted = pl.col("disruption").replace_strict(DISRUPTION_STATES, default=None)
    state = (
        pl.when(mine & ended_by_oom).then(pl.lit("out_of_memory"))
        .when(mine & (disrupted == "node_fail").fill_null(False)).then(pl.lit("node_fail"))
        .when(mine & (disrupted == "preempted").fill_null(False)
              & ~pl.col("state").is_in(["completed", "cancelled"])).then(pl.lit("preempted"))
        .otherwise(pl.col("state"))
    )
    return merged.with_columns(
        state=state,
        exit_code=pl.when(mine).then(pl.col("exit_code")),
        nodes=pl.when(mine).then(pl.col("nodes")),
        ranks_per_node=pl.when(mine).then(pl.col("ranks_per_node")),
        gpus_per_node=pl.when(mine).then(pl.col("gpus_per_node")),
    )


EVIDENCE_CONDITIONS = ("Evicted", "Preempted", "DeactivationTarget", "Finished")
"""Workload condition types whose message, while the condition is True, says why the
latest attempt ended (``Exceeded the PodsReady timeout …``, ``Preempted to accommodate a
workload …``)."""


def kueue_evidence(snapshot: KueueSnapshot, cluster: str, origin: str) -> pl.DataFrame:
    """What Kubernetes says about why an attempt ended → rows with the ``observations``
    columns (source ``k8s``), for the rules to read as they read a log line.

    The messages of the Workload's :data:`EVIDENCE_CONDITIONS` that are True, stamped with
    their transition time; a pod's ``status.message`` (the kubelet's node-pressure eviction:
    ``The node was low on resource: memory…``) and its ``DisruptionTarget`` message, stamped
    with the disruption's time (else its container's end) and placed on the pod's node. All
    belong to the workload's latest attempt. Each row is an input of its own
    (``kueue:<cluster>/<namespace>/<object>/<what>@<time>``), so the same text seen in
    several snapshots lands once and a snapshot that no longer shows it removes nothing.
    """
    empty = pl.from_arrow(OBSERVATIONS.empty_table())
    frame = snapshot.workloads
    if frame.is_empty():
        return empty
    wl = frame.select(
        "namespace", "name", "latest", join_owner=pl.coalesce(pl.col("owner"), pl.col("name")),
    ).filter(pl.col("latest") >= 0)
    conditions = frame.select("namespace", "name", "conditions").explode("conditions") \
        .unnest("conditions").filter(
            pl.col("type").is_in(EVIDENCE_CONDITIONS) & (pl.col("status") == "True")
            & (pl.col("message").fill_null("") != "")
        ).select(
            "namespace", "name", node=pl.lit(None, dtype=pl.String), program=pl.lit("kueue"),
            ts=_ts(pl.col("lastTransitionTime")),
            what=pl.concat_str(pl.lit("workload/"), pl.col("name"), pl.lit("/"), pl.col("type")),
            message=pl.concat_str(pl.lit("Workload "), pl.col("namespace"), pl.lit("/"), pl.col("name"),
                                  pl.lit(" "), pl.col("type"), pl.lit(" "), pl.col("reason").fill_null(""),
                                  pl.lit(": "), pl.col("message")),
        )
    lines = [conditions]
    if not snapshot.pods.is_empty():
        ended = pl.col("containers").list.eval(
            pl.element().struct.field("state").struct.field("terminated").struct.field("finishedAt")
        ).list.max()
        frame = snapshot.pods.join(wl, left_on=["namespace", "owner"], right_on=["namespace", "join_owner"]) \
            .with_columns(ts=pl.coalesce(_ts(pl.col("disruption").struct.field("lastTransitionTime")), _ts(ended)))
        said = [
            ("status", pl.col("pod_reason"), pl.col("pod_message")),
            ("DisruptionTarget", pl.col("disruption").struct.field("reason"),
             pl.when((pl.col("disruption").struct.field("status") == "True")
                     & (pl.col("disruption").struct.field("message") != pl.col("pod_message").fill_null("")))
             .then(pl.col("disruption").struct.field("message"))),
        ]
        for what, reason, message in said:
            lines.append(frame.filter(message.fill_null("") != "").select(
                "namespace", "name", "node", program=pl.lit("kubernetes"), ts="ts",
                what=pl.concat_str(pl.lit("pod/"), pl.col("pod"), pl.lit(f"/{what}")),
                message=pl.concat_str(pl.lit("Pod "), pl.col("namespace"), pl.lit("/"), pl.col("pod"),
                                      pl.lit(f" {what} "), reason.fill_null(""), pl.lit(": "), message),
            ))
    rows = pl.concat(lines).drop_nulls("ts").join(wl.select("namespace", "name", "latest"), on=["namespace", "name"])
    if rows.is_empty():
        return empty
    return rows.select(
        "ts", ts_source=pl.lit("line"), node="node",
        attempt_id=_attempt_id(cluster, pl.col("latest")),
        rank=pl.lit(None, dtype=pl.Int32), program="program", message="message",
        origin=pl.concat_str(pl.lit(f"{origin}#"), pl.col("namespace"), pl.lit("/"), pl.col("what")),
        seq=pl.lit(1, dtype=pl.Int64),
        input_id=pl.concat_str(pl.lit(f"kueue:{cluster}/"), pl.col("namespace"), pl.lit("/"), pl.col("what"),
                               pl.lit("@"), pl.col("ts").dt.to_string("%Y-%m-%dT%H:%M:%S%.fZ")),
    ).unique("input_id", keep="first", maintain_order=True).sort("input_id")


# ------------------------------------------------------------------ pod logs


class PodLogsOptions(ConnectorOptions):
    """One container's log from the Kubernetes API."""

    url: str = Field(description="API server, e.g. https://kube-apiserver:6443")
    namespace: str
    pod: str
    container: str | None = None
    previous: bool = Field(False, description="the previous (crashed) container instance")
    node: str | None = Field(None, description="node of the pod; looked up from the pod when unset")
    attempt_id: str | None = None
    token_env: str | None = "KUBE_TOKEN"
    timeout: float = 30.0
    max_attempts: int = 5


class PodLogsConnector(Connector):
    """Timestamped container log lines → observations (source ``k8s``)."""

    name: ClassVar[str] = "pod_logs"
    Options: ClassVar[type[ConnectorOptions]] = PodLogsOptions
    options: PodLogsOptions

    def fetch(self, window: FetchWindow | None) -> Iterator[Batch]:
        """Yield the log's observations, and a ``rejects`` batch for unstamped lines. The
        API returns the whole log; ``window`` (when given) keeps the lines inside it."""
        opts = self.options
        client = HttpClient(opts.url, token_env=opts.token_env, timeout=opts.timeout,
                            max_attempts=opts.max_attempts)
        pod_path = f"/api/v1/namespaces/{opts.namespace}/pods/{opts.pod}"
        params: dict[str, object] = {"timestamps": "true"}
        if opts.container:
            params["container"] = opts.container
        if opts.previous:
            params["previous"] = "true"
        node = opts.node
        if node is None:
            node = (client.get_json(pod_path).get("spec") or {}).get("nodeName")
        text = client.get_text(pod_path + "/log", params)
        input_id = client.url(pod_path + "/log", params)
        rows, rejects = parse_timestamped_log(text, input_id)
        rows = rows.with_columns(
            node=pl.lit(node, dtype=pl.String),
            attempt_id=pl.lit(opts.attempt_id, dtype=pl.String),
            program=pl.coalesce(pl.col("program"), pl.lit(opts.container, dtype=pl.String)),
        )
        fetched = rows.height + rejects.height
        if window is not None:
            rows = rows.filter(pl.col("ts").is_between(_utc(window.start), _utc(window.end), closed="left"))
        yield Batch(table="observations", rows=rows, cluster=self.cluster, input_id=input_id,
                    source="k8s", fetched=fetched)
        if rejects.height:
            # Counted in the observations batch's ``fetched`` already.
            yield Batch(table="rejects", rows=rejects, cluster=self.cluster, input_id=input_id)


def parse_timestamped_log(text: str, input_id: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``kubectl logs --timestamps`` text → (observations, rejects); ``origin`` is
    ``<input_id>:<line number>``. The container's lines go through the application prefixes
    as a ``kubectl`` file's do (:mod:`ingest.files.kubectl`): a torchrun ``[default0]:`` is
    peeled into ``rank``, so what the program printed starts its ``message``."""
    now = datetime.now(timezone.utc)
    lines = pl.DataFrame({"line": text.splitlines()}).with_row_index("seq", offset=1).with_columns(
        file=pl.lit(0, dtype=pl.UInt32), seq=pl.col("seq").cast(pl.Int64), mtime=pl.lit(now).dt.cast_time_unit("us"),
    )
    ctx = ParseContext(year=None, boot_time=None, default_node=None, ingest_time=now)
    parsed = kubectl.parse(lines, ctx).with_columns(
        raw=lines["line"], origin=pl.concat_str(pl.lit(f"{input_id}:"), pl.col("seq").cast(pl.String)))
    good = parsed.filter(pl.col("reason").is_null())
    rows = good.select(
        "ts", ts_source=pl.lit("line"), node=pl.lit(None, dtype=pl.String),
        attempt_id=pl.lit(None, dtype=pl.String), rank="rank", program="program", message="message",
        origin="origin", seq="seq", input_id=pl.lit(input_id),
    )
    rejects = parsed.filter(pl.col("reason").is_not_null()).select(
        ts_ingest=pl.lit(now).dt.cast_time_unit("us"),
        source=pl.lit("k8s"), origin="origin",
        reason=pl.lit("no RFC 3339 timestamp at the start of the line (expected timestamps=true)"),
        raw="raw", input_id=pl.lit(input_id),
    )
    return rows, rejects


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value
