import pickle

import pytest

from scheduler.core import ConfigError, EtlError, IdentityTransform, Pipeline
from scheduler.pipelines import (
    RunContext,
    UnknownTarget,
    all_pipelines,
    all_workflows,
    get_pipeline,
    get_workflow,
    is_registered,
    load_pipeline_modules,
    pipeline,
    register_pipeline,
    register_workflow,
)
from scheduler.pipelines.noop import NoopSink, NoopSource

pytestmark = pytest.mark.usefixtures("clean_registry")

CTX = RunContext(run_id=1, schedule="s", window=None, params={}, logical_time=None)


def make(ctx):
    """Builds a no-op pipeline."""
    return Pipeline(NoopSource(n=ctx.params.get("n", 0)), IdentityTransform(), NoopSink())


def test_registered_pipeline_builds_a_fresh_pipeline_per_run():
    spec = register_pipeline("orders_sync", make, description="Orders", watermark_column="last_modified")
    assert get_pipeline("orders_sync") is spec
    assert spec.description == "Orders"
    assert spec.watermark_column == "last_modified"
    first = spec.build(RunContext(1, "s", None, {"n": 3}, None))
    second = spec.build(CTX)
    assert first is not second
    assert first.run_once() == 3


def test_decorator_registers_and_returns_the_factory_unchanged():
    @pipeline("decorated", description="by decorator")
    def factory(ctx):
        return make(ctx)

    assert factory(CTX).run_once() == 0
    assert get_pipeline("decorated").factory is factory
    assert get_pipeline("decorated").description == "by decorator"


def test_description_defaults_to_the_first_line_of_the_docstring():
    register_pipeline("documented", make)
    assert get_pipeline("documented").description == "Builds a no-op pipeline."


def test_registry_refuses_a_duplicate_id():
    register_pipeline("orders_sync", make)
    with pytest.raises(ConfigError) as err:
        register_pipeline("orders_sync", make)
    assert err.value.field == "pipeline"
    assert "already registered" in str(err.value)


def test_replace_true_overrides_an_existing_registration():
    register_pipeline("orders_sync", make, description="old")
    register_pipeline("orders_sync", make, description="new", replace=True)
    assert get_pipeline("orders_sync").description == "new"


def test_a_pipeline_and_a_workflow_cannot_share_an_id():
    register_pipeline("shared", make)
    with pytest.raises(ConfigError) as err:
        register_workflow("shared", {"a": make}, [])
    assert err.value.field == "workflow"
    assert "already registered as a pipeline" in str(err.value)


@pytest.mark.parametrize("bad_id", ["", " spaced", "a b", None, 3, "x" * 201])
def test_registry_refuses_a_malformed_id(bad_id):
    with pytest.raises(ConfigError) as err:
        register_pipeline(bad_id, make)
    assert err.value.field == "pipeline"


def test_registry_refuses_a_factory_that_is_not_callable():
    with pytest.raises(ConfigError) as err:
        register_pipeline("p", "not callable")
    assert err.value.field == "pipeline"


def test_registry_refuses_a_bad_watermark_column():
    with pytest.raises(ConfigError) as err:
        register_pipeline("p", make, watermark_column="x; drop table")
    assert err.value.field == "watermark_column"


def test_unknown_id_names_the_known_ones():
    for name in ("c", "a", "b"):
        register_pipeline(name, make)
    with pytest.raises(UnknownTarget) as err:
        get_pipeline("x")
    assert str(err.value) == "unknown pipeline 'x' (known: a, b, c)"
    assert isinstance(err.value, KeyError) and isinstance(err.value, EtlError)
    assert err.value.known == ["a", "b", "c"]


def test_unknown_target_survives_pickling_for_the_task_queue():
    err = UnknownTarget("workflow", "w", ["a"])
    again = pickle.loads(pickle.dumps(err))
    assert str(again) == "unknown workflow 'w' (known: a)"


def test_unknown_workflow_when_none_registered_says_so():
    with pytest.raises(UnknownTarget, match=r"unknown workflow 'nightly' \(known: none\)"):
        get_workflow("nightly")


def test_is_registered_and_listing_are_sorted_by_id():
    register_pipeline("b", make)
    register_pipeline("a", make)
    register_workflow("w", {"x": make}, [])
    assert is_registered("pipeline", "a")
    assert not is_registered("pipeline", "w")
    assert is_registered("workflow", "w")
    assert [s.id for s in all_pipelines()] == ["a", "b"]
    assert [s.id for s in all_workflows()] == ["w"]
    with pytest.raises(ConfigError) as err:
        is_registered("job", "a")
    assert err.value.field == "kind"


def test_workflow_orders_nodes_topologically_and_builds_each():
    spec = register_workflow(
        "nightly",
        {"report": make, "orders": make, "customers": make, "revenue": make},
        [("customers", "revenue"), ("orders", "revenue"), ("revenue", "report")],
        description="nightly",
    )
    assert spec.order == ("orders", "customers", "revenue", "report")
    assert spec.upstreams["revenue"] == ["customers", "orders"]
    built = spec.build(CTX)
    assert list(built) == list(spec.order)
    assert all(isinstance(p, Pipeline) for p in built.values())


def test_workflow_refuses_a_cycle_and_names_it():
    with pytest.raises(ConfigError) as err:
        register_workflow("w", {"a": make, "b": make}, [("a", "b"), ("b", "a")])
    assert err.value.field == "deps"
    assert "a -> b -> a" in str(err.value)
    assert not is_registered("workflow", "w")


def test_workflow_refuses_a_dependency_on_an_unknown_node():
    with pytest.raises(ConfigError) as err:
        register_workflow("w", {"a": make}, [("a", "missing")])
    assert err.value.field == "deps"
    assert "missing" in str(err.value)


def test_workflow_refuses_no_nodes():
    with pytest.raises(ConfigError) as err:
        register_workflow("w", {}, [])
    assert err.value.field == "nodes"


def test_a_factory_that_returns_no_pipeline_fails_with_its_id():
    register_pipeline("broken", lambda ctx: None)
    with pytest.raises(ConfigError, match="'broken'"):
        get_pipeline("broken").build(CTX)


def test_load_pipeline_modules_imports_and_registers(tmp_path, monkeypatch):
    (tmp_path / "my_etl_pipelines_mod.py").write_text(
        "from scheduler.pipelines import register_pipeline\n"
        "from scheduler.pipelines.noop import NoopSource, NoopSink\n"
        "from scheduler.core import Pipeline\n"
        "register_pipeline('from_module', lambda ctx: Pipeline(NoopSource(), None, NoopSink()))\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert load_pipeline_modules(["my_etl_pipelines_mod"]) == ["my_etl_pipelines_mod"]
    assert is_registered("pipeline", "from_module")


def test_load_pipeline_modules_names_a_module_that_does_not_import():
    with pytest.raises(ConfigError) as err:
        load_pipeline_modules(["no.such.module_here"])
    assert err.value.field == "modules"
    assert "no.such.module_here" in str(err.value)


def test_demo_register_puts_the_demo_pipelines_back_after_a_reset():
    from scheduler.pipelines import demo

    demo.register()
    demo.register()  # idempotent
    ids = {s.id for s in all_pipelines()}
    assert {
        "demo.customers_sync",
        "demo.orders_sync",
        "demo.revenue_transform",
        "demo.daily_report",
        "demo.order_confirmed",
        "demo.webhook_ingest",
        "demo.flaky",
        "demo.noop",
    } <= ids
    assert get_pipeline("demo.orders_sync").watermark_column == "last_modified"
    assert get_workflow("demo.nightly").upstreams["build_revenue"] == ["extract_customers", "extract_orders"]
