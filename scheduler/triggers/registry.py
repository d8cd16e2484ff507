"""The registry of trigger plugins: built-ins plus entry point `etl_scheduler.triggers`."""
from __future__ import annotations

import logging
from importlib.metadata import entry_points

from scheduler.core import ConfigError
from scheduler.triggers.base import TriggerPlugin
from scheduler.triggers.builtin import BUILTINS

log = logging.getLogger(__name__)
ENTRY_POINT_GROUP = "etl_scheduler.triggers"

_plugins: dict[str, TriggerPlugin] = {cls.id: cls() for cls in BUILTINS}
_loaded_entry_points = False


def register_trigger(plugin: TriggerPlugin | type[TriggerPlugin], *, replace: bool = False) -> TriggerPlugin:
    instance = plugin() if isinstance(plugin, type) else plugin
    if not instance.id:
        raise ConfigError("trigger_kind", "a trigger plugin needs an id")
    if instance.id in _plugins and not replace:
        raise ConfigError("trigger_kind", f"trigger plugin '{instance.id}' is already registered")
    _plugins[instance.id] = instance
    return instance


def unregister_trigger(plugin_id: str) -> None:
    if plugin_id in {cls.id for cls in BUILTINS}:
        raise ConfigError("trigger_kind", f"cannot remove built-in trigger '{plugin_id}'")
    _plugins.pop(plugin_id, None)


def get_trigger(plugin_id: str) -> TriggerPlugin:
    try:
        return _plugins[plugin_id]
    except KeyError:
        raise ConfigError(
            "trigger_kind", f"unknown trigger plugin '{plugin_id}' (known: {', '.join(sorted(_plugins))})"
        ) from None


def all_triggers() -> dict[str, TriggerPlugin]:
    return dict(_plugins)


def load_entry_point_plugins() -> None:
    """Load third-party plugins once; a broken plugin is logged, not fatal."""
    global _loaded_entry_points
    if _loaded_entry_points:
        return
    _loaded_entry_points = True
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            register_trigger(ep.load(), replace=False)
        except Exception:
            log.exception("trigger plugin %s from entry point %s failed to load", ep.name, ep.value)
