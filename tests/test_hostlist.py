"""Slurm hostlist expansion and compression.

Expected values were recorded from Slurm itself: Debian 12's ``slurm-client``
22.05.8-4+deb12u3, ``scontrol show hostnames EXPR`` / ``scontrol show hostlist NODES``, run
with a one-node ``slurm.conf`` pointed to by ``SLURM_CONF`` (no controller is needed for
these two commands). The rules behind them are in Slurm's ``src/common/hostlist.c``
(https://github.com/SchedMD/slurm/blob/master/src/common/hostlist.c):
``hostlist_create`` splits on ``"\\t, "``; ``_parse_single_range`` takes the padding width
from the lower bound as written (``range->width = strlen(lo)``), rejects ``lo > hi`` and
more than ``MAX_RANGE`` (64K) hosts in one range; ``_push_range_list`` multiplies several
brackets out with the leftmost one varying slowest.

``test_matches_scontrol_when_installed`` re-checks the table against a local ``scontrol``
when one is installed; nothing else needs Slurm.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import polars as pl
import pytest

import ingest.hostlist as hostlist
from ingest.hostlist import compress_hostlist, expand_hostlist, expand_hostlist_column

# expression → what `scontrol show hostnames` printed (Slurm 22.05.8), one name per line.
SCONTROL_HOSTNAMES = {
    "n[08-11]": ["n08", "n09", "n10", "n11"],
    "n[8-11]": ["n8", "n9", "n10", "n11"],
    "n[001-004,007]": ["n001", "n002", "n003", "n004", "n007"],
    "n[01-3]": ["n01", "n02", "n03"],
    "n[1-010]": ["n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9", "n10"],
    "n[009-011]": ["n009", "n010", "n011"],
    "n[0-1]": ["n0", "n1"],
    "n[007]": ["n007"],
    "rack[1-2]-node[01-02]": ["rack1-node01", "rack1-node02", "rack2-node01", "rack2-node02"],
    "n[1-2]x[3-4]": ["n1x3", "n1x4", "n2x3", "n2x4"],
    "n[1-2][3-4]": ["n13", "n14", "n23", "n24"],
    "gpu-a[1-2]-ib[1-2]": ["gpu-a1-ib1", "gpu-a1-ib2", "gpu-a2-ib1", "gpu-a2-ib2"],
    "node1-[1-2]": ["node1-1", "node1-2"],
    "[1-2]": ["1", "2"],
    "a,a,b": ["a", "a", "b"],
    "n[1-2],n1": ["n1", "n2", "n1"],
    "n[3,1-2]": ["n3", "n1", "n2"],
    "n[1-3,2]": ["n1", "n2", "n3", "n2"],
    "a[1-2],b[1-2]": ["a1", "a2", "b1", "b2"],
    " n1 , n2 ": ["n1", "n2"],
    "n1 n2": ["n1", "n2"],
    "n[1-2]\tn3": ["n1", "n2", "n3"],
    "a,,b": ["a", "b"],
}

# nodes (comma-joined) → what `scontrol show hostlist` printed (Slurm 22.05.8).
SCONTROL_HOSTLIST = {
    "n1": "n1",
    "n1,n2": "n[1-2]",
    "n1,n3": "n[1,3]",
    "n2,n1": "n[2,1]",
    "n3,n1,n2": "n[3,1-2]",
    "n1,m1,n2": "n1,m1,n2",
    "n8,n9,n10": "n[8-10]",
    "n08,n9,n10": "n[08,9-10]",
    "n1,n1": "n[1,1]",
    "n9,n010": "n[9,010]",
    "a,n1": "a,n1",
    "1,2,3": "[1-3]",
    "n1,n2,m1,m2": "n[1-2],m[1-2]",
    "rack1-node01,rack1-node02,rack2-node01": "rack1-node[01-02],rack2-node01",
    "n001,n002,n003,n004,n007": "n[001-004,007]",
    "gpu-a1-ib,gpu-a2-ib": "gpu-a1-ib,gpu-a2-ib",
    "n99,n100": "n[99-100]",
}

# Slurm rejects these too ("Invalid hostlist" / "_parse_single_range: Invalid range").
INVALID = {
    "n[5-3]": "at position 2: descending range 5-3 — write the lower bound first: 3-5",
    "n[]": "at position 2: an empty range",
    "n[a-b]": "at position 2: invalid range 'a-b'",
    "n[-1]": "at position 2: invalid range '-1'",
    "n[1,,2]": "at position 4: an empty range",
    "n[1-2-3]": "at position 2: invalid range '1-2-3'",
    "n[[1-2]]": "at position 2: '[' inside a bracket",
    "n[1-2]]": "at position 6: ']' without a matching '['",
    "n[1-100000]": "range 1-100000 holds more than 65536 hosts",
    "x,gpu[004-001]": "at position 6: descending range 004-001",
}

# Slurm 22.05 is lenient here (``n[1-2`` prints ``n]``, ``n1]`` prints ``n1]``, ``n[1-]``
# prints ``n1``, ``n[ 1-3]`` prints n01..n03); a wrong node list misattributes node events,
# so these are errors here.
STRICTER_THAN_SLURM = {
    "n[1-2": "at position 1: '[' is never closed — add the closing ']'",
    "n1]": "at position 2: ']' without a matching '['",
    "n[1-]": "at position 2: invalid range '1-'",
    "n[ 1-3]": "at position 2: invalid range ' 1-3'",
    "": "it is empty",
    "   ": "it is empty",
}


@pytest.mark.parametrize(("expr", "expected"), SCONTROL_HOSTNAMES.items())
def test_expand_matches_slurm(expr, expected):
    assert expand_hostlist(expr) == expected


def test_suffix_after_last_bracket():
    # Slurm 22.05 answers "Invalid hostlist: gpu-a[1-2]-ib"; node names with an interface
    # suffix are common in context files, so a suffix after the last bracket is expanded.
    assert expand_hostlist("gpu-a[1-2]-ib") == ["gpu-a1-ib", "gpu-a2-ib"]
    assert expand_hostlist("gpu[1-2]-ib,x[3]y") == ["gpu1-ib", "gpu2-ib", "x3y"]


@pytest.mark.parametrize(("expr", "fragment"), {**INVALID, **STRICTER_THAN_SLURM}.items())
def test_invalid_expressions_name_expression_and_position(expr, fragment):
    with pytest.raises(ValueError) as info:
        expand_hostlist(expr)
    message = str(info.value)
    assert f"invalid hostlist {expr!r}" in message
    assert fragment in message


def test_expansion_size_is_bounded():
    with pytest.raises(ValueError, match="expands to 2000000 hosts"):
        expand_hostlist("a[1-1000]b[1-2000]")
    assert len(expand_hostlist("n[1-65536]")) == 65536  # Slurm's MAX_RANGE is accepted


@pytest.mark.parametrize(("nodes", "expected"), SCONTROL_HOSTLIST.items())
def test_compress_matches_slurm_and_round_trips(nodes, expected):
    names = nodes.split(",")
    assert compress_hostlist(names) == expected
    assert expand_hostlist(compress_hostlist(names)) == names


@pytest.mark.parametrize("bad", [[], ["n[1]"], ["a,b"], ["a b"], [""]])
def test_compress_rejects_what_cannot_be_a_node(bad):
    with pytest.raises(ValueError, match="compress_hostlist"):
        compress_hostlist(bad)


def test_column_expands_each_distinct_value_once(monkeypatch):
    calls = []
    real = hostlist.expand_hostlist

    def counting(expr):
        calls.append(expr)
        return real(expr)

    monkeypatch.setattr(hostlist, "expand_hostlist", counting)
    column = pl.Series("NodeList", ["gpu[001-002]", None, "cpu7", "gpu[001-002]"] * 500)
    out = expand_hostlist_column(column)
    assert sorted(calls) == ["cpu7", "gpu[001-002]"]
    assert out.name == "NodeList"
    assert out.dtype == pl.List(pl.String)
    assert out.head(4).to_list() == [["gpu001", "gpu002"], None, ["cpu7"], ["gpu001", "gpu002"]]
    assert out.len() == 2000


def test_column_reports_the_bad_value():
    with pytest.raises(ValueError, match=r"invalid hostlist 'n\[2-1\]'"):
        expand_hostlist_column(pl.Series(["n[1-2]", "n[2-1]"]))


@pytest.mark.skipif(shutil.which("scontrol") is None, reason="Slurm's scontrol is not installed")
def test_matches_scontrol_when_installed(tmp_path):
    conf = tmp_path / "slurm.conf"
    conf.write_text(
        "ClusterName=t\nSlurmctldHost=localhost\n"
        "NodeName=localhost CPUs=1 State=UNKNOWN\nPartitionName=p Nodes=localhost Default=YES\n"
    )
    env = {**os.environ, "SLURM_CONF": str(conf)}
    for expr, expected in SCONTROL_HOSTNAMES.items():
        out = subprocess.run(
            ["scontrol", "show", "hostnames", expr], capture_output=True, text=True,
            env=env, timeout=30, check=True,
        ).stdout.split()
        assert out == expected == expand_hostlist(expr), expr
    for nodes, expected in SCONTROL_HOSTLIST.items():
        out = subprocess.run(
            ["scontrol", "show", "hostlist", nodes], capture_output=True, text=True,
            env=env, timeout=30, check=True,
        ).stdout.strip()
        assert out == expected == compress_hostlist(nodes.split(",")), nodes
