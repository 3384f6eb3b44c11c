"""Fabric and GPU topology → ``topology`` rows.

Two kinds of rows (``kind``):

``hca_port``
    A host HCA port and the switch port it is cabled to. From a CSV or YAML file with the
    columns ``node, hca, port, switch, switch_port`` and, optionally, ``pci`` (the port's
    PCI function, ``0000:9c:00.0``: the kernel names an HCA by it alone in some lines, and
    one ConnectX PCI function is one port), or from ``ibnetdiscover`` output (the
    topology file of ``ibnetdiscover(8)``, infiniband-diags / rdma-core), where each CA
    block reads::

        Ca	2 "H-001e0bffff4cafc0"		# "telesto HCA-1"
        [1](1e0bffff4cafc1) 	"S-0008f10500200134"[4]		# lid 3 lmc 0 "Voltaire 4036 # v4036" lid 1 4xDDR

    The CA's node description is ``<hostname> <hca>`` (``gpu-node-001 mlx5_0`` on
    rdma-core hosts, ``telesto HCA-1`` on older ones); the port line gives the local port,
    the peer switch (its node description, or ``S-<guid>`` when it has none) and the peer
    port. Links from a CA to anything but a switch are not host-to-switch cabling and are
    not rows.
``gpu``
    A GPU index and its PCI address, from CSV or YAML with the columns ``node, gpu, pci``.
    PCI addresses are normalized to ``dddd:bb:dd.f`` lowercase, the form the kernel prints
    (``nvidia-smi``'s 8-digit domain ``00000000:18:00.0`` becomes ``0000:18:00.0``).

``node_alias``
    Another name a node's logs use for it, from CSV or YAML with the columns ``node,
    alias``: ``node`` as the scheduler names it, ``alias`` as its logs do (an old hostname
    its syslog still sends, a Cray xname such as ``x1000c1s2b0n0`` for ``nid001236``). Logs
    landed after it name the node (:meth:`ingest.lake.Lake.land_inputs`); logs landed
    before keep the alias until landed again. Both names are read as the lake keeps node
    names (short, lower case); an alias naming itself, or given for two nodes, is an error.

A YAML file is a list of mappings with exactly these keys. Files are strict: a missing or
unknown column, an empty value (but an optional one) or an unreadable PCI address is an
error naming the file and row.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import polars as pl
import yaml
from pydantic import Field

from ingest.connectors.base import Batch, Connector, ConnectorError, ConnectorOptions, FetchWindow
from ingest.hostlist import short_host
from ingest.schema import TOPOLOGY

HCA_PORT_COLUMNS = ("node", "hca", "port", "switch", "switch_port")
HCA_PORT_OPTIONAL = ("pci",)
GPU_COLUMNS = ("node", "gpu", "pci")
ALIAS_COLUMNS = ("node", "alias")

_CA_HEADER = r'^Ca\s+\d+\s+"[^"]*"\s+#\s+"([^"]*)"'
_OTHER_HEADER = r"^(?:Switch|Rt)\s+\d+\s"
_CA_PORT = (
    r'^\[(\d+)\](?:\([0-9A-Fa-f]+\))?\s+"S-([0-9A-Fa-f]+)"\[(\d+)\](?:\([0-9A-Fa-f]+\))?'
    r'\s+#\s+lid\s+\d+\s+lmc\s+\d+\s+"([^"]*)"'
)


class TopologyOptions(ConnectorOptions):
    """Topology files; give any of them."""

    hca_ports_file: Path | None = Field(None, description="CSV/YAML: node, hca, port, switch, switch_port[, pci]")
    gpus_file: Path | None = Field(None, description="CSV/YAML: node, gpu, pci")
    aliases_file: Path | None = Field(None, description="CSV/YAML: node, alias (another name its logs use)")
    ibnetdiscover_file: Path | None = Field(None, description="ibnetdiscover output")


class TopologyConnector(Connector):
    """Host port ↔ switch port and GPU index ↔ PCI address, one batch per file."""

    name: ClassVar[str] = "topology"
    Options: ClassVar[type[ConnectorOptions]] = TopologyOptions
    options: TopologyOptions

    def fetch(self, window: FetchWindow | None) -> Iterator[Batch]:
        """Yield one ``topology`` batch per configured file (topology has no time window)."""
        opts = self.options
        if not (opts.hca_ports_file or opts.gpus_file or opts.ibnetdiscover_file or opts.aliases_file):
            raise ConnectorError(
                "topology: no file given — set hca_ports_file, gpus_file, ibnetdiscover_file or aliases_file")
        loaders = (
            (opts.hca_ports_file, read_hca_ports),
            (opts.gpus_file, read_gpus),
            (opts.ibnetdiscover_file, read_ibnetdiscover),
            (opts.aliases_file, read_aliases),
        )
        for path, load in loaders:
            if path is None:
                continue
            rows = load(Path(path))
            warnings = ordinal_hca_warnings(rows, path) if load is read_ibnetdiscover else []
            yield Batch(table="topology", rows=rows, cluster=self.cluster, input_id=str(path),
                        fetched=rows.height, warnings=warnings)


def read_hca_ports(path: Path) -> pl.DataFrame:
    """A CSV/YAML file of HCA port cabling (and, optionally, each port's PCI function) →
    ``hca_port`` rows."""
    frame = _read_table(path, HCA_PORT_COLUMNS, HCA_PORT_OPTIONAL)
    return _conform(_normalized_pci(frame, path).with_columns(kind=pl.lit("hca_port")), path)


def read_gpus(path: Path) -> pl.DataFrame:
    """A CSV/YAML file of GPU index ↔ PCI address → ``gpu`` rows."""
    frame = _read_table(path, GPU_COLUMNS)
    return _conform(_normalized_pci(frame, path).with_columns(kind=pl.lit("gpu")), path)


def read_aliases(path: Path) -> pl.DataFrame:
    """A CSV/YAML file of node ↔ the other name its logs use → ``node_alias`` rows."""
    frame = _read_table(path, ALIAS_COLUMNS).with_columns(
        short_host(pl.col("node")).alias("node"), short_host(pl.col("alias")).alias("alias"), kind=pl.lit("node_alias"))
    itself = frame.filter(pl.col("node") == pl.col("alias"))
    if itself.height:
        raise ConnectorError(f"topology: {path}: an alias names its own node at {itself['origin'].head(5).to_list()}")
    twice = frame.filter(pl.col("node").n_unique().over("alias") > 1)
    if twice.height:
        raise ConnectorError(
            f"topology: {path}: the same alias is given for two nodes at {twice['origin'].head(5).to_list()}")
    return _conform(frame.unique(["node", "alias"], keep="first", maintain_order=True), path)


def _normalized_pci(frame: pl.DataFrame, path: Path) -> pl.DataFrame:
    """``frame`` with its ``pci`` column (when it has one) normalized
    (:func:`normalize_pci_expr`); an address given but unreadable is an error."""
    if "pci" not in frame.columns:
        return frame
    normalized = frame.with_columns(normalize_pci_expr(pl.col("pci")).alias("_pci"))
    bad = normalized.filter(pl.col("pci").is_not_null() & pl.col("_pci").is_null())
    if bad.height:
        raise ConnectorError(
            f"topology: {path}: unreadable PCI addresses at {bad['origin'].head(5).to_list()} — write e.g. 0000:18:00.0"
        )
    return normalized.with_columns(pl.col("_pci").alias("pci")).drop("_pci")


def normalize_pci_expr(pci: pl.Expr) -> pl.Expr:
    """Vectorized: a PCI address in any common spelling → ``dddd:bb:dd.f`` lowercase
    (a missing function becomes ``.0``; an 8-digit domain keeps its last 4 digits)."""
    text = pci.str.strip_chars().str.to_lowercase().str.replace(r"^pci:", "")
    parts = text.str.extract_groups(r"^(?:([0-9a-f]{1,8}):)?([0-9a-f]{2}):([0-9a-f]{2})(?:\.([0-7]))?$")
    domain = parts.struct.field("1").fill_null("0").str.zfill(8).str.slice(4, 4)
    return pl.when(parts.struct.field("2").is_not_null()).then(pl.concat_str(
        domain, pl.lit(":"), parts.struct.field("2"), pl.lit(":"), parts.struct.field("3"),
        pl.lit("."), parts.struct.field("4").fill_null("0"),
    ))


def read_ibnetdiscover(path: Path) -> pl.DataFrame:
    """``ibnetdiscover`` output → ``hca_port`` rows (see the module docstring)."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConnectorError(f"topology: cannot read {path}: {exc}") from None
    lines = pl.DataFrame({"line": text.splitlines()}).with_row_index("lineno", offset=1)
    lines = lines.with_columns(
        # The description of the CA block a line belongs to; "" inside switch/router blocks.
        block=pl.when(pl.col("line").str.contains(_CA_HEADER))
        .then(pl.col("line").str.extract(_CA_HEADER, 1))
        .when(pl.col("line").str.contains(_OTHER_HEADER)).then(pl.lit(""))
        .forward_fill(),
        port=pl.col("line").str.extract_groups(_CA_PORT),
    )
    ports = lines.filter(pl.col("block").fill_null("") != "", pl.col("port").struct.field("1").is_not_null())
    if ports.is_empty():
        raise ConnectorError(
            f"topology: {path} has no CA port linked to a switch — is it `ibnetdiscover` output?"
        )
    desc = pl.col("block").str.strip_chars().str.splitn(" ", 2)
    switch_desc = pl.col("port").struct.field("4")
    rows = ports.select(
        kind=pl.lit("hca_port"),
        node=desc.struct.field("field_0"),
        hca=desc.struct.field("field_1"),
        port=pl.col("port").struct.field("1"),
        switch=pl.when(switch_desc.str.strip_chars() != "").then(switch_desc)
        .otherwise(pl.concat_str(pl.lit("S-"), pl.col("port").struct.field("2"))),
        switch_port=pl.col("port").struct.field("3"),
        gpu=pl.lit(None, dtype=pl.String),
        pci=pl.lit(None, dtype=pl.String),
        origin=pl.concat_str(pl.lit(f"{path}:"), pl.col("lineno").cast(pl.String)),
        alias=pl.lit(None, dtype=pl.String),
    )
    return rows.unique(["node", "hca", "port"], keep="last", maintain_order=True)


ORDINAL_HCA = r"^HCA-[0-9]+\b"
"""An HCA a node description names by its ordinal (older OFED's ``<host> HCA-1``), where
the kernel's and NCCL's lines name it by device (``mlx5_0``): nothing in the file says
which device is which."""


def ordinal_hca_warnings(rows: pl.DataFrame, path: Path) -> list[str]:
    """The warning, if any, naming the nodes of ``hca_port`` rows (:func:`read_ibnetdiscover`
    of ``path``) whose HCAs are named by their ordinal (:data:`ORDINAL_HCA`): landed, their
    switch ports still match no port a log line names."""
    nodes = sorted(rows.filter(pl.col("hca").str.contains(ORDINAL_HCA))["node"].unique().to_list())
    if not nodes:
        return []
    listed = ", ".join(nodes[:3]) + ("…" if len(nodes) > 3 else "")
    return [f"{path}: {len(nodes)} node(s) ({listed}) name their HCAs 'HCA-<n>' in their node descriptions, where "
            "kernel and NCCL lines say mlx5_<n>: their ports map to no switch port. Land a --hca-ports file naming "
            "the devices, or give the hosts rdma-ndd's '<host> <device>' descriptions."]


def _read_table(path: Path, columns: tuple[str, ...], optional: tuple[str, ...] = ()) -> pl.DataFrame:
    """A strict CSV/YAML table with exactly ``columns`` (all read as text, none empty) and
    any of ``optional`` (may be empty), plus ``origin``."""
    suffix = path.suffix.lower()
    try:
        if suffix == ".csv":
            frame = pl.read_csv(path, infer_schema=False)
            first_line = 2  # after the header
        elif suffix in (".yaml", ".yml"):
            records = yaml.safe_load(path.read_text()) or []
            if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
                raise ConnectorError(f"topology: {path} must be a YAML list of mappings with keys {list(columns)}")
            keys = sorted(set().union(*records))
            frame = pl.from_dicts(records, schema={k: pl.String for k in keys}, strict=False)
            first_line = 1  # list item number
        else:
            raise ConnectorError(f"topology: {path}: unknown file type '{suffix}' — use .csv, .yaml or .yml")
    except (OSError, pl.exceptions.PolarsError, yaml.YAMLError) as exc:
        raise ConnectorError(f"topology: cannot read {path}: {exc}") from None
    missing = [c for c in columns if c not in frame.columns]
    unknown = [c for c in frame.columns if c not in columns + optional]
    if missing or unknown:
        raise ConnectorError(
            f"topology: {path}: columns must be exactly {', '.join(columns)}"
            + (f" (and optionally {', '.join(optional)})" if optional else "")
            + (f"; missing {missing}" if missing else "") + (f"; unknown {unknown}" if unknown else "")
        )
    present = [c for c in columns + optional if c in frame.columns]
    frame = frame.select(present).with_columns(pl.all().str.strip_chars().replace("", None))
    frame = frame.with_row_index("row", offset=first_line)
    empty = frame.filter(pl.any_horizontal(pl.col(columns).is_null()))
    if empty.height:
        rows = empty["row"].head(10).to_list()
        raise ConnectorError(f"topology: {path}: empty values in rows {rows} — fill every column")
    return frame.with_columns(origin=pl.concat_str(pl.lit(f"{path}:"), pl.col("row").cast(pl.String))).drop("row")


def _conform(frame: pl.DataFrame, path: Path) -> pl.DataFrame:
    out = frame.select([
        (pl.col(c) if c in frame.columns else pl.lit(None, dtype=pl.String)).alias(c)
        for c in TOPOLOGY.names
    ])
    keys = ["kind", "node", "hca", "port", "gpu", "alias"]
    if out.select(keys).is_duplicated().any():
        dup = out.filter(out.select(keys).is_duplicated())["origin"].head(5).to_list()
        raise ConnectorError(f"topology: {path}: the same port or GPU is listed twice at {dup}")
    return out
