"""register_workflow(timeouts=...): a node's own time limit, declared by the workflow that uses the factory."""
import math

import pytest

from scheduler.core import ConfigError, IdentityTransform, Pipeline
from scheduler.pipelines import RunContext, get_workflow, is_registered, register_workflow
from scheduler.pipelines.noop import NoopSink, NoopSource

pytestmark = pytest.mark.usefixtures("clean_registry")

CTX = RunContext(run_id=1, schedule="s", window=None, params={}, logical_time=None)


def plain(ctx):
    """A node without a limit of its own."""
    return Pipeline(NoopSource(), IdentityTransform(), NoopSink())


def limited(ctx):
    return Pipeline(NoopSource(), IdentityTransform(), NoopSink(), timeout_seconds=30)


def test_the_workflow_gives_the_named_nodes_their_limit_and_leaves_the_others_alone():
    spec = register_workflow("wf", {"a": plain, "b": limited, "c": limited}, [("a", "b")],
                             timeouts={"a": 600, "b": 2.5})
    assert spec.timeouts == {"a": 600, "b": 2.5}
    built = {name: factory(CTX) for name, factory in get_workflow("wf").nodes.items()}
    assert (built["a"].timeout_seconds, built["b"].timeout_seconds, built["c"].timeout_seconds) == (600, 2.5, 30)
    assert get_workflow("wf").build(CTX)["a"].timeout_seconds == 600
    assert spec.nodes["a"].__doc__ == plain.__doc__  # the wrapped factory still says what it is
    assert spec.nodes["c"] is limited


def test_without_timeouts_the_factories_are_registered_as_given():
    spec = register_workflow("wf", {"a": plain})
    assert spec.nodes["a"] is plain and spec.timeouts == {}


@pytest.mark.parametrize("timeouts, words", [
    ({"ghost": 60}, "unknown node 'ghost'"),
    ({"a": 0}, "must be a number of seconds > 0"),
    ({"a": -5}, "must be a number of seconds > 0"),
    ({"a": True}, "must be a number of seconds > 0"),
    ({"a": "60"}, "must be a number of seconds > 0"),
    ({"a": math.inf}, "must be a number of seconds > 0"),
    ({"a": math.nan}, "must be a number of seconds > 0"),
    ([("a", 60)], "must be a dict"),
])
def test_bad_timeouts_are_refused_naming_the_option_and_register_nothing(timeouts, words):
    with pytest.raises(ConfigError) as info:
        register_workflow("wf", {"a": plain}, timeouts=timeouts)
    assert info.value.field == "timeouts" and words in str(info.value)
    assert not is_registered("workflow", "wf")
