from django.db import models

from scheduler.models.choices import ConnectionKind


class Connection(models.Model):
    """A team's credentials for a database, an HTTP service or an SMTP server, used by name (docs/security.md).

    The secret fields (the password and the extra fields named secret) are one Fernet token in `secret`,
    never shown at any door. Its URL may instead come from the environment (ETL_CONN_<NAME>) or a mounted
    file (ETL_CONNECTIONS_DIR/<name>): this row still says whose it is and what kind.
    """

    name = models.CharField(max_length=63, unique=True,
                            help_text="Lower-case letters, digits and _, starting with a letter (ETL_CONN_<NAME>).")
    owner = models.ForeignKey("scheduler.Team", on_delete=models.PROTECT, related_name="connections",
                              help_text="The team whose schedules may use it.")
    kind = models.CharField(max_length=16, choices=ConnectionKind.choices, default=ConnectionKind.GENERIC,
                            help_text="postgres, sqlite, http, smtp, or a generic URL.")
    description = models.CharField(max_length=300, blank=True)
    scheme = models.CharField(max_length=32, blank=True, help_text="The URL's scheme (https, smtps, ...); empty: "
                                                                   "the kind's default.")
    host = models.CharField(max_length=255, blank=True)
    port = models.PositiveIntegerField(null=True, blank=True)
    database = models.CharField(max_length=500, blank=True,
                                help_text="Database name, SQLite file path, or an HTTP service's base path.")
    login = models.CharField(max_length=255, blank=True)
    extra = models.JSONField(default=dict, blank=True, help_text="More fields that are not secret (sslmode, ...).")
    secret = models.TextField(blank=True, help_text="The secret fields, encrypted (write-only).")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
