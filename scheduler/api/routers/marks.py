"""/api/v1/schedules/{name}/watermark and /breaker: read and set the mark (with a reason), reset the breaker."""
from __future__ import annotations

from ninja import Router

from scheduler.api.common import caller, errors, require, schedule_by_name
from scheduler.api.schemas import BreakerOut, ReasonIn, WatermarkIn, WatermarkOut
from scheduler.models import Schedule, WatermarkState
from scheduler.services.runs.breakers import breaker_reset
from scheduler.services.runs.watermarks import watermark_config, watermark_set

router = Router(tags=["watermarks and breakers"])


def watermark_out(schedule: Schedule) -> dict:
    config = watermark_config(schedule)
    row = WatermarkState.objects.filter(schedule=schedule).first()
    return {"schedule": schedule.name, "type": str(getattr(config.type, "value", config.type)) if config else None,
            "value": (row.value or None) if row else None, "updated_at": row.updated_at if row else None}


def breaker_out(schedule: Schedule) -> dict:
    return {"schedule": schedule.name, "status": schedule.breaker_status, "failures": schedule.breaker_failures,
            "opened_at": schedule.breaker_opened_at}


@router.get("/schedules/{name}/watermark", response={200: WatermarkOut, **errors()}, summary="A schedule's watermark")
def get_watermark(request, name: str):
    schedule = schedule_by_name(name)
    require(request, "scheduler.view_schedule", schedule)
    return watermark_out(schedule)


@router.put("/schedules/{name}/watermark", response={200: WatermarkOut, **errors()}, summary="Set (or reset) the mark")
def set_watermark(request, name: str, payload: WatermarkIn):
    """Audited with its reason (required); a datetime in the future needs `force`."""
    schedule = schedule_by_name(name)
    require(request, "scheduler.manage_watermark", schedule)
    watermark_set(schedule=schedule, value=payload.value, actor=caller(request), reason=payload.reason,
                  force=payload.force)
    return watermark_out(schedule)


@router.post("/schedules/{name}/breaker/reset", response={200: BreakerOut, **errors()},
             summary="Reset the circuit breaker to closed")
def reset_breaker(request, name: str, payload: ReasonIn):
    schedule = schedule_by_name(name)
    require(request, "scheduler.reset_breaker", schedule)
    breaker_reset(schedule=schedule, actor=caller(request), reason=payload.reason or "reset through the API")
    return breaker_out(schedule_by_name(name))
