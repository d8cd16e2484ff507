from django.db import models


class Event(models.Model):
    """An event received on a topic; matching event schedules get one run each."""

    topic = models.CharField(max_length=200, db_index=True)
    event_id = models.CharField(max_length=200, help_text="Sender's id, used to deduplicate.")
    payload = models.JSONField(default=dict, blank=True)
    source = models.CharField(max_length=150, blank=True, help_text="http, command, api ... and who.")
    received_at = models.DateTimeField()
    matched = models.PositiveIntegerField(default=0, help_text="Runs created for it.")
    scope = models.CharField(
        max_length=100, default="*",
        help_text="Whose id namespace the event id is in: 'team:<id>' (a team's token or a one-team user), "
                  "'teams:<ids>' (a user of several teams) or '*' (admin-wide). Dedup is per scope.",
    )
    team = models.ForeignKey("scheduler.Team", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
                             help_text="The team whose token sent it; empty for admin-wide senders.")

    class Meta:
        ordering = ["-id"]
        constraints = [models.UniqueConstraint(fields=["scope", "topic", "event_id"], name="event_unique_id_per_scope")]

    def __str__(self) -> str:
        return f"{self.topic}#{self.event_id}"


class WebhookDelivery(models.Model):
    """A seen webhook signature, kept for the replay window to refuse replays."""

    schedule = models.ForeignKey("scheduler.Schedule", on_delete=models.CASCADE, related_name="+")
    signature = models.CharField(max_length=128)
    received_at = models.DateTimeField(db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["schedule", "signature"], name="webhook_unique_signature")]


class WebhookRefusal(models.Model):
    """Refused webhook requests, counted per target, reason and minute: a flood is one row, not a row per request."""

    target = models.CharField(max_length=64, help_text="schedule:<id>, or 'unknown' for every name that is not one.")
    code = models.CharField(max_length=32, help_text="Why: signature, timestamp, unknown, disabled, body, ...")
    window_start = models.DateTimeField(help_text="Start of the minute the refusals are counted in.")
    count = models.PositiveIntegerField(default=0)
    status = models.PositiveSmallIntegerField(help_text="The HTTP status the caller got.")
    first_at = models.DateTimeField()
    last_at = models.DateTimeField(db_index=True)
    last_remote = models.CharField(max_length=45, blank=True, help_text="Address of the latest refused caller.")
    sample = models.CharField(max_length=100, blank=True, help_text="The latest name asked for (printable, cut).")

    class Meta:
        ordering = ["-last_at"]
        constraints = [
            models.UniqueConstraint(fields=["target", "code", "window_start"], name="webhook_refusal_per_minute"),
        ]

    def __str__(self) -> str:
        return f"{self.count} x {self.code} on {self.target} from {self.window_start:%Y-%m-%d %H:%M}"


class EventToken(models.Model):
    """A bearer token for POST /api/events/<topic>: it fires only its team's schedules, or (all_teams) every team's.

    Only a SHA-256 of the secret is stored; the token (`evt_<key_id>_<secret>`) is shown once.
    """

    name = models.CharField(max_length=100, help_text="What the token is for (the sending system).")
    team = models.ForeignKey("scheduler.Team", null=True, blank=True, on_delete=models.PROTECT,
                             related_name="event_tokens", help_text="The team whose schedules it may fire.")
    all_teams = models.BooleanField(default=False, help_text="Admin-wide: fires every team's schedules (no team).")
    key_id = models.CharField(max_length=16, unique=True, help_text="Public id of the token; audit entries name it.")
    secret_hash = models.CharField(max_length=64, help_text="SHA-256 (hex) of the secret part; the secret is not kept.")
    created_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True,
                                      help_text="When it was revoked; a revoked token is refused.")
    last_used_at = models.DateTimeField(null=True, blank=True, help_text="Last event sent with it (to the minute).")

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(team__isnull=False, all_teams=False) | models.Q(team__isnull=True, all_teams=True),
                name="event_token_team_or_all_teams",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.key_id} ({self.name}, {self.scope_label})"

    @property
    def scope_label(self) -> str:
        return "all teams" if self.all_teams else f"team {self.team.name}"
