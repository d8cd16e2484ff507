
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core import (
    CycleError,
    descendants,
    find_all_cycles,
    find_cycle,
    gate,
    invert,
    topological_order,
    would_create_cycle,
)


def is_cycle_of(path, graph):
    """A closed walk along the graph's links."""
    return (
        len(path) >= 2
        and path[0] == path[-1]
        and all(b in graph.get(a, ()) for a, b in zip(path, path[1:]))
    )


def test_topological_order_puts_upstreams_first_and_breaks_ties_by_given_order():
    order = topological_order(["d", "c", "b", "a"], [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])
    assert order == ["a", "c", "b", "d"]


def test_nodes_only_in_edges_are_appended():
    assert topological_order(["x"], [("y", "z")]) == ["x", "y", "z"]


def test_topological_order_raises_with_a_concrete_cycle():
    with pytest.raises(CycleError) as info:
        topological_order(["ok", "a", "b", "c"], [("a", "b"), ("b", "c"), ("c", "a"), ("ok", "a")])
    cycle = info.value.cycle
    assert is_cycle_of(cycle, {"a": ["b"], "b": ["c"], "c": ["a"]})
    assert str(info.value) == "cycle: " + " -> ".join(cycle)


def test_self_loop_is_a_cycle():
    with pytest.raises(CycleError) as info:
        topological_order(["a"], [("a", "a")])
    assert info.value.cycle == ["a", "a"]


def test_find_cycle_follows_upstream_links():
    graph = {"a": ["b"], "b": ["c"], "c": ["a"], "d": []}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": ["b"], "b": []}) is None
    assert find_cycle({"a": ["missing"]}) is None


def test_find_cycle_handles_a_chain_of_100000_nodes_without_recursion():
    n = 100_000
    graph = {i: [i + 1] for i in range(n)}
    assert find_cycle(graph) is None
    graph[n - 1] = [0]
    cycle = find_cycle(graph)
    assert cycle is not None and len(cycle) == n + 1


def test_find_all_cycles_reports_one_per_component():
    graph = {"a": ["b"], "b": ["a"], "c": ["d"], "d": ["e"], "e": ["c"], "f": ["f"], "g": ["a"]}
    cycles = find_all_cycles(graph)
    assert len(cycles) == 3
    assert all(is_cycle_of(c, graph) for c in cycles)
    assert {frozenset(c) for c in cycles} == {frozenset("ab"), frozenset("cde"), frozenset("f")}
    assert find_all_cycles({"a": ["b"], "b": []}) == []


def test_find_all_cycles_is_iterative_at_scale():
    n = 100_000
    graph = {i: [(i + 1) % n] for i in range(n)}
    (cycle,) = find_all_cycles(graph)
    assert len(cycle) == n + 1


def test_would_create_cycle_names_the_path_through_the_new_link():
    graph = {"a": ["b"], "b": ["c"], "c": []}
    assert would_create_cycle(graph, "c", ["a"]) == ["c", "a", "b", "c"]
    assert would_create_cycle(graph, "c", ["x"]) is None
    assert would_create_cycle(graph, "a", ["a"]) == ["a", "a"]


def test_would_create_cycle_replaces_the_nodes_current_upstreams():
    # a currently depends on b; saving a with no upstreams cannot make a cycle.
    graph = {"a": ["b"], "b": ["a"]}
    assert would_create_cycle(graph, "a", []) is None


def test_gate_blocks_transitively_through_a_diamond():
    upstreams = {"B": ["A"], "C": ["A"], "D": ["B", "C"], "E": []}
    assert gate(["A", "B", "C", "D", "E"], upstreams, {"A"}) == {"B", "C", "D"}
    assert gate(["A", "B", "C", "D", "E"], upstreams, {"B"}) == {"D"}


def test_descendants_and_invert():
    upstreams = {"B": ["A"], "C": ["B"], "D": []}
    down = invert(upstreams)
    assert down["A"] == ["B"]
    assert descendants(down, "A") == {"B", "C"}
    assert descendants(down, "D") == set()


def test_topological_order_and_gating_handle_100000_nodes_without_recursion_limits():
    # speed is measured in bench/ (scenario 5), not asserted here
    n = 100_000
    nodes = [f"n{i}" for i in range(n)]
    edges = [(nodes[i // 2], nodes[i]) for i in range(1, n)]  # a binary tree
    edges += [(nodes[i - 1], nodes[i]) for i in range(1, n, 7)]
    upstreams: dict[str, list[str]] = {}
    for a, b in edges:
        upstreams.setdefault(b, []).append(a)
    order = topological_order(nodes, edges)
    blocked = gate(order, upstreams, {nodes[3]})
    position = {node: i for i, node in enumerate(order)}
    assert len(order) == n and all(position[a] < position[b] for a, b in edges)
    assert nodes[7] in blocked and nodes[3] not in blocked and nodes[2] not in blocked


@st.composite
def dags(draw):
    n = draw(st.integers(min_value=1, max_value=30))
    nodes = [f"n{i}" for i in draw(st.permutations(range(n)))]
    # Edges only go from a lower to a higher rank, so the graph is acyclic.
    pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=80))
    edges = [(f"n{min(a, b)}", f"n{max(a, b)}") for a, b in pairs if a != b]
    return nodes, edges


@settings(deadline=None)
@given(dags())
def test_topological_order_respects_every_edge_of_random_dags(dag):
    nodes, edges = dag
    order = topological_order(nodes, edges)
    position = {n: i for i, n in enumerate(order)}
    assert sorted(order) == sorted(nodes)
    assert all(position[a] < position[b] for a, b in edges)


@settings(deadline=None)
@given(dags(), st.data())
def test_gate_blocks_exactly_the_descendants_of_failed_nodes(dag, data):
    nodes, edges = dag
    failed = set(data.draw(st.lists(st.sampled_from(nodes), max_size=3)))
    upstreams: dict[str, list[str]] = {}
    for a, b in edges:
        upstreams.setdefault(b, []).append(a)
    down = invert(upstreams)
    expected = set().union(*(descendants(down, f) for f in failed)) - failed if failed else set()
    # A failed node downstream of another failed node is still "failed", and
    # nodes below it are blocked either way.
    blocked = gate(topological_order(nodes, edges), upstreams, failed)
    assert blocked == expected


@settings(max_examples=50, deadline=None)
@given(dags(), st.data())
def test_adding_a_back_edge_is_reported_as_a_cycle(dag, data):
    nodes, edges = dag
    if not edges:
        return
    a, b = data.draw(st.sampled_from(edges))  # b depends on a
    upstreams: dict[str, list[str]] = {n: [] for n in nodes}
    for x, y in edges:
        upstreams[y].append(x)
    # Making a depend on b closes a loop.
    cycle = would_create_cycle(upstreams, a, upstreams[a] + [b])
    assert cycle is not None and cycle[0] == cycle[-1] == a
    changed = dict(upstreams, **{a: upstreams[a] + [b]})
    assert is_cycle_of(cycle, changed)
