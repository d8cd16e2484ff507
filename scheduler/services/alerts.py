"""Alerts to operators. Placeholder hooks filled in by the alerts work (issue 4)."""
from __future__ import annotations

from datetime import datetime


def governance_alerts(*, now: datetime) -> list[int]:
    return []
