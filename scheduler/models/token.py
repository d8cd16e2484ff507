from django.conf import settings
from django.db import models


class ApiToken(models.Model):
    """A user's token for the REST API: it acts with exactly that user's permissions and teams.

    Only a SHA-256 of the secret is stored; the token (`etl_<key_id>_<secret>`) is shown once.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens",
                             help_text="Whose permissions and teams the token acts with.")
    name = models.CharField(max_length=100, help_text="What the token is for (a CI job, a script).")
    key_id = models.CharField(max_length=16, unique=True, help_text="Public id of the token; audit entries name it.")
    secret_hash = models.CharField(
        max_length=64, help_text="SHA-256 (hex) of the secret part; the secret is not kept."
    )
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField(null=True, blank=True, help_text="After this the token is refused; empty: never.")
    revoked_at = models.DateTimeField(
        null=True, blank=True, help_text="When it was revoked; a revoked token is refused."
    )
    last_used_at = models.DateTimeField(null=True, blank=True, help_text="Last request made with it (to the minute).")

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.key_id} ({self.name})"

    def state(self, now) -> str:
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= now:
            return "expired"
        return "active"
