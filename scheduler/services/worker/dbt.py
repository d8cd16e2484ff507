"""dbt targets: a schedule whose run calls `dbt build` and reads dbt's results into the run's node records.

Built on the command target (services/commands.py): the same supervisor
starts, cancels, times out and reaps dbt; its output streams into the run
log. What runs comes only from the schedule's `dbt` definition and the
settings (ETL_DBT_EXECUTABLE, ETL_DBT_RUNS_DIR); run params and the window
reach dbt only as `--vars` JSON, one argv item, never as flags or paths.
Each run attempt has its own `--target-path` and `--log-path`, so runs at
once never clobber each other's artifacts. docs/dbt.md is the operator's page.
"""
from __future__ import annotations

import json
import logging
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils import timezone

from scheduler.core import Outcome, RunRecord, RunReport, Window
from scheduler.core.dbt_results import (
    FAILED, SKIPPED, DbtNode, failure_summary, manifest_edges, parse_run_results, rerun_selector,
)
from scheduler.models import NodeOutcome, NodeRecord, Run
from scheduler.services.worker import supervisor
from scheduler.services.worker.commands import CommandFailed, command_execute, run_env
from scheduler.services.common.errors import ServiceError
from scheduler.services.runs.watermarks import encode_value

log = logging.getLogger(__name__)
KEYS = ("project_dir", "profiles_dir", "target", "select", "exclude", "full_refresh", "threads", "vars")
#: the names the scheduler gives dbt in --vars (a schedule's vars and the run's params may not take them)
FACT_VARS = ("window_low", "window_high", "logical_time", "run_id", "schedule", "attempt", "backfill_id")
TARGET_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$")
MAX_SELECTOR_CHARS = 4096
MAX_RESULTS_BYTES = 64 * 1024 * 1024
MAX_THREADS = 256
# dbt's own switches for a scheduler's run: no colours in the run log, no phone-home (runs may have no network)
QUIET_FLAGS = ("--no-use-colors", "--no-send-anonymous-usage-stats", "--no-version-check")
DBT_ENV = {"DBT_SEND_ANONYMOUS_USAGE_STATS": "false", "DBT_USE_COLORS": "false"}


class DbtFailed(CommandFailed):
    """dbt exited non-zero: what it ran (the report, when it wrote results) and the reason in dbt's words."""

    def __init__(self, message: str, *, exit_code: int | None, tail: str = "", report: RunReport | None = None,
                 rows: int | None = None, error: str = "") -> None:
        super().__init__(message, exit_code=exit_code, tail=tail)
        self.report = report
        self.rows = rows
        self.error = error


@dataclass
class DbtReport(RunReport):
    """A workflow report whose graph comes from dbt's manifest rather than a registered workflow."""

    deps: list[tuple[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "kind": "dbt", "deps": [list(edge) for edge in self.deps]}


@dataclass(frozen=True)
class DbtResult:
    exit_code: int
    rows: int | None = None
    report: DbtReport | None = None


# --- the definition ---------------------------------------------------------------

def _dir(value: Any, field: str, *, required: bool) -> str | None:
    if value in (None, "") and not required:
        return None
    if not isinstance(value, str) or not value or "\x00" in value or not os.path.isabs(value):
        raise ServiceError("must be an absolute directory path such as /srv/analytics", field=field)
    return value


def _selector(value: Any, field: str) -> str | list[str] | None:
    """A dbt selection as a string ("tag:daily orders+") or a list of such items; no item may look like a flag."""
    if value in (None, "", []):
        return None
    items = value if isinstance(value, list) else [value]
    if not isinstance(value, (str, list)) or not all(isinstance(item, str) for item in items):
        raise ServiceError('must be a dbt selection: a string such as "tag:daily" or a list of strings', field=field)
    if sum(map(len, items)) > MAX_SELECTOR_CHARS or any("\x00" in item for item in items):
        raise ServiceError(f"must be at most {MAX_SELECTOR_CHARS} characters, without NUL", field=field)
    for word in (w for item in items for w in item.split()):
        if word.startswith("-"):
            raise ServiceError(f"{word!r} looks like a flag; a selection names nodes (tag:daily, orders+)",
                               field=field)
    return value


def dbt_spec_check(value: Any, *, field: str = "dbt") -> dict:
    """A schedule's dbt definition, checked: {project_dir, profiles_dir?, target?, select?, exclude?,
    full_refresh?, threads?, vars?}. Raises ServiceError naming the key (`dbt.project_dir`)."""
    if not isinstance(value, dict):
        raise ServiceError('must be an object such as {"project_dir": "/srv/analytics", "select": "tag:daily"}',
                           field=field)
    unknown = sorted(set(value) - set(KEYS), key=str)
    if unknown:
        raise ServiceError(f"unknown key(s) {', '.join(map(str, unknown))} (known: {', '.join(KEYS)})", field=field)
    out: dict[str, Any] = {"project_dir": _dir(value.get("project_dir"), f"{field}.project_dir", required=True)}
    if (profiles := _dir(value.get("profiles_dir"), f"{field}.profiles_dir", required=False)) is not None:
        out["profiles_dir"] = profiles
    target = value.get("target")
    if target not in (None, ""):
        if not isinstance(target, str) or not TARGET_RE.match(target):
            raise ServiceError("must be a profile target name (letters, digits, '_', '.', '-')",
                               field=f"{field}.target")
        out["target"] = target
    for key in ("select", "exclude"):
        if (selection := _selector(value.get(key), f"{field}.{key}")) is not None:
            out[key] = selection
    full_refresh = value.get("full_refresh")
    if full_refresh not in (None, False):
        if full_refresh is not True:
            raise ServiceError(f"must be true or false, got {full_refresh!r}", field=f"{field}.full_refresh")
        out["full_refresh"] = True
    threads = value.get("threads")
    if threads is not None:
        if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= MAX_THREADS:
            raise ServiceError(f"must be a whole number from 1 to {MAX_THREADS}, got {threads!r}",
                               field=f"{field}.threads")
        out["threads"] = threads
    variables = value.get("vars")
    if variables not in (None, {}):
        if not isinstance(variables, dict) or not all(isinstance(k, str) and k for k in variables):
            raise ServiceError('must be an object of name: value, such as {"region": "eu"}', field=f"{field}.vars")
        taken = sorted(set(variables) & set(FACT_VARS))
        if taken:
            raise ServiceError(f"{', '.join(taken)}: the scheduler sets these (the run's facts)", field=f"{field}.vars")
        out["vars"] = dict(variables)
    return out


def dbt_executable() -> str:
    """ETL_DBT_EXECUTABLE, else the `dbt` installed beside this Python, else the one on PATH."""
    if settings.ETL_DBT_EXECUTABLE:
        return settings.ETL_DBT_EXECUTABLE
    beside = Path(sys.executable).parent / "dbt"
    if os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("dbt") or "dbt"


def _words(selection: str | list[str] | None) -> list[str]:
    items = selection if isinstance(selection, list) else [selection or ""]
    return [word for item in items for word in item.split()]


def dbt_vars(*, spec: dict, run_id: int, schedule: str, window: Window | None, logical_time: datetime | None,
             params: dict, attempt: int, backfill: int | None) -> dict[str, Any]:
    """What dbt sees in `var()`: the schedule's vars, the run's params over them, then the run's facts."""
    return {
        **spec.get("vars", {}),
        **{k: v for k, v in (params or {}).items() if k not in FACT_VARS},
        "window_low": encode_value(window.low) if window else "",
        "window_high": encode_value(window.high) if window else "",
        "logical_time": logical_time.isoformat() if logical_time else "",
        "run_id": run_id,
        "schedule": schedule,
        "attempt": attempt,
        "backfill_id": backfill,
    }


def dbt_argv(*, spec: dict, variables: dict, target_path: str, log_path: str,
             select: list[str] | None = None) -> list[str]:
    """The argv of `dbt build` (no shell). `select` (a re-run from failure) replaces the schedule's selection."""
    argv = [dbt_executable(), "build", *QUIET_FLAGS, "--project-dir", spec["project_dir"]]
    if spec.get("profiles_dir"):
        argv += ["--profiles-dir", spec["profiles_dir"]]
    if spec.get("target"):
        argv += ["--target", spec["target"]]
    chosen = select if select else _words(spec.get("select"))
    if chosen:
        argv += ["--select", *chosen]
    if spec.get("exclude"):
        argv += ["--exclude", *_words(spec["exclude"])]
    if spec.get("full_refresh"):
        argv.append("--full-refresh")
    if spec.get("threads"):
        argv += ["--threads", str(spec["threads"])]
    argv += ["--vars", json.dumps(variables, sort_keys=True, default=str),
             "--target-path", target_path, "--log-path", log_path]
    return argv


def dbt_run_dir(run: Run) -> Path:
    """This attempt's own directory (emptied): ETL_DBT_RUNS_DIR/run-<id>/attempt-<n>/{target,logs}."""
    path = Path(settings.ETL_DBT_RUNS_DIR) / f"run-{run.pk}" / f"attempt-{run.attempt}"
    shutil.rmtree(path, ignore_errors=True)
    (path / "target").mkdir(parents=True, exist_ok=True)
    (path / "logs").mkdir(parents=True, exist_ok=True)
    return path


# --- re-run from failure ------------------------------------------------------------

def dbt_rerun_select(run: Run) -> list[str]:
    """The `--select` of a re-run of `run` from its failure: what failed or was skipped, with its children,
    within the schedule's own `select`.

    Empty when `run` recorded no node that failed (dbt could not parse, or the
    run was cancelled before dbt wrote its results): then the whole build runs.
    """
    latest = NodeRecord.objects.filter(run=run).order_by("-run_attempt").values_list("run_attempt", flat=True)
    attempt = latest.first()
    if attempt is None:
        return []
    rows = NodeRecord.objects.filter(run=run, run_attempt=attempt).order_by("id").values_list("task_id", "outcome")
    return rerun_selector(rows, within=_words((run.schedule.dbt or {}).get("select")))


# --- running it ---------------------------------------------------------------------

def dbt_execute(*, run: Run, spec: dict, window: Window | None, params: dict, control: supervisor.RunControl,
                logs) -> DbtResult:
    """`dbt build` to its end under `control`; its results into the run's node records.

    Exit 0 returns; a run asked to stop returns just the exit code (the caller
    writes the stop's outcome, and nothing dbt wrote counts). Any other exit
    raises DbtFailed: 1 with a summary of what failed, else (2: dbt could not
    parse or compile the project) with dbt's own message.
    """
    spec = dbt_spec_check(spec)
    run_dir = dbt_run_dir(run)
    target_path, log_path = run_dir / "target", run_dir / "logs"
    select = dbt_rerun_select(run.retry_of) if run.retry_of_id else []
    if run.retry_of_id:
        logs.note(f"re-run of run {run.retry_of_id} from its failure: "
                  + (f"--select {' '.join(select)}" if select else "it recorded no failed node, so all of it runs"))
    variables = dbt_vars(spec=spec, run_id=run.pk, schedule=run.schedule.name, window=window,
                         logical_time=run.logical_time, params=params, attempt=run.attempt, backfill=run.backfill_id)
    argv = dbt_argv(spec=spec, variables=variables, target_path=str(target_path), log_path=str(log_path),
                    select=select)
    result_file = str(run_dir / "result.json")
    env = run_env(run_id=run.pk, schedule=run.schedule.name, logical_time=run.logical_time,
                  window_low=variables["window_low"], window_high=variables["window_high"], params=params,
                  attempt=run.attempt, backfill=run.backfill_id, result_file=result_file, extra=DBT_ENV)
    try:
        code = command_execute(spec={"argv": argv, "cwd": spec["project_dir"]}, env=env, control=control, logs=logs,
                               result_file=result_file).exit_code
        tail = ""
    except CommandFailed as exc:
        if exc.exit_code is None:
            raise  # dbt could not start: the reason is the command's
        code, tail = exc.exit_code, exc.tail
    if control.requested is not None:
        return DbtResult(exit_code=code)
    nodes = _read_nodes(target_path, logs)
    report, rows = None, None
    if nodes is not None:
        dbt_record_nodes(run=run, nodes=nodes, now=timezone.now())
        report = _report(nodes, manifest_edges(_read_json(target_path / "manifest.json"), [n.unique_id for n in nodes]))
        counted = [n.rows for n in nodes if n.rows is not None and n.resource_type != "test" and n.outcome == "SUCCESS"]
        rows = sum(counted) if counted else None
    if code == 0:
        return DbtResult(exit_code=0, rows=rows, report=report)
    if nodes and any(n.outcome == FAILED for n in nodes):
        summary = failure_summary(nodes)
        details = "\n".join(f"{n.unique_id}: {n.message}" for n in nodes if n.outcome == FAILED)
        raise DbtFailed(summary, exit_code=code, tail=tail, report=report, rows=rows,
                        error=f"dbt build: {summary}\n{details}")
    message = dbt_message(tail)
    raise DbtFailed(f"dbt build failed (exit code {code}): {message}", exit_code=code, tail=tail, report=report,
                    rows=rows, error=f"dbt build failed (exit code {code})\n{message}")


def dbt_message(tail: str) -> str:
    """dbt's own words for an error it stopped on: what follows its last "Encountered an error:", else the tail."""
    lines = [line.rstrip() for line in tail.splitlines()]
    for i in range(len(lines) - 1, -1, -1):
        if "Encountered an error" in lines[i]:
            after = [line.strip() for line in lines[i + 1:] if line.strip()]
            if after:
                return " ".join(after)
    return " ".join(line.strip() for line in lines[-5:] if line.strip()) or "no output"


def _read_json(path: Path) -> Any:
    try:
        if path.stat().st_size > MAX_RESULTS_BYTES:
            return None
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _read_nodes(target_path: Path, logs) -> list[DbtNode] | None:
    """The nodes of this attempt's run_results.json, or None when dbt wrote none (it stopped before running)."""
    path = target_path / "run_results.json"
    if not path.exists():
        return None
    data = _read_json(path)
    try:
        return parse_run_results(data)
    except ValueError as exc:
        logs.note(f"dbt's run_results.json could not be read: {exc}", level="WARNING")
        return None


def _outcome(node: DbtNode) -> str:
    return {FAILED: NodeOutcome.FAILED, SKIPPED: NodeOutcome.SKIPPED}.get(node.outcome, NodeOutcome.SUCCESS)


def dbt_record_nodes(*, run: Run, nodes: list[DbtNode], now: datetime) -> None:
    """One node record per model, seed, snapshot and test dbt reported, for this attempt of the run."""
    NodeRecord.objects.bulk_create([
        NodeRecord(run=run, run_attempt=run.attempt, task_id=n.unique_id[:200], outcome=_outcome(n), attempts=1,
                   started_at=n.started_at or n.finished_at or now, finished_at=n.finished_at or n.started_at or now,
                   rows=max(0, n.rows or 0), reason=n.message[:500])
        for n in nodes
    ])


def _report(nodes: list[DbtNode], edges: list[tuple[str, str]]) -> DbtReport:
    now = timezone.now()
    records = [
        RunRecord(n.unique_id, Outcome.FAILED if n.outcome == FAILED else Outcome.SUCCESS,
                  n.started_at or now, n.finished_at or n.started_at or now, rows=n.rows or 0, reason=n.message[:500])
        for n in nodes if n.outcome != SKIPPED
    ]
    return DbtReport(records=records, blocked=[n.unique_id for n in nodes if n.outcome == SKIPPED], deps=edges)


__all__ = ["DbtFailed", "DbtReport", "DbtResult", "dbt_argv", "dbt_execute", "dbt_executable", "dbt_message",
           "dbt_record_nodes", "dbt_rerun_select", "dbt_spec_check", "dbt_vars"]
