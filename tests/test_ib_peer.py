"""The ``ib_common_peer`` python rule, end to end: when NCCL's retry-exceeded reports of an
attempt all touch one node (the others name its address, it names theirs), that node is the
culprit; so is the node whose NCCL bootstrap banner shows the shared address, even when it
reported nothing, and the node an Open MPI openib report names by its host, and the one peer
the one reporting node names, and the one node that reported nothing when every reporting
node names one unmapped address; two nodes that only name each other stay suspects unless
one of their ports counted errors. EFA's unresponsive-peer
errors (by instance id), NCCL socket timeouts (by address) and UCX's reports (by the LID on
the failed work request's line) are read the same way. Real
NCCL lines, landed through the Slurm connector and the files landing, attributed by a run."""

from __future__ import annotations

from datetime import date

import polars as pl
import pytest

from engine.config import EngineConfig
from engine.extract import line_events
from engine.rules.loader import load_rule_pack
from engine.run import attribute

from tests.end_to_end import CUDA_OOM, ITERATION, XID_79, syslog, verdicts_by_job, watchdog_timeout
from tests.engine_frames import at, attempts, events
from tests.test_decide import full_coverage

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
800|800|train|alice|FAILED|1:0|2026-11-20T08:00:00|2026-11-20T09:00:00|n[1-3]|gres/gpu=24,node=3
801|801|train|alice|FAILED|1:0|2026-11-20T08:00:00|2026-11-20T09:00:00|n[4-6]|gres/gpu=24,node=3
802|802|train|alice|FAILED|1:0|2026-11-20T08:00:00|2026-11-20T09:00:00|n[7-8]|gres/gpu=16,node=2
803|803|train|alice|FAILED|1:0|2026-11-20T08:00:00|2026-11-20T09:00:00|n[9-11]|gres/gpu=24,node=3
804|804|train|alice|FAILED|1:0|2026-11-20T08:00:00|2026-11-20T09:00:00|n[12-19]|gres/gpu=64,node=8
805|805|train|alice|FAILED|1:0|2026-11-20T08:00:00|2026-11-20T09:00:00|n[20-22]|gres/gpu=24,node=3
806|806|train|alice|FAILED|1:0|2026-11-20T08:00:00|2026-11-20T09:00:00|n[23-25]|gres/gpu=24,node=3
807|807|train|alice|FAILED|1:0|2026-11-20T08:00:00|2026-11-20T09:00:00|n[26-27]|gres/gpu=16,node=2
808|808|train|alice|FAILED|1:0|2026-11-20T08:00:00|2026-11-20T09:00:00|n[28-30]|gres/gpu=24,node=3
809|809|train|alice|FAILED|1:0|2026-11-20T08:00:00|2026-11-20T09:00:00|n[31-33]|gres/gpu=24,node=3
810|810|train|alice|FAILED|1:0|2026-11-20T08:00:00|2026-11-20T09:00:00|n[34-37]|gres/gpu=32,node=4
811|811|train|alice|FAILED|1:0|2026-11-20T08:00:00|2026-11-20T09:00:00|n[38-39]|gres/gpu=16,node=2
812|812|train|alice|FAILED|1:0|2026-11-20T08:00:00|2026-11-20T09:00:00|n[40-42]|gres/gpu=24,node=3
813|813|md|alice|FAILED|1:0|2026-11-20T08:00:00|2026-11-20T09:00:00|n[43-46]|gres/gpu=32,node=4
814|814|train|alice|FAILED|1:0|2026-11-20T08:00:00|2026-11-20T09:00:00|n[47-49]|gres/gpu=24,node=3
815|815|train|alice|FAILED|1:0|2026-11-20T08:00:00|2026-11-20T09:00:00|n[50-51]|gres/gpu=16,node=2
816|816|train|alice|FAILED|1:0|2026-11-20T08:00:00|2026-11-20T09:00:00|n[52-55]|gres/gpu=32,node=4
817|817|train|alice|FAILED|1:0|2026-11-20T08:00:00|2026-11-20T09:00:00|n[56-59]|gres/gpu=32,node=4
"""


def retry_exceeded(rank: int, node: str, peer: str) -> str:
    """An ``srun --label`` line of NCCL's retry-exceeded completion from ``node`` naming
    ``peer``: the message as pytorch/pytorch#81628 prints it, behind the host prefix and
    ``transport/net_ib.cc:1295`` source of NVIDIA/nccl#928."""
    return (f"{rank}: {node}:4551{rank}:4559{rank} [{rank % 8}] transport/net_ib.cc:1295 NCCL WARN NET/IB : "
            f"Got completion from peer {peer}<5231{rank}> with error 12, opcode 0, len 0, vendor err 129")


def ucx_retry_exceeded(rank: int, node: str, lid: int) -> str:
    """UCX's two-line report of a retry-exceeded completion from ``node``, the failed work
    request's remote LID ``lid`` on the second line (openucx/ucx#5199's lines)."""
    prefix = f"{rank}: [{node}:2700{rank}:0:2700{rank}] ib_mlx5_log.c:177  "
    return (f"{prefix}Transport retry count exceeded on mlx5_0:1/IB (synd 0x15 vend 0x81 hw_synd 0/0)\n"
            f"{prefix}RC QP 0xf0c{rank} wqe[53918]: SEND s-e [rqpn 0x637 rlid {lid}] [va 0x7f1c2a4e0000 len 65536 lkey 0x1a2f1]")


def openib_retry_exceeded(rank: int, node: str, peer: str) -> str:
    """Open MPI's openib report of a retry-exceeded completion from ``node`` naming the host
    ``peer``, as open-mpi/ompi-www community/lists/users/2013/10/22801.php quotes it."""
    return (f"[[12065,1],{rank}][btl_openib_component.c:2948:handle_wc] from {node}.local to: {peer} error polling "
            "LP CQ with status RETRY EXCEEDED ERROR status number 12 for wr_id 396116864 opcode 0  vendor error 129 "
            "qp_idx 1")


def efa_unresponsive(rank: int, node: str, own: str, peer: str) -> str:
    """aws-ofi-nccl's completion error for EFA's unresponsive peer from ``node`` (instance
    ``own``) naming instance ``peer``: the plugin's ``Request %p completed with error. RC:
    %d. Error: %d (%s)…`` (src/nccl_ofi_rdma.cpp) around libfabric's efa_errno.h text and
    its ``My host id: / Peer host id:`` addresses."""
    return (f"{rank}: {node}:4551{rank}:4559{rank} [{rank % 8}] nccl_net_ofi_rdma.cpp:1651 NCCL WARN NET/OFI Request "
            f"0x7fe1840b9f0{rank % 8} completed with error. RC: 5. Error: 13 (Unresponsive remote (was previously "
            f"responsive) My EFA addr: fi_addr_efa://[fe80::4a4:6dff:fe3a:9b{rank:02x}]:0:1538447221 My host id: {own} "
            f"Peer EFA addr: fi_addr_efa://[fe80::4c1:10ff:fe8b:21af]:0:907215503 Peer host id: {peer}). Completed "
            "length: 0, Request: {dev: 2, size: 1048576, state: PENDING, type: SEND}")


def socket_timed_out(rank: int, node: str, peer: str) -> str:
    """NCCL's socket transport giving up on ``peer`` (misc/socket.cc: ``socketProgressOpt:
    Call to recv from %s failed : %s``), the shape of NVIDIA/nccl#2076's report."""
    return (f"{rank}: {node}:4551{rank}:4560{rank} [{rank % 8}] misc/socket.cc:50 NCCL WARN socketProgressOpt: "
            f"Call to recv from {peer}<4312{rank}> failed : Connection timed out")


def bootstrap(rank: int, node: str, address: str) -> str:
    """NCCL's bootstrap banner naming the node's address, as NVIDIA/nccl-tests#188 prints it."""
    return f"{rank}: {node}:4551{rank}:4551{rank} [0] NCCL INFO Bootstrap : Using ibs85f0:{address}<0>"


def output(*reports: tuple[int, str, str], banners: tuple[str, ...] = ()) -> str:
    return "".join(b + "\n" for b in banners) + f"0: [2026-11-20 08:40:00,000] {ITERATION}\n" + "".join(
        retry_exceeded(*r) + "\n" for r in reports)


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("ibpeer")
    logs = root / "logs"
    logs.mkdir()
    # n3's link broke: n1 and n2 name its address, n3 names each of theirs.
    (logs / "slurm-800.out").write_text(output(
        (4, "n1", "10.22.0.3"), (5, "n1", "10.22.0.3"), (12, "n2", "10.22.0.3"),
        (20, "n3", "10.22.0.1"), (21, "n3", "10.22.0.2"),
    ))
    # Everyone names 10.22.0.6, which no banner maps: no reporting node is the shared end,
    # and n6, the one node that reported nothing, is.
    (logs / "slurm-801.out").write_text(output((4, "n4", "10.22.0.6"), (12, "n5", "10.22.0.6")))
    # Two nodes that only name each other: either end may be the broken one. Every rank's
    # watchdog then timed out, and both nodes' kernels logged nothing about it.
    (logs / "slurm-802.out").write_text(output((4, "n7", "10.22.0.8"), (12, "n8", "10.22.0.7"))
                                        + "".join(watchdog_timeout(r, "08:51:00") + "\n" for r in range(16)))
    for node in ("n7", "n8"):
        (logs / f"{node}.log").write_text(syslog(node, ("08:30:00", "kernel: ok"), ("08:55:00", "kernel: ok")))
    # Everyone names 10.22.0.11, which n11's bootstrap banner says is its address; n11
    # reported nothing (its link is down).
    (logs / "slurm-803.out").write_text(output(
        (4, "n9", "10.22.0.11"), (12, "n10", "10.22.0.11"),
        banners=(bootstrap(0, "n9", "10.22.0.9"), bootstrap(8, "n10", "10.22.0.10"), bootstrap(16, "n11", "10.22.0.11")),
    ))
    # Four nodes each lose a connection to a different peer: the connections share no end.
    (logs / "slurm-804.out").write_text(output(
        (32, "n16", "10.22.0.13"), (40, "n17", "10.22.0.19"), (48, "n18", "10.22.0.12"), (56, "n19", "10.22.0.14"),
    ))
    # Everyone names n22 (its banner's address), which reported nothing: its GPU fell off
    # the bus, stamped by its clock four minutes after the job ended.
    (logs / "slurm-805.out").write_text(output(
        (4, "n20", "10.22.0.22"), (12, "n21", "10.22.0.22"),
        banners=(bootstrap(0, "n20", "10.22.0.20"), bootstrap(8, "n21", "10.22.0.21"), bootstrap(16, "n22", "10.22.0.22")),
    ))
    (logs / "n22.log").write_text(syslog("n22", ("09:04:00", f"kernel: {XID_79}")))
    # Open MPI's openib reports name the peer's host: everyone names n25, which reported nothing.
    (logs / "slurm-806.out").write_text(f"[2026-11-20 08:40:00,000] {ITERATION}\n" + "".join(
        openib_retry_exceeded(*r) + "\n" for r in ((4, "n23", "n25"), (12, "n24", "n25"))))
    # A two-node job: n26 names n27's address, and n27 (its banner's) said nothing more.
    (logs / "slurm-807.out").write_text(output(
        (4, "n26", "10.22.0.27"), (5, "n26", "10.22.0.27"),
        banners=(bootstrap(0, "n26", "10.22.0.26"), bootstrap(8, "n27", "10.22.0.27")),
    ))
    # EFA on AWS: n28 and n29 name instance i-0c (n30: its own reports say "My host id:
    # i-0c"), and n30 names theirs.
    ids = {"n28": "i-0a0000000000000a1", "n29": "i-0b0000000000000b2", "n30": "i-0c0000000000000c3"}
    (logs / "slurm-808.out").write_text(f"0: [2026-11-20 08:40:00,000] {ITERATION}\n" + "".join(
        efa_unresponsive(rank, node, ids[node], ids[peer]) + "\n"
        for rank, node, peer in ((4, "n28", "n30"), (12, "n29", "n30"), (20, "n30", "n28"), (21, "n30", "n29"))))
    # NCCL over sockets: n31 and n32 time out on n33's address (its bootstrap banner's);
    # n33 printed nothing more.
    (logs / "slurm-809.out").write_text(
        "".join(b + "\n" for b in (bootstrap(0, "n31", "10.22.0.31"), bootstrap(8, "n32", "10.22.0.32"),
                                    bootstrap(16, "n33", "10.22.0.33")))
        + f"0: [2026-11-20 08:40:00,000] {ITERATION}\n"
        + "".join(socket_timed_out(*r) + "\n" for r in ((4, "n31", "10.22.0.33"), (12, "n32", "10.22.0.33"))))
    # n34 and n35 both name 10.22.0.99, which no banner maps; n36 and n37 said nothing:
    # the shared end is one of them, not a reporter.
    (logs / "slurm-810.out").write_text(output((4, "n34", "10.22.0.99"), (12, "n35", "10.22.0.99")))
    # n39 overheated and shut down at 08:44:12; n38's reports of it are unstamped, between
    # an iteration stamped 08:40 and torchrun's teardown stamped 08:44:44 (its glog line as
    # huggingface/accelerate#2960 shows it): they only inherited 08:40.
    (logs / "slurm-811.out").write_text(
        "".join(b + "\n" for b in (bootstrap(0, "n38", "10.22.0.38"), bootstrap(8, "n39", "10.22.0.39")))
        + f"0: [2026-11-20 08:40:00,000] {ITERATION}\n" + retry_exceeded(4, "n38", "10.22.0.39") + "\n"
        + "0: W1120 08:44:44.786825 140538811684672 torch/distributed/elastic/multiprocessing/api.py:858] Sending "
        "process 147865 closing signal SIGTERM\n")
    (logs / "n39.log").write_text(syslog("n39", ("08:30:00", "kernel: ok"), (
        "08:44:12", "kernel: thermal thermal_zone1: x86_pkg_temp: critical temperature reached, shutting down")))
    # Rank 16 on n42 ran out of GPU memory and died; its queue pairs closed with it, and
    # the ranks of n40 and n41 that sent to it ran out of retries, naming its address.
    (logs / "slurm-812.out").write_text(
        "".join(b + "\n" for b in (bootstrap(0, "n40", "10.22.0.40"), bootstrap(8, "n41", "10.22.0.41"),
                                    bootstrap(16, "n42", "10.22.0.42")))
        + f"0: [2026-11-20 08:40:00,000] {ITERATION}\n16: {CUDA_OOM}\n"
        + "".join(retry_exceeded(*r) + "\n" for r in ((4, "n40", "10.22.0.42"), (12, "n41", "10.22.0.42"))))
    # UCX (an MPI code on four nodes, a task per GPU): n43, n44 and n45 lose their
    # connections to LID 1422, which n46 said nothing about (its port died with it).
    (logs / "slurm-813.out").write_text(f"0: [2026-11-20 08:40:00,000] {ITERATION}\n" + "".join(
        ucx_retry_exceeded(rank, node, 1422) + "\n" for rank, node in ((0, "n43"), (8, "n44"), (16, "n45"))))
    # EFA again: n47 and n48 name instance i-0f, n49's, which printed nothing; slurmctld then
    # found n49 not responding (its line as clustervision/trinity#506 shows it).
    ids = {"n47": "i-0d0000000000000d4", "n48": "i-0e0000000000000e5", "n49": "i-0f0000000000000f6"}
    (logs / "slurm-814.out").write_text(f"0: [2026-11-20 08:40:00,000] {ITERATION}\n" + "".join(
        efa_unresponsive(rank, node, ids[node], ids["n49"]) + "\n" for rank, node in ((4, "n47"), (12, "n48"))))
    # Two nodes that only name each other again, n51's reports half a minute after n50's
    # (each rank's watchdog stamps the next line: PyTorch 2.4's "terminated with exception",
    # the shape of communication.yaml's watchdog test line, carrying NCCL's result string for
    # a peer gone): either end, still one incident.
    watchdog = ("{r}: [rank{r}]:[E1120 {clock}.000000132 ProcessGroupNCCL.cpp:1896] [PG ID 0 PG GUID 0(default_pg) "
                "Rank {r}] Process group watchdog thread terminated with exception: NCCL error: remote process exited "
                "or there was a network error, NCCL version 2.21.5\n")
    (logs / "slurm-815.out").write_text(
        f"0: [2026-11-20 08:40:00,000] {ITERATION}\n"
        + retry_exceeded(1, "n50", "10.22.0.51") + "\n" + watchdog.format(r=1, clock="08:40:31")
        + retry_exceeded(9, "n51", "10.22.0.50") + "\n" + watchdog.format(r=9, clock="08:40:37"))
    for node in ("n50", "n51"):
        (logs / f"{node}.log").write_text(syslog(node, ("08:30:00", "kernel: ok"), ("08:55:00", "kernel: ok")))
    # Two nodes each lose one connection, to two other nodes (their banners' addresses):
    # four ends, none in common. Then two whose connections share n56.
    four = tuple(bootstrap(8 * i, f"n{52 + i}", f"10.22.0.{52 + i}") for i in range(4))
    (logs / "slurm-816.out").write_text(output((4, "n52", "10.22.0.54"), (12, "n53", "10.22.0.55"), banners=four))
    four = tuple(bootstrap(8 * i, f"n{56 + i}", f"10.22.0.{56 + i}") for i in range(4))
    (logs / "slurm-817.out").write_text(output((4, "n56", "10.22.0.58"), (12, "n57", "10.22.0.56"), banners=four))
    ctld = root / "slurmctld.log"
    ctld.write_text("[2026-11-20T09:03:20.846] error: Nodes n49 not responding, setting DOWN\n")
    return verdicts_by_job(root, SACCT, logs, date(2026, 11, 20), more=((ctld, {"node": "ctl1"}),))


def test_the_node_every_failing_connection_touches_is_the_culprit(verdicts):
    v = verdicts["800"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("network", "network.transport_retry_exceeded", ["n3"])
    roles = {(e["node"], e["role"]) for e in v["evidence"] if e["rule_id"] == "fabric.nccl_ib_completion_error"}
    assert roles == {("n3", "root_candidate"), ("n1", "cascade"), ("n2", "cascade")}
    assert v["affected_nodes"] == ["n1", "n2"]


def test_the_one_silent_node_is_the_unmapped_shared_end_every_reporter_names(verdicts):
    v = verdicts["801"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("network", "network.transport_retry_exceeded", ["n6"])
    assert v["quality"] != "definitive"
    assert {e["role"] for e in v["evidence"] if e["rule_id"] == "fabric.nccl_ib_completion_error"} == {"cascade"}


def test_two_nodes_naming_each_other_stay_suspects(verdicts):
    """Either end may be the broken one: both are named, and nothing makes the verdict
    more than ``probable``, though every rank's watchdog timeout corroborates a fabric
    fault."""
    v = verdicts["802"]
    assert (v["culprit_nodes"], v["quality"]) == (["n7", "n8"], "probable")


def test_two_nodes_naming_each_other_half_a_minute_apart_are_both_suspects(verdicts):
    v = verdicts["815"]
    assert (v["culprit_nodes"], v["quality"]) == (["n50", "n51"], "probable")


def test_of_two_nodes_naming_each_other_the_one_whose_port_counted_errors_is_the_end():
    """The symbol errors n8's port counted (its node exporter's counter rising) break the tie,
    and so does its GID table changing a minute before the reports (NCCL's async event);
    with the counters of neither, or of both, or a change long before, the two stay suspects."""
    att = attempts(*({"attempt_id": a, "job_id": a, "nodes": [f"{a}7", f"{a}8"], "n_nodes": 2}
                     for a in ("one", "none", "both", "gid", "early")))
    report = {"rule_id": "fabric.nccl_ib_completion_error", "event": "network.ib_retry_exceeded",
              "domain": "network", "cause": "network.transport_retry_exceeded", "role": "root_candidate",
              "action": "check_fabric_port", "source": "app", "ts": at(10)}
    counter = {"rule_id": "metric.ib_symbol_errors", "event": "ib_symbol_errors", "domain": "network",
               "cause": "network.link_errors", "role": "context", "source": "metrics", "ts": at(9),
               "message": "node_infiniband_symbol_error_total increased"}
    change = {"rule_id": "fabric.nccl_ib_async_event", "event": "network.gid_table_change", "domain": "network",
              "cause": "network.gid_table_change", "role": "context", "source": "app",
              "message": "NCCL WARN NET/IB : mlx5_3:1 Got async event : GID table change"}
    rows = []
    for a, counted in (("one", ["one8"]), ("none", []), ("both", ["both7", "both8"]), ("gid", []), ("early", [])):
        rows += [{**report, "attempt_id": a, "node": f"{a}7", "rank": 0, "params": f'{{"peer": "10.0.{a}.8"}}'},
                 {**report, "attempt_id": a, "node": f"{a}8", "rank": 8, "params": f'{{"peer": "10.0.{a}.7"}}'}]
        rows += [{**counter, "node": node} for node in counted]
    rows += [{**change, "attempt_id": "gid", "node": "gid8", "rank": 8, "ts": at(9)},
             {**change, "attempt_id": "early", "node": "early8", "rank": 8, "ts": at(2)}]
    verdicts, _ = attribute(att, events(*rows), full_coverage(att), load_rule_pack(), EngineConfig())
    culprits = dict(zip(verdicts["attempt_id"], verdicts["culprit_nodes"].to_list(), strict=True))
    assert culprits == {"one": ["one8"], "none": ["none7", "none8"], "both": ["both7", "both8"], "gid": ["gid8"],
                        "early": ["early7", "early8"]}
    # The change tells the end by its moment only (a container's start changes the table too).
    assert verdicts.filter(pl.col("attempt_id") == "gid")["quality"].item() == "probable"


def test_a_shared_end_that_reported_nothing_itself_is_never_definitive():
    """Every node of both attempts has its log (full coverage). loud3 names the others'
    addresses too: its own failing connections are the fault seen from its end. quiet3
    printed nothing, so only the others' reports place the fault there, and nothing says
    whether its HCA, its cable or the node itself broke."""
    att = attempts(*({"attempt_id": a, "job_id": a, "nodes": [f"{a}1", f"{a}2", f"{a}3"], "n_nodes": 3}
                     for a in ("loud", "quiet")))
    report = {"rule_id": "fabric.nccl_ib_completion_error", "event": "network.ib_retry_exceeded",
              "domain": "network", "cause": "network.transport_retry_exceeded", "role": "root_candidate",
              "action": "check_fabric_port", "source": "app", "ts": at(10)}
    rows = []
    for a in ("loud", "quiet"):
        rows += [{**report, "attempt_id": a, "node": f"{a}{n}", "rank": 8 * (n - 1), "params": f'{{"peer": "10.0.{a}.3"}}'}
                 for n in (1, 2)]
    rows.append({**report, "attempt_id": "loud", "node": "loud3", "rank": 16, "params": '{"peer": "10.0.loud.1"}'})
    verdicts, _ = attribute(att, events(*rows), full_coverage(att), load_rule_pack(), EngineConfig())
    got = {r["attempt_id"]: (r["culprit_nodes"], r["quality"]) for r in verdicts.to_dicts()}
    assert got == {"loud": (["loud3"], "definitive"), "quiet": (["quiet3"], "probable")}


def test_the_shared_address_names_its_node_through_nccls_bootstrap_banner(verdicts):
    v = verdicts["803"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("network", "network.transport_retry_exceeded", ["n11"])
    roles = {(e["node"], e["role"]) for e in v["evidence"] if e["rule_id"] == "fabric.nccl_ib_completion_error"}
    assert roles == {("n9", "cascade"), ("n10", "cascade")}
    assert v["affected_nodes"] == ["n10", "n9"]


def test_the_one_peer_the_one_reporting_node_names_is_the_silent_end(verdicts):
    """Had the link between them broken, both ends would report: the silent one died."""
    v = verdicts["807"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("network", "network.transport_retry_exceeded", ["n27"])
    assert {e["role"] for e in v["evidence"] if e["rule_id"] == "fabric.nccl_ib_completion_error"} == {"cascade"}


def test_a_shared_peer_named_by_its_host_is_that_node(verdicts):
    v = verdicts["806"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("network", "network.transport_retry_exceeded", ["n25"])
    reports = [e for e in v["evidence"] if e["rule_id"] == "fabric.openib_completion_error"]
    assert {(e["node"], e["rank"], e["role"]) for e in reports} == {("n23", 4, "cascade"), ("n24", 12, "cascade")}
    assert v["affected_nodes"] == ["n23", "n24"]


def test_failing_connections_that_share_no_end_name_no_node(verdicts):
    v = verdicts["804"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("network", "network.transport_retry_exceeded", [])
    assert v["quality"] != "definitive"
    assert {e["role"] for e in v["evidence"] if e["rule_id"] == "fabric.nccl_ib_completion_error"} == {"context"}
    assert next(e["event"] for e in v["evidence"] if e["rule_id"] == "ib_common_peer") == "network.ib_errors_scattered"


def test_two_failing_connections_with_four_different_ends_name_no_node(verdicts):
    v = verdicts["816"]
    assert (v["cause"], v["culprit_nodes"]) == ("network.transport_retry_exceeded", [])
    assert v["quality"] != "definitive"
    assert next(e["event"] for e in v["evidence"] if e["rule_id"] == "ib_common_peer") == "network.ib_errors_scattered"


def test_two_failing_connections_sharing_an_end_are_not_the_fabrics(verdicts):
    v = verdicts["817"]
    assert "n56" in v["culprit_nodes"]
    assert not any(e["event"] == "network.ib_errors_scattered" for e in v["evidence"])


def test_runs_keep_one_address_banner_per_node_and_attempt():
    """Every rank prints the bootstrap banner; a run keeps it once per node (no rank)."""
    lines = [bootstrap(rank, f"n{9 + rank // 8}", f"10.22.0.{9 + rank // 8}").split(": ", 1)[1] for rank in range(24)]
    observations = pl.DataFrame({
        "message": lines, "origin": [f"slurm-803.out:{i + 1}" for i in range(24)],
        "node": [f"n{9 + i // 8}" for i in range(24)], "rank": list(range(24)),
        "attempt_id": ["slurm/c1/803/0"] * 24, "source": ["app"] * 24,
    }, schema_overrides={"rank": pl.Int32})
    kept = line_events(observations, load_rule_pack())
    assert kept.select("node", "rank", "event").sort("node").rows() == [
        ("n10", None, "network.nccl_address"), ("n11", None, "network.nccl_address"), ("n9", None, "network.nccl_address"),
    ]


def test_a_silent_shared_ends_own_gpu_fault_after_the_end_is_what_the_connections_failed_on(verdicts):
    v = verdicts["805"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("gpu", "gpu.fallen_off_bus", ["n22"])
    assert v["quality"] != "definitive"  # stamped after the end: a clock running ahead is a guess
    assert {e["role"] for e in v["evidence"] if e["rule_id"] == "fabric.nccl_ib_completion_error"} == {"cascade"}


def test_efas_unresponsive_peer_names_its_instance_and_so_its_node(verdicts):
    v = verdicts["808"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("network", "network.transport_retry_exceeded", ["n30"])
    roles = {(e["node"], e["role"]) for e in v["evidence"] if e["rule_id"] == "fabric.ofi_completion_error"}
    assert roles == {("n30", "root_candidate"), ("n28", "cascade"), ("n29", "cascade")}


def test_slurms_word_that_the_silent_end_stopped_answering_points_at_it(verdicts):
    """slurmctld's report of the node every connection named is no rival to the reports: it
    is why they failed."""
    v = verdicts["814"]
    assert v["domain"] in ("network", "host") and v["culprit_nodes"] == ["n49"]


def test_socket_timeouts_on_one_address_name_its_node(verdicts):
    v = verdicts["809"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("network", "network.transport_retry_exceeded", ["n33"])
    assert {e["role"] for e in v["evidence"] if e["rule_id"] == "comm.nccl_socket_call_failed"} == {"cascade"}


def test_an_unmapped_shared_end_among_several_silent_nodes_blames_no_reporter(verdicts):
    v = verdicts["810"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("network", "network.transport_retry_exceeded", [])
    assert v["quality"] != "definitive"
    assert {e["role"] for e in v["evidence"] if e["rule_id"] == "fabric.nccl_ib_completion_error"} == {"context"}


def test_the_silent_ends_own_fault_before_the_reports_could_be_printed_is_their_root(verdicts):
    """The reports are stamped 08:40 only by inheritance: printed any time up to 08:44:44,
    after the silent end shut itself down at 08:44:12, which is why its connections failed."""
    v = verdicts["811"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("host", "host.thermal_shutdown", ["n39"])


def test_a_silent_end_whose_rank_died_of_its_own_error_is_that_errors_cascade(verdicts):
    """A rank that died of the job's own error closed its connections: its peers' retries
    ran out on it, and no link or node is to blame."""
    v = verdicts["812"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("workload", "workload.cuda_oom", [])
    assert {e["role"] for e in v["evidence"] if e["rule_id"] == "fabric.nccl_ib_completion_error"} == {"cascade"}


def test_ucx_reports_naming_one_lid_point_at_the_silent_node(verdicts):
    v = verdicts["813"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("network", "network.transport_retry_exceeded", ["n46"])
    assert v["quality"] != "definitive"
