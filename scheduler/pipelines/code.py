"""Which code a run runs: the package's version and a digest of the target's source.

A pipeline's source is the module its factory lives in, digested when the
module registers it (so the digest is of the code this process imported, not
of whatever is on disk later); its package is the distribution that installed
that module (found through the `etl_scheduler.pipelines` entry point that
loaded it, else through the installed distributions' file lists). A command's
source is its executable when that is a file (a console script of an installed
distribution: the module the script runs, and that distribution's version);
a dbt project's is the files its manifest is built from (dbt writes the
manifest itself only while the run parses the project), its version the
project's own `version:`.

`installed_code` reads the same facts from disk again: a cluster compares it
with `loaded_code` to notice a newer version installed beside it.
No Django here: pipeline authors' tests import the registry without settings.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import shutil
import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

DIGEST_CHARS = 12  # of sha256's hex: a glance tells two versions apart, and 48 bits do not collide by chance
SCHEDULER_DISTRIBUTION = "etl-scheduler"
ENTRY_POINT_GROUP = "etl_scheduler.pipelines"
# the files of a dbt project that its manifest is built from; target/, logs/ and installed packages are outputs
DBT_SOURCES = (".sql", ".yml", ".yaml", ".csv", ".py", ".md", ".jinja")
DBT_SKIP = {"target", "logs", "dbt_packages", "dbt_modules", ".git", ".venv", "__pycache__"}
DBT_MAX_FILES = 20_000

_lock = threading.Lock()
_file_digests: dict[tuple, str] = {}
_module_digests: dict[tuple[str, int], str] = {}
# top-level import name -> (distribution, version), from the entry points that loaded it and from the lookups made
_distributions: dict[str, tuple[str, str]] = {}
# distribution -> version of the packages whose entry points this process loaded (or tried to)
_announced: dict[str, str] = {}


@dataclass(frozen=True)
class CodeVersion:
    """What ran: a distribution and its version (empty when no installed distribution holds the code) and a
    digest of the target's source (empty when the target has no source file, as a shell command)."""

    package: str = ""
    version: str = ""
    digest: str = ""

    @property
    def text(self) -> str:
        """As a run records it: 'sales-etl 0.2.0 · 9f86d081884c', or the digest alone without a package."""
        named = f"{self.package} {self.version}".strip()
        if named and self.digest:
            return f"{named} · {self.digest}"
        return named or self.digest

    def __str__(self) -> str:
        return self.text


def digest_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:DIGEST_CHARS]


def file_digest(path: str | os.PathLike) -> str:
    """The digest of a file's bytes; '' when it cannot be read. Cached while the file keeps its inode, size and
    modification time, so a large executable is hashed once, not at every run."""
    try:
        st = os.stat(path)
    except OSError:
        return ""
    key = (str(path), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    found = _file_digests.get(key)
    if found is not None:
        return found
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return ""
    value = digest.hexdigest()[:DIGEST_CHARS]
    with _lock:
        _file_digests[key] = value
    return value


def module_file(name: str) -> str:
    """The source file of a module as imported here (or as it would be imported); '' for one without a file."""
    module = sys.modules.get(name)
    path = getattr(module, "__file__", None) if module is not None else None
    if path is None and module is None:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        path = spec.origin if spec is not None and spec.has_location else None
    return path or ""


def module_digest(name: str) -> str:
    """The digest of an imported module's source as it was when first asked in this process (its registration)."""
    key = (name, id(sys.modules.get(name)))  # a module imported again (importlib.reload) is digested again
    found = _module_digests.get(key)
    if found is None:
        found = file_digest(module_file(name)) if module_file(name) else ""
        with _lock:
            _module_digests[key] = found
    return found


def remember_distribution(module: str, dist: metadata.Distribution | None) -> None:
    """An entry point loads `module` from `dist`: its package's code belongs to that distribution (recorded
    before the import, so a package that fails to load is not taken for a newer install at every look)."""
    if dist is not None:
        name, version = dist.metadata["Name"] or "", dist.version or ""
        with _lock:
            _distributions[module.split(".")[0]] = (name, version)
            _announced[name] = version


@functools.lru_cache(maxsize=1)
def _import_names() -> dict[str, list[str]]:
    # 0.1 s once a process, and only for a module no entry point announced (ETL_PIPELINE_MODULES, an app's)
    return metadata.packages_distributions()


def distribution_of(module: str) -> tuple[str, str]:
    """(distribution, version) that installed `module`'s top-level package, ('', '') for none."""
    top = module.split(".")[0]
    found = _distributions.get(top)
    if found is not None:
        return found
    names = [SCHEDULER_DISTRIBUTION] if top in ("scheduler", "etlsite") else _import_names().get(top, [])
    found = ("", "")
    for name in names:
        try:
            found = (name, metadata.version(name))
            break
        except metadata.PackageNotFoundError:
            continue
    with _lock:
        _distributions[top] = found
    return found


def modules_code(modules: Iterable[str]) -> CodeVersion:
    """The code of a target made of one or more modules (a workflow's nodes): one digest over theirs."""
    names = sorted(set(modules))
    if not names:
        return CodeVersion()
    package, version = distribution_of(names[0])
    if len(names) == 1:
        return CodeVersion(package, version, module_digest(names[0]))
    joined = "\n".join(f"{name}={module_digest(name)}" for name in names)
    return CodeVersion(package, version, digest_bytes(joined.encode()))


def executable_code(argv0: str, *, path: str | None, cwd: str | None = None) -> CodeVersion:
    """A command's program: the module behind a console script of an installed distribution (and its version),
    else the digest of the file the program resolves to; empty for a program that is no file found."""
    if os.sep in argv0:
        found = argv0 if os.path.isabs(argv0) else os.path.join(cwd or os.getcwd(), argv0)
    else:
        found = shutil.which(argv0, path=path) or ""
    if not found or not os.path.isfile(found):
        return CodeVersion()
    script = _console_script(os.path.basename(found), found)
    if script is not None:
        module, dist = script
        return CodeVersion(dist.metadata["Name"] or "", dist.version or "", file_digest(module_file(module)))
    return CodeVersion(digest=file_digest(found))


def _console_script(name: str, path: str) -> tuple[str, metadata.Distribution] | None:
    """(module, distribution) when `path` is the console script `name` that a distribution installed."""
    for ep in metadata.entry_points(group="console_scripts", name=name):
        dist = ep.dist
        if dist is None:
            continue
        installed = {os.path.realpath(dist.locate_file(f)) for f in (dist.files or ()) if f.name == name}
        if os.path.realpath(path) in installed or not installed:
            return ep.module, dist
    return None


def dbt_project_code(project_dir: str) -> CodeVersion:
    """The project's name and `version:` (dbt_project.yml) and one digest over the files its manifest reads."""
    root = Path(project_dir)
    name = version = ""
    try:
        for line in (root / "dbt_project.yml").read_text(encoding="utf-8").splitlines():
            key, sep, value = line.partition(":")
            if sep and key in ("name", "version") and not line.startswith((" ", "\t")):
                value = value.split("#")[0].strip().strip("'\"")
                name, version = (value, version) if key == "name" else (name, value)
    except OSError:
        return CodeVersion()
    files: list[str] = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in DBT_SKIP and not d.startswith("."))
        files.extend(os.path.join(folder, n) for n in sorted(names) if n.endswith(DBT_SOURCES))
        if len(files) > DBT_MAX_FILES:
            break
    joined = "\n".join(f"{os.path.relpath(f, root)}={file_digest(f)}" for f in files)
    return CodeVersion(name, version, digest_bytes(joined.encode()))


# --- a process's code as a whole (what a cluster runs, and what is installed beside it) -------------------

def entry_point_packages() -> dict[str, str]:
    """Distribution -> version of every installed package that announces pipelines, read from disk now."""
    out: dict[str, str] = {}
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.dist is not None:
            out[ep.dist.metadata["Name"] or ep.name] = ep.dist.version or ""
    return out


def loaded_code(modules: Iterable[str]) -> dict[str, Any]:
    """The code this process imported: the packages that announce pipelines (and the scheduler), with the
    versions this process loaded, and the digest of each module that registered a pipeline or workflow."""
    modules = sorted(set(modules))
    packages = dict(_announced)
    scheduler = distribution_of("scheduler")
    if scheduler[0]:
        packages[scheduler[0]] = scheduler[1]
    return {"packages": dict(sorted(packages.items())), "modules": {m: module_digest(m) for m in modules}}


def installed_code(modules: Iterable[str]) -> dict[str, Any]:
    """The same facts read from disk now: a newer install or an edited module differs from `loaded_code`."""
    packages = entry_point_packages()
    name = SCHEDULER_DISTRIBUTION
    try:
        packages[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
        pass
    files = {m: module_file(m) for m in sorted(set(modules))}
    return {"packages": dict(sorted(packages.items())), "modules": {m: file_digest(f) if f else "" for m, f in
                                                                     files.items()}}


def code_changes(loaded: dict[str, Any], installed: dict[str, Any]) -> list[str]:
    """What differs between the code a process runs and the code installed now, one line each; [] when none."""
    changes = []
    before, after = loaded.get("packages", {}), installed.get("packages", {})
    for name in sorted(set(before) | set(after)):
        if name not in before:
            changes.append(f"{name} {after[name]} installed")
        elif name not in after:
            changes.append(f"{name} {before[name]} removed")
        elif before[name] != after[name]:
            changes.append(f"{name} {before[name]} -> {after[name]}")
    for module, digest in sorted(loaded.get("modules", {}).items()):
        now = installed.get("modules", {}).get(module, digest)
        if now != digest:
            changes.append(f"{module} changed ({digest or 'none'} -> {now or 'gone'})")
    return changes


def code_summary(code: dict[str, Any]) -> str:
    """One line for a cluster's code: its packages with their versions and one digest over its modules."""
    modules = code.get("modules", {})
    joined = "\n".join(f"{m}={d}" for m, d in sorted(modules.items()))
    packages = ", ".join(f"{n} {v}".strip() for n, v in code.get("packages", {}).items())
    digest = digest_bytes(joined.encode())
    return f"{packages} · {digest}" if packages else digest


__all__ = [
    "ENTRY_POINT_GROUP", "CodeVersion", "code_changes", "code_summary", "dbt_project_code", "distribution_of",
    "entry_point_packages", "executable_code", "file_digest", "installed_code", "loaded_code", "module_digest",
    "module_file", "modules_code", "remember_distribution",
]
