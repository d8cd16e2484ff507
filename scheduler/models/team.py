from django.conf import settings
from django.db import models


class Team(models.Model):
    """A group of people who own schedules, may act on them, and are paged for them."""

    name = models.SlugField(max_length=100, unique=True, help_text="Unique id of the team (letters, digits, - and _).")
    description = models.CharField(max_length=300, blank=True, help_text="What this team looks after.")
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, related_name="etl_teams", blank=True,
        help_text="Users who act on this team's schedules (their group still decides what they may do).",
    )
    alert_channels = models.TextField(
        blank=True,
        help_text="Apprise URLs paged for this team's schedules, one per line "
        "(mailto://, slack://, workflows://, ntfy://, json://, etlhooks://; see docs/notifications.md).",
    )
    alert_webhook_secret = models.CharField(
        max_length=128, blank=True, help_text="HMAC secret that signs this team's etlhook(s):// alerts (generated)."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        permissions = [("act_for_all_teams", "Can act on the schedules of every team")]

    def __str__(self) -> str:
        return self.name

    @classmethod
    def default_team_id(cls) -> int:
        """The team that owns a schedule nobody was named for (ETL_DEFAULT_TEAM, made on first use)."""
        name = getattr(settings, "ETL_DEFAULT_TEAM", "default")
        found = cls.objects.filter(name=name).values_list("pk", flat=True).first()
        if found is None:
            found = cls.objects.get_or_create(name=name, defaults={"description": "Owner of unassigned schedules"})[
                0
            ].pk
        return found
