"""A run's life: built and queued (queue), waiting on dependencies, its end (end: the one place a run ends; stop,
lost), cancelled
(cancel), re-run (rerun), its log, its breaker and its watermark.
"""
from scheduler.services.runs.queue import run_build, run_enqueue, run_trigger_manual, validate_params, schedule_get
from scheduler.services.runs.end import Ending, run_end, run_finish, runs_end
from scheduler.services.runs.lost import run_lost, run_stop_settled, runs_lost
from scheduler.services.runs.stop import run_cancel, run_stop_request
from scheduler.services.runs.cancel import run_cancel_as
from scheduler.services.runs.rerun import run_rerun, rerun_offers
from scheduler.services.runs.rerun import run_rerun_from_failure
from scheduler.services.runs.breakers import breaker_reset
from scheduler.services.runs.watermarks import watermark_set, watermark_reset, watermark_advance

__all__ = [
    "run_build",
    "run_enqueue",
    "run_trigger_manual",
    "validate_params",
    "schedule_get",
    "Ending",
    "run_end",
    "run_finish",
    "runs_end",
    "run_cancel",
    "run_stop_request",
    "run_lost",
    "runs_lost",
    "run_stop_settled",
    "run_cancel_as",
    "run_rerun",
    "rerun_offers",
    "run_rerun_from_failure",
    "breaker_reset",
    "watermark_set",
    "watermark_reset",
    "watermark_advance",
]
