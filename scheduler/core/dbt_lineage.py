"""dbt's manifest read into lineage terms: each node's job type and the datasets it reads and writes.

Pure: takes the decoded manifest and a profile's output, touches neither Django nor the file system. Datasets are
named as openlineage-dbt names them: namespace = the warehouse (from the profile's connection: host and port,
never a user or a password), name = `{database}.{schema}.{table}` of the relation dbt builds or reads.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .lineage import LineageDataset

#: the OpenLineage jobType of each kind of dbt node (openlineage-dbt's words; a unit test is a test)
JOB_TYPES = {"model": "MODEL", "seed": "SEED", "snapshot": "SNAPSHOT", "test": "TEST", "unit_test": "TEST"}
#: the nodes whose relation is a table or view a later node can read
RELATION_TYPES = ("model", "seed", "snapshot", "source")
DEFAULT_PORTS = {"postgres": 5432, "redshift": 5439, "sqlserver": 1433, "mysql": 3306, "trino": 8080}


def profile_namespace(output: Mapping[str, Any]) -> str | None:
    """The OpenLineage namespace of a profile's output (its connection), as openlineage-dbt and the naming spec
    write it; None when the profile does not say (an unrendered template, a missing host)."""
    kind = str(output.get("type") or "").lower()

    def known(*keys: str) -> bool:
        return all(output.get(k) not in (None, "") and "{{" not in str(output.get(k)) for k in keys)

    if kind == "bigquery":
        return "bigquery"
    if kind == "snowflake":
        return f"snowflake://{str(output['account']).lower()}" if known("account") else None
    if kind == "databricks":
        return f"databricks://{output['host']}" if known("host") else None
    if kind == "sqlserver":
        return f"mssql://{output['server']}:{output.get('port') or DEFAULT_PORTS[kind]}" if known("server") else None
    if kind == "duckdb":  # not in the naming spec: the file, as this product names SQLite (docs/lineage.md)
        path = str(output.get("path") or ":memory:")
        if "{{" in path:
            return None
        return f"duckdb://{path if path.startswith(':') or '://' in path else os.path.abspath(path)}"
    if kind and known("host"):
        port = output.get("port") or DEFAULT_PORTS.get(kind)
        return f"{kind}://{output['host']}" + (f":{port}" if port else "")
    return None


def _entry(manifest: Mapping[str, Any], unique_id: str) -> Mapping[str, Any] | None:
    for section in ("nodes", "sources", "unit_tests"):
        found = (manifest.get(section) or {}).get(unique_id) if isinstance(manifest.get(section), Mapping) else None
        if isinstance(found, Mapping):
            return found
    return None


def relation(manifest: Mapping[str, Any], unique_id: str, namespace: str) -> LineageDataset | None:
    """The table or view a node builds (or a source names): `{database}.{schema}.{alias}`; None for an ephemeral
    model, a test, or a node the manifest does not describe."""
    node = _entry(manifest, unique_id)
    if node is None or unique_id.split(".", 1)[0] not in RELATION_TYPES:
        return None
    if (node.get("config") or {}).get("materialized") == "ephemeral":
        return None
    table = node.get("identifier") or node.get("alias") or node.get("name")
    parts = [node.get("database"), node.get("schema"), table]
    if not table:
        return None
    return LineageDataset(namespace, ".".join(str(p) for p in parts if p))


def _parents(manifest: Mapping[str, Any], unique_id: str) -> list[str]:
    node = _entry(manifest, unique_id) or {}
    depends = (node.get("depends_on") or {}).get("nodes") if isinstance(node.get("depends_on"), Mapping) else None
    return [p for p in depends if isinstance(p, str)] if isinstance(depends, list) else []


def _read_relations(manifest: Mapping[str, Any], unique_id: str, namespace: str) -> list[LineageDataset]:
    """What a node reads: its parents' relations, looking through ephemeral models to what they read."""
    found: dict[LineageDataset, None] = {}
    seen: set[str] = set()
    stack = list(reversed(_parents(manifest, unique_id)))
    while stack:
        parent = stack.pop()
        if parent in seen:
            continue
        seen.add(parent)
        dataset = relation(manifest, parent, namespace)
        if dataset is not None:
            found.setdefault(dataset)
        elif parent.startswith("model."):  # ephemeral: inlined into its child, so its own inputs are the child's
            stack.extend(reversed(_parents(manifest, parent)))
    return list(found)


def node_datasets(manifest: Any, unique_id: str, namespace: str
                  ) -> tuple[list[LineageDataset], list[LineageDataset]]:
    """(inputs, outputs) of a dbt node. A model, seed or snapshot writes its relation and reads its parents'; a
    data test reads what it tests and writes nothing; a unit test reads fixtures only, so it names no dataset."""
    if not isinstance(manifest, Mapping):
        return [], []
    kind = unique_id.split(".", 1)[0]
    if kind == "unit_test":
        return [], []
    inputs = _read_relations(manifest, unique_id, namespace)
    output = relation(manifest, unique_id, namespace) if kind in ("model", "seed", "snapshot") else None
    return inputs, [output] if output is not None else []


def adapter_type(manifest: Any) -> str:
    metadata = manifest.get("metadata") if isinstance(manifest, Mapping) else None
    return str((metadata or {}).get("adapter_type") or "") if isinstance(metadata, Mapping) else ""


def job_type(unique_id: str) -> str:
    return JOB_TYPES.get(unique_id.split(".", 1)[0], "TASK")


__all__ = ["JOB_TYPES", "adapter_type", "job_type", "node_datasets", "profile_namespace", "relation"]
