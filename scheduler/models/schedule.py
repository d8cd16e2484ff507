from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from scheduler.models.choices import (
    BreakerStatus,
    CatchupPolicy,
    Condition,
    FreshnessMeasure,
    OverlapPolicy,
    TargetKind,
)
from scheduler.models.team import Team


class Schedule(models.Model):
    """What to run, when, over which data window, and under which guards."""

    name = models.SlugField(
        max_length=100, unique=True, help_text="Unique id of the schedule (letters, digits, - and _)."
    )
    description = models.CharField(max_length=300, blank=True, help_text="What this schedule is for.")
    target_kind = models.CharField(
        max_length=16, choices=TargetKind.choices, default=TargetKind.PIPELINE,
        help_text="Run a registered pipeline or workflow (target_id), a command (command) or dbt build (dbt)."
    )
    target_id = models.CharField(
        max_length=200, blank=True, help_text="Registered pipeline or workflow id (empty for a command)."
    )
    command = models.JSONField(
        default=dict, blank=True,
        help_text='A command target: {"argv": ["dbt", "build"], "cwd": "/srv/dbt", "env": {"K": "v"}}, run '
                  'without a shell in its own process group ({"shell": "..."} instead of argv opts in to /bin/sh -c); '
                  'empty for other targets.',
    )
    dbt = models.JSONField(
        default=dict, blank=True,
        help_text='A dbt target: {"project_dir": "/srv/analytics", "profiles_dir": "/srv/analytics", "target": '
                  '"prod", "select": "tag:daily"}; the run calls `dbt build` (docs/dbt.md). Empty for other targets.',
    )
    timeout_seconds = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1)],
        help_text="Stop a run (each attempt) that runs longer than this; it ends FAILED \"timed out after N s\". "
                  "Empty: no limit.",
    )
    deadline_seconds = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1)],
        help_text="A run not SUCCEEDED this long after its logical time raises one alert to the owning team. "
                  "Empty: no deadline.",
    )
    enabled = models.BooleanField(default=True, help_text="Disabled schedules do not fire.")
    priority = models.PositiveSmallIntegerField(
        default=5, validators=[MinValueValidator(0), MaxValueValidator(9)], help_text="0..9, higher runs first."
    )
    workload_class = models.ForeignKey(
        "scheduler.WorkloadClass", on_delete=models.PROTECT, related_name="schedules", help_text="Queue lane."
    )
    params = models.JSONField(default=dict, blank=True, help_text="Default params given to every run.")
    owner = models.ForeignKey(
        "scheduler.Team", on_delete=models.PROTECT, related_name="schedules",
        help_text="The team that owns this schedule: its members act on it and hear its alerts.",
    )

    # --- trigger -----------------------------------------------------------
    trigger_kind = models.CharField(
        max_length=64,
        default="manual",
        help_text="Trigger plugin id: cron, interval, event, webhook, manual, upstream or a third-party plugin.",
    )
    trigger_config = models.JSONField(default=dict, blank=True, help_text='Plugin config, e.g. {"cron": "0 * * * *"}.')
    timezone = models.CharField(max_length=64, default="UTC", help_text="IANA time zone for cron triggers.")
    catchup = models.CharField(
        max_length=8, choices=CatchupPolicy.choices, default=CatchupPolicy.LATEST,
        help_text="Fires missed while the scheduler was down: latest (one run), all (up to max_catchup), none.",
    )
    max_catchup = models.PositiveIntegerField(default=10, help_text="Most missed fires replayed when catchup is 'all'.")
    overlap_policy = models.CharField(
        max_length=16, choices=OverlapPolicy.choices, blank=True, default="",
        help_text="A cron or interval fire while a run is active: skip, buffer_one, buffer_all, cancel_other, "
                  "terminate_other, allow_all. Empty: skip for watermarked schedules, allow_all otherwise.",
    )
    next_fire_at = models.DateTimeField(
        null=True, blank=True, db_index=True, help_text="Next due time (time triggers)."
    )
    last_fire_at = models.DateTimeField(null=True, blank=True, help_text="Last fire time (time triggers).")
    webhook_secret = models.CharField(max_length=128, blank=True, help_text="HMAC secret for webhook triggers.")

    # --- watermark ---------------------------------------------------------
    watermark_config = models.JSONField(
        default=dict,
        blank=True,
        help_text="Empty for none, else {type, column, initial, lag, overlap, max_window} (seconds for durations).",
    )

    # --- dependencies ------------------------------------------------------
    depends_on = models.ManyToManyField(
        "self", symmetrical=False, related_name="downstream", blank=True, help_text="Upstream schedules."
    )
    condition = models.CharField(
        max_length=16, choices=Condition.choices, default=Condition.ALL_SUCCESS, help_text="When upstreams allow a run."
    )
    max_wait_seconds = models.PositiveIntegerField(
        default=3600, help_text="How long a run may wait for its upstreams before it fails (dependency timeout)."
    )
    max_upstream_age_seconds = models.PositiveIntegerField(
        default=86400, validators=[MinValueValidator(1)],
        help_text="A run is matched with upstream runs whose logical time is at most this much older than its own.",
    )

    # --- circuit breaker ---------------------------------------------------
    breaker_threshold = models.PositiveIntegerField(
        default=5, validators=[MinValueValidator(1)], help_text="Consecutive failures that open the breaker."
    )
    breaker_cooldown_seconds = models.PositiveIntegerField(
        default=300, validators=[MinValueValidator(1)], help_text="Initial cooldown before a test run."
    )
    breaker_max_cooldown_seconds = models.PositiveIntegerField(
        default=3600, validators=[MinValueValidator(1)], help_text="Cap for the doubled cooldown."
    )
    breaker_status = models.CharField(
        max_length=16, choices=BreakerStatus.choices, default=BreakerStatus.CLOSED, help_text="Breaker state."
    )
    breaker_failures = models.PositiveIntegerField(default=0, help_text="Consecutive failures counted.")
    breaker_opened_at = models.DateTimeField(null=True, blank=True, help_text="When the breaker last opened.")
    breaker_current_cooldown_seconds = models.PositiveIntegerField(
        null=True, blank=True, help_text="Cooldown in force (doubles on a failed test run)."
    )
    breaker_trial_run = models.ForeignKey(
        "scheduler.Run",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Half-open test run.",
    )

    # --- rate limit, freshness, retries -----------------------------------
    max_runs_per_minute = models.PositiveIntegerField(default=0, help_text="0 = unlimited.")
    refresh_after_seconds = models.PositiveIntegerField(
        null=True, blank=True, help_text="Skip a run when the last success is younger than this."
    )
    freshness_max_age_seconds = models.PositiveIntegerField(
        null=True, blank=True,
        help_text="Freshness objective: alert when the data is older than this (empty: no objective).",
    )
    freshness_measure = models.CharField(
        max_length=16, choices=FreshnessMeasure.choices, default=FreshnessMeasure.LAST_SUCCESS,
        help_text="What the objective measures: the age of the last success, or a datetime watermark's lag.",
    )
    freshness_breached_at = models.DateTimeField(
        null=True, blank=True, help_text="Since when the freshness objective is breached (empty: fresh)."
    )
    retry_max_attempts = models.PositiveIntegerField(
        default=3, validators=[MinValueValidator(1)], help_text="Attempts per run."
    )
    retry_initial_delay = models.FloatField(
        default=1.0, validators=[MinValueValidator(0)], help_text="Seconds before the first retry."
    )
    retry_backoff = models.FloatField(default=2.0, validators=[MinValueValidator(1)], help_text="Delay multiplier.")
    retry_max_delay = models.FloatField(default=60.0, validators=[MinValueValidator(0)], help_text="Cap on the delay.")
    retry_jitter = models.FloatField(
        default=0.0,
        validators=[MinValueValidator(0), MaxValueValidator(1)],
        help_text="Random fraction added to delays.",
    )

    # --- retention ---------------------------------------------------------
    retention_days = models.PositiveIntegerField(
        null=True, blank=True,
        help_text="Days its finished runs (with their logs and node records) and alert deliveries are kept; "
                  "empty: ETL_RETENTION_RUNS_DAYS / ETL_RETENTION_ALERTS_DAYS.",
    )
    runs_pruned_through = models.BigIntegerField(
        null=True, blank=True, help_text="The highest id of this schedule's runs a prune deleted (empty: none yet).",
    )

    # --- alerts ------------------------------------------------------------
    alert_channels = models.TextField(
        blank=True,
        help_text="Apprise URLs that hear about this schedule's alerts, one per line "
        "(mailto://, slack://, workflows://, ntfy://, json://, etlhooks://; see docs/notifications.md).",
    )

    # --- schedules as code (the file that manages it) and a deferred delete ------------------
    source_file = models.CharField(
        max_length=200, blank=True,
        help_text="The schedules file it was last applied from (e.g. schedules.yaml); empty: not managed by a file. "
                  "Its definition is then changed in the file only, until it is detached.",
    )
    source_digest = models.CharField(max_length=64, blank=True, help_text="SHA-256 of that file's text, as applied.")
    source_applied_at = models.DateTimeField(null=True, blank=True, help_text="When that file was applied to it.")
    source_applied_by = models.CharField(max_length=150, blank=True, help_text="Who applied it.")
    deleting_at = models.DateTimeField(
        null=True, blank=True,
        help_text="A delete that stops its runs was asked: disabled, its runs are being stopped, and the schedule is "
                  "deleted once none is left unfinished (governance finishes it).",
    )
    deleting_by = models.CharField(max_length=150, blank=True, help_text="Who asked for that delete.")
    deleting_reason = models.CharField(max_length=500, blank=True, help_text="Why, as recorded on the delete.")

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        indexes = [models.Index(fields=["enabled", "next_fire_at"], name="sched_due_idx")]
        permissions = [
            ("trigger_schedule", "Can trigger a schedule manually"),
            ("reset_breaker", "Can reset a circuit breaker"),
            ("manage_watermark", "Can reset or set a watermark"),
            ("toggle_schedule", "Can enable or disable a schedule"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def managed_by(self) -> str:
        """The schedules file that manages it ("" when none)."""
        return self.source_file

    def save(self, *args, **kwargs):
        if self.owner_id is None:  # a schedule made without an owner lands in the default team
            self.owner_id = Team.default_team_id()
        super().save(*args, **kwargs)

    @property
    def overlap(self) -> str:
        """The overlap policy in force: the one set, else skip for watermarked schedules and allow_all for others."""
        if self.overlap_policy:
            return self.overlap_policy
        return OverlapPolicy.SKIP if self.watermark_config else OverlapPolicy.ALLOW_ALL
