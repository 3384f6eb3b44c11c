"""NCCL's setup read by where it failed, end to end through the Slurm connector, the files
landing and a run: a queue-pair transition or a network setting that fails on every node of
a job is the job's configuration; the same failure on some nodes only, while the others
printed that they got through, is those nodes'. A rendezvous every node (or every rank)
joined, still waiting for more, asked for more than the job was given; ranks looking for
the store on a host that is none of the job's nodes were given the wrong one. PXN refusing host buffers is
the job's NCCL setting; NVLS failing alike on every node names none of them."""

from __future__ import annotations

from datetime import date

import pytest

from ingest.connectors.topology import TopologyConnector, TopologyOptions
from tests.end_to_end import ITERATION, role_of, verdicts_by_job

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
970|970|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:01:00|q[1-2]|gres/gpu=16,node=2
971|971|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:01:00|q[3-4]|gres/gpu=16,node=2
972|972|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:01:00|q[5-7]|gres/gpu=24,node=3
973|973|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:01:00|q[8-9]|gres/gpu=16,node=2
974|974|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:01:00|q[10-11]|gres/gpu=16,node=2
975|975|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:01:00|q[12-13]|gres/gpu=16,node=2
976|976|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:16:00|q[14-15]|gres/gpu=16,node=2
977|977|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:16:00|q[16-17]|gres/gpu=16,node=2
978|978|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:01:00|q[18-19]|gres/gpu=16,node=2
979|979|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:01:00|q[20-21]|gres/gpu=16,node=2
980|980|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:01:00|q[22-23]|gres/gpu=16,node=2
981|981|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:16:00|q[24-25]|gres/gpu=16,node=2
982|982|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:16:00|q[26-27]|gres/gpu=16,node=2
983|983|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:11:00|q[28-29]|gres/gpu=16,node=2
984|984|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:11:00|q[30-31]|gres/gpu=16,node=2
985|985|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:11:00|q[32-33]|gres/gpu=16,node=2
986|986|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:11:00|q[34-35]|gres/gpu=16,node=2
"""


def modify_qp(task: int, node: str) -> str:
    """NCCL's verbs wrapper failing to move a queue pair on ``node``, as NVIDIA/nccl-tests#185
    prints it (behind the ``host:pid:tid [dev]`` prefix)."""
    return (f"{task}: {node}:2152{task}:2152{task} [0] misc/ibvwrap.cc:187 NCCL WARN Call to ibv_modify_qp failed "
            "with error Network is unreachable")


def no_interface(task: int, node: str) -> str:
    """NCCL finding no interface NCCL_SOCKET_IFNAME names (pytorch/pytorch#29482)."""
    return f"{task}: {node}:2284{task}:2284{task} [0] bootstrap.cc:37 NCCL WARN Bootstrap : no socket interface found"


def ib_not_found(task: int, node: str) -> str:
    """NCCL told to use IB (``NCCL_NET=IB``) on a node with no HCA it can open: src/net.cc's
    ``WARN("Error: network %s not found.")`` after ``NET/IB : No device found.``."""
    return (f"{task}: {node}:4727{task}:4727{task} [0] NCCL INFO NET/IB : No device found.\n"
            f"{task}: {node}:4727{task}:4727{task} [0] net.cc:1032 NCCL WARN Error: network IB not found.")


def bootstrap(task: int, node: str, address: str) -> str:
    """NCCL's bootstrap banner (NVIDIA/nccl-tests#188): the node found its interface."""
    return f"{task}: {node}:4551{task}:4551{task} [0] NCCL INFO Bootstrap : Using ibs85f0:{address}<0>"


def ib_using(task: int, node: str, address: str) -> str:
    """NCCL's IB banner (NVIDIA/nccl#1052's shape): the node opened its HCAs."""
    return (f"{task}: {node}:4551{task}:4551{task} [0] NCCL INFO NET/IB : Using [0]mlx5_4:1/IB [RO]; "
            f"OOB ibs85f0:{address}<0>")


def store_timeout(task: int, joined: int, expected: int) -> str:
    """torch's store giving up on the clients it waited for (OpenRLHF/OpenRLHF#1040's line)."""
    return (f"{task}: torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. "
            f"{joined}/{expected} clients joined.")


def store_unreachable(task: int, host: str) -> str:
    """A store client giving up connecting to the store's host (vllm-project/vllm#19670's line)."""
    return (f"{task}: torch.distributed.DistNetworkError: The client socket has timed out after 600000ms while "
            f"trying to connect to ({host}, 29500).")


def pxn_host_buffers(task: int, node: str) -> str:
    """NCCL's proxy refusing PXN from host buffers (NVIDIA/nccl-tests#340), then the job's
    error as PyTorch raises it."""
    return (f"{task}: {node}:4821{task}:4837{task} [0] transport/net.cc:514 NCCL WARN PXN should not use host "
            "buffers for data\n"
            f"{task}: torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
            "ProcessGroupNCCL.cpp:3356, internal error - please report this issue to the NCCL developers, "
            "NCCL version 2.27.3")


def nvls_failure(task: int, node: str) -> str:
    """NCCL's NVLS transport failing to set up multicast (NVIDIA/nccl#1788's line)."""
    return (f"{task}: {node}:5120{task}:5130{task} [{task % 8}] transport/nvls.cc:254 NCCL WARN Cuda failure 401 "
            "'the operation cannot be performed in the present state'")


def output(*lines: str) -> str:
    return f"0: [2026-11-20 10:00:20,000] {ITERATION}\n" + "".join(line + "\n" for line in lines)


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("nccl_setup")
    logs = root / "logs"
    logs.mkdir()
    # A GID index no port has: every node fails to move its queue pairs.
    (logs / "slurm-970.out").write_text(output(modify_qp(0, "q1"), modify_qp(8, "q2")))
    # One node's port cannot: that node.
    (logs / "slurm-971.out").write_text(output(bootstrap(0, "q3", "10.9.0.3"), modify_qp(8, "q4")))
    # q7's interface kept another name after a reimage: q5 and q6 found theirs.
    (logs / "slurm-972.out").write_text(output(
        bootstrap(0, "q5", "10.9.0.5"), bootstrap(8, "q6", "10.9.0.6"), no_interface(16, "q7")))
    # The job named an interface no node has.
    (logs / "slurm-973.out").write_text(output(no_interface(0, "q8"), no_interface(8, "q9")))
    # q11 has no HCA NCCL can open; q10 opened its own.
    (logs / "slurm-974.out").write_text(output(
        bootstrap(0, "q10", "10.9.0.10"), ib_using(0, "q10", "10.9.0.10"), bootstrap(8, "q11", "10.9.0.11"),
        ib_not_found(8, "q11")))
    # q13 found no HCA, and q12 never said it opened one (its bootstrap banner alone says
    # nothing of IB): nothing shows the setting works anywhere.
    (logs / "slurm-975.out").write_text(output(
        bootstrap(0, "q12", "10.9.0.12"), bootstrap(8, "q13", "10.9.0.13"), ib_not_found(8, "q13")))
    # torchrun --nnodes 4 on two nodes: both joined, the store waited for four. 977: one of
    # two never came.
    (logs / "slurm-976.out").write_text(output(store_timeout(0, 2, 4), store_timeout(8, 2, 4)))
    (logs / "slurm-977.out").write_text(output(store_timeout(0, 1, 2)))
    # init_process_group's store on rank 0 waits for one client per rank: all 16 ranks of
    # two eight-GPU nodes joined a WORLD_SIZE of 32 (981); four of them never came (982).
    (logs / "slurm-981.out").write_text(output(store_timeout(0, 16, 32)))
    (logs / "slurm-982.out").write_text(output(store_timeout(0, 12, 16)))
    # The ranks look for the store on q90, no node of the job (983); on the job's own q30
    # (984); at an address (985); on q34's other name, which the topology knows (986).
    (logs / "slurm-983.out").write_text(output(store_unreachable(0, "q90"), store_unreachable(8, "q90")))
    (logs / "slurm-984.out").write_text(output(store_unreachable(8, "q30")))
    (logs / "slurm-985.out").write_text(output(store_unreachable(8, "10.9.0.90")))
    (logs / "slurm-986.out").write_text(output(store_unreachable(8, "q34-mgmt")))
    (logs / "slurm-978.out").write_text(output(pxn_host_buffers(0, "q18"), pxn_host_buffers(8, "q19")))
    # Multicast refused on both nodes at once (979), on one of two (980).
    (logs / "slurm-979.out").write_text(output(*(nvls_failure(t, "q20" if t < 8 else "q21") for t in (0, 1, 8, 9))))
    (logs / "slurm-980.out").write_text(output(bootstrap(0, "q22", "10.9.0.22"), nvls_failure(8, "q23"),
                                               nvls_failure(9, "q23")))
    aliases = root / "aliases.csv"
    aliases.write_text("node,alias\nq34,q34-mgmt\n")
    return verdicts_by_job(root, SACCT, logs, date(2026, 11, 20),
                           connectors=(TopologyConnector(TopologyOptions(aliases_file=aliases), "c1"),))


def test_a_queue_pair_transition_every_node_fails_is_the_jobs_setting(verdicts):
    v = verdicts["970"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("workload", "workload.bad_network_config", [])


def test_a_queue_pair_transition_one_node_fails_is_that_nodes(verdicts):
    v = verdicts["971"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("network", "network.ib_setup_failed", ["q4"])


def test_a_node_missing_the_interface_its_peers_found_is_named(verdicts):
    v = verdicts["972"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("network", "network.interface_missing", ["q7"])
    assert role_of(v, "comm.nccl_no_socket_interface") == "confirmation"


def test_an_interface_no_node_has_is_the_jobs_setting(verdicts):
    v = verdicts["973"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("workload", "workload.nccl_invalid_usage", [])


def test_a_node_without_the_hca_its_peers_opened_is_named(verdicts):
    v = verdicts["974"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("network", "network.interface_missing", ["q11"])


def test_no_node_opening_its_hca_leaves_the_setting_the_jobs(verdicts):
    v = verdicts["975"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("workload", "workload.nccl_invalid_usage", [])


def test_a_rendezvous_every_node_joined_still_waiting_asked_for_more_nodes(verdicts):
    v = verdicts["976"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("workload", "workload.bad_arguments", [])


def test_a_rendezvous_a_node_never_joined_is_not_the_jobs_arguments(verdicts):
    assert verdicts["977"]["cause"] != "workload.bad_arguments"


def test_a_store_every_rank_joined_still_waiting_asked_for_more_ranks(verdicts):
    v = verdicts["981"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("workload", "workload.bad_arguments", [])
    assert verdicts["982"]["cause"] != "workload.bad_arguments"


def test_a_store_on_a_host_outside_the_job_is_the_jobs_arguments(verdicts):
    v = verdicts["983"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("workload", "workload.bad_arguments", [])


@pytest.mark.parametrize("job", ["984", "985", "986"])
def test_a_store_on_a_node_of_the_job_or_at_an_address_is_not_the_jobs_arguments(verdicts, job):
    assert verdicts[job]["cause"] != "workload.bad_arguments"


def test_pxn_refusing_host_buffers_is_the_jobs_nccl_setting(verdicts):
    v = verdicts["978"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("workload", "workload.nccl_invalid_usage", [])


def test_nvls_failing_alike_on_every_node_names_none(verdicts):
    v = verdicts["979"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("nvlink", "nvlink.nvls_failure", [])


def test_nvls_failing_on_one_node_names_it(verdicts):
    v = verdicts["980"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("nvlink", "nvlink.nvls_failure", ["q23"])
