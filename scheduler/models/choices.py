"""Every status and kind in the product is one of these; never a bare string."""
from django.db import models


class RunStatus(models.TextChoices):
    QUEUED = "QUEUED", "Queued"
    WAITING = "WAITING", "Waiting"
    RUNNING = "RUNNING", "Running"
    SUCCEEDED = "SUCCEEDED", "Succeeded"
    FAILED = "FAILED", "Failed"
    BLOCKED = "BLOCKED", "Blocked"
    SKIPPED = "SKIPPED", "Skipped"
    CANCELLED = "CANCELLED", "Cancelled"

    @classmethod
    def final(cls) -> frozenset[str]:
        return frozenset({cls.SUCCEEDED, cls.FAILED, cls.BLOCKED, cls.SKIPPED, cls.CANCELLED})

    @classmethod
    def active(cls) -> frozenset[str]:
        return frozenset({cls.QUEUED, cls.WAITING, cls.RUNNING})


class TriggerKind(models.TextChoices):
    CRON = "cron", "Cron"
    INTERVAL = "interval", "Interval"
    EVENT = "event", "Event"
    WEBHOOK = "webhook", "Webhook"
    MANUAL = "manual", "Manual"
    UPSTREAM = "upstream", "Upstream completed"
    BACKFILL = "backfill", "Backfill window"
    RETRY = "retry", "Retry"
    RERUN = "rerun", "Re-run"


class TargetKind(models.TextChoices):
    PIPELINE = "pipeline", "Pipeline"
    WORKFLOW = "workflow", "Workflow"
    COMMAND = "command", "Command"
    DBT = "dbt", "dbt build"


class Condition(models.TextChoices):
    ALL_SUCCESS = "ALL_SUCCESS", "All upstreams succeeded"
    ANY_SUCCESS = "ANY_SUCCESS", "Any upstream succeeded"
    ALL_DONE = "ALL_DONE", "All upstreams finished"
    NONE_FAILED = "NONE_FAILED", "No upstream failed"


class OverlapPolicy(models.TextChoices):
    """What a cron or interval fire does while a run of the same schedule is still active."""

    SKIP = "skip", "Skip: the fire becomes a SKIPPED run"
    BUFFER_ONE = "buffer_one", "Buffer one: queue at most one run behind the active one"
    BUFFER_ALL = "buffer_all", "Buffer all: queue every fire, run them one at a time"
    CANCEL_OTHER = "cancel_other", "Cancel other: ask the active run to stop, start the new one once it has"
    TERMINATE_OTHER = "terminate_other", "Terminate other: kill the active run at once, start the new one"
    ALLOW_ALL = "allow_all", "Allow all: runs overlap freely"


#: Reason prefixes of SKIPPED runs that stand for a fire which did not run (overlap or catch-up
#: policy): unlike a run skipped as still fresh, they say nothing about the data, so dependencies
#: look past them.
OVERLAP_SKIP_REASON = "overlap policy"
CATCHUP_SKIP_REASON = "catch-up policy"


class StopKind(models.TextChoices):
    """Why a RUNNING run was asked to stop (it shows as STOPPING until its work has ended)."""

    CANCEL = "cancel", "Cancelled"
    CANCEL_OTHER = "cancel_other", "Replaced by a newer fire (cancel_other)"
    TIMEOUT = "timeout", "Timed out"
    FENCE = "fence", "Fenced: its worker lost the database"
    SHUTDOWN = "shutdown", "The cluster stopped"
    TERMINATE = "terminate", "Terminated"


class CatchupPolicy(models.TextChoices):
    """What fires missed while the scheduler was down become."""

    LATEST = "latest", "Latest: one run for the latest missed fire"
    ALL = "all", "All: every missed fire, up to max_catchup"
    NONE = "none", "None: missed fires are recorded as SKIPPED, no run"


class BreakerStatus(models.TextChoices):
    CLOSED = "closed", "Closed"
    OPEN = "open", "Open"
    HALF_OPEN = "half_open", "Half-open"


class WatermarkType(models.TextChoices):
    DATETIME = "datetime", "Datetime"
    INTEGER = "integer", "Integer"


class BackfillStatus(models.TextChoices):
    ACTIVE = "ACTIVE", "Active"
    PAUSED = "PAUSED", "Paused"
    CANCELLED = "CANCELLED", "Cancelled"
    COMPLETED = "COMPLETED", "Completed"


class WindowStatus(models.TextChoices):
    PENDING = "PENDING", "Pending"
    QUEUED = "QUEUED", "Queued"
    RUNNING = "RUNNING", "Running"
    SUCCEEDED = "SUCCEEDED", "Succeeded"
    FAILED = "FAILED", "Failed"
    CANCELLED = "CANCELLED", "Cancelled"


class WatermarkChange(models.TextChoices):
    ADVANCE = "advance", "Advanced by a run"
    RESET = "reset", "Reset"
    SET = "set", "Set to value"


class ActorKind(models.TextChoices):
    USER = "user", "User"
    SYSTEM = "system", "System"
    API = "api", "API"


class AlertKind(models.TextChoices):
    RUN_FAILED = "run_failed", "Run failed for good"
    BREAKER_OPENED = "breaker_opened", "Circuit breaker opened"
    DEPENDENCY_TIMEOUT = "dependency_timeout", "Dependency timeout"
    GOVERNANCE_LATE = "governance_late", "Governance loop late"
    FRESHNESS_BREACHED = "freshness_breached", "Freshness objective breached"
    DEADLINE_MISSED = "deadline_missed", "Run missed its deadline"


class FreshnessMeasure(models.TextChoices):
    LAST_SUCCESS = "last_success", "Age of the last success"
    WATERMARK = "watermark", "Watermark lag behind now"


class AlertStatus(models.TextChoices):
    PENDING = "PENDING", "Pending"
    SENDING = "SENDING", "Sending"
    SENT = "SENT", "Sent"
    FAILED = "FAILED", "Failed"


class NodeOutcome(models.TextChoices):
    """How one node of a workflow run ended (the executor's Outcome)."""

    SUCCESS = "SUCCESS", "Succeeded"
    FAILED = "FAILED", "Failed"
    SKIPPED = "SKIPPED", "Skipped"  # a dbt node dbt skipped because something upstream of it failed


class ConnectionKind(models.TextChoices):
    POSTGRES = "postgres", "PostgreSQL"
    SQLITE = "sqlite", "SQLite"
    HTTP = "http", "HTTP service"
    SMTP = "smtp", "SMTP server"
    GENERIC = "generic", "Generic URL"
