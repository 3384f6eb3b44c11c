"""Sanity checks of the bundled sample fleet in ``data/samples`` (no attribution involved).

The demo and the golden verdicts stand on these files, so a broken path, a truth entry
without an attempt, an unknown domain or a scenario whose key line went missing must fail
here first. Every line shape in the samples was copied from a real system; the source of
each shape is cited beside the key line it checks.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from engine.rules.catalog import cause_catalog
from engine.rules.loader import load_rule_pack
from ingest.schema import DOMAINS, QUALITIES

SAMPLES = Path(__file__).resolve().parent.parent / "data" / "samples"

SLURM_STATES = {
    "COMPLETED", "FAILED", "TIMEOUT", "PREEMPTED", "CANCELLED", "NODE_FAIL", "OUT_OF_MEMORY",
}
# Every cause the truth names must be one the rule pack (or the engine) can produce.
CAUSES = set(cause_catalog(load_rule_pack())["cause"].to_list())
TRUTH_KEYS = {
    "attempt_id", "domain", "cause", "culprit_nodes", "culprit_gpus", "culprit_ports",
    "culprit_ranks", "alternatives", "also_accept", "quality", "quality_at_least", "story",
}

# (attempt, file, text that must occur in it, where the shape was seen in the wild)
KEY_LINES = [
    ("1001/0", "nodes/gpu003/syslog",
     "NVRM: Xid (PCI:0000:3a:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
     "https://github.com/leptonai/gpud/blob/main/components/accelerator/nvidia/query/xid/xid.go"),
    ("1001/0", "nodes/gpu003/syslog", "NVRM: Xid (PCI:0000:18:00): 45, pid=",
     "https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1150"),
    ("1001/0", "jobs/slurm-1001.out",
     "ProcessGroupNCCL.cpp:607] [Rank 5] Watchdog caught collective operation timeout: "
     "WorkNCCL(SeqNum=40417, OpType=ALLREDUCE, NumelIn=131334144, NumelOut=131334144, "
     "Timeout(ms)=600000) ran for 600017 milliseconds before timing out.",
     "https://github.com/hiyouga/LlamaFactory/issues/6269"),
    ("1001/0", "jobs/slurm-1001.out", "[default5]:[rank5]:[E1128 10:51:07.",
     "https://github.com/hiyouga/LlamaFactory/issues/6269"),
    ("1001/0", "jobs/slurm-1001.out", "NCCL WARN NET/IB : Got completion from peer 10.21.0.3<",
     "https://github.com/NVIDIA/nccl/issues/1405"),
    ("1001/0", "jobs/slurm-1001.out", "closing signal SIGTERM",
     "https://github.com/huggingface/accelerate/issues/2960"),
    ("1001/0", "jobs/slurm-1001.out",
     "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
     "https://github.com/open-mmlab/mmsegmentation/issues/3106"),
    ("1002/0", "nodes/gpu006/syslog",
     "NVRM: Xid (PCI:0000:9a:00): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error "
     "detected on link 14(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
     "https://github.com/NVIDIA/NVSentinel/pull/516"),
    ("1003/0", "nodes/gpu008/syslog",
     "mlx5_core 0000:3c:00.0: mlx5_port_module_event:1131:(pid 0): Port module event[error]: "
     "module 0, Cable error, Bad or shorted cable/module",
     "https://github.com/torvalds/linux/blob/master/drivers/net/ethernet/mellanox/mlx5/core/events.c"),
    ("1003/0", "nodes/gpu008/syslog", "mlx5_core 0000:3c:00.0 enp60s0np0: Link down",
     "https://jishuzhan.net/article/1911252493641777153"),
    ("1003/0", "nodes/gpu008/syslog", "mlx5_core 0000:3c:00.0 mlx5_1: Port: 1 Link DOWN",
     "https://github.com/leptonai/gpud/pull/1209"),
    ("1003/0", "jobs/slurm-1003.out",
     "NCCL WARN NET/IB : Got completion from peer 10.21.0.8<52302> with error 12, opcode 0, "
     "len 0, vendor err 129",
     "https://github.com/NVIDIA/nccl/issues/902"),
    ("1004/0", "nodes/gpu005/syslog", "gpu005 kernel: Out of memory: Killed process 44414 (python)",
     "https://github.com/torvalds/linux/blob/master/mm/oom_kill.c"),
    ("1004/0", "jobs/slurm-1004.out",
     "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=1004.0 cgroup.",
     "https://github.com/hafs-community/HAFS/issues/101"),
    ("1005/0", "jobs/slurm-1005.out",
     "[default5]:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB.",
     "https://github.com/lllyasviel/FramePack/issues/369"),
    ("1006/0", "jobs/slurm-1006.out",
     " 0: FileNotFoundError: [Errno 2] No such file or directory: "
     "'/lustre/datasets/bert-eval/shard_00017.jsonl'",
     "https://github.com/NVIDIA/Megatron-LM/issues/185"),
    ("1007/0", "jobs/slurm-1007.out",
     "slurmstepd: error: *** JOB 1007 ON gpu013 CANCELLED AT 2026-11-28T06:00:07 DUE TO TIME LIMIT ***",
     "https://github.com/desihub/desitarget/issues/628"),
    ("1008/0", "jobs/slurm-1008.out",
     "slurmstepd: error: *** JOB 1008 ON gpu001 CANCELLED AT 2026-11-28T09:59:32 DUE TO PREEMPTION ***",
     "https://github.com/SchedMD/slurm/blob/master/src/slurmd/slurmstepd/req.c"),
    ("1009/0", "jobs/slurm-1009.out",
     "slurmstepd: error: *** JOB 1009 ON gpu015 CANCELLED AT 2026-11-28T11:20:31 ***",
     "https://github.com/hafs-community/HAFS/issues/101"),
    ("1010/0", "jobs/slurm-1010.out", " 0: OSError: [Errno 28] No space left on device",
     "https://github.com/babysor/MockingBird/issues/774"),
    ("1011/0", "nodes/gpu014/syslog", "gpu014 kernel: Kernel panic - not syncing: Hard LOCKUP",
     "https://github.com/iron-fish/ironfish/issues/701"),
    ("1011/0", "jobs/slurm-1011.out",
     "*** JOB 1011 ON gpu013 CANCELLED AT 2026-11-29T04:13:10 DUE TO NODE FAILURE, "
     "SEE SLURMCTLD LOG FOR DETAILS ***",
     "https://github.com/SchedMD/slurm/blob/master/src/slurmd/slurmstepd/req.c"),
    ("1013/0", "jobs/slurm-1013.out", "Watchdog caught collective operation timeout",
     "https://github.com/XPixelGroup/BasicSR/issues/737"),
    ("1014/0", "nodes/gpu001/syslog", "NVRM: Xid (PCI:0000:ab:00): 79,",
     "https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1151"),
    ("1014/0", "nodes/gpu002/syslog", "mlx5_core 0000:9c:00.0 mlx5_2: Port: 1 Link DOWN",
     "https://github.com/leptonai/gpud/pull/1209"),
    ("1016/0", "nodes/gpu009/dmesg",
     "NVRM: Xid (PCI:0000:ba:00): 63, pid=47189, name=python, Row Remapper: New row marked "
     "for remapping, reset gpu to activate.",
     "https://github.com/stas00/ml-engineering/blob/15de338c6411c943fc083f7365017c1547acf9af/compute/accelerator/nvidia/debug.md"),
]

MONTHS = {m: i for i, m in enumerate(
    "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), start=1)}
RFC5424 = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}[+-]\d\d:\d\d) (\S+) ")
RFC3164 = re.compile(r"^([A-Z][a-z]{2}) ([ \d]\d) (\d\d):(\d\d):(\d\d) (\S+) ")
DMESG = re.compile(r"^\[\s*(\d+\.\d{6})\] ")


def _load(name: str) -> dict:
    return yaml.safe_load((SAMPLES / name).read_text())


def _expand(hostlist: str) -> list[str]:
    """Expands the only hostlist shapes the samples use: ``gpu007`` and ``gpu[001-004,009]``."""
    m = re.fullmatch(r"([a-z]+)\[([\d,-]+)\]", hostlist)
    if not m:
        return [hostlist]
    prefix, body = m.groups()
    nodes = []
    for part in body.split(","):
        lo, _, hi = part.partition("-")
        width = len(lo)
        nodes += [f"{prefix}{i:0{width}d}" for i in range(int(lo), int(hi or lo) + 1)]
    return nodes


def _attempt_id(a: dict) -> str:
    return f"static/demo/{a['job_id']}/{a.get('attempt_index', 0)}"


def _ts(value) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(str(value))


@pytest.fixture(scope="module")
def context() -> dict:
    return _load("context.yaml")


@pytest.fixture(scope="module")
def manifest() -> dict:
    return _load("manifest.yaml")


@pytest.fixture(scope="module")
def truth() -> dict:
    return _load("truth.yaml")


@pytest.fixture(scope="module")
def node_stamps(manifest) -> dict[str, list[tuple[datetime, str]]]:
    """Every node log line with its wall time, read the way the manifest says to."""
    out: dict[str, list[tuple[datetime, str]]] = {}
    for item in manifest["inputs"]:
        if item.get("source") not in ("syslog", "kmsg"):
            continue
        rows = out.setdefault(item["node"], [])
        for line in (SAMPLES / item["path"]).read_text().splitlines():
            if m := RFC5424.match(line):
                rows.append((datetime.fromisoformat(m[1]), line))
            elif m := RFC3164.match(line):
                mon, day, hh, mm, ss, _ = m.groups()
                rows.append((datetime(item["year"], MONTHS[mon], int(day), int(hh), int(mm),
                                      int(ss), tzinfo=UTC), line))
            elif m := DMESG.match(line):
                boot = datetime.fromisoformat(item["boot_time"].replace("Z", "+00:00"))
                rows.append((boot + timedelta(seconds=float(m[1])), line))
            else:
                pytest.fail(f"{item['path']}: line matches no declared stamp format: {line!r}")
    return out


def test_manifest_paths_exist_and_cover_every_node(manifest, context):
    assert manifest["cluster"] == context["cluster"] == "demo"
    for item in manifest["inputs"]:
        assert (SAMPLES / item["path"]).exists(), f"manifest names missing path {item['path']}"
        assert item["kind"] in ("static", "files")
        if item["kind"] == "files":
            assert item["source"] in ("syslog", "kmsg", "app")
        if item.get("source") == "kmsg":
            assert "boot_time" in item and "node" in item
    logged = {i["node"] for i in manifest["inputs"] if "node" in i}
    used = {n for a in context["attempts"] for n in _expand(a["nodes"])}
    assert used <= logged, f"nodes with attempts but no log input: {sorted(used - logged)}"
    assert len(logged) == 16


def test_every_attempt_has_truth_and_vice_versa(context, truth):
    ids = [_attempt_id(a) for a in context["attempts"]]
    assert len(ids) == len(set(ids)) >= 20
    assert sorted(ids) == sorted(t["attempt_id"] for t in truth["attempts"])


def test_context_values_are_well_formed(context):
    for a in context["attempts"]:
        where = _attempt_id(a)
        assert isinstance(a["job_id"], str), where
        assert a["state"].split(" ")[0] in SLURM_STATES, where
        assert re.fullmatch(r"\d+:\d+", a["exit_code"]), where
        assert _ts(a["submit"]) <= _ts(a["start"]) < _ts(a["end"]), where
        assert a["ranks_per_node"] == a["gpus_per_node"] == 8, where
        failed = a["state"] == "FAILED"
        assert failed == (a["exit_code"].split(":")[0] != "0"), f"{where}: state vs exit code"
        if a["state"] == "OUT_OF_MEMORY":
            assert a["exit_code"] == "0:125", where


def test_no_node_runs_two_attempts_at_once(context):
    spans = sorted((n, _ts(a["start"]), _ts(a["end"]), _attempt_id(a))
                   for a in context["attempts"] for n in _expand(a["nodes"]))
    for (n1, _, e1, id1), (n2, s2, _, id2) in zip(spans, spans[1:]):
        assert n1 != n2 or e1 <= s2, f"{id1} and {id2} overlap on {n1}"


def test_truth_values_are_in_closed_sets(truth):
    for t in truth["attempts"]:
        where = t["attempt_id"]
        assert set(t) <= TRUTH_KEYS, f"{where}: unknown keys {set(t) - TRUTH_KEYS}"
        assert t["domain"] in DOMAINS, where
        assert t["cause"] in CAUSES, where
        assert t["cause"] == "none" or t["cause"].split(".")[0] == t["domain"], where
        assert ("quality" in t) != ("quality_at_least" in t), where
        assert t.get("quality", t.get("quality_at_least")) in QUALITIES, where
        assert set(t.get("alternatives", [])) | set(t.get("also_accept", [])) <= CAUSES, where
        assert isinstance(t["culprit_nodes"], list) and t["story"], where


def test_truth_matches_attempt_outcome(context, truth):
    by_id = {t["attempt_id"]: t for t in truth["attempts"]}
    for a in context["attempts"]:
        t = by_id[_attempt_id(a)]
        assert (a["state"] == "COMPLETED") == (t["domain"] == "none"), t["attempt_id"]
    assert by_id["static/demo/1013/0"]["quality"] == "insufficient"
    assert by_id["static/demo/1014/0"]["quality"] == "ambiguous"
    assert by_id["static/demo/1014/0"]["alternatives"]
    assert sum(t["domain"] == "none" for t in truth["attempts"]) >= 6


@pytest.mark.parametrize(("attempt", "path", "text", "seen_at"), KEY_LINES,
                         ids=[f"{k[0]}:{k[1]}" for k in KEY_LINES])
def test_scenario_key_line_is_present(attempt, path, text, seen_at):
    assert text in (SAMPLES / path).read_text(), f"{path} lost the key line of {attempt}"


def test_node_key_lines_fall_inside_their_attempt(context, node_stamps):
    spans = {_attempt_id(a): (_ts(a["start"]), _ts(a["end"]), _expand(a["nodes"]))
             for a in context["attempts"]}
    for attempt, path, text, _ in KEY_LINES:
        if not path.startswith("nodes/"):
            continue
        node = path.split("/")[1]
        start, end, nodes = spans[f"static/demo/{attempt}"]
        assert node in nodes, f"{attempt}: key line on {node}, which the attempt does not use"
        stamps = [ts for ts, line in node_stamps[node] if text in line]
        assert stamps and all(start <= ts <= end for ts in stamps), f"{attempt}: {text!r}"


def test_idle_node_link_flap_touches_no_attempt(context, node_stamps):
    flaps = [ts for ts, line in node_stamps["gpu016"] if "Link down" in line]
    assert flaps
    for a in context["attempts"]:
        if "gpu016" in _expand(a["nodes"]):
            assert all(not _ts(a["start"]) <= ts <= _ts(a["end"]) for ts in flaps)


def test_roots_come_before_their_cascades(node_stamps):
    gpu003 = node_stamps["gpu003"]
    xid79 = min(ts for ts, line in gpu003 if "): 79," in line)
    xid45 = min(ts for ts, line in gpu003 if "): 45," in line)
    assert timedelta(seconds=590) < xid45 - xid79 < timedelta(seconds=620)
    gpu006 = node_stamps["gpu006"]
    assert min(ts for ts, l in gpu006 if "): 74," in l) < min(ts for ts, l in gpu006 if "): 45," in l)


def test_flood_of_one_xid_is_present(node_stamps):
    flood = [ts for ts, line in node_stamps["gpu006"] if "): 45, " in line]
    assert len(flood) >= 200
    assert max(flood) - min(flood) < timedelta(seconds=5)


def test_srun_label_width_matches_task_count(context):
    """srun --label pads the task id to the width of the largest one (``%*d: ``)."""
    for a in context["attempts"]:
        text = (SAMPLES / "jobs" / f"slurm-{a['job_id']}.out").read_text()
        width = len(str(len(_expand(a["nodes"])) * a["ranks_per_node"] - 1))
        for label in re.findall(r"^( *\d+): ", text, flags=re.MULTILINE):
            assert len(label) == width, f"slurm-{a['job_id']}.out: label {label!r}"


def test_folder_stays_small():
    total = sum(p.stat().st_size for p in SAMPLES.rglob("*") if p.is_file())
    assert total < 1_100_000
