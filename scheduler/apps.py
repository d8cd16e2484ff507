from django.apps import AppConfig


class SchedulerConfig(AppConfig):
    name = "scheduler"
    verbose_name = "ETL scheduler"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from scheduler.pipelines.registry import autodiscover
        from scheduler.triggers.registry import load_entry_point_plugins

        from scheduler import permissions  # noqa: F401  registers the team rules (django-rules)
        from scheduler.services import alerts  # noqa: F401  connects the alert signal receivers

        autodiscover()
        load_entry_point_plugins()
