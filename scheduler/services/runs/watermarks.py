"""Watermarks: read, advance with a run's success, reset and set (audited)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from scheduler.core import (INT64_MAX, INT64_MIN, ConfigError, WatermarkConfig, WatermarkState, Window, advance,
                            compute_window, compute_windows)
from scheduler.core.limits import LATEST
from scheduler.models import Run, Schedule, WatermarkChange, WatermarkHistory
from scheduler.models import WatermarkState as WatermarkRow
from scheduler.services.common.audit import actor_name, audit_record
from scheduler.services.common.errors import ServiceError, check_text
from scheduler.services.runs.queue import run_enqueue


@dataclass(frozen=True)
class Loaded:
    """What a succeeded live run read, for the watermark: the window and the largest value loaded."""

    config: WatermarkConfig
    window: Window | None
    max_value: Any = None
    capped: bool = False  # max_window cut a long gap: the next slice runs right after this one


def watermark_config(schedule: Schedule) -> WatermarkConfig | None:
    if not schedule.watermark_config:
        return None
    return WatermarkConfig.from_dict(schedule.watermark_config)


def encode_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    return str(value)


def decode_value(config: WatermarkConfig, text: str) -> Any:
    if text in ("", None):
        return None
    if config.is_datetime:
        value = datetime.fromisoformat(text)
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return int(text)


def parse_user_value(config: WatermarkConfig, text: Any, *, field: str = "value") -> Any:
    """A value typed by a person or a script, checked against the mark's type."""
    if config.is_datetime:
        if isinstance(text, datetime):
            value = text
        else:
            try:
                value = datetime.fromisoformat(str(text).strip())
            except ValueError:
                raise ServiceError(f"{text!r} is not an ISO 8601 date and time", field=field) from None
        value = value if value.tzinfo else value.replace(tzinfo=UTC)
        try:
            value.astimezone(UTC)  # stored in UTC: 0001-01-01T00:00+05:00 has no UTC equivalent
        except OverflowError:
            raise ServiceError(f"{text!r} is out of range in UTC", field=field) from None
        if value >= LATEST:  # a window or a backfill step added to it must still be a date
            raise ServiceError(f"must be before {LATEST.isoformat()} (the latest allowed), got {text!s}", field=field)
        return value
    try:
        number = int(str(text).strip())
    except ValueError:
        raise ServiceError(f"{text!r} is not a whole number", field=field) from None
    if not INT64_MIN <= number <= INT64_MAX:  # a 64-bit source column; the stored text has room for nothing longer
        raise ServiceError("is outside the 64-bit integer range", field=field)
    return number


def watermark_state(schedule: Schedule, config: WatermarkConfig | None = None) -> WatermarkState:
    config = config or watermark_config(schedule)
    row = WatermarkRow.objects.filter(schedule=schedule).first()
    if config is None or row is None:
        return WatermarkState(None)
    return WatermarkState(decode_value(config, row.value))


def window_encode(window: Window | None) -> tuple[str, str]:
    if window is None:
        return "", ""
    return encode_value(window.low), encode_value(window.high)


def effective_mark(config: WatermarkConfig, text: str) -> Any:
    """The mark a run's window starts from: the stored value, else the configured initial (0 for integers)."""
    value = decode_value(config, text)
    if value is None:
        value = config.initial if config.initial is not None else (None if config.is_datetime else 0)
    return value


def window_start_mark(config: WatermarkConfig, window: Window | None) -> Any:
    """The mark a live window was computed from (its low end plus the overlap), None when unknown."""
    if window is None or window.low is None:
        return None
    return window.low + config.overlap


def watermark_advance(*, schedule: Schedule, run: Run, new_value: Any, now: datetime,
                      started_from: Any = None) -> str:
    """Move the mark forward; call inside the run's success transaction. Never moves back.

    With `started_from` (the mark the run's window was computed from) it is a compare-and-set: when the mark
    is no longer there (a person set or reset it, or another run moved it, while this run read its window),
    the mark stays where it is and the one line why is returned. '' when it moved or had nothing to do.
    """
    config = watermark_config(schedule)
    if config is None or (new_value is None and started_from is None):
        return ""
    return _advance(schedule=schedule, run=run, config=config, now=now, started_from=started_from,
                    new_value=lambda current: new_value)[0]


def _advance(*, schedule: Schedule, run: Run, config: WatermarkConfig, now: datetime, started_from: Any,
             new_value: Callable[[Any], Any]) -> tuple[str, Any]:
    """watermark_advance on the row as locked here: (why it was refused or '', the value it moved to or None).
    `new_value(current mark)` is where the run would move it."""
    row, _ = WatermarkRow.objects.select_for_update().get_or_create(schedule=schedule)
    current = decode_value(config, row.value)
    target = new_value(current)
    if started_from is not None and effective_mark(config, row.value) != started_from:
        last = (WatermarkHistory.objects.filter(schedule=schedule).exclude(new_value=encode_value(started_from))
                .order_by("-at", "-id").first())
        who = (f"{last.actor or 'a person'} ({last.kind}{': ' + last.reason if last.reason else ''})"
               if last is not None and last.kind != WatermarkChange.ADVANCE
               else f"run {last.run_id}" if last is not None and last.run_id else "someone else")
        moved = f"advanced to {encode_value(target)}" if target is not None else "moved by this run"
        note = (f"watermark not {moved}: it was moved from "
                f"{encode_value(started_from) or 'its initial value'} to {row.value or 'its initial value'} by {who} "
                "while this run read its window; the rows it loaded are kept")[:500]
        audit_record(actor="watermark", action="watermark.advance_refused", target=schedule,
                     before={"value": row.value or None},
                     after={"run": run.pk, "would_be": encode_value(target) or None},
                     reason=note, at=now)
        return note, None
    if target is None or (current is not None and target <= current):
        return "", None
    encoded = encode_value(target)
    # compare-and-set on the old value: a concurrent writer makes this a no-op
    changed = WatermarkRow.objects.filter(schedule=schedule, value=row.value).update(
        value=encoded, updated_at=now, updated_by_run=run
    )
    if not changed:
        return "", None
    WatermarkHistory.objects.create(
        schedule=schedule, kind=WatermarkChange.ADVANCE, old_value=row.value, new_value=encoded, run=run, at=now
    )
    return "", target


def watermark_advance_on_success(run: Run, loaded: Loaded, *, now: datetime) -> None:
    """A live run's success moves its schedule's mark (finish.py calls it in the transaction of the success)."""
    def moved_to(current: Any) -> Any:
        state = WatermarkState(current)
        moved = advance(loaded.config, state, loaded.window, loaded.max_value)
        return moved.value if moved.value is not None and moved != state else None

    # the mark moves in the same transaction as the run's success, and only from where the run's window began;
    # where it moves is computed from the row as locked there (read once)
    started_from = window_start_mark(loaded.config, loaded.window)
    if started_from is None and moved_to(watermark_state(run.schedule, loaded.config).value) is None:
        return  # nothing to move, nothing to check against: the row is neither locked nor made
    refused, new_value = _advance(schedule=run.schedule, run=run, config=loaded.config, now=now,
                                  started_from=started_from, new_value=moved_to)
    if refused:
        run.reason = refused
        Run.objects.filter(pk=run.pk).update(reason=refused)
        return  # no catch-up slice either: the next run reads from where the mark now is
    if new_value is not None:
        run.watermark_after = encode_value(new_value)
        Run.objects.filter(pk=run.pk).update(watermark_after=run.watermark_after)
    if loaded.capped and loaded.window is not None:
        # kept on the run for the worker that may run the slice next (catchup.py)
        run.catchup_slice = run_enqueue(
            schedule=run.schedule, trigger_kind=run.trigger_kind,
            trigger_key=f"{run.trigger_key.split('>')[0]}>{encode_value(loaded.window.high)}",
            params=run.params, logical_time=run.logical_time, triggered_by="watermark catch-up", now=now)


def watermark_set(*, schedule: Schedule, value: Any, actor: Any, reason: str, now: datetime | None = None,
                  force: bool = False) -> str:
    """Set the mark to a value (or reset it with value=None). Audited; a reason is required.

    A datetime mark in the future would make the schedule skip every row
    stamped before it once it arrives (or read nothing until then): refused
    unless `force`.
    """
    now = now or timezone.now()
    config, parsed = _checked_move(schedule, value=value, reason=reason, now=now, force=force)
    encoded = encode_value(parsed)
    kind = WatermarkChange.RESET if parsed is None else WatermarkChange.SET
    with transaction.atomic():
        row, _ = WatermarkRow.objects.select_for_update().get_or_create(schedule=schedule)
        old = row.value
        WatermarkRow.objects.filter(schedule=schedule).update(value=encoded, updated_at=now, updated_by_run=None)
        WatermarkHistory.objects.create(
            schedule=schedule, kind=kind, old_value=old, new_value=encoded, actor=actor_name(actor)[0],
            reason=reason[:500], at=now,
        )
        after = {"value": encoded or None, **({"forced": True} if force and isinstance(parsed, datetime)
                                               and parsed > now else {})}
        audit_record(actor=actor, action=f"watermark.{kind.value}", target=schedule,
                     before={"value": old}, after=after, reason=reason, at=now)
    return encoded


def _checked_move(schedule: Schedule, *, value: Any, reason: str, now: datetime, force: bool
                  ) -> tuple[WatermarkConfig, Any]:
    """The checks of a set or reset, shared by the move and its preview: (config, parsed value or None)."""
    config = watermark_config(schedule)
    if config is None:
        raise ServiceError(f"schedule '{schedule.name}' has no watermark", field="schedule")
    if not reason or not str(reason).strip():
        raise ServiceError("a reason is required", field="reason")
    check_text(reason, field="reason")
    parsed = None if value in (None, "") else parse_user_value(config, value)
    if isinstance(parsed, datetime) and parsed > now and not force:
        raise ServiceError(f"{encode_value(parsed)} is in the future (now {encode_value(now)}); "
                           "force it to set a future mark anyway", field="value")
    return config, parsed


PREVIEW_WINDOWS = 10_000  # counted ahead for "then N more windows to catch up"; past it the preview says "over"


def watermark_preview(*, schedule: Schedule, value: Any, reason: str, now: datetime, force: bool = False) -> dict:
    """What a set (or, with value None, a reset) would do, checked as the move itself is, changing nothing.

    {"old": stored text, "new": the mark it stores (a datetime, an int, or None: the initial value),
    "start": the mark the next run starts from, "window": the next window it causes (None: nothing to read
    yet), "windows": how many windows until it has caught up to now (datetime marks), "more": True past
    PREVIEW_WINDOWS}.
    """
    config, parsed = _checked_move(schedule, value=value, reason=reason, now=now, force=force)
    row = WatermarkRow.objects.filter(schedule=schedule).first()
    start = effective_mark(config, encode_value(parsed))
    state = WatermarkState(start)
    window = compute_window(config, state, now)
    windows = compute_windows(config, state, now, limit=PREVIEW_WINDOWS + 1) if config.is_datetime else []
    return {"old": row.value if row else "", "new": parsed, "start": start, "window": window,
            "windows": min(len(windows), PREVIEW_WINDOWS), "more": len(windows) > PREVIEW_WINDOWS,
            "is_datetime": config.is_datetime}


def watermark_reset(*, schedule: Schedule, actor: Any, reason: str, now: datetime | None = None) -> str:
    """Forget the mark: the next run starts again from the configured initial value."""
    return watermark_set(schedule=schedule, value=None, actor=actor, reason=reason, now=now)


__all__ = [
    "ConfigError", "Loaded", "decode_value", "effective_mark", "encode_value", "watermark_advance",
    "watermark_advance_on_success", "window_start_mark", "watermark_config", "watermark_preview", "watermark_reset",
    "watermark_set", "watermark_state", "window_encode",
]
