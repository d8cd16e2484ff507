"""Schedules: saved, validated, deleted, and kept in a file (apply, export, drift)."""
from scheduler.services.definitions.schedules import schedule_save, schedule_delete, schedule_set_enabled, schedule_spec
from scheduler.services.definitions.schedule_files import schedules_plan, schedules_apply, schedules_export

__all__ = [
    "schedule_save", "schedule_delete", "schedule_set_enabled", "schedule_spec", "schedules_plan",
    "schedules_apply", "schedules_export"
]
