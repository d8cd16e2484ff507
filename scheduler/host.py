"""`SchedulerHost`: the one object a script needs.

    from scheduler.host import SchedulerHost
    host = SchedulerHost()
    run_id = host.trigger_manual("orders_hourly", {"full": True})
    host.get_active_runs()   # [(run_id, pipeline_id, status), ...]

Every method calls the same services as the admin, the pages and the
commands, so the same checks and audit entries apply.
"""
from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from scheduler.core import EtlError
from scheduler.loops import start_loops, stop_loops
from scheduler.models import AuditEntry, Backfill, Run, RunStatus, Schedule, WatermarkHistory
from scheduler.pipelines import registry
from scheduler.services.admission.backfills import (
    backfill_cancel,
    backfill_pause,
    backfill_progress,
    backfill_resume,
    backfill_retry_failed,
    backfill_submit,
)
from scheduler.services.runs.breakers import breaker_reset
from scheduler.services.runs.cancel import run_cancel_as
from scheduler.services.oversight.channel_probe import channel_test_send
from scheduler.services.integrations.channels import mask_url
from scheduler.services.common.errors import NotFound, ServiceError
from scheduler.services.admission.firing import compute_next_fire
from scheduler.services.oversight.freshness import freshness_status
from scheduler.services.runs.rerun import run_rerun_from_failure
from scheduler.services.runs.queue import run_trigger_manual
from scheduler.services.definitions.schedule_files import Plan, schedules_apply, schedules_export
from scheduler.services.definitions.schedule_removal import schedule_delete
from scheduler.services.definitions.schedule_source import schedule_detach
from scheduler.services.definitions.schedules import schedule_get, schedule_save, schedule_spec
from scheduler.services.access.teams import authorize, authorize_owner_change, owner_for_create, team_get
from scheduler.services.runs.watermarks import encode_value, watermark_reset, watermark_set, watermark_state
from scheduler.triggers.registry import get_trigger
from scheduler.services.worker.commands import command_spec_shown

log = logging.getLogger(__name__)


class RunStorage:
    """The run ledger: every run, its status, rows and times."""

    def get(self, run_id: int) -> Run:
        run = Run.objects.select_related("schedule", "workload_class").filter(pk=run_id).first()
        if run is None:
            raise NotFound(f"unknown run {run_id}", field="run_id")
        return run

    def list(self, *, schedule: str | None = None, status: str | None = None, limit: int = 100) -> list[Run]:
        qs = Run.objects.select_related("schedule").order_by("-id")
        if schedule is not None:
            qs = qs.filter(schedule__name=schedule)
        if status is not None:
            if status not in RunStatus.values:
                raise ServiceError(f"must be one of {', '.join(RunStatus.values)}", field="status")
            qs = qs.filter(status=status)
        return list(qs[:limit])

    def last_success(self, schedule: str) -> Run | None:
        return (Run.objects.filter(schedule__name=schedule, status=RunStatus.SUCCEEDED)
                .order_by("-finished_at").first())


class Watermarks:
    """Read, set and reset schedules' watermarks (set and reset are audited)."""

    def get(self, schedule: str | int) -> str | None:
        return encode_value(watermark_state(schedule_get(schedule)).value) or None

    def history(self, schedule: str | int, limit: int = 50) -> list[WatermarkHistory]:
        return list(WatermarkHistory.objects.filter(schedule=schedule_get(schedule)).order_by("-at", "-id")[:limit])

    def set(self, schedule: str | int, value: Any, *, reason: str, actor: Any = "api", force: bool = False) -> str:
        """Set the mark; a datetime in the future is refused unless force=True."""

        target = schedule_get(schedule)
        authorize(actor=actor, perm="scheduler.manage_watermark", obj=target)
        return watermark_set(schedule=target, value=value, actor=actor, reason=reason, force=force)

    def reset(self, schedule: str | int, *, reason: str, actor: Any = "api") -> str:
        target = schedule_get(schedule)
        authorize(actor=actor, perm="scheduler.manage_watermark", obj=target)
        return watermark_reset(schedule=target, actor=actor, reason=reason)


class Backfills:
    """Backfill requests and their progress."""

    def get(self, backfill_id: int) -> Backfill:
        found = Backfill.objects.select_related("schedule").filter(pk=backfill_id).first()
        if found is None:
            raise NotFound(f"unknown backfill {backfill_id}", field="backfill_id")
        return found

    def list(self, *, status: str | None = None, limit: int = 100) -> list[Backfill]:
        qs = Backfill.objects.select_related("schedule").order_by("-id")
        if status is not None:
            qs = qs.filter(status=status)
        return list(qs[:limit])

    def _allowed(self, backfill_id: int, actor: Any) -> Backfill:
        backfill = self.get(backfill_id)
        authorize(actor=actor, perm="scheduler.manage_backfill", obj=backfill)
        return backfill

    def progress(self, backfill_id: int) -> dict[str, int]:
        return backfill_progress(self.get(backfill_id))

    def pause(self, backfill_id: int, *, actor: Any = "api", reason: str = "") -> None:
        backfill_pause(backfill=self._allowed(backfill_id, actor), actor=actor, reason=reason)

    def resume(self, backfill_id: int, *, actor: Any = "api", reason: str = "") -> None:
        backfill_resume(backfill=self._allowed(backfill_id, actor), actor=actor, reason=reason)

    def cancel(self, backfill_id: int, *, actor: Any = "api", reason: str = "") -> None:
        backfill_cancel(backfill=self._allowed(backfill_id, actor), actor=actor, reason=reason)

    def retry_failed(self, backfill_id: int, *, actor: Any = "api", reason: str = "") -> int:
        return backfill_retry_failed(backfill=self._allowed(backfill_id, actor), actor=actor, reason=reason)


class Schedules:
    """Schedules from code: the same checks, next-fire computation and audit entries as the admin.

        host.schedules.create("orders_sync", target_id="shop.orders", trigger_kind="cron",
                              trigger_config={"cron": "0 * * * *"}, timezone="Europe/Berlin")
        host.schedules.update("orders_sync", priority=7, reason="month end")
        host.schedules.get("orders_sync")          # the Schedule
        host.schedules.spec("orders_sync")         # its fields as the schedules file writes them
        host.schedules.delete("orders_sync", reason="replaced by orders_v2")
        host.schedules.test_channel("orders_sync", 0)  # a test notification to its first alert channel

    Field names are those of the schedules file (`SCHEDULE_FIELDS`); a bad
    value raises ServiceError naming the field and changes nothing.
    """

    def get(self, name: str | int) -> Schedule:
        return schedule_get(name)

    def list(self) -> list[Schedule]:
        return list(Schedule.objects.select_related("workload_class").order_by("name"))

    def spec(self, name: str | int) -> dict:
        """Its fields as the schedules file writes them: channel URLs masked (updating with them keeps the secrets)."""
        spec = schedule_spec(schedule_get(name))
        spec["alert_channels"] = [mask_url(url) for url in spec["alert_channels"]]
        spec["command"] = command_spec_shown(spec["command"])  # env values marked secret
        return spec

    def create(self, name: str, *, actor: Any = "api", reason: str = "", **fields: Any) -> Schedule:
        authorize(actor=actor, perm="scheduler.add_schedule")
        # no owner named: ETL_DEFAULT_TEAM, which a user must be allowed to give schedules to like any team
        authorize_owner_change(actor=actor, schedule=Schedule(name=name), team=owner_for_create(fields.get("owner")))
        return schedule_save(data={"name": name, **fields}, actor=actor, reason=reason)

    def update(self, name: str | int, *, actor: Any = "api", reason: str = "", **fields: Any) -> Schedule:
        schedule = schedule_get(name)
        authorize(actor=actor, perm="scheduler.change_schedule", obj=schedule)
        if fields.get("owner") is not None:
            authorize_owner_change(actor=actor, schedule=schedule, team=team_get(fields["owner"]))
        return schedule_save(data=fields, schedule=schedule, actor=actor, reason=reason)

    def delete(self, name: str | int, *, actor: Any = "api", reason: str = "", stop_runs: bool = False) -> str:
        """"deleted", or with `stop_runs` "deleting" while its runs stop; unfinished runs refuse it otherwise."""
        schedule = schedule_get(name)
        authorize(actor=actor, perm="scheduler.delete_schedule", obj=schedule)
        return schedule_delete(schedule=schedule, actor=actor, reason=reason, stop_runs=stop_runs)

    def detach(self, name: str | int, *, actor: Any = "api", reason: str = "") -> Schedule:
        """Detach it from the schedules file that manages it (audited), so it may be edited here."""
        return schedule_detach(schedule=schedule_get(name), actor=actor, reason=reason)

    def apply(self, text: str, *, prune: bool = False, dry_run: bool = False, actor: Any = "api",
              reason: str = "", source: str = "schedules.yaml") -> Plan:
        """Apply a schedules file's text, as `manage.py apply_schedules` does; its schedules are then managed by
        `source` (the file's name)."""
        return schedules_apply(text=text, actor=actor, prune=prune, dry_run=dry_run, reason=reason, source=source)

    def export(self, names: list[str] | None = None) -> str:
        """The schedules file text for all schedules, or those named (channel URLs masked)."""
        return schedules_export(names)

    def test_channel(self, name: str | int, index: int = 0, *, actor: Any = "api") -> dict:
        """Send a test notification to the schedule's channel `index` (0-based): {channel, index, ok, error}."""
        return channel_test_send(target=schedule_get(name), index=index, actor=actor)

    def test_team_channel(self, team: str | int, index: int = 0, *, actor: Any = "api") -> dict:
        """Send a test notification to a team's channel `index` (0-based): {channel, index, ok, error}."""
        return channel_test_send(target=team_get(team), index=index, actor=actor)


class AuditLog:
    """The append-only audit log, newest first."""

    def get(self, entry_id: int) -> AuditEntry:
        found = AuditEntry.objects.filter(pk=entry_id).first()
        if found is None:
            raise NotFound(f"unknown audit entry {entry_id}", field="entry_id")
        return found

    def list(self, *, action: str | None = None, actor: str | None = None, target_type: str | None = None,
             target_id: Any = None, limit: int = 100) -> list[AuditEntry]:
        qs = AuditEntry.objects.all()
        if action is not None:
            qs = qs.filter(action=action)
        if actor is not None:
            qs = qs.filter(actor=actor)
        if target_type is not None:
            qs = qs.filter(target_type=target_type)
        if target_id is not None:
            qs = qs.filter(target_id=str(target_id))
        return list(qs.order_by("-at", "-id")[:limit])


class SchedulerHost:
    """Facade over the scheduler for scripts and notebooks."""

    def __init__(self, *, cluster: str | None = None) -> None:
        self.cluster = cluster
        self._loops: list = []
        self.storage = RunStorage()
        self.watermarks = Watermarks()
        self.backfills = Backfills()
        self.audit_log = AuditLog()
        self.schedules = Schedules()

    # --- lifecycle ----------------------------------------------------------

    @property
    def running(self) -> bool:
        return any(loop.is_alive() for loop in self._loops)

    def start(self) -> None:
        """Start the leased dispatch, governance and alerts loops in this process (workers run in qcluster)."""
        if self.running:
            return

        self._loops = start_loops(self.cluster)

    def stop(self, timeout: float = 10.0) -> None:
        stop_loops(self._loops, timeout)
        self._loops = []

    def reload(self, *, now: datetime | None = None) -> dict[str, int]:
        """Pick up newly added pipeline modules and recompute every enabled time trigger's next fire."""

        registry._discovered = False  # autodiscover imports modules it has not seen yet
        registry.autodiscover()
        now = now or timezone.now()
        updated = 0
        for schedule in Schedule.objects.filter(enabled=True):
            try:
                if not get_trigger(schedule.trigger_kind).time_based:
                    continue
                nxt = compute_next_fire(schedule, after=now)
            except EtlError:
                # a plugin or config that no longer loads: validate_schedules reports it
                log.warning("schedule %s: cannot compute its next fire", schedule.name, exc_info=True)
                continue
            with transaction.atomic():
                updated += Schedule.objects.filter(pk=schedule.pk, enabled=True).update(next_fire_at=nxt)
        return {"pipelines": len(registry.all_pipelines()), "workflows": len(registry.all_workflows()),
                "schedules": updated}

    # --- actions --------------------------------------------------------------

    def _schedule_for(self, schedule_or_pipeline_id: Any) -> Schedule:
        try:
            return schedule_get(schedule_or_pipeline_id)
        except NotFound:
            pass
        targets = list(Schedule.objects.filter(target_id=str(schedule_or_pipeline_id)).order_by("name"))
        if len(targets) == 1:
            return targets[0]
        if targets:
            names = ", ".join(s.name for s in targets)
            raise ServiceError(f"'{schedule_or_pipeline_id}' is the target of several schedules ({names}); "
                               "name the schedule", field="schedule_or_pipeline_id")
        raise NotFound(f"no schedule or pipeline named '{schedule_or_pipeline_id}'", field="schedule_or_pipeline_id")

    def trigger_manual(self, schedule_or_pipeline_id: Any, override_params: dict | None = None,
                       actor: Any = "api", reason: str = "") -> int:
        """Queue a run now; a pipeline id is accepted when exactly one schedule targets it."""

        schedule = self._schedule_for(schedule_or_pipeline_id)
        authorize(actor=actor, perm="scheduler.trigger_schedule", obj=schedule)
        return run_trigger_manual(schedule=schedule, actor=actor, params=override_params, reason=reason).pk

    def submit_backfill(self, schedule: Any, start: Any, end: Any, window: Any, *, reason: str,
                        requested_by: Any = "api", max_parallel: int = 1, params: dict | None = None,
                        reprocess: str = "all") -> int:
        """Backfill [start, end) (datetime marks) in windows; `params` go to every window's run.
        `reprocess="failed"` leaves out the windows that already have a succeeded run of the schedule."""

        target = schedule_get(schedule)
        authorize(actor=requested_by, perm="scheduler.manage_backfill", obj=target)
        return backfill_submit(schedule=target, start=start, end=end, window=window, reason=reason,
                               requested_by=requested_by, max_parallel=max_parallel, params=params,
                               reprocess=reprocess).pk

    def reset_circuit_breaker(self, schedule_id: Any, reset_by: Any, reason: str = "") -> None:
        target = schedule_get(schedule_id)
        authorize(actor=reset_by, perm="scheduler.reset_breaker", obj=target)
        breaker_reset(schedule=target, actor=reset_by,
                      reason=reason or "reset through SchedulerHost")

    def freshness(self, *, now: datetime | None = None) -> list[dict]:
        """Each enabled schedule with a freshness objective: age, objective, breached (as `manage.py freshness
        --json`)."""
        return [row.as_dict() for row in freshness_status(now=now or timezone.now())]

    def next_fires(self, schedule: Any, count: int = 5, *, after: datetime | None = None) -> list[datetime]:
        """The next fire instants (aware UTC) of a cron or interval schedule, Debian cron's DST rule."""

        found = schedule_get(schedule)
        plugin = get_trigger(found.trigger_kind)
        if not plugin.time_based:
            raise ServiceError(f"'{found.name}' is a {found.trigger_kind} schedule; only time-based schedules "
                               "have fire times", field="schedule")
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 1000:
            raise ServiceError(f"must be a whole number from 1 to 1000, got {count!r}", field="count")
        return plugin.next_fires(found.trigger_config or {}, timezone=found.timezone,
                                 after=after or timezone.now(), count=count)

    def rerun_from_failure(self, run_id: int, *, actor: Any = "api", reason: str = "") -> int:
        """Queue a new run of a failed workflow run that skips its succeeded nodes; returns its id."""
        run = self.storage.get(run_id)
        authorize(actor=actor, perm="scheduler.trigger_schedule", obj=run)
        return run_rerun_from_failure(run=run, actor=actor, reason=reason).pk

    def cancel_run(self, run_id: int, *, actor: Any, reason: str = "", force: bool = False) -> str:
        """Cancel a run as `actor` (held to their teams); `force` kills its process at once.

        Returns "cancelled" (it had not begun: CANCELLED now), "stopping" (its code
        was asked to stop: the run shows as STOPPING and keeps its slot until the
        work has ended, then it is CANCELLED) or "already stopping". Raises
        ServiceError for a run that is final already, PermissionRefused when the
        actor may not cancel runs of its schedule.
        """
        return run_cancel_as(run=self.storage.get(run_id), actor=actor, force=force,
                             reason=reason or f"{'killed' if force else 'cancelled'} through SchedulerHost")

    def get_active_runs(self) -> list[tuple[int, str, str]]:
        """(run id, pipeline or workflow id, status) of every QUEUED, WAITING or RUNNING run, oldest first."""
        return [
            (pk, target, status)
            for pk, target, status in Run.objects.filter(status__in=RunStatus.active())
            .order_by("id").values_list("id", "schedule__target_id", "status")
        ]
