"""The built-in trigger plugins: cron, interval, event, webhook, manual, upstream."""
from __future__ import annotations

from datetime import datetime, timezone as dt_timezone

from scheduler.core import ConfigError, describe_cron, next_fires, next_interval_fires, validate_cron, validate_timezone
from scheduler.triggers.base import TriggerPlugin, require_keys


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
        return f"{describe_cron(config['cron'], timezone)} ({config['cron']}, {timezone})"

    def next_fires(self, config, *, timezone, after, count):
        return next_fires(config["cron"], timezone, after, count)


class IntervalTrigger(TriggerPlugin):
    id = "interval"
    label = "Interval"
    time_based = True

    def validate(self, config, *, timezone):
        config = super().validate(config, timezone=timezone)
        require_keys(config, {"seconds", "anchor"}, {"seconds"})
        seconds = config["seconds"]
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds <= 0:
            raise ConfigError("trigger_config.seconds", "must be a positive number of seconds")
        anchor = config.get("anchor")
        if anchor is not None:
            try:
                parsed = datetime.fromisoformat(str(anchor))
            except ValueError:
                raise ConfigError("trigger_config.anchor", "must be an ISO-8601 date-time") from None
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=dt_timezone.utc)
            config["anchor"] = parsed.astimezone(dt_timezone.utc).isoformat()
        return config

    def _anchor(self, config) -> datetime:
        if config.get("anchor"):
            return datetime.fromisoformat(config["anchor"])
        return datetime(2000, 1, 1, tzinfo=dt_timezone.utc)

    def describe(self, config, *, timezone):
        seconds = config["seconds"]
        if seconds % 3600 == 0:
            text = f"every {int(seconds // 3600)} h"
        elif seconds % 60 == 0:
            text = f"every {int(seconds // 60)} min"
        else:
            text = f"every {seconds:g} s"
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


class EventTrigger(TriggerPlugin):
    id = "event"
    label = "Event"

    def validate(self, config, *, timezone):
        from scheduler.triggers.filters import compile_filter

        config = super().validate(config, timezone=timezone)
        require_keys(config, {"topic", "filter"}, {"topic"})
        topic = config["topic"]
        if not isinstance(topic, str) or not topic.strip() or len(topic) > 200:
            raise ConfigError("trigger_config.topic", "must be a non-empty string of at most 200 characters")
        flt = config.get("filter") or ""
        if not isinstance(flt, str):
            raise ConfigError("trigger_config.filter", "must be a string expression such as status == 'confirmed'")
        if flt.strip():
            compile_filter(flt)
        config["topic"] = topic.strip()
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
