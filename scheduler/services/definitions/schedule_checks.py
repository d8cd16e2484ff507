"""Checking a schedule before it is saved: every field, named in the message; cycles, filters, targets."""
from __future__ import annotations

import math
import re
from typing import Any


from scheduler.core import ConfigError, WatermarkConfig, validate_timezone
from scheduler.core.limits import MAX_SECONDS
from scheduler.models import (
    CatchupPolicy,
    Condition,
    FreshnessMeasure,
    OverlapPolicy,
    Schedule,
    TargetKind,
)
from scheduler.pipelines.registry import all_pipelines, all_workflows, is_registered
from scheduler.services.worker.commands import command_spec_check
from scheduler.services.worker.dbt import dbt_spec_check
from scheduler.services.runs.dependencies import cycle_for
from scheduler.services.common.errors import ErrorCollector, ServiceError, check_text
from scheduler.services.integrations.channels import (
    channels_text,
    check_channels,
)
# schedule_get is re-exported
from scheduler.services.runs.queue import check_target_params, schedule_get, validate_params  # noqa: F401
from scheduler.triggers.registry import get_trigger
from scheduler.services.access.connections import connections_check

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
#: Every field a person sets on a schedule, in the order the schedules file and
#: `export_schedules` write them. The one list: the service's accepted keys
#: (EDITABLE), the schedules file, its export and `SchedulerHost.schedules` read it.
SCHEDULE_FIELDS: tuple[str, ...] = (
    "name",
    "description",
    "owner",
    "target_kind",
    "target_id",
    "command",
    "dbt",
    "enabled",
    "priority",
    "workload_class",
    "params",
    "timeout_seconds",
    "deadline_seconds",
    "trigger_kind",
    "trigger_config",
    "timezone",
    "catchup",
    "max_catchup",
    "overlap_policy",
    "watermark_config",
    "depends_on",
    "condition",
    "max_wait_seconds",
    "max_upstream_age_seconds",
    "breaker_threshold",
    "breaker_cooldown_seconds",
    "breaker_max_cooldown_seconds",
    "max_runs_per_minute",
    "refresh_after_seconds",
    "freshness_max_age_seconds",
    "freshness_measure",
    "retry_max_attempts",
    "retry_initial_delay",
    "retry_backoff",
    "retry_max_delay",
    "retry_jitter",
    "alert_channels",
    "retention_days",
)
EDITABLE = frozenset(SCHEDULE_FIELDS)
MAX_RETENTION_DAYS = 36_500
NON_NEGATIVE_INT = ["max_catchup", "max_wait_seconds", "max_runs_per_minute"]
POSITIVE_INT = [
    "max_upstream_age_seconds",
    "breaker_threshold",
    "breaker_cooldown_seconds",
    "breaker_max_cooldown_seconds",
    "retry_max_attempts",
]


INT_MAX = 2**31 - 1  # the columns are 32-bit integers: a bigger value would be a database error, not a message
TEXT_FIELDS = ["name", "description", "target_id", "timezone"]
JSON_FIELDS = ["params", "trigger_config", "watermark_config", "command", "dbt"]


def _int(value: Any, field: str, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str) and value.strip().lstrip("-").isascii() and value.strip().lstrip("-").isdigit():
            value = int(value)  # isdigit alone admits "¹", which int() refuses
        else:
            raise ServiceError(f"must be a whole number, got {value!r}", field=field)
    if value < minimum:
        raise ServiceError(f"must be >= {minimum}, got {value}", field=field)
    if value > INT_MAX:
        raise ServiceError(f"must be <= {INT_MAX}, got {value}", field=field)
    return value


def _float(value: Any, field: str, *, minimum: float, maximum: float | None = None) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ServiceError(f"must be a number, got {value!r}", field=field) from None
    if not math.isfinite(number) or number < minimum or (maximum is not None and number > maximum):
        bound = f"between {minimum} and {maximum:g}" if maximum is not None else f">= {minimum}"
        if maximum is not None and math.isfinite(number) and number > maximum:
            bound = f"at most {maximum:.15g} (the largest allowed)"
        raise ServiceError(f"must be {bound}, got {value!r}", field=field)
    return number


def validate_schedule(schedule: Schedule, *, depends_on: list[Schedule] | None = None) -> None:
    """Check every field of an unsaved or changed schedule; raise ServiceError naming the field.

    Every field is checked, so several bad fields are reported together (InvalidInput lists them).
    """
    found = ErrorCollector()
    for field in TEXT_FIELDS:
        with found.check():
            if not isinstance(getattr(schedule, field), (str, type(None))):
                raise ServiceError(f"must be text, got {type(getattr(schedule, field)).__name__}", field=field)
            check_text(getattr(schedule, field), field=field, max_length=Schedule._meta.get_field(field).max_length)
    if not isinstance(schedule.enabled, bool):
        found.errors.append(ServiceError(f"must be true or false, got {schedule.enabled!r}", field="enabled"))
    if isinstance(schedule.catchup, bool):  # the boolean of old files and callers: true meant every missed fire
        schedule.catchup = CatchupPolicy.ALL if schedule.catchup else CatchupPolicy.LATEST
    if not isinstance(schedule.catchup, str) or schedule.catchup not in CatchupPolicy.values:
        found.errors.append(ServiceError(f"must be one of {', '.join(CatchupPolicy.values)}, got {schedule.catchup!r}",
                                         field="catchup"))
    if schedule.overlap_policy is None:
        schedule.overlap_policy = ""
    if not isinstance(schedule.overlap_policy, str) or schedule.overlap_policy not in ["", *OverlapPolicy.values]:
        found.errors.append(
            ServiceError(
                f"must be one of {', '.join(OverlapPolicy.values)} (or empty for the default), "
                f"got {schedule.overlap_policy!r}",
                field="overlap_policy",
            )
        )
    if not found.failed("name") and (not schedule.name or not NAME_RE.match(schedule.name)):
        found.errors.append(ServiceError(
            "must be 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit", field="name"))
    if schedule.command is None:
        schedule.command = {}
    if schedule.dbt is None:
        schedule.dbt = {}
    if schedule.target_kind != TargetKind.DBT and schedule.dbt:
        found.errors.append(ServiceError(f"only a dbt target has a dbt definition (this one runs a "
                                         f"{schedule.target_kind})", field="dbt"))
    if schedule.target_kind not in TargetKind.values:
        found.errors.append(ServiceError(f"must be one of {', '.join(TargetKind.values)}", field="target_kind"))
    elif schedule.target_kind == TargetKind.COMMAND:
        # a command comes from its author (this definition), never from run params
        if not schedule.command:
            found.errors.append(ServiceError('a command target needs a command such as {"argv": ["dbt", "build"]}',
                                             field="command"))
        else:
            with found.check():
                schedule.command = command_spec_check(schedule.command)
        if schedule.target_id and not found.failed("target_id"):
            found.errors.append(ServiceError("must be empty for a command target (the command says what runs)",
                                             field="target_id"))
    elif schedule.target_kind == TargetKind.DBT:
        # like a command's, the project and profile paths come from this definition, never from run params
        if not schedule.dbt:
            found.errors.append(ServiceError('a dbt target needs a dbt definition such as {"project_dir": '
                                             '"/srv/analytics", "select": "tag:daily"}', field="dbt"))
        else:
            with found.check():
                schedule.dbt = dbt_spec_check(schedule.dbt)
        if schedule.target_id and not found.failed("target_id"):
            found.errors.append(ServiceError("must be empty for a dbt target (the dbt definition says what runs)",
                                             field="target_id"))
        if schedule.command:
            found.errors.append(ServiceError("only a command target has a command (this one runs dbt build)",
                                             field="command"))
    elif schedule.command:
        found.errors.append(
            ServiceError(
                f"only a command target has a command (this one runs a {schedule.target_kind})", field="command"
            )
        )
    elif not found.failed("target_id") and (
        not schedule.target_id or not is_registered(schedule.target_kind, schedule.target_id)
    ):
        known = [p.id for p in (all_pipelines() if schedule.target_kind == TargetKind.PIPELINE else all_workflows())]
        found.errors.append(ServiceError(
            f"unknown {schedule.target_kind} '{schedule.target_id}' (known: {', '.join(sorted(known)) or 'none'})",
            field="target_id",
        ))
    if isinstance(schedule.priority, bool) or not isinstance(schedule.priority, int) or not 0 <= schedule.priority <= 9:
        found.errors.append(ServiceError(f"must be a whole number from 0 to 9, got {schedule.priority!r}",
                                         field="priority"))
    if schedule.workload_class_id is None:
        found.errors.append(ServiceError("is required", field="workload_class"))
    if not found.failed("timezone"):
        try:
            validate_timezone(schedule.timezone)
        except ConfigError as exc:
            found.errors.append(ServiceError(exc.problem, field="timezone"))
    if not found.failed("timezone"):  # the trigger is read in the schedule's zone
        try:
            plugin = get_trigger(schedule.trigger_kind)
            schedule.trigger_config = plugin.validate(schedule.trigger_config, timezone=schedule.timezone)
        except ConfigError as exc:
            found.errors.append(ServiceError(exc.problem, field=exc.field))
    if schedule.watermark_config:
        try:
            schedule.watermark_config = WatermarkConfig.from_dict(schedule.watermark_config).to_dict()
        except ConfigError as exc:
            field = exc.field if exc.field.startswith("watermark") else f"watermark_config.{exc.field}"
            found.errors.append(ServiceError(exc.problem, field=field))
    else:
        schedule.watermark_config = {}
    if schedule.watermark_config and schedule.overlap_policy == OverlapPolicy.ALLOW_ALL:
        found.errors.append(ServiceError(
            "a watermarked schedule cannot use allow_all: two runs at once would read overlapping "
            "windows (use skip, buffer_one, buffer_all or cancel_other)", field="overlap_policy"))
    if schedule.condition not in Condition.values:
        found.errors.append(ServiceError(f"must be one of {', '.join(Condition.values)}", field="condition"))
    for field in NON_NEGATIVE_INT:
        with found.check():
            setattr(schedule, field, _int(getattr(schedule, field), field, minimum=0))
    for field in POSITIVE_INT:
        with found.check():
            setattr(schedule, field, _int(getattr(schedule, field), field, minimum=1))
    if schedule.refresh_after_seconds is not None:
        with found.check():
            schedule.refresh_after_seconds = _int(schedule.refresh_after_seconds, "refresh_after_seconds", minimum=1)
    for field in ("timeout_seconds", "deadline_seconds", "retention_days"):
        if getattr(schedule, field) in ("", None):
            setattr(schedule, field, None)
        else:
            with found.check():
                setattr(schedule, field, _int(getattr(schedule, field), field, minimum=1))
    if schedule.retention_days is not None and not found.failed("retention_days") \
            and schedule.retention_days > MAX_RETENTION_DAYS:
        found.errors.append(ServiceError(f"must be <= {MAX_RETENTION_DAYS} (100 years), got {schedule.retention_days}",
                                         field="retention_days"))
    if schedule.freshness_max_age_seconds is not None:
        with found.check():
            schedule.freshness_max_age_seconds = _int(schedule.freshness_max_age_seconds, "freshness_max_age_seconds",
                                                      minimum=1)
    if not isinstance(schedule.freshness_measure, str) or schedule.freshness_measure not in FreshnessMeasure.values:
        found.errors.append(ServiceError(
            f"must be one of {', '.join(FreshnessMeasure.values)}, got {schedule.freshness_measure!r}",
            field="freshness_measure"))
    elif schedule.freshness_measure == FreshnessMeasure.WATERMARK and not found.failed("watermark_config") and (
            not isinstance(schedule.watermark_config, dict) or not schedule.watermark_config
            or schedule.watermark_config.get("type", "datetime") != "datetime"):
        found.errors.append(ServiceError("'watermark' measures a datetime watermark's lag: this schedule has none "
                                         "(use last_success)", field="freshness_measure"))
    with found.check():
        schedule.retry_initial_delay = _float(schedule.retry_initial_delay, "retry_initial_delay", minimum=0,
                                              maximum=MAX_SECONDS)
    with found.check():
        schedule.retry_backoff = _float(schedule.retry_backoff, "retry_backoff", minimum=1)
    with found.check():
        schedule.retry_max_delay = _float(schedule.retry_max_delay, "retry_max_delay", minimum=0, maximum=MAX_SECONDS)
    with found.check():
        schedule.retry_jitter = _float(schedule.retry_jitter, "retry_jitter", minimum=0, maximum=1)
    if not isinstance(schedule.params, dict):
        found.errors.append(ServiceError("must be a JSON object", field="params"))
    for field in JSON_FIELDS:  # storable: no NUL, NaN, Infinity or runaway nesting
        if not found.failed(field):
            with found.check():
                validate_params(getattr(schedule, field), field=field)
    if not found.failed("params", "target_id", "target_kind"):
        with found.check():
            check_target_params(schedule, schedule.params, field="params")
    with found.check():
        schedule.alert_channels = channels_text(check_channels(schedule.alert_channels, field="alert_channels",
                                                               owner_id=schedule.owner_id,
                                                               who=f"schedule '{schedule.name}'"))
    for field in ("command", "dbt"):  # the connections it declares: its own team's only (permissions.py)
        names = (getattr(schedule, field) or {}).get("connections") if not found.failed(field) else None
        if names and not found.failed("owner"):
            with found.check():
                connections_check(schedule, names, field=f"{field}.connections")
    if depends_on is not None:
        if schedule.trigger_kind == "upstream" and not depends_on:
            found.errors.append(ServiceError("an 'upstream' trigger needs at least one upstream schedule",
                                             field="depends_on"))
        elif not found.failed("name"):
            cycle = cycle_for(schedule.name, [u.name for u in depends_on])
            if cycle:
                found.errors.append(ServiceError("would create a cycle: " + " -> ".join(cycle), field="depends_on"))
    found.raise_any()
