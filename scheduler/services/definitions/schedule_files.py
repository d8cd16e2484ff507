"""Schedules as code: a YAML file of schedules, planned and applied as a whole.

    version: 1
    schedules:
      - name: orders_sync
        target_id: shop.orders
        trigger_kind: cron
        trigger_config: {cron: "0 * * * *"}
        ...

The file is declarative: an entry states the whole schedule, and a field it
leaves out takes its default (as a new schedule would). Every entry is
checked before anything changes; one bad entry refuses the whole file, with
each problem naming the entry and the field. The plan says, per schedule,
create / update (with the field diff) / unchanged / delete (only with
`prune`), and applying it is one transaction through `schedule_save` and
`schedule_delete`, so each change has its audit entry. Applying the same file
twice changes nothing the second time. Webhook secrets are never in the file:
they stay in the database (rotate them with `rotate_webhook_secret`).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from scheduler.core import EtlError, find_cycle, topological_order
from scheduler.core.userdata import excerpt
from scheduler.models import Schedule, Team, WorkloadClass
from scheduler.services.integrations.channels import mask_url, split_channels, unmask_channels
from scheduler.services.worker.commands import command_env_resolve, command_spec_shown
from scheduler.services.definitions.connection_files import connections_file_apply
from scheduler.services.definitions.schedule_source import FileSource, source_stamp
from scheduler.services.definitions.team_files import teams_file_apply
from scheduler.services.definitions.schedule_export import schedules_export  # noqa: F401  re-exported
from scheduler.services.common.errors import ServiceError
from scheduler.services.definitions.schedules import (
    SCHEDULE_FIELDS,
    field_default,
    schedule_save,
    schedule_spec,
    validate_schedule,
)
from scheduler.services.definitions.schedule_removal import schedule_delete
from scheduler.services.access.teams import authorize, authorize_create, authorize_owner_change
from scheduler.services.definitions.schedule_yaml import (  # noqa: F401  re-exported: the reader's names
    CREATE, DELETE, FILE_VERSION, MAX_FILE_CHARS, UNCHANGED, UPDATE, Problem, ScheduleFileError, parse_document,
    parse_schedules_file)

DEFAULT_SOURCE = "schedules.yaml"

def _shown(field_name: str, value: Any) -> Any:
    if field_name == "alert_channels" and isinstance(value, list):
        return [mask_url(url) for url in value]
    if field_name == "command":
        return command_spec_shown(value)
    return value


@dataclass
class Change:
    action: str
    name: str
    #: field -> (old, new) for an update; field -> new for a create
    changes: dict[str, Any] = field(default_factory=dict)

    def shown_changes(self) -> dict[str, Any]:
        """The changes as printed (a command's output, JSON): channel URLs masked."""
        if self.action == UPDATE:
            return {k: (_shown(k, old), _shown(k, new)) for k, (old, new) in self.changes.items()}
        return {k: _shown(k, v) for k, v in self.changes.items()}

    def as_dict(self) -> dict:
        shown = self.shown_changes()
        if self.action == UPDATE:
            diff = {k: {"old": old, "new": new} for k, (old, new) in shown.items()}
        else:
            diff = shown
        return {"action": self.action, "schedule": self.name, "changes": diff}


@dataclass
class Plan:
    changes: list[Change]
    applied: bool = False
    #: what the file's `connections:` section changed (connection_files.py): [{action, name, changes}], no secret
    connections: list[dict] = field(default_factory=list)
    #: what its `teams:` section changed (team_files.py): [{action, name, changes}]
    teams: list[dict] = field(default_factory=list)
    #: schedules of the file that exist and were not managed by it (before this apply)
    unmanaged: list[str] = field(default_factory=list)
    #: schedules this apply put under the file (created, or taken over)
    managed: list[str] = field(default_factory=list)

    def count(self, action: str) -> int:
        return sum(1 for c in self.changes if c.action == action)

    @property
    def summary(self) -> dict[str, int]:
        return {action: self.count(action) for action in (CREATE, UPDATE, UNCHANGED, DELETE)}

    @property
    def has_changes(self) -> bool:
        return any(c.action != UNCHANGED for c in self.changes)

    @property
    def drift(self) -> bool:
        """Whether the database differs from the file: a schedule, team or connection to change, or a schedule
        of the file that the file does not manage (detached)."""
        return (self.has_changes or bool(self.unmanaged)
                or any(c["action"] != UNCHANGED for c in self.connections + self.teams))

    def as_dict(self) -> dict:
        return {"applied": self.applied, "summary": self.summary, "plan": [c.as_dict() for c in self.changes],
                "teams": self.teams, "unmanaged": self.unmanaged, "managed": self.managed,
                "connections": self.connections}


# --- planning ----------------------------------------------------------------------

def _label(index: int, entry: Any) -> str:
    name = entry.get("name") if isinstance(entry, dict) else None
    return f"schedules[{index}] ({excerpt(name, 60)})" if isinstance(name, str) and name else f"schedules[{index}]"


def _candidate(entry: dict, classes: dict[str, WorkloadClass],
               existing: dict[str, Schedule] | None = None) -> tuple[Schedule, list[str]]:
    """An unsaved, validated schedule for `entry` (defaults for what it leaves out) and its upstream names."""
    unknown = sorted(str(k) for k in set(entry) - set(SCHEDULE_FIELDS))
    if unknown:
        raise ServiceError(f"unknown field (fields: {', '.join(SCHEDULE_FIELDS)})", field=excerpt(unknown[0], 40))
    values = {f: entry[f] if f in entry else field_default(f) for f in SCHEDULE_FIELDS}
    current = (existing or {}).get(values["name"]) if isinstance(values["name"], str) else None
    if current is not None and values["alert_channels"]:
        # an exported file shows channels masked: a masked URL keeps the stored one
        values["alert_channels"] = unmask_channels(split_channels(values["alert_channels"], field="alert_channels"),
                                                   split_channels(current.alert_channels, field="alert_channels"))
    upstreams = values.pop("depends_on")
    if upstreams is None:
        upstreams = []
    if not isinstance(upstreams, list) or not all(isinstance(u, str) and u and "\x00" not in u for u in upstreams):
        raise ServiceError("must be a list of schedule names", field="depends_on")
    if len(set(upstreams)) != len(upstreams):
        raise ServiceError("names an upstream twice", field="depends_on")
    wc_name = values.pop("workload_class")
    if not isinstance(wc_name, str) or wc_name not in classes:
        known = ", ".join(sorted(classes)) or "none"
        raise ServiceError(f"unknown workload class {wc_name!r} (known: {known})", field="workload_class")
    owner_name = values.pop("owner")
    owner = Team.objects.filter(name=owner_name).first() if isinstance(owner_name, str) and owner_name else None
    if owner is None:
        known = ", ".join(Team.objects.order_by("name").values_list("name", flat=True)[:20]) or "none"
        raise ServiceError(f"unknown team {owner_name!r} (known: {known})", field="owner")
    schedule = Schedule(workload_class=classes[wc_name], owner=owner, **values)
    validate_schedule(schedule)
    if schedule.trigger_kind == "upstream" and not upstreams:
        raise ServiceError("an 'upstream' trigger needs at least one upstream schedule", field="depends_on")
    return schedule, upstreams


def schedules_plan(entries: list, *, prune: bool = False) -> Plan:
    """Check every entry against the database and say what applying them would change.

    Raises ScheduleFileError listing every problem when any entry is invalid.
    """
    problems: list[Problem] = []
    classes = {wc.name: wc for wc in WorkloadClass.objects.all()}
    existing = {s.name: s for s in
                Schedule.objects.select_related("workload_class", "owner").prefetch_related("depends_on")}
    wanted: dict[str, dict] = {}  # name -> spec, in file order
    for index, entry in enumerate(entries):
        label = _label(index, entry)
        if not isinstance(entry, dict):
            problems.append(Problem(label, None, "must be a mapping of schedule fields"))
            continue
        try:
            schedule, upstreams = _candidate(entry, classes, existing)
        except EtlError as exc:
            for error in getattr(exc, "errors", [exc]):  # InvalidInput: every bad field of the entry
                problems.append(Problem(label, getattr(error, "field", None),
                                        getattr(error, "problem", None) or str(error)))
            continue
        if schedule.name in wanted:
            problems.append(Problem(label, "name", f"'{schedule.name}' is listed twice"))
            continue
        wanted[schedule.name] = schedule_spec(schedule, depends_on=upstreams)

    # prune touches only the teams the file speaks for: another team's schedules are not this file's business
    file_teams = {spec["owner"] for spec in wanted.values()}
    pruned = {name for name, s in existing.items()
              if name not in wanted and s.owner.name in file_teams} if prune else set()
    kept = (set(wanted) | set(existing)) - pruned
    # entries refused above already have their problem: do not report them again as missing upstreams
    listed = {e["name"] for e in entries if isinstance(e, dict) and isinstance(e.get("name"), str)}
    for index, entry in enumerate(entries):
        name = entry.get("name") if isinstance(entry, dict) else None
        spec = wanted.get(name) if isinstance(name, str) else None
        if spec is None:
            continue
        for upstream in spec["depends_on"]:
            if upstream == name:
                problems.append(Problem(_label(index, entry), "depends_on", "a schedule cannot depend on itself"))
            elif upstream not in kept and upstream not in listed:
                why = ("is not in the file and --prune would delete it" if upstream in pruned
                       else "is neither in the file nor in the database")
                problems.append(Problem(_label(index, entry), "depends_on", f"upstream '{upstream}' {why}"))
    graph = {name: list(wanted[name]["depends_on"]) if name in wanted else
             sorted(u.name for u in existing[name].depends_on.all()) for name in kept}
    if not problems:
        cycle = find_cycle(graph)
        if cycle:
            # spelled as data flows, upstream -> dependent (the graph walks upstream links),
            # starting at an entry of the file
            ring = list(reversed(cycle))[:-1]
            entry_name = next((n for n in ring if n in wanted), ring[0])
            start = ring.index(entry_name)
            spelled = " -> ".join(ring[start:] + ring[:start] + [entry_name])
            problems.append(Problem(entry_name, "depends_on", f"would create a cycle: {spelled}"))
    if problems:
        raise ScheduleFileError(problems)

    changes: list[Change] = []
    # upstreams first, so each schedule_save finds its upstreams already in their final shape
    order = topological_order(list(wanted), [(u, n) for n in wanted for u in wanted[n]["depends_on"] if u in wanted])
    for name in order:
        spec = wanted[name]
        current = existing.get(name)
        if current is None:
            changes.append(Change(CREATE, name, spec))
            continue
        before = schedule_spec(current, depends_on=[u.name for u in current.depends_on.all()])
        spec["command"] = command_env_resolve(spec["command"], before["command"])  # a masked secret is no change
        diff = {f: (before[f], spec[f]) for f in SCHEDULE_FIELDS if before[f] != spec[f]}
        changes.append(Change(UPDATE if diff else UNCHANGED, name, diff))
    if prune:
        changes.extend(Change(DELETE, name) for name in sorted(pruned))
    return Plan(changes)


# --- applying ---------------------------------------------------------------------

def _authorize_plan(plan: Plan, *, actor: Any) -> None:
    """`teams.authorize` for every change of the plan; the first refusal (audited) refuses the whole file."""
    targets = {s.name: s for s in Schedule.objects.select_related("owner").filter(
        name__in=[c.name for c in plan.changes if c.action in (UPDATE, DELETE)])}
    teams = {t.name: t for t in Team.objects.all()}
    for change in plan.changes:
        if change.action == CREATE:
            authorize_create(actor=actor, name=change.name, team=teams[change.changes["owner"]])
        elif change.action == UPDATE:
            authorize(actor=actor, perm="scheduler.change_schedule", obj=targets[change.name])
            if "owner" in change.changes:
                authorize_owner_change(actor=actor, schedule=targets[change.name],
                                       team=teams[change.changes["owner"][1]])
        elif change.action == DELETE:
            authorize(actor=actor, perm="scheduler.delete_schedule", obj=targets[change.name])


def schedules_apply(*, text: str | None = None, entries: list | None = None, actor: Any, prune: bool = False,
                    dry_run: bool = False, reason: str = "", now: datetime | None = None,
                    source: str | None = DEFAULT_SOURCE) -> Plan:
    """Validate, plan and (unless dry_run) apply a schedules file in one transaction.

    Nothing changes when any entry is invalid (ScheduleFileError names each
    entry and field) or when applying fails part way (the transaction rolls back).
    `source` names the file: each schedule it lists is then managed by it (schedule_source.py); None: not.
    """
    connections = teams = None
    if entries is None:
        text = text if text is not None else ""
        entries, connections, teams = parse_document(text)
    now = now or timezone.now()
    reason = reason or "applied from a schedules file"
    stamp = None if source is None else FileSource.of(
        name=source, text=text if text is not None else json.dumps(entries, sort_keys=True, default=str),
        actor=actor, at=now)
    if connections is None and teams is None:
        return _apply(entries, actor=actor, prune=prune, dry_run=dry_run, reason=reason, now=now, stamp=stamp)
    # first, on their own: the schedules may name the teams and connections the file declares
    with transaction.atomic():
        team_changes, problems = teams_file_apply(teams, actor=actor, reason=reason) if teams is not None \
            else ([], [])
        if not problems and connections is not None:
            conn_changes, problems = connections_file_apply(connections, actor=actor, reason=reason)
        else:
            conn_changes = []
        if problems:
            raise ScheduleFileError([Problem(*problem) for problem in problems])
        if dry_run:  # planned against what the sections would make, then rolled back: nothing is kept
            plan = schedules_plan(entries, prune=prune)
            _authorize_plan(plan, actor=actor)
            plan.unmanaged = _unmanaged(plan, stamp)
            plan.connections, plan.teams = conn_changes, team_changes
            transaction.set_rollback(True)
            return plan
    plan = _apply(entries, actor=actor, prune=prune, dry_run=False, reason=reason, now=now, stamp=stamp)
    plan.connections, plan.teams = conn_changes, team_changes
    return plan


def _unmanaged(plan: Plan, stamp: FileSource | None) -> list[str]:
    """The schedules of the file that exist and are not managed by it (never applied from it, or detached)."""
    if stamp is None:
        return []
    listed = [c.name for c in plan.changes if c.action in (UPDATE, UNCHANGED)]
    return sorted(Schedule.objects.filter(name__in=listed).exclude(source_file=stamp.name)
                  .values_list("name", flat=True))


def _apply(entries: list, *, actor: Any, prune: bool, dry_run: bool, reason: str, now: datetime,
           stamp: FileSource | None) -> Plan:
    # asked outside the transaction, so that a refusal's audit entry stays when nothing else does
    _authorize_plan(schedules_plan(entries, prune=prune), actor=actor)
    with transaction.atomic():
        plan = schedules_plan(entries, prune=prune)
        plan.unmanaged = _unmanaged(plan, stamp)
        if dry_run or not (plan.has_changes or plan.unmanaged or _restamp(plan, stamp)):
            return plan
        _authorize_plan(plan, actor=actor)  # the database may have moved since the first look
        try:
            for change in plan.changes:
                if change.action == CREATE:
                    schedule_save(data=dict(change.changes), actor=actor, reason=reason, now=now, source=stamp)
                elif change.action == UPDATE:
                    target = Schedule.objects.get(name=change.name)
                    data = {f: new for f, (_old, new) in change.changes.items()}
                    schedule_save(data=data, schedule=target, actor=actor, reason=reason, now=now, source=stamp)
                elif change.action == UNCHANGED and stamp is not None:
                    target = Schedule.objects.select_for_update().get(name=change.name)
                    if target.source_file != stamp.name:  # coming under this file is a change of the schedule
                        authorize(actor=actor, perm="scheduler.change_schedule", obj=target)
                    source_stamp(schedule=target, source=stamp, actor=actor, reason=reason)
            for change in plan.changes:
                if change.action == DELETE:
                    schedule_delete(schedule=Schedule.objects.get(name=change.name), actor=actor, reason=reason,
                                    now=now)
        except ServiceError as exc:
            raise ScheduleFileError([Problem(change.name, e.field, getattr(e, "problem", None) or str(e))
                                     for e in exc.errors]) from None
        plan.applied = plan.has_changes
        plan.managed = sorted(plan.unmanaged + [c.name for c in plan.changes if c.action == CREATE and stamp])
    return plan


def _restamp(plan: Plan, stamp: FileSource | None) -> bool:
    """Whether a schedule of the file has an older digest of it (another entry of the file changed)."""
    if stamp is None:
        return False
    listed = [c.name for c in plan.changes if c.action != DELETE]
    return Schedule.objects.filter(name__in=listed, source_file=stamp.name).exclude(
        source_digest=stamp.digest).exists()


__all__ = [
    "CREATE", "DELETE", "UNCHANGED", "UPDATE", "Change", "Plan", "Problem", "ScheduleFileError",
    "parse_document", "parse_schedules_file", "schedules_apply", "schedules_export", "schedules_plan",
]
