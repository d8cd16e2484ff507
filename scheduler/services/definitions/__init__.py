"""Schedules: saved, validated, deleted, and kept in a file (apply, export, drift, the file that manages one)."""
from scheduler.services.definitions.schedules import schedule_save, schedule_set_enabled, schedule_spec
from scheduler.services.definitions.schedule_removal import schedule_delete, schedules_deleting_finish
from scheduler.services.definitions.schedule_source import schedule_detach
from scheduler.services.definitions.schedule_files import schedules_plan, schedules_apply, schedules_export

__all__ = [
    "schedule_save", "schedule_delete", "schedule_detach", "schedule_set_enabled", "schedule_spec",
    "schedules_deleting_finish", "schedules_plan", "schedules_apply", "schedules_export"
]
