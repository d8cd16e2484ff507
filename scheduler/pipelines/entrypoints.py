"""Installed packages' pipelines, found through the entry point group `etl_scheduler.pipelines`.

A team keeps its pipelines in a package of its own and announces them in its pyproject.toml:

    [project.entry-points."etl_scheduler.pipelines"]
    sales = "sales_etl.pipelines"

Installed into the scheduler's environment (`pip install ./sales-etl`), the package's pipelines are registered
in every process that autodiscovers (the web side, each cluster, each command), with no setting to edit.
"""

from __future__ import annotations

import logging
import re
from importlib.metadata import entry_points
from types import ModuleType

from .code import ENTRY_POINT_GROUP, remember_distribution

log = logging.getLogger(__name__)
# a URL's password in an import error's text (a module that connects as it is imported) is not shown on a page
_PASSWORD = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://[^:/@\s]*:)[^@\s]+@")

#: what autodiscover could not load: (where, the error), shown on the overview with the cluster that met it
load_problems: list[tuple[str, str]] = []


def load_entry_points() -> list[str]:
    """Import every installed package's pipelines, announced in its pyproject.toml as

        [project.entry-points."etl_scheduler.pipelines"]
        sales = "sales_etl.pipelines"

    The value names a module (its `@pipeline` decorators register as it is imported) or a function in one
    (`sales_etl.pipelines:register`), called once. A package that fails to load is logged and kept in
    `load_problems`; the others still load. Returns the entry points' names loaded.
    """
    loaded = []
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        remember_distribution(ep.module, ep.dist)
        try:
            target = ep.load()
            if callable(target) and not isinstance(target, (ModuleType, type)):
                target()
        except Exception as exc:  # one team's broken package must not stop the others' pipelines
            log.exception("pipelines of entry point %s = %s failed to load", ep.name, ep.value)
            error = _PASSWORD.sub(r"\1***@", f"{type(exc).__name__}: {exc}")[:500]
            load_problems.append((f"{ENTRY_POINT_GROUP}: {ep.name} = {ep.value}", error))
            continue
        loaded.append(ep.name)
    return loaded


__all__ = ["ENTRY_POINT_GROUP", "load_entry_points", "load_problems"]
