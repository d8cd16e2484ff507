"""Models, split by aggregate and re-exported here."""
from scheduler.models.audit import AuditCount, AuditEntry, RefusalCount
from scheduler.models.backfill import Backfill, BackfillWindow
from scheduler.models.choices import (
    ActorKind,
    AlertKind,
    AlertStatus,
    BackfillStatus,
    BreakerStatus,
    CATCHUP_SKIP_REASON,
    CatchupPolicy,
    Condition,
    ConnectionKind,
    FreshnessMeasure,
    NodeOutcome,
    OverlapPolicy,
    OVERLAP_SKIP_REASON,
    RunStatus,
    StopKind,
    TargetKind,
    TriggerKind,
    WatermarkChange,
    WatermarkType,
    WindowStatus,
)
from scheduler.models.connection import Connection
from scheduler.models.failure import FailureAck
from scheduler.models.event import Event, EventToken, WebhookDelivery, WebhookRefusal
from scheduler.models.lineage import LineageEvent, LineageStatus
from scheduler.models.node import NodeRecord
from scheduler.models.ops import Alert, Cluster, GovernanceTick, LoopLease, RunHourCount, RunTally
from scheduler.models.outcome import LatestOutcome
from scheduler.models.run import Run, RunUpstream, requeue_fields
from scheduler.models.runlog import RunLogLine
from scheduler.models.schedule import Schedule
from scheduler.models.team import Team
from scheduler.models.token import ApiToken
from scheduler.models.watermark import WatermarkHistory, WatermarkState
from scheduler.models.workload import WorkloadClass

__all__ = [
    "ActorKind",
    "ApiToken",
    "Alert",
    "AlertKind",
    "AlertStatus",
    "AuditCount",
    "AuditEntry",
    "Backfill",
    "BackfillStatus",
    "BackfillWindow",
    "BreakerStatus",
    "CATCHUP_SKIP_REASON",
    "CatchupPolicy",
    "Cluster",
    "Condition",
    "Connection",
    "ConnectionKind",
    "FreshnessMeasure",
    "OVERLAP_SKIP_REASON",
    "OverlapPolicy",
    "Event",
    "EventToken",
    "RefusalCount",
    "GovernanceTick",
    "LatestOutcome",
    "LineageEvent",
    "LineageStatus",
    "LoopLease",
    "NodeOutcome",
    "NodeRecord",
    "Run",
    "RunHourCount",
    "RunLogLine",
    "RunStatus",
    "RunTally",
    "RunUpstream",
    "requeue_fields",
    "Schedule",
    "StopKind",
    "TargetKind",
    "Team",
    "TriggerKind",
    "WatermarkChange",
    "WatermarkHistory",
    "FailureAck",
    "WatermarkState",
    "WatermarkType",
    "WebhookDelivery",
    "WebhookRefusal",
    "WindowStatus",
    "WorkloadClass",
]
