"""A dbt run's nodes as OpenLineage jobs: START and COMPLETE or FAIL per model, seed, snapshot and test, as
openlineage-dbt reports them, each with the datasets it read and wrote (from the manifest) and a `parent` facet
naming the scheduler's run. Written to the outbox with the node records (services/dbt.py), so they commit together.

The datasets' namespace is the warehouse the run's profile connects to (`postgres://host:5432`,
`duckdb:///srv/wh.duckdb`): profiles.yml is read the way dbt finds it, its `env_var()` values from the environment
dbt ran with. Only the connection's host, port, account or file is used, never a user or a password. A profile
that cannot be read names the adapter instead (`postgres`); lineage never fails a run.
"""
from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from scheduler.core.dbt_lineage import adapter_type, job_type, node_datasets, profile_namespace
from scheduler.core.dbt_results import SKIPPED, SUCCESS, DbtNode
from scheduler.models import NodeOutcome, Run
from scheduler.services.integrations.lineage import NodeEvent, lineage_enabled, lineage_nodes_finished

log = logging.getLogger(__name__)
# `{{ env_var('NAME') }}`, `{{ env_var("NAME", "default") }}`, with dbt's usual filters (`| int`): what profiles use
_ENV_VAR = re.compile(r"""\{\{\s*env_var\(\s*(['"])(?P<name>[^'"]+)\1\s*(?:,\s*(['"])(?P<default>[^'"]*)\3\s*)?\)"""
                      r"""(?:\s*\|\s*(?:int|string|as_number|as_text|trim))*\s*\}\}""")


def _render(value: Any, env: Mapping[str, str]) -> Any:
    """A profile value with its env_var() templates filled in; one that names an unset variable stays a template."""
    if not isinstance(value, str):
        return value

    def fill(match: re.Match) -> str:
        found = env.get(match["name"], match["default"])
        return match[0] if found is None else found

    return _ENV_VAR.sub(fill, value)


def _yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, yaml.YAMLError):
        return None


def profile_output(*, spec: dict, env: Mapping[str, str]) -> dict[str, Any] | None:
    """The profile output (connection) dbt used, found as dbt finds it: the profile named by dbt_project.yml in
    --profiles-dir, else DBT_PROFILES_DIR, else the project directory, else ~/.dbt; the target --target, else
    DBT_TARGET, else the profile's own."""
    project = Path(spec["project_dir"])
    name = _render((_yaml(project / "dbt_project.yml") or {}).get("profile"), env)
    home = Path(env.get("HOME") or Path.home()) / ".dbt"
    dirs = [spec.get("profiles_dir"), env.get("DBT_PROFILES_DIR"), project, home]
    folder = next((Path(d) for d in dirs if d and (Path(d) / "profiles.yml").is_file()), None)
    profiles = _yaml(folder / "profiles.yml") if folder else None
    profile = profiles.get(name) if isinstance(profiles, dict) and isinstance(name, str) else None
    if not isinstance(profile, dict) or not isinstance(profile.get("outputs"), dict):
        return None
    target = spec.get("target") or env.get("DBT_TARGET") or _render(profile.get("target"), env)
    output = profile["outputs"].get(target)
    return {key: _render(value, env) for key, value in output.items()} if isinstance(output, dict) else None


def dbt_namespace(*, spec: dict, env: Mapping[str, str], manifest: Any) -> str:
    """The datasets' namespace: the profile's connection, else the adapter's name."""
    output = profile_output(spec=spec, env=env)
    found = profile_namespace(output) if output else None
    if found is None:
        fallback = adapter_type(manifest) or "dbt"
        log.warning("dbt lineage: the profile's connection could not be read; datasets are named under %r", fallback)
        return fallback
    return found


def dbt_lineage_nodes(*, run: Run, nodes: list[DbtNode], manifest: Any, spec: dict, env: Mapping[str, str],
                      now: datetime) -> None:
    """Each node dbt ran: its START and its COMPLETE (or FAIL), as the job `<schedule>.<unique_id>` (jobType MODEL,
    SEED, SNAPSHOT or TEST; integration DBT). A skipped node ran nothing and sends nothing, as in openlineage-dbt."""
    if not lineage_enabled():
        return
    try:
        namespace = dbt_namespace(spec=spec, env=env, manifest=manifest)
        events = []
        for node in (n for n in nodes if n.outcome != SKIPPED):
            inputs, outputs = node_datasets(manifest, node.unique_id, namespace)
            started = node.started_at or node.finished_at or now
            outcome = NodeOutcome.SUCCESS if node.outcome == SUCCESS else NodeOutcome.FAILED
            events.append(NodeEvent(
                task_id=node.unique_id, outcome=outcome, started_at=started, finished_at=node.finished_at or started,
                reason=node.message[:500], rows=node.rows, inputs=tuple(inputs), outputs=tuple(outputs),
                job_type=job_type(node.unique_id), integration="DBT", language="SQL"))
    except Exception:  # lineage never fails a run
        log.exception("run %s: the lineage of dbt's nodes could not be built; not sent", run.pk)
        return
    lineage_nodes_finished(run=run, nodes=events)


__all__ = ["dbt_lineage_nodes", "dbt_namespace", "profile_output"]
