"""The pure core of the ETL scheduler: no Django, no clock, no database.

Everything takes `now` (or a clock) as an argument so it can be tested in
microseconds and reused by the services, the dispatcher and the CLI.
"""

from .breaker import (
    BreakerSettings,
    BreakerState,
    BreakerStatus,
    admit,
    cooldown_over,
    record_failure,
    record_success,
    reset,
)
from .cron import (
    describe_cron,
    fires_between,
    next_fires,
    next_interval_fires,
    validate_cron,
    validate_timezone,
)
from .dag import (
    descendants,
    find_all_cycles,
    find_cycle,
    gate,
    invert,
    topological_order,
    would_create_cycle,
)
from .errors import ConfigError, CycleError, EtlError, LoadError, PermanentError
from .executor import Executor, RunReport
from .freshness import Freshness, freshness
from .lineage import (LineageDataset, file_dataset, postgres_dataset, sql_url_dataset,  # noqa: F401  re-exported
                      sqlite_dataset)
from .ledger import Ledger, MemoryLedger, Outcome, RunRecord
from .overlap import ActiveRun, Fire, OverlapDecision, decide_catchup, decide_overlap
from .pipeline import IdentityTransform, Pipeline, PipelineResult, Sink, Source, StreamsFrom, Transform
from .queue import QueuedItem, plan_admissions, queue_order
from .ratelimit import next_allowed_start
from .retry import RetryPolicy, with_retry
from .stop import RunStopped, StopToken
from .windows import (
    INT64_MAX,
    INT64_MIN,
    WatermarkConfig,
    WatermarkState,
    WatermarkType,
    Window,
    advance,
    compute_window,
    compute_windows,
    reached_until,
    split_windows,
)

__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    # errors
    "ConfigError",
    "CycleError",
    "EtlError",
    "LoadError",
    "PermanentError",
    # retry
    "RetryPolicy",
    "with_retry",
    # stop requests
    "RunStopped",
    "StopToken",
    # pipeline
    "IdentityTransform",
    "Pipeline",
    "PipelineResult",
    "Sink",
    "Source",
    "StreamsFrom",
    "Transform",
    # ledger
    "Ledger",
    "MemoryLedger",
    "Outcome",
    "RunRecord",
    # executor
    "Executor",
    "RunReport",
    # dag
    "descendants",
    "find_all_cycles",
    "find_cycle",
    "ActiveRun",
    "Freshness",
    "freshness",
    "Fire",
    "OverlapDecision",
    "decide_catchup",
    "decide_overlap",
    "gate",
    "invert",
    "topological_order",
    "would_create_cycle",
    # windows
    "WatermarkConfig",
    "WatermarkState",
    "WatermarkType",
    "Window",
    "advance",
    "compute_window",
    "compute_windows",
    "reached_until",
    "split_windows",
    # cron
    "describe_cron",
    "fires_between",
    "next_fires",
    "next_interval_fires",
    "validate_cron",
    "validate_timezone",
    # breaker
    "BreakerSettings",
    "BreakerState",
    "BreakerStatus",
    "admit",
    "cooldown_over",
    "record_failure",
    "record_success",
    "reset",
    # rate limit and queue
    "QueuedItem",
    "next_allowed_start",
    "plan_admissions",
    "queue_order",
]
