"""The bundled rule pack: it lints clean, every inline test passes, the suppress and
precedence rules only name events, causes and rules that the pack can actually produce, and
on small scenarios of real lines its relations give the right root."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from engine.config import EngineConfig
from engine.extract import extract_lines
from engine.rules.loader import BUNDLED_RULES, RulePack, lint_rule_pack, load_rule_pack
from engine.rules.model import Outcome, Selector
from engine.rules.testing import run_inline_tests
from engine.run import attribute
from tests.engine_frames import at, attempts

RULE_FILES = sorted(BUNDLED_RULES.glob("*.yaml"))


@pytest.fixture(scope="module")
def pack() -> RulePack:
    return load_rule_pack()


def test_bundled_pack_lints_clean() -> None:
    issues = lint_rule_pack()
    assert not issues, "\n".join(str(issue) for issue in issues)


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.name)
def test_inline_tests_pass(path: Path) -> None:
    file_pack = load_rule_pack([path])
    results = run_inline_tests(file_pack)
    failures = [f"{r.rule_id} {r.case}: {r.message}" for r in results if not r.ok]
    tested = {r.rule_id for r in results}
    untested = [r.id for r in (*file_pack.extract, *file_pack.metric) if r.id not in tested]
    assert not untested, f"rules without inline test results: {untested}"
    assert not failures, "\n".join(failures)


def _outcomes(pack: RulePack) -> list[Outcome]:
    """Every outcome an extract/metric/state rule can emit (its own and its map's)."""
    outcomes: list[Outcome] = []
    for rule in (*pack.extract, *pack.metric, *pack.state):
        outcomes.append(rule)
        mapping = getattr(rule, "map", None)
        if mapping is not None:
            outcomes += [o.model_copy(update={k: v for k, v in rule.model_dump().items()
                                              if k in Outcome.model_fields and getattr(o, k) is None})
                         for o in (*mapping.table.values(), *([mapping.default] if mapping.default else []))]
    return outcomes


def dangling_references(pack: RulePack) -> list[str]:
    """Names in suppress/precedence selectors, and causes a state rule ``agrees_with``, that
    no rule of ``pack`` produces (python rules' by the causes they declare: cause, domain,
    role, event)."""
    outcomes = _outcomes(pack)
    declared = [cause for loaded in pack.python for cause in getattr(loaded, "causes", ())]
    events = {o.event for o in outcomes} | {c[3] for c in declared}
    causes = {o.cause for o in outcomes} | {c[0] for c in declared}
    rule_ids = {r.id for r in (*pack.extract, *pack.metric, *pack.state)} | {
        r.rule.id if hasattr(r, "rule") else r.id for r in pack.python
    }
    problems = []
    for rule in (*pack.suppress, *pack.precedence):
        for side in ("root", "cascade", "prefer", "over"):
            selector: Selector | None = getattr(rule, side, None)
            if selector is None:
                continue
            for kind, names, known in (("event", selector.events, events),
                                       ("cause", selector.causes, causes),
                                       ("rule", selector.rules, rule_ids)):
                problems += [f"{rule.id}.{side}: no rule emits {kind} '{name}'"
                             for name in names or () if name not in known]
    for rule in pack.state:
        problems += [f"{rule.id}.agrees_with: no rule emits cause '{cause}'"
                     for cause in rule.agrees_with if cause not in causes]
    return problems


def test_selectors_reference_emitted_names(pack: RulePack) -> None:
    problems = dangling_references(pack)
    assert not problems, "\n".join(problems)


def test_dangling_reference_is_reported(tmp_path: Path) -> None:
    (tmp_path / "one.yaml").write_text(
        (BUNDLED_RULES / "communication.yaml").read_text()
    )
    (tmp_path / "typo.yaml").write_text(
        "rules:\n"
        "  - kind: suppress\n"
        "    id: typo\n"
        "    title: misspelt event\n"
        "    root: {roles: [root_candidate]}\n"
        "    cascade: {events: [network.colective_timeout], causes: [network.collective_timeout]}\n"
        "    window: 40m\n"
    )
    (tmp_path / "state.yaml").write_text(
        "rules:\n"
        "  - kind: state\n"
        "    id: state.typo\n"
        "    title: misspelt agreement\n"
        "    states: [preempted]\n"
        "    event: attempt_preempted\n"
        "    domain: scheduler\n"
        "    cause: scheduler.preempted\n"
        "    agrees_with: [scheduler.requeue]\n"
    )
    problems = dangling_references(load_rule_pack([tmp_path]))
    assert problems == ["typo.cascade: no rule emits event 'network.colective_timeout'",
                        "state.typo.agrees_with: no rule emits cause 'scheduler.requeue'"]


def test_outcome_cause_belongs_to_its_domain(pack: RulePack) -> None:
    wrong = [f"{o.event}: cause {o.cause} in domain {o.domain}" for o in _outcomes(pack)
             if o.cause and o.domain and o.cause.split(".")[0] != o.domain]
    assert not wrong, "\n".join(wrong)


def test_every_hit_line_cites_a_public_source(pack: RulePack) -> None:
    missing = [f"{rule.id}: {case.line[:60]}" for rule in pack.extract for case in rule.tests.hit
               if not case.ref.startswith("https://")]
    assert not missing, "\n".join(missing)


# --- the bundled pack on small real-line scenarios ------------------------------------
# Real lines (sources beside each) placed on nodes and in time, then correlated and decided
# by the engine core with the bundled pack: the verdicts the pack's relations must give.

def _scenario(pack: RulePack, placed: list[tuple[float, str | None, bool, str]], nodes=("n1", "n2")):
    """Verdict and correlated events of one failed attempt on ``nodes`` (one hour long).

    ``placed``: (seconds after start, node, printed by the job, line). Job lines carry the
    attempt; node lines (kernel) attach by node and time.
    """
    lines = [line for *_, line in placed]
    extracted = extract_lines(lines, pack).with_columns(
        pl.col("origin").str.extract(r":(\d+)$").cast(pl.Int64).alias("_i")
    )
    where = pl.DataFrame(
        {
            "_i": list(range(1, len(placed) + 1)),
            "_ts": [at(seconds / 60) for seconds, *_ in placed],
            "_node": [node for _, node, _, _ in placed],
            "_job": [job for _, _, job, _ in placed],
        },
        schema={"_i": pl.Int64, "_ts": pl.Datetime("us", "UTC"), "_node": pl.String, "_job": pl.Boolean},
    )
    ev = (
        extracted.join(where, on="_i")
        .with_columns(
            pl.col("_ts").alias("ts"), pl.col("_ts").alias("last_ts"),
            pl.coalesce("_node", "node").alias("node"),
            pl.when(pl.col("_job")).then(pl.lit("a1")).otherwise(None).alias("attempt_id"),
            pl.lit("line").alias("ts_source"), pl.lit("c").alias("cluster"),
            pl.concat_str([pl.when(pl.col("_job")).then(pl.lit("job.out")).otherwise(pl.col("_node") + ".log"),
                           pl.lit(":"), pl.col("_i").cast(pl.String)]).alias("origin"),
        )
        .with_columns(pl.concat_str([pl.col("rule_id"), pl.lit("@"), pl.col("origin")]).alias("event_id"))
        .select(extracted.drop("_i").columns)
    )
    att = attempts({"attempt_id": "a1", "nodes": list(nodes), "n_nodes": len(nodes)})
    coverage = att.select("attempt_id").with_columns(
        pl.lit([{"source": "syslog", "rows": 10, "error": None}]).alias("coverage"),
        pl.lit(True).alias("coverage_complete"),
    )
    verdicts, correlated = attribute(att, ev, coverage, pack, EngineConfig())
    return verdicts.row(0, named=True), correlated


def _role(correlated: pl.DataFrame, rule_id: str) -> set[str]:
    return set(correlated.filter(pl.col("rule_id") == rule_id)["role"])


def test_step_cancel_without_reason_follows_the_oom_kill(pack: RulePack) -> None:
    # https://github.com/hafs-community/HAFS/issues/101
    verdict, correlated = _scenario(pack, [
        (100, None, True, "slurmstepd: error: Detected 1 oom-kill event(s) in step 3495064.0 cgroup. Some of your processes may have been killed by the cgroup out-of-memory handler."),
        (101, None, True, "srun: error: Orion-01-01: task 4: Out Of Memory"),
        (101, None, True, "srun: Terminating job step 3495064.0"),
        (102, None, True, "slurmstepd: error: *** STEP 3495064.0 ON orion-01-01 CANCELLED AT 2021-10-27T19:35:36 ***"),
    ])
    assert (verdict["domain"], verdict["cause"]) == ("host", "host.oom_killer")
    assert _role(correlated, "scheduler.slurm_cancelled_by_user") == {"cascade"}


def test_a_long_soft_lockup_is_a_host_root_unless_a_storage_fault_on_the_node_explains_it(pack: RulePack) -> None:
    # https://lore.kernel.org/r/20230519225157.760788-2-aditi.ghag@isovalent.com
    lockup = "watchdog: BUG: soft lockup - CPU#0 stuck for 86s! [test_progs:2331]"
    alone, _ = _scenario(pack, [(1800, "n1", False, lockup)])
    assert (alone["domain"], alone["cause"], alone["culprit_nodes"]) == ("host", "host.cpu_stall", ["n1"])
    # The lockup is stamped first, but the Lustre client lost its target on the same node.
    explained, correlated = _scenario(pack, [
        (1800, "n1", False, lockup),
        # https://github.com/aws/aws-parallelcluster/issues/2701
        (1830, "n1", False, "Apr 30 13:50:10 ip-10-0-33-4 kernel: [268274.472582] Lustre: no2zxbmv-MDT0000-mdc-000000001785e248: Connection to no2zxbmv-MDT0000 (at 10.0.47.232@tcp) was lost; in progress operations using this service will wait for recovery to complete"),
    ])
    assert explained["domain"] == "storage"
    assert _role(correlated, "host.soft_lockup_long") == {"confirmation"}


def test_dataloader_timeout_on_one_rank_is_the_root_of_the_peers_watchdog(pack: RulePack) -> None:
    verdict, correlated = _scenario(pack, [
        # https://github.com/IGNF/myria3d/issues/123
        (1800, "n2", True, "[E ProcessGroupNCCL.cpp:475] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800008 milliseconds before timing out."),
        # https://github.com/ray-project/ray/issues/52641
        (1810, "n1", True, "RuntimeError: DataLoader timed out after 300 seconds"),
    ])
    # The job's own fault: no node to take out of service.
    assert (verdict["domain"], verdict["culprit_nodes"]) == ("workload", [])
    assert _role(correlated, "comm.nccl_watchdog_timeout") == {"cascade"}


def test_a_dataloader_timeout_on_a_node_whose_filesystem_stopped_answering_is_the_outages(pack: RulePack) -> None:
    """The loader waited on the storage: its timeout, printed long after the server went, is
    the outage's symptom. On a node whose filesystem answered, it stays the job's root."""
    nfs = "kernel: nfs: server 192.168.1.229 not responding, still trying"  # kangear/tiny210v2-uboot#5
    timeout = "RuntimeError: DataLoader timed out after 300 seconds"  # ray-project/ray#52641
    verdict, correlated = _scenario(pack, [(1500, "n1", False, nfs), (1810, "n1", True, timeout)])
    assert (verdict["domain"], verdict["cause"]) == ("storage", "storage.filesystem_unavailable")
    assert _role(correlated, "framework.dataloader_timeout") == {"cascade"}
    elsewhere, correlated = _scenario(pack, [(1500, "n2", False, nfs), (1810, "n1", True, timeout)])
    assert _role(correlated, "framework.dataloader_timeout") == {"root_candidate"}


def test_gpu_fault_outranks_the_cuda_oom_it_causes(pack: RulePack) -> None:
    verdict, correlated = _scenario(pack, [
        # https://github.com/leptonai/gpud/pull/1174
        (100, "n1", False, "NVRM: Xid (PCI:0000:9b:00): 94, pid=1234, name=python3, Contained ECC error"),
        # https://github.com/bigscience-workshop/bigscience/blob/9e64edec2ad1fb9263bf39ba616a84ff64b4d947/train/tr1-13B-base/chronicles.md
        (102, "n1", True, "RuntimeError: CUDA error: out of memory"),
    ])
    assert verdict["domain"] in ("gpu", "gpu_memory") and verdict["culprit_nodes"] == ["n1"]
    assert _role(correlated, "cuda.out_of_memory") == {"confirmation"}


@pytest.mark.parametrize(("line", "cause"), [
    # https://github.com/patrickbryant1/AFProfile/issues/8
    ("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 4770354232 bytes.",
     "workload.cuda_oom"),
    # https://github.com/yangjianxin1/Firefly/issues/68
    ("Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.",
     "workload.non_finite_loss"),
])
def test_a_named_workload_failure_outranks_the_exception_line_it_is_on(pack: RulePack, line: str, cause: str) -> None:
    """The generic exception rule matches these lines too; the named failure is the cause."""
    verdict, correlated = _scenario(pack, [(100, None, True, line)])
    assert (verdict["domain"], verdict["cause"]) == ("workload", cause)
    assert _role(correlated, "framework.python_exception") == {"confirmation"}


def test_dead_node_outranks_the_retry_exceeded_errors_of_its_peers(pack: RulePack) -> None:
    verdict, correlated = _scenario(pack, [
        # https://github.com/pytorch/pytorch/issues/81628
        (108, "n2", True, "NCCL WARN NET/IB : Got completion from peer 192.168.17.147<38560> with error 12, opcode 0, len 0, vendor err 129"),
        # https://github.com/nebius/soperator/issues/854
        (400, None, True, "srun: error: Node failure on n1"),
        # https://github.com/SchedMD/slurm/blob/master/src/slurmd/slurmstepd/req.c
        (401, None, True, "slurmstepd: error: *** JOB 1062 ON n2 CANCELLED AT 2023-05-08T11:21:53 DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***"),
    ])
    assert (verdict["domain"], verdict["cause"], verdict["culprit_nodes"]) == ("host", "host.node_failure", ["n1"])
    assert _role(correlated, "fabric.nccl_ib_completion_error") == {"confirmation"}


def test_kernel_panic_is_a_host_root(pack: RulePack) -> None:
    verdict, _ = _scenario(pack, [
        # https://github.com/leptonai/gpud/pull/997
        (100, "n1", False, "<0>[2315424.098863] Kernel panic - not syncing: hung_task: blocked tasks"),
        # https://github.com/pytorch/pytorch/issues/81628
        (108, "n2", True, "NCCL WARN NET/IB : Got completion from peer 192.168.17.147<38560> with error 12, opcode 0, len 0, vendor err 129"),
    ])
    assert (verdict["domain"], verdict["cause"], verdict["culprit_nodes"]) == ("host", "host.kernel_fault", ["n1"])


def test_cable_error_and_link_down_name_the_port(pack: RulePack) -> None:
    # Line shapes: format_strings.jsonl (mlx5 events.c) and the mlx5 IB port state print
    # https://github.com/torvalds/linux/blob/master/drivers/net/ethernet/mellanox/mlx5/core/events.c
    verdict, _ = _scenario(pack, [
        (100, "n1", False, "kernel: mlx5_core 0000:1a:00.0: mlx5_port_module_event:1131:(pid 0): Port module event[error]: module 0, Cable error, Bad or shorted cable/module"),
        (100, "n1", False, "kernel: mlx5_core 0000:1a:00.0 enp60s0np0: Link down"),
        (100, "n1", False, "kernel: mlx5_core 0000:1a:00.0 mlx5_1: Port: 1 Link DOWN"),
    ])
    assert verdict["domain"] == "network" and verdict["culprit_nodes"] == ["n1"]
    # The HCA name and the port number join into one port.
    assert verdict["culprit_ports"] == ["mlx5_1:1"]


def test_a_killed_worker_does_not_outrank_the_fabric_error_before_it(pack: RulePack) -> None:
    verdict, _ = _scenario(pack, [
        # https://github.com/pytorch/pytorch/issues/81628
        (108, "n2", True, "NCCL WARN NET/IB : Got completion from peer 192.168.17.147<38560> with error 12, opcode 0, len 0, vendor err 129"),
        # https://github.com/zai-org/ChatGLM2-6B/issues/520
        (130, "n2", True, "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 0 (pid: 31631) of binary: /usr/bin/python3"),
    ])
    assert (verdict["domain"], verdict["cause"]) == ("network", "network.transport_retry_exceeded")
