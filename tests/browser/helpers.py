"""What the browser tests do besides clicking: a dispatcher tick, and telling a live update from a reload."""
from __future__ import annotations

from django.utils import timezone

from tests.services.semantics_helpers import tick


def dispatch() -> list[tuple[int, str]]:
    """One dispatcher tick now; the broker hand-off is captured instead of sent."""
    return tick(timezone.now(), holder="browser-test")


def mark_page(page) -> None:
    """Mark the page's window: a reload clears the mark, an htmx swap keeps it."""
    page.evaluate("window.__notReloaded = true")


def not_reloaded(page) -> bool:
    return page.evaluate("window.__notReloaded === true")
