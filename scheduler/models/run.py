from django.db import models

from scheduler.models.choices import RunStatus, StopKind, TriggerKind
from scheduler.models.fields import MaskedCharField, MaskedJSONField, MaskedTextField
from scheduler.timefmt import interval_text


#: The rows in the index governance's deadline check reads (services/deadlines.py): runs with a logical time
#: not yet marked as past their deadline. The condition has no parameters so that SQLite can match it to the
#: query's (it cannot match a status list sent as parameters); the index's columns then seek the few live
#: statuses of non-backfill runs within a logical-time range.
DEADLINE_WATCHED = models.Q(deadline_missed_at__isnull=True, logical_time__isnull=False)


#: A run governance failed or re-queued because its worker was lost (services/finish.py `_lost_why`).
LOST_WORKER = models.Q(reason__startswith="worker lost")


def requeue_fields(*, reason: str, attempt: int | None = None, not_before=None) -> dict:
    """What a run that goes back to the queue has written: no worker, no admission, no stop request (one set of
    fields for every path that re-queues a run: a retry, a lost worker, a cluster's stop, a shutdown)."""
    fields = {"status": RunStatus.QUEUED, "started_at": None, "admitted_at": None, "heartbeat_at": None,
              "dispatch_token": "", "worker_id": "", "reason": reason[:500], "stop_requested_at": None,
              "stop_kind": "", "stop_reason": ""}
    if attempt is not None:
        fields["attempt"] = attempt
    if not_before is not None:
        fields["not_before"] = not_before
    return fields


class Run(models.Model):
    """One execution of a schedule: the queue entry and the ledger record."""

    schedule = models.ForeignKey("scheduler.Schedule", on_delete=models.CASCADE, related_name="runs")
    trigger_key = models.CharField(max_length=200, help_text="Idempotency key: fire time, event id, request id ...")
    trigger_kind = models.CharField(max_length=16, choices=TriggerKind.choices, help_text="What made this run.")
    logical_time = models.DateTimeField(null=True, blank=True, help_text="The fire time the run stands for.")
    params = models.JSONField(default=dict, blank=True, help_text="Params given to the pipeline.")
    priority = models.PositiveSmallIntegerField(default=5, help_text="Copied from the schedule at trigger time.")
    workload_class = models.ForeignKey("scheduler.WorkloadClass", on_delete=models.PROTECT, related_name="runs")
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.QUEUED)
    attempt = models.PositiveIntegerField(default=1)
    max_attempts = models.PositiveIntegerField(default=1)
    retry_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="retries")
    not_before = models.DateTimeField(null=True, blank=True, help_text="Retry backoff: not admitted before this time.")
    window_low = models.CharField(
        max_length=64, blank=True, help_text="Window low end: ISO datetime (included) or integer (excluded)."
    )
    window_high = models.CharField(
        max_length=64, blank=True, help_text="Window high end: ISO datetime (excluded) or integer (included)."
    )
    rows_loaded = models.BigIntegerField(null=True, blank=True)
    watermark_after = models.CharField(max_length=64, blank=True, help_text="Mark reached by this run, if it moved it.")
    queued_at = models.DateTimeField(help_text="When the run entered the queue.")
    admitted_at = models.DateTimeField(null=True, blank=True, help_text="When the gate admitted it.")
    started_at = models.DateTimeField(null=True, blank=True, help_text="When a worker began executing it.")
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    worker_id = models.CharField(max_length=200, blank=True, help_text="cluster/process that runs it.")
    dispatch_token = models.CharField(
        max_length=64, blank=True, help_text="Matches the broker message; stale ones are ignored."
    )
    error = MaskedTextField(blank=True)
    reason = MaskedCharField(max_length=500, blank=True, help_text="Why blocked, skipped, waiting or failed.")
    blocked_by = models.ForeignKey(
        "scheduler.Schedule", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="The upstream or breaker owner that caused a block.",
    )
    triggered_by = models.CharField(max_length=150, blank=True, help_text="Who or what triggered it.")
    backfill = models.ForeignKey(
        "scheduler.Backfill", null=True, blank=True, on_delete=models.CASCADE, related_name="runs"
    )
    event = models.ForeignKey("scheduler.Event", null=True, blank=True, on_delete=models.SET_NULL, related_name="runs")
    report = MaskedJSONField(null=True, blank=True, help_text="Workflow RunReport (records, skipped, blocked).")
    rerun_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="reruns",
        help_text="The finished run a person re-ran (same params and window).",
    )
    stop_requested_at = models.DateTimeField(
        null=True, blank=True,
        help_text="When a RUNNING run was asked to stop: it shows as STOPPING and keeps its slot until its work ended.",
    )
    stop_kind = models.CharField(max_length=16, choices=StopKind.choices, blank=True, help_text="Why it must stop.")
    stop_reason = MaskedCharField(max_length=300, blank=True, help_text="The stop request's reason, as asked.")
    exit_code = models.IntegerField(
        null=True, blank=True, help_text="A command run's exit status (-N: killed by signal N)."
    )
    deadline_missed_at = models.DateTimeField(
        null=True, blank=True, help_text="When governance found the run not SUCCEEDED past its schedule's deadline."
    )
    propagate = models.BooleanField(
        default=True,
        help_text="Whether this run's end starts or blocks its downstream schedules (off for 're-run just this').",
    )
    code_version = models.CharField(
        max_length=200, blank=True,
        help_text="The code its latest attempt ran: package, version and a digest of the target's source "
                  "('sales-etl 0.2.0 · 9f86d081884c'), written as the worker claimed it.",
    )

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(fields=["schedule", "trigger_key"], name="run_unique_trigger"),
            models.CheckConstraint(condition=models.Q(priority__lte=9), name="run_priority_0_9"),
        ]
        indexes = [
            # the dispatcher: queued runs by priority then FIFO
            models.Index(fields=["status", "-priority", "queued_at", "id"], name="run_queue_idx"),
            models.Index(fields=["status", "workload_class"], name="run_class_status_idx"),
            models.Index(fields=["schedule", "status", "finished_at"], name="run_sched_status_idx"),
            models.Index(fields=["schedule", "-id"], name="run_sched_recent_idx"),
            models.Index(fields=["schedule", "started_at"], name="run_sched_started_idx"),
            models.Index(fields=["status", "heartbeat_at"], name="run_heartbeat_idx"),
            models.Index(fields=["status", "-id"], name="run_status_recent_idx"),
            models.Index(fields=["trigger_kind", "-id"], name="run_kind_recent_idx"),
            models.Index(fields=["queued_at"], name="run_queued_at_idx"),
            # a rate-limited schedule's admissions of the last minute (dispatch): a range, not all its runs
            models.Index(fields=["schedule", "admitted_at"], name="run_sched_admitted_idx"),
            # the WAITING runs in turns (services/waiting.py): only they are in it, in the order the turns number
            # them, so a tick never walks the finished runs (4.9 s on SQLite with 1,000,000 runs and none waiting)
            models.Index(fields=["schedule", "id"], condition=models.Q(status="WAITING"), name="run_waiting_turns_idx"),
            # the overview's failing schedules: each schedule's latest success and latest failure, one seek each
            models.Index(fields=["schedule", "status", "-id"], condition=models.Q(backfill__isnull=True),
                         name="run_sched_verdict_idx"),
            # /metrics' last hour of finished runs: a range of this index, not a scan of the ledger (not partial:
            # SQLite cannot prove `finished_at >= ?` implies NOT NULL with the bound sent as a parameter)
            models.Index(fields=["finished_at"], name="run_finished_at_idx"),
            models.Index(fields=["status", "backfill", "logical_time"], condition=DEADLINE_WATCHED,
                         name="run_deadline_watch_idx"),
            # the overview's "missed its deadline": only the runs that missed one are in it
            models.Index(fields=["deadline_missed_at"], condition=models.Q(deadline_missed_at__isnull=False),
                         name="run_deadline_missed_idx"),
            # the overview's "lost worker" list: only the runs governance failed or re-queued for a lost worker are
            # in it, so a day of the ledger is not read to find none (oncall.lost_runs writes the condition out,
            # selectors.as_written: SQLite matches no LIKE sent as a parameter to a partial index)
            models.Index(fields=["queued_at"], condition=LOST_WORKER, name="run_lost_idx"),
        ]
        permissions = [("cancel_run", "Can cancel a run")]

    def __str__(self) -> str:
        return f"run {self.pk} of {self.schedule_id} ({self.status})"

    @property
    def window_text(self) -> str:
        """The window as read: [low, high) for datetimes, (low, high] for integers; empty without one."""
        return interval_text(self.window_low, self.window_high)

    @property
    def stopping(self) -> bool:
        """A RUNNING run asked to stop whose work has not ended yet."""
        return self.status == RunStatus.RUNNING and self.stop_requested_at is not None

    @property
    def shown_status(self) -> str:
        """The status as pages show it: STOPPING for a RUNNING run asked to stop."""
        return "STOPPING" if self.stopping else self.status

    @property
    def attempts_begun(self) -> int:
        """Attempts that really began: a run re-queued for attempt N and cancelled (or lost) before a worker
        claimed it began N - 1 (its `attempt` already says N), a run never claimed began none."""
        return self.attempt if self.started_at is not None else self.attempt - 1

    @property
    def is_final(self) -> bool:
        return self.status in RunStatus.final()

    @property
    def duration_seconds(self) -> float | None:
        """Seconds from start to finish; None until it has both."""
        if self.started_at and self.finished_at:
            return (self.finished_at - self.started_at).total_seconds()
        return None

    @property
    def queue_wait_seconds(self) -> float | None:
        """Seconds from queued to started; None until it started."""
        if self.started_at and self.queued_at:
            return (self.started_at - self.queued_at).total_seconds()
        return None


class RunUpstream(models.Model):
    """Which upstream run a downstream run stands for, one row per (run, upstream schedule).

    `pinned` rows name the upstream run that triggered the run (or joined it
    while it waited); the others record the upstream run matched by logical
    time when the run was admitted or blocked (docs/semantics.md, Dependencies).
    """

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="upstream_links")
    upstream_schedule = models.ForeignKey("scheduler.Schedule", on_delete=models.CASCADE, related_name="+")
    upstream_run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="downstream_links",
        help_text="Empty when no upstream run matched (the condition tolerated it).",
    )
    pinned = models.BooleanField(default=False, help_text="The upstream run that triggered this run.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "upstream_schedule"], name="run_upstream_unique"),
        ]

    def __str__(self) -> str:
        return f"run {self.run_id} stands for run {self.upstream_run_id} of {self.upstream_schedule_id}"
