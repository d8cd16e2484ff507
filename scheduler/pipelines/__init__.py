"""Pipelines: the registry of pipeline and workflow ids, and the built-in
Source / Transform / Sink implementations (one module each).

Nothing in this package imports Django at module level: the registry's
`autodiscover`, `SqlSource`/`SqlSink` with a database alias and the demo
factories import it inside the function that needs it.
"""

from .connections import ConnectionInfo, resolve_connection
from .context import RunContext
from .registry import (
    PipelineSpec,
    UnknownTarget,
    WorkflowSpec,
    all_pipelines,
    all_workflows,
    autodiscover,
    get_pipeline,
    get_workflow,
    is_registered,
    load_pipeline_modules,
    pipeline,
    register_pipeline,
    register_workflow,
)

__all__ = [
    "ConnectionInfo",
    "PipelineSpec",
    "RunContext",
    "UnknownTarget",
    "WorkflowSpec",
    "all_pipelines",
    "all_workflows",
    "autodiscover",
    "get_pipeline",
    "get_workflow",
    "is_registered",
    "load_pipeline_modules",
    "pipeline",
    "register_pipeline",
    "register_workflow",
    "resolve_connection",
]
