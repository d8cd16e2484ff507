"""Where a project registers its pipelines and workflows by id.

A pipeline is registered as a factory, `factory(ctx: RunContext) -> Pipeline`,
so every run gets fresh Source / Sink objects built for its own window and
params. Registration happens at import time of the project's pipeline
modules; `autodiscover()` imports them once per process: the built-in ones,
every installed package's announced through the `etl_scheduler.pipelines`
entry point group, then `ETL_PIPELINE_MODULES` and each app's `etl_pipelines`.
Each registration keeps the module it came from, so a run can record which
code it ran (code.py).

Ids of pipelines and workflows share one namespace: a schedule names its
target by id, and an id that meant two things would run the wrong one.
"""

from __future__ import annotations

import functools
import importlib
import math
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from scheduler.core import ConfigError, CycleError, EtlError, Pipeline, topological_order

from .code import CodeVersion, module_digest, modules_code
from .context import RunContext
from .entrypoints import load_entry_points
from .params import check_schema
from .values import check_identifier

Factory = Callable[[RunContext], Pipeline]

PIPELINE = "pipeline"
WORKFLOW = "workflow"
KINDS = (PIPELINE, WORKFLOW)
# always registered, whatever ETL_PIPELINE_MODULES says: the demo's pipelines (its schedules are setup_demo's)
BUILTIN_MODULES = ("scheduler.pipelines.demo",)

_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,199}$")


class UnknownTarget(EtlError, KeyError):
    """No pipeline or workflow is registered under that id."""

    def __init__(self, kind: str, target_id: str, known: Iterable[str] = ()) -> None:
        self.kind = kind
        self.target_id = target_id
        self.known = sorted(known)
        super().__init__(self._message())

    def _message(self) -> str:
        known = ", ".join(self.known) if self.known else "none"
        return f"unknown {self.kind} {self.target_id!r} (known: {known})"

    def __str__(self) -> str:
        # KeyError's own __str__ would quote the whole message.
        return self._message()

    def __reduce__(self):  # type: ignore[override]
        return (type(self), (self.kind, self.target_id, self.known))


@dataclass(frozen=True)
class PipelineSpec:
    id: str
    factory: Factory
    description: str = ""
    watermark_column: str | None = None
    #: the pydantic model its run params must fit (pipelines/params.py); None takes any JSON object
    params: Any = field(default=None, compare=False)
    #: the module its factory lives in (its source is digested as it registers)
    module: str = field(default="", compare=False)

    def build(self, ctx: RunContext) -> Pipeline:
        """Call the factory and check that it returned something runnable."""
        return _build(self.id, self.factory, ctx)

    @property
    def code(self) -> CodeVersion:
        """The package and source digest a run of it records."""
        return modules_code([self.module] if self.module else [])


@dataclass(frozen=True)
class WorkflowSpec:
    id: str
    nodes: dict[str, Factory]
    deps: tuple[tuple[str, str], ...] = ()
    description: str = ""
    order: tuple[str, ...] = field(default=(), compare=False)
    #: node -> its own time limit in seconds, as declared with register_workflow(timeouts=...)
    timeouts: dict[str, float] = field(default_factory=dict, compare=False)
    #: the pydantic model its run params must fit (pipelines/params.py); None takes any JSON object
    params: Any = field(default=None, compare=False)
    #: the modules its nodes' factories live in
    modules: tuple[str, ...] = field(default=(), compare=False)

    @property
    def code(self) -> CodeVersion:
        """The package and one digest over its nodes' modules, as a run of it records."""
        return modules_code(self.modules)

    @property
    def upstreams(self) -> dict[str, list[str]]:
        """node -> the nodes it depends on, for every node."""
        ups: dict[str, list[str]] = {n: [] for n in self.nodes}
        for upstream, downstream in self.deps:
            ups[downstream].append(upstream)
        return ups

    def build(self, ctx: RunContext) -> dict[str, Pipeline]:
        """One fresh pipeline per node, in topological order."""
        return {node: _build(f"{self.id}/{node}", self.nodes[node], ctx) for node in self.order}


def _build(name: str, factory: Factory, ctx: RunContext) -> Pipeline:
    built = factory(ctx)
    if not callable(getattr(built, "run", None)):
        raise ConfigError(PIPELINE, f"factory of {name!r} returned {built!r}, not a Pipeline")
    return built


_pipelines: dict[str, PipelineSpec] = {}
_workflows: dict[str, WorkflowSpec] = {}
_lock = threading.Lock()
_discovery_lock = threading.Lock()
_discovered = False


def _check_id(kind: str, target_id: Any, replace: bool) -> str:
    if not isinstance(target_id, str) or not _ID.match(target_id):
        raise ConfigError(kind, f"id {target_id!r} must be 1-200 letters, digits, '_', '.', ':' or '-'")
    own, other = (_pipelines, _workflows) if kind == PIPELINE else (_workflows, _pipelines)
    if target_id in other:
        other_kind = WORKFLOW if kind == PIPELINE else PIPELINE
        raise ConfigError(kind, f"{target_id!r} is already registered as a {other_kind}")
    if target_id in own and not replace:
        raise ConfigError(kind, f"{kind} {target_id!r} is already registered (pass replace=True to override)")
    return target_id


def _check_factory(kind: str, name: str, factory: Any) -> None:
    if not callable(factory):
        raise ConfigError(kind, f"factory of {name!r} must be callable, got {factory!r}")


def _module_of(factory: Any) -> str:
    """The module a factory was written in, its source digested now: at registration, the code imported."""
    module = getattr(factory, "__module__", None) or ""
    if module:
        module_digest(module)
    return module


def register_pipeline(
    pipeline_id: str,
    factory: Factory | None = None,
    *,
    description: str = "",
    watermark_column: str | None = None,
    params: Any = None,
    replace: bool = False,
) -> Any:
    """Register `factory` under `pipeline_id`; without a factory, return a decorator.

    `params` is the schema of its run params (a `Params` model, pipelines/params.py).
    """
    if factory is None:

        def decorator(fn: Factory) -> Factory:
            register_pipeline(
                pipeline_id, fn, description=description, watermark_column=watermark_column, params=params,
                replace=replace,
            )
            return fn

        return decorator

    with _lock:
        _check_id(PIPELINE, pipeline_id, replace)
        _check_factory(PIPELINE, pipeline_id, factory)
        if watermark_column is not None:
            check_identifier(watermark_column, "watermark_column")
        schema = check_schema(params, pipeline_id)
        if not description:
            description = (getattr(factory, "__doc__", None) or "").strip().split("\n")[0]
        spec = PipelineSpec(pipeline_id, factory, description, watermark_column, schema, _module_of(factory))
        _pipelines[pipeline_id] = spec
    return spec


def pipeline(pipeline_id: str, **options: Any) -> Callable[[Factory], Factory]:
    """Decorator form: `@pipeline('orders_sync', description='...')`."""
    return register_pipeline(pipeline_id, None, **options)


def _check_timeouts(nodes: dict[str, Factory], timeouts: Any) -> dict[str, float]:
    if timeouts is None:
        return {}
    if not isinstance(timeouts, dict):
        raise ConfigError("timeouts", "must be a dict of node name -> seconds")
    out: dict[str, float] = {}
    for name, seconds in timeouts.items():
        if name not in nodes:
            raise ConfigError("timeouts", f"unknown node {name!r} (nodes: {', '.join(map(str, nodes))})")
        if (isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds)
                or seconds <= 0):
            raise ConfigError("timeouts", f"node {name!r}: must be a number of seconds > 0, got {seconds!r}")
        out[name] = seconds
    return out


def _with_timeout(factory: Factory, seconds: float) -> Factory:
    """The node's factory, building its pipeline with the workflow's time limit for it.

    The workflow's limit replaces the pipeline's own `timeout_seconds`: a
    pipeline registered once may be a quick node in one workflow and a slow
    one in another, and it is the workflow's author who knows which.
    """
    @functools.wraps(factory)
    def build(ctx: RunContext) -> Pipeline:
        built = factory(ctx)
        if callable(getattr(built, "run", None)):  # anything else is refused where it is run
            built.timeout_seconds = seconds
        return built

    return build


def register_workflow(
    workflow_id: str,
    nodes: dict[str, Factory],
    deps: Iterable[tuple[str, str]] = (),
    description: str = "",
    *,
    timeouts: dict[str, float] | None = None,
    params: Any = None,
    replace: bool = False,
) -> WorkflowSpec:
    """Register a DAG of pipeline factories; `deps` are (upstream, downstream) pairs.

    `timeouts` gives nodes their own time limit in seconds ({"build_revenue": 600}),
    the same as building that node's pipeline with `Pipeline(..., timeout_seconds=600)`;
    a node past its limit stops the run, which ends FAILED "node 'build_revenue'
    timed out after 600 s". The schedule's `timeout_seconds` bounds the whole run. `params` is the schema
    of its run params (a `Params` model, pipelines/params.py), as for register_pipeline.
    """
    with _lock:
        _check_id(WORKFLOW, workflow_id, replace)
        if not isinstance(nodes, dict) or not nodes:
            raise ConfigError("nodes", f"workflow {workflow_id!r} needs at least one node")
        for name, factory in nodes.items():
            if not isinstance(name, str) or not _ID.match(name):
                raise ConfigError("nodes", f"node name {name!r} is not a valid id")
            _check_factory("nodes", name, factory)
        pairs: list[tuple[str, str]] = []
        for dep in deps:
            if not (isinstance(dep, (tuple, list)) and len(dep) == 2):
                raise ConfigError("deps", f"{dep!r} is not an (upstream, downstream) pair")
            upstream, downstream = dep
            for name in (upstream, downstream):
                if name not in nodes:
                    raise ConfigError("deps", f"unknown node {name!r} in dependency {upstream} -> {downstream}")
            pairs.append((upstream, downstream))
        try:
            order = topological_order(nodes, pairs)
        except CycleError as exc:
            raise ConfigError("deps", str(exc)) from exc
        limits = _check_timeouts(nodes, timeouts)
        built = {name: _with_timeout(f, limits[name]) if name in limits else f for name, f in nodes.items()}
        modules = tuple(sorted({m for m in map(_module_of, nodes.values()) if m}))
        spec = WorkflowSpec(workflow_id, built, tuple(pairs), description, tuple(order), limits,
                            check_schema(params, workflow_id), modules)
        _workflows[workflow_id] = spec
    return spec


def get_pipeline(pipeline_id: str) -> PipelineSpec:
    try:
        return _pipelines[pipeline_id]
    except (KeyError, TypeError):
        raise UnknownTarget(PIPELINE, pipeline_id, _pipelines) from None


def get_workflow(workflow_id: str) -> WorkflowSpec:
    try:
        return _workflows[workflow_id]
    except (KeyError, TypeError):
        raise UnknownTarget(WORKFLOW, workflow_id, _workflows) from None


def get_target(kind: str, target_id: str) -> PipelineSpec | WorkflowSpec:
    """`get_pipeline` or `get_workflow` by kind name."""
    if kind == PIPELINE:
        return get_pipeline(target_id)
    if kind == WORKFLOW:
        return get_workflow(target_id)
    raise ConfigError("kind", f"must be one of {', '.join(KINDS)}, got {kind!r}")


def is_registered(kind: str, target_id: str) -> bool:
    if kind == PIPELINE:
        return target_id in _pipelines
    if kind == WORKFLOW:
        return target_id in _workflows
    raise ConfigError("kind", f"must be one of {', '.join(KINDS)}, got {kind!r}")


def all_pipelines() -> list[PipelineSpec]:
    """Every registered pipeline, sorted by id."""
    return [_pipelines[k] for k in sorted(_pipelines)]


def all_workflows() -> list[WorkflowSpec]:
    """Every registered workflow, sorted by id."""
    return [_workflows[k] for k in sorted(_workflows)]


def load_pipeline_modules(modules: Iterable[str]) -> list[str]:
    """Import each dotted module (registering what it defines); returns their names."""
    if isinstance(modules, str) or not all(isinstance(m, str) for m in modules):
        raise ConfigError("modules", "must be a list of dotted module names")
    loaded = []
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise ConfigError("modules", f"cannot import pipeline module {name!r}: {exc}") from exc
        loaded.append(name)
    return loaded


def registered_modules() -> list[str]:
    """The modules every registered pipeline and workflow came from (what a cluster watches for new code)."""
    with _lock:
        found = {spec.module for spec in _pipelines.values()} | {m for w in _workflows.values() for m in w.modules}
    return sorted(m for m in found if m)


def autodiscover() -> None:
    """Register the built-in pipelines, every installed package's (entry point group `etl_scheduler.pipelines`),
    settings.ETL_PIPELINE_MODULES and every app's `etl_pipelines` module, once.

    ETL_PIPELINE_MODULES adds to what the entry points found; it never takes the built-in pipelines away.
    """
    global _discovered
    if _discovered:
        return
    # The lock keeps two threads of one process from importing half of the
    # modules each and both believing discovery finished.
    with _discovery_lock:
        if _discovered:
            return
        from django.conf import settings
        from django.utils.module_loading import autodiscover_modules

        modules = getattr(settings, "ETL_PIPELINE_MODULES", [])
        if isinstance(modules, str) or not isinstance(modules, (list, tuple)):
            raise ConfigError("ETL_PIPELINE_MODULES", "must be a list of dotted module names")
        load_pipeline_modules(BUILTIN_MODULES)
        load_entry_points()
        try:
            load_pipeline_modules([m for m in modules if m not in BUILTIN_MODULES])
        except ConfigError as exc:
            raise ConfigError("ETL_PIPELINE_MODULES", exc.problem) from exc
        autodiscover_modules("etl_pipelines")
        _discovered = True


def _reset_for_tests() -> None:
    """Forget every registration and the discovery flag.

    Modules already imported are not imported again by `autodiscover`; a
    test that needs the demo pipelines back calls `demo.register()`.
    """
    global _discovered
    with _lock:
        _pipelines.clear()
        _workflows.clear()
        _discovered = False
