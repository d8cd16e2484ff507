"""Alert channels become Apprise URLs (issue 24, part 3).

Team.alert_emails / alert_webhook_url and Schedule.alert_emails /
alert_webhook_url are converted to `alert_channels`, one Apprise URL per line,
then removed:

- each address a@x.com -> mailto://a@x.com (sent through Django's EMAIL_BACKEND, as before);
- a webhook https://h/p -> etlhooks://h/p (http -> etlhook://): the same JSON body and
  X-Etl-Signature header as before, signed with the team's secret (a team's) or
  ETL_ALERT_WEBHOOK_SECRET (a schedule's).

Alerts still queued (PENDING or FAILED) keep their old channel records; delivery reads both.
Going back joins the mailto addresses and the first etlhook(s) URL into the old fields.
The conversion is plain functions, self-contained so the migration never changes with the app code.
"""
from django.db import migrations, models


def emails_to_urls(text):
    return [f"mailto://{a.strip()}" for a in (text or "").split(",") if a.strip()]


def webhook_to_url(url):
    url = (url or "").strip()
    if not url:
        return []
    scheme, _, rest = url.partition("://")
    return [f"{'etlhooks' if scheme.lower() == 'https' else 'etlhook'}://{rest}"]


def old_to_channels(emails, webhook_url):
    """The alert_channels text for the old pair of fields."""
    urls = []
    for url in emails_to_urls(emails) + webhook_to_url(webhook_url):
        if url not in urls:
            urls.append(url)
    return "\n".join(urls)


def channels_to_old(text):
    """(alert_emails, alert_webhook_url) for alert_channels, for going back; other kinds of URL are dropped."""
    emails, hook = [], ""
    for url in (text or "").splitlines():
        scheme, _, rest = url.strip().partition("://")
        scheme = scheme.lower()
        if scheme in ("mailto", "mailtos") and "@" in rest and ":" not in rest.split("@")[0]:
            emails.append(rest.split("?")[0].split("/")[0])
        elif scheme in ("etlhook", "etlhooks") and not hook:
            hook = f"{'https' if scheme == 'etlhooks' else 'http'}://{rest}"
    return ", ".join(emails)[:500], hook[:200]


def forwards(apps, schema_editor):
    for model in ("Team", "Schedule"):
        Model = apps.get_model("scheduler", model)
        for pk, emails, url in Model.objects.values_list("pk", "alert_emails", "alert_webhook_url").iterator():
            channels = old_to_channels(emails, url)
            if channels:
                Model.objects.filter(pk=pk).update(alert_channels=channels)


def backwards(apps, schema_editor):
    for model in ("Team", "Schedule"):
        Model = apps.get_model("scheduler", model)
        for pk, channels in Model.objects.exclude(alert_channels="").values_list("pk", "alert_channels").iterator():
            emails, url = channels_to_old(channels)
            Model.objects.filter(pk=pk).update(alert_emails=emails, alert_webhook_url=url)


CHANNELS_HELP = ("Apprise URLs that hear about this schedule's alerts, one per line (mailto://, slack://, "
                 "workflows://, ntfy://, json://, etlhooks://; see docs/notifications.md).")
TEAM_CHANNELS_HELP = ("Apprise URLs paged for this team's schedules, one per line (mailto://, slack://, "
                      "workflows://, ntfy://, json://, etlhooks://; see docs/notifications.md).")


class Migration(migrations.Migration):

    dependencies = [
        ("scheduler", "0016_lineage_outbox"),
    ]

    operations = [
        migrations.AddField(
            model_name="team", name="alert_channels",
            field=models.TextField(blank=True, help_text=TEAM_CHANNELS_HELP),
        ),
        migrations.AddField(
            model_name="schedule", name="alert_channels",
            field=models.TextField(blank=True, help_text=CHANNELS_HELP),
        ),
        migrations.RunPython(forwards, backwards),
        migrations.RemoveField(model_name="team", name="alert_emails"),
        migrations.RemoveField(model_name="team", name="alert_webhook_url"),
        migrations.RemoveField(model_name="schedule", name="alert_emails"),
        migrations.RemoveField(model_name="schedule", name="alert_webhook_url"),
        migrations.AlterField(
            model_name="team", name="alert_webhook_secret",
            field=models.CharField(blank=True, max_length=128,
                                   help_text="HMAC secret that signs this team's etlhook(s):// alerts (generated)."),
        ),
    ]
