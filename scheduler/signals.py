"""Run and breaker events, sent after the transaction that caused them commits.

Receivers get `run` (a Run instance) or `schedule` plus keyword details.
"""
from django.dispatch import Signal

run_started = Signal()  # run
run_completed = Signal()  # run (SUCCEEDED or SKIPPED)
run_failed = Signal()  # run, final: bool (False when it was re-queued)
run_blocked = Signal()  # run
circuit_breaker_changed = Signal()  # schedule, old, new, reason
