"""Reading a schedules file: safe YAML (no tags, no aliases, a key given once, dates as text), problems named
without quoting the file (it may hold a secret)."""
from __future__ import annotations

from dataclasses import dataclass

import re
from typing import Any

import yaml

from scheduler.services.common.errors import ServiceError
from scheduler.core import ConfigError
from scheduler.core.userdata import check_number_literal, excerpt

FILE_VERSION = 1
MAX_FILE_CHARS = 2 * 1024 * 1024  # far above any real schedules file; checked before the YAML is read
CREATE, UPDATE, UNCHANGED, DELETE = "create", "update", "unchanged", "delete"


@dataclass(frozen=True)
class Problem:
    """One refused entry: which entry, which field, what is wrong."""

    entry: str
    field: str | None
    problem: str

    def __str__(self) -> str:
        return f"{self.entry}: {self.field}: {self.problem}" if self.field else f"{self.entry}: {self.problem}"

    def as_dict(self) -> dict:
        return {"entry": self.entry, "field": self.field, "problem": self.problem}


class ScheduleFileError(ServiceError):
    """The file is refused; `problems` lists every problem found, nothing was changed."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        first = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        super().__init__(str(first) + more, field=first.field)


# --- reading the file ----------------------------------------------------------

class _FileProblem(yaml.YAMLError):
    """A problem we found in the file ourselves: its message quotes nothing but short, escaped excerpts."""

    def __init__(self, problem: str, mark: Any) -> None:
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = mark


class _Loader(yaml.SafeLoader):
    """Safe YAML (no object tags, no aliases), dates stay text, a key given twice is an error."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        # Refused while composing, before any node is built: "billion laughs" expands through aliases,
        # and a schedules file has no need for them.
        if self.check_event(yaml.AliasEvent):
            raise _FileProblem("aliases (*name) are not allowed in a schedules file", self.peek_event().start_mark)
        return super().compose_node(parent, index)


# Dates stay strings: the services parse ISO text themselves, and a datetime
# object would not survive the round trip through JSON fields.
_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _construct_mapping(loader: _Loader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: set = set()
    for key_node, _value in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise _FileProblem(f"key '{excerpt(key)}' is given twice", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


def _construct_int(loader: _Loader, node: yaml.ScalarNode) -> int:
    try:
        check_number_literal(str(node.value), field="number")
    except ConfigError as exc:
        raise _FileProblem(exc.problem, node.start_mark) from None
    return yaml.SafeLoader.construct_yaml_int(loader, node)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)
# PyYAML's own messages quote what it found (a character, a token): the file may be a secret, so none of it is shown.
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")


def parse_schedules_file(text: str) -> list[dict]:
    """The file's schedule entries; ScheduleFileError for YAML that does not parse or is not a schedules document."""
    return parse_document(text)[0]


def parse_document(text: str) -> tuple[list, Any, Any]:
    """(schedule entries, the `connections:` section or None, the `teams:` section or None) of a schedules file."""
    if not isinstance(text, str):
        raise ScheduleFileError([Problem("file", None, "must be YAML text")])
    if "\x00" in text:
        raise ScheduleFileError([Problem("file", None, "must not contain the NUL character")])
    if len(text) > MAX_FILE_CHARS:
        raise ScheduleFileError([Problem("file", None, f"is larger than {MAX_FILE_CHARS} characters")])
    try:
        document = yaml.load(text, Loader=_Loader)  # noqa: S506 - _Loader is a SafeLoader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or "cannot be read"
        if not isinstance(exc, _FileProblem):
            problem = _QUOTED.sub("a character", problem)
        raise ScheduleFileError([Problem("file", None, f"not valid YAML ({where}{problem})")]) from None
    except RecursionError:
        raise ScheduleFileError([Problem("file", None, "is nested too deeply")]) from None
    if not isinstance(document, dict):
        raise ScheduleFileError([Problem("file", None, "must be a mapping with a 'schedules' list")])
    unknown = sorted(str(k) for k in set(document) - {"version", "schedules", "connections", "teams"})
    if unknown:
        # the file may be anything YAML reads (a config full of secrets): quote a short excerpt only
        raise ScheduleFileError([Problem("file", excerpt(unknown[0]),
                                         "unknown key (allowed: version, teams, connections, schedules)")])
    version = document.get("version", FILE_VERSION)
    if version != FILE_VERSION:
        raise ScheduleFileError([Problem("file", "version", f"must be {FILE_VERSION}, got {excerpt(version)}")])
    entries = document.get("schedules")
    if entries is None:
        entries = []
    if not isinstance(entries, list):
        raise ScheduleFileError([Problem("file", "schedules", "must be a list of schedules")])
    return entries, document.get("connections"), document.get("teams")
