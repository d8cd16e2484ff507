"""Where built-in pipelines may read and write files: only inside an allowlisted base directory.

A path is resolved first (symbolic links followed, `..` removed), then it
must lie inside the resolved base (the ETL_FILES_DIR setting); the
scheduler's own SQLite database is refused even when it lies inside. Paths
come from settings or the schedule definition, never from run params
(pipelines/params.py). The caller reads the settings and passes them in.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from scheduler.core import ConfigError

FILES_SETTING = "ETL_FILES_DIR"


def _is_path(value: Any) -> bool:
    return isinstance(value, (str, os.PathLike)) and bool(str(value).strip()) and "\x00" not in str(value)


def sqlite_files(databases: Any) -> list[Any]:
    """The files of the SQLite databases in a DATABASES setting (the scheduler's own, never a pipeline's)."""
    if not isinstance(databases, dict):
        return []
    return [db.get("NAME") for db in databases.values()
            if isinstance(db, dict) and "sqlite" in str(db.get("ENGINE", "")) and _is_path(db.get("NAME"))
            and str(db.get("NAME")) != ":memory:"]


def allowed_path(value: Any, *, field: str, base: Any, forbidden: Iterable[Any] = ()) -> Path:
    """`value` resolved, when it lies inside `base` (resolved too) and is none of the `forbidden` files."""
    if not _is_path(base):
        raise ConfigError(FILES_SETTING, "is not set: built-in pipelines read and write files only inside it")
    if not _is_path(value):
        raise ConfigError(field, "must be a file path")
    root = Path(base).resolve()
    path = Path(value).resolve()  # symbolic links followed: a link inside that points outside is outside
    if not path.is_relative_to(root):
        raise ConfigError(field, f"resolves outside {FILES_SETTING} ({root}); built-in pipelines use files "
                                 "only inside it")
    if path in {Path(f).resolve() for f in forbidden}:
        raise ConfigError(field, "is the scheduler's own database")
    return path
