"""The registry of trigger plugins: built-ins plus entry point `etl_scheduler.triggers`.

A third-party package adds a plugin with, in its pyproject.toml:

    [project.entry-points."etl_scheduler.triggers"]
    business_days = "my_package.triggers:BusinessDaysTrigger"

The object named is a TriggerPlugin subclass (or instance) with a unique id.
"""
from __future__ import annotations

import logging
import re
from importlib.metadata import entry_points

from scheduler.core import ConfigError
from scheduler.triggers.base import TriggerPlugin
from scheduler.triggers.builtin import BUILTINS

log = logging.getLogger(__name__)
ENTRY_POINT_GROUP = "etl_scheduler.triggers"
ID_RE = re.compile(r"^[a-z][a-z0-9_]{0,15}$")

_plugins: dict[str, TriggerPlugin] = {cls.id: cls() for cls in BUILTINS}
_loaded_entry_points = False


def register_trigger(plugin: TriggerPlugin | type[TriggerPlugin], *, replace: bool = False) -> TriggerPlugin:
    instance = plugin() if isinstance(plugin, type) else plugin
    if not isinstance(instance, TriggerPlugin):
        raise ConfigError("trigger_kind", f"{plugin!r} is not a TriggerPlugin")
    # 16 characters: the id is stored in Run.trigger_kind of the runs it fires
    if not isinstance(instance.id, str) or not ID_RE.match(instance.id):
        raise ConfigError(
            "trigger_kind", f"a trigger plugin id must be 1-16 lowercase letters, digits or '_', got {instance.id!r}"
        )
    if instance.id in {cls.id for cls in BUILTINS} and replace:
        raise ConfigError("trigger_kind", f"cannot replace built-in trigger '{instance.id}'")
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
    except (KeyError, TypeError):
        raise ConfigError(
            "trigger_kind", f"unknown trigger plugin {plugin_id!r} (known: {', '.join(sorted(_plugins))})"
        ) from None


def all_triggers() -> dict[str, TriggerPlugin]:
    return dict(_plugins)


def load_entry_point_plugins(*, force: bool = False) -> list[str]:
    """Load third-party plugins once; a broken plugin is logged, never fatal. Returns the ids loaded."""
    global _loaded_entry_points
    if _loaded_entry_points and not force:
        return []
    _loaded_entry_points = True
    loaded: list[str] = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            loaded.append(register_trigger(ep.load(), replace=False).id)
        except Exception:
            log.exception("trigger plugin %s from entry point %s failed to load", ep.name, ep.value)
    return loaded
