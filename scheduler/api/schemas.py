"""The API's request and response bodies (pydantic, through django-ninja)."""
from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Schema
from pydantic import BeforeValidator, ConfigDict, Field, StrictBool, field_validator
from pydantic_core import PydanticCustomError


def _iso_datetime(value: Any) -> datetime:
    """ISO 8601 text only: pydantic alone would also read a number (`?until=0.5`) as a Unix timestamp."""
    if isinstance(value, datetime):
        return value
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            pass
    raise PydanticCustomError("iso_datetime", "must be an ISO 8601 date and time, such as 2026-03-01T00:00:00Z")


def _query_bool(value: Any) -> bool:
    """A query string carries text: only the JSON words `true` and `false` (not 1, yes, on ...) are booleans."""
    if isinstance(value, bool):
        return value
    if value in ("true", "false"):
        return value == "true"
    raise PydanticCustomError("json_bool", "must be true or false")


#: a datetime in a query string (ISO 8601; naive is UTC, see common.aware)
QueryDatetime = Annotated[datetime, BeforeValidator(_iso_datetime)]
#: a boolean in a query string: true or false
QueryBool = Annotated[bool, BeforeValidator(_query_bool)]


class FieldError(Schema):
    field: str
    message: str


class Problem(Schema):
    """RFC 9457 problem details."""

    type: str = Field(examples=["/docs/api.md#invalid-input"])
    title: str = Field(examples=["Unprocessable Content"])
    status: int = Field(examples=[422])
    detail: str = Field(examples=["invalid input: trigger_config.cron: bad cron expression"])
    errors: list[FieldError] | None = None
    run_ids: list[int] | None = Field(default=None, description="A delete refused: the schedule's unfinished runs.")


class Strict(Schema):
    """A request body: unknown fields refused, JSON types as declared (no "5" for 5, no 0 or "yes" for a
    boolean), no NUL in text (PostgreSQL cannot store it)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @field_validator("*", mode="after")
    @classmethod
    def _no_nul(cls, value):
        if isinstance(value, str) and "\x00" in value:
            raise ValueError("must not contain the NUL character")
        return value


# --- schedules ------------------------------------------------------------------

class ScheduleOut(Schema):
    id: int
    name: str
    owner: str | None
    enabled: bool
    target_kind: str
    target_id: str
    trigger_kind: str
    breaker_status: str
    breaker_failures: int
    next_fire_at: datetime | None
    last_fire_at: datetime | None
    created_at: datetime
    updated_at: datetime
    spec: dict[str, Any] = Field(description="Every field as the schedules file writes it (SCHEDULE_FIELDS).")
    managed_by: dict[str, Any] | None = Field(
        default=None, description="The schedules file that manages it ({file, digest, applied_at, applied_by}); "
                                   "its fields but `enabled` change in the file only, until it is detached.")
    deleting: bool = Field(default=False, description="A delete waits for its runs to stop.")


class ScheduleDeleting(Schema):
    status: str = Field(examples=["deleting"])
    stopping_runs: list[int]


class ScheduleFields(Strict):
    """The fields a person sets (any subset on update); see docs/schedules-file.md for each."""

    description: str = None
    owner: str = None
    target_kind: str = None
    target_id: str = None
    command: dict[str, Any] | None = None
    dbt: dict[str, Any] | None = None
    enabled: bool = None
    priority: int = None
    workload_class: str = None
    params: dict[str, Any] = None
    timeout_seconds: int | None = None
    deadline_seconds: int | None = None
    trigger_kind: str = None
    trigger_config: dict[str, Any] = None
    timezone: str = None
    catchup: str = None
    max_catchup: int = None
    overlap_policy: str = None
    watermark_config: dict[str, Any] | None = None
    depends_on: list[str] = None
    condition: str = None
    max_wait_seconds: int = None
    max_upstream_age_seconds: int | None = None
    breaker_threshold: int = None
    breaker_cooldown_seconds: int = None
    breaker_max_cooldown_seconds: int = None
    max_runs_per_minute: int = None
    refresh_after_seconds: int | None = None
    freshness_max_age_seconds: int | None = None
    freshness_measure: str = None
    retry_max_attempts: int = None
    retry_initial_delay: float = None
    retry_backoff: float = None
    retry_max_delay: float = None
    retry_jitter: float = None
    retention_days: int | None = Field(
        default=None, description="Days its finished runs and alert deliveries are kept; null: the settings' default.")
    alert_channels: list[str] | str = Field(
        default=None, description="Apprise URLs (a list, or one per line); a masked URL sent back keeps the stored one."
    )
    reason: str = Field(default="", description="Why; kept in the audit log.")


class ScheduleCreate(ScheduleFields):
    name: str


class ScheduleUpdate(ScheduleFields):
    name: str = Field(default=None, description="A new name (rename).")


# --- runs -------------------------------------------------------------------------

class RunOut(Schema):
    id: int
    schedule: str
    status: str
    stopping: bool
    trigger_kind: str
    triggered_by: str
    logical_time: datetime | None
    params: dict[str, Any] | list[Any] | None
    priority: int
    workload_class: str
    attempt: int
    max_attempts: int
    window_low: str
    window_high: str
    rows_loaded: int | None
    watermark_after: str
    queued_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    reason: str
    error: str
    exit_code: int | None
    backfill_id: int | None
    rerun_of_id: int | None
    code_version: str = Field(description="The code its latest attempt ran: package, version and a digest of the "
                                          "target's source ('sales-etl 0.2.0 · 9f86d081884c'); empty before it began.")


class SchedulePage(Schema):
    items: list[ScheduleOut]
    next: str | None = Field(description="Pass as `cursor` for the next page (by name); null on the last page.")


class RunPage(Schema):
    items: list[RunOut]
    next: int | None = Field(description="Pass as `cursor` for the next (older) page; null on the last page.")


class TriggerIn(Strict):
    params: dict[str, Any] | None = Field(
        default=None, description="Override params, checked against the pipeline's schema.")
    reason: str = ""


class CancelIn(Strict):
    reason: str = ""
    force: bool = Field(default=False, description="Kill the run's process at once instead of asking its code to stop.")


class CancelOut(Schema):
    outcome: Literal["cancelled", "stopping", "already stopping"]
    run: RunOut


class RerunIn(Strict):
    reason: str = ""
    downstream: bool = Field(default=False, description="Let the new run's end start its downstream schedules.")
    from_failure: bool = Field(default=False, description="A workflow: skip the nodes that succeeded.")


class LogLine(Schema):
    seq: int
    at: datetime
    level: str
    source: str
    message: str


class LogPage(Schema):
    lines: list[LogLine]
    next: int | None = Field(description="Pass as `after` for the following lines; null when none are left yet.")
    done: bool = Field(description="The run is final: no more lines will come.")


# --- backfills ----------------------------------------------------------------------

class BackfillIn(Strict):
    schedule: str
    from_: str = Field(alias="from", description="Start: ISO datetime (datetime marks) or integer.")
    to: str = Field(description="End (exclusive for datetimes).")
    window: str | int | float = Field(description="Window size: seconds (datetime marks) or a count (integer marks).")
    reason: str
    max_parallel: int = 1
    params: dict[str, Any] | None = None
    reprocess: str = Field(default="all", description='"all": every window of the range; "failed": only the windows '
                           'without a SUCCEEDED run of the schedule for exactly that window (failed or missing).')
    newest_first: StrictBool = Field(default=False, description="Queue the latest window first (default: oldest "
                               "first).")
    preview: bool = Field(default=False, description="Only count the windows; nothing is created.")

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)  # Strict's, plus `from`


class BackfillPreview(Schema):
    preview: bool = True
    windows: int
    already_succeeded: int = Field(default=0, description='Windows left out by reprocess "failed".')
    first: list[str]
    last: list[str]


class BackfillOut(Schema):
    id: int
    schedule: str
    status: str
    range_from: str
    range_to: str
    window_size: str
    reason: str
    requested_by: str
    max_parallel: int
    newest_first: bool
    total_windows: int
    created_at: datetime
    finished_at: datetime | None
    progress: dict[str, int]


class ReasonIn(Strict):
    reason: str = ""


# --- watermarks, breakers -------------------------------------------------------------

class WatermarkOut(Schema):
    schedule: str
    type: str | None
    value: str | None
    updated_at: datetime | None


class WatermarkIn(Strict):
    value: str | None = Field(description="The new mark (ISO datetime or integer); null or empty resets it.")
    reason: str = Field(min_length=1, description="Required: why the mark is moved (kept in the audit log).")
    force: bool = Field(default=False, description="Allow a datetime in the future.")


class BreakerOut(Schema):
    schedule: str
    status: str
    failures: int
    opened_at: datetime | None


# --- audit ------------------------------------------------------------------------------

class AuditOut(Schema):
    id: int
    at: datetime
    actor: str
    actor_kind: str
    via: str
    action: str
    target_type: str
    target_id: str
    target_repr: str
    reason: str
    before: Any = None
    after: Any = None


class AuditPage(Schema):
    items: list[AuditOut]
    next: int | None
