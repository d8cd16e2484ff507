"""The built-in trigger plugins: cron, interval, event, webhook, manual, upstream."""
from __future__ import annotations

import re
from datetime import UTC, datetime

from scheduler.core import ConfigError, describe_cron, next_fires, next_interval_fires, validate_cron, validate_timezone
from scheduler.core.limits import LATEST
from scheduler.triggers.base import TriggerPlugin, require_keys
from scheduler.triggers.filters import compile_filter


class CronTrigger(TriggerPlugin):
    id = "cron"
    label = "Cron"
    time_based = True

    def validate(self, config, *, timezone):
        config = super().validate(config, timezone=timezone)
        require_keys(config, {"cron"}, {"cron"})
        if not isinstance(config["cron"], str):
            raise ConfigError("trigger_config.cron", "must be a string such as '0 * * * *'")
        try:
            config["cron"] = validate_cron(config["cron"])
        except ConfigError as exc:
            raise ConfigError("trigger_config.cron", exc.problem) from None
        validate_timezone(timezone)
        return config

    def describe(self, config, *, timezone):
        # describe_cron already ends with the zone: "At 0 minutes past the hour, Europe/Berlin"
        return f"{describe_cron(config['cron'], timezone)} (cron {config['cron']})"

    def next_fires(self, config, *, timezone, after, count):
        return next_fires(config["cron"], timezone, after, count)


# One second is the dispatcher's resolution; ten years is a typo guard.
MIN_SECONDS = 1
MAX_SECONDS = 10 * 366 * 24 * 3600


class IntervalTrigger(TriggerPlugin):
    id = "interval"
    label = "Interval"
    time_based = True

    def validate(self, config, *, timezone):
        config = super().validate(config, timezone=timezone)
        require_keys(config, {"seconds", "anchor"}, {"seconds"})
        seconds = config["seconds"]
        if (isinstance(seconds, bool) or not isinstance(seconds, (int, float))
                or not MIN_SECONDS <= seconds <= MAX_SECONDS):
            raise ConfigError("trigger_config.seconds", f"must be a number of seconds from {MIN_SECONDS} to "
                                                        f"{MAX_SECONDS} (the largest allowed), got {seconds!r}")
        if isinstance(seconds, float) and seconds.is_integer():
            config["seconds"] = int(seconds)
        anchor = config.get("anchor")
        if anchor is not None:
            try:
                parsed = datetime.fromisoformat(anchor) if isinstance(anchor, str) else None
            except ValueError:
                parsed = None
            if parsed is None:
                raise ConfigError("trigger_config.anchor", "must be an ISO-8601 date-time") from None
            if parsed.tzinfo is None:
                # a wall-clock anchor is read in the schedule's own zone, like cron
                parsed = parsed.replace(tzinfo=validate_timezone(timezone))
            try:
                utc = parsed.astimezone(UTC)
            except OverflowError:
                utc = None
            if utc is None or utc >= LATEST:  # the fires after it, an interval apart, must still be dates
                raise ConfigError("trigger_config.anchor",
                                  f"must be before {LATEST.isoformat()} (the latest allowed), got {anchor}")
            config["anchor"] = utc.isoformat()
        return config

    def _anchor(self, config) -> datetime:
        if config.get("anchor"):
            return datetime.fromisoformat(config["anchor"])
        return datetime(2000, 1, 1, tzinfo=UTC)

    def describe(self, config, *, timezone):
        seconds = config["seconds"]
        if seconds % 3600 == 0:
            text = f"every {int(seconds // 3600)} h"
        elif seconds % 60 == 0:
            text = f"every {int(seconds // 60)} min"
        else:
            text = f"every {seconds:g} s"
        if config.get("anchor"):
            text += f" from {config['anchor']}"
        return text

    def next_fires(self, config, *, timezone, after, count):
        return next_interval_fires(self._anchor(config), config["seconds"], after, count)


class ManualTrigger(TriggerPlugin):
    id = "manual"
    label = "Manual only"

    def validate(self, config, *, timezone):
        config = super().validate(config, timezone=timezone)
        require_keys(config, set())
        return config

    def describe(self, config, *, timezone):
        return "manual only"


class UpstreamTrigger(TriggerPlugin):
    id = "upstream"
    label = "When upstreams complete"

    def validate(self, config, *, timezone):
        config = super().validate(config, timezone=timezone)
        require_keys(config, set())
        return config

    def describe(self, config, *, timezone):
        return "when its upstreams complete"


TOPIC_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}$")


def validate_topic(topic, *, field: str = "topic") -> str:
    """A topic is part of the URL /api/events/<topic>: letters, digits, '.', '_', ':' and '-'."""
    if not isinstance(topic, str) or not TOPIC_RE.match(topic.strip()):
        raise ConfigError(
            field,
            f"must be 1-200 letters, digits, '.', '_', ':' or '-', starting with a letter or digit, got {topic!r}"[
                :300
            ],
        )
    return topic.strip()


class EventTrigger(TriggerPlugin):
    id = "event"
    label = "Event"

    def validate(self, config, *, timezone):
        config = super().validate(config, timezone=timezone)
        require_keys(config, {"topic", "filter"}, {"topic"})
        topic = validate_topic(config["topic"], field="trigger_config.topic")
        flt = config.get("filter") or ""
        if not isinstance(flt, str):
            raise ConfigError("trigger_config.filter", "must be a string expression such as status == 'confirmed'")
        if flt.strip():
            compile_filter(flt)
        config["topic"] = topic
        config["filter"] = flt.strip()
        return config

    def describe(self, config, *, timezone):
        text = f"on event '{config['topic']}'"
        if config.get("filter"):
            text += f" where {config['filter']}"
        return text


class WebhookTrigger(TriggerPlugin):
    id = "webhook"
    label = "Webhook"

    def validate(self, config, *, timezone):
        config = super().validate(config, timezone=timezone)
        require_keys(config, set())
        return config

    def describe(self, config, *, timezone):
        return "on a signed webhook"


BUILTINS: list[type[TriggerPlugin]] = [
    CronTrigger, IntervalTrigger, EventTrigger, WebhookTrigger, ManualTrigger, UpstreamTrigger,
]
