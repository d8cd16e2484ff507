"""Graph math for workflows and schedule dependencies.

Two shapes appear here. `topological_order` takes edges (a, b) meaning
"b depends on a". Every other function takes a mapping node -> its upstreams,
which is how schedules store `depends_on`. All traversals are iterative so a
100,000-node chain does not hit Python's recursion limit.
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import Hashable, Iterable, Mapping, TypeVar

from .errors import CycleError

N = TypeVar("N", bound=Hashable)


def topological_order(nodes: Iterable[str], edges: Iterable[tuple[str, str]]) -> list[str]:
    """Kahn's algorithm; among ready nodes the earliest given one goes first.

    Nodes that appear only in edges are appended after the given ones. A
    cycle raises CycleError whose path follows the edges (a -> b: b depends
    on a).
    """
    index: dict[str, int] = {}
    order_in: list[str] = []
    for n in nodes:
        if n not in index:
            index[n] = len(order_in)
            order_in.append(n)
    down: list[list[int]] = [[] for _ in order_in]
    indeg: list[int] = [0] * len(order_in)
    for a, b in edges:
        for n in (a, b):
            if n not in index:
                index[n] = len(order_in)
                order_in.append(n)
                down.append([])
                indeg.append(0)
        down[index[a]].append(index[b])
        indeg[index[b]] += 1

    # A heap of indices keeps ties in insertion order, so the same workflow
    # always runs in the same order (reproducible logs and tests).
    ready = [i for i, d in enumerate(indeg) if d == 0]
    heapq.heapify(ready)
    result: list[str] = []
    push, pop = heapq.heappush, heapq.heappop
    while ready:
        i = pop(ready)
        result.append(order_in[i])
        for j in down[i]:
            indeg[j] -= 1
            if indeg[j] == 0:
                push(ready, j)

    if len(result) != len(order_in):
        left = {i for i, d in enumerate(indeg) if d > 0}
        graph = {order_in[i]: [order_in[j] for j in down[i] if j in left] for i in sorted(left)}
        cycle = find_cycle(graph)
        assert cycle is not None  # Kahn leftovers always contain a cycle
        raise CycleError(cycle)
    return result


def find_cycle(graph: Mapping[N, Iterable[N]]) -> list[N] | None:
    """One cycle following the mapping's links, e.g. ['a', 'b', 'c', 'a'], or None.

    Targets that are not keys are treated as nodes without links.
    """
    WHITE, GREY, BLACK = 0, 1, 2
    color: dict[N, int] = {}
    for root in graph:
        if color.get(root, WHITE) != WHITE:
            continue
        # Stack of (node, iterator over its links); `path` mirrors the grey nodes.
        color[root] = GREY
        path: list[N] = [root]
        pos: dict[N, int] = {root: 0}
        stack = [iter(graph.get(root, ()))]
        while stack:
            advanced = False
            for nxt in stack[-1]:
                c = color.get(nxt, WHITE)
                if c == GREY:
                    return path[pos[nxt]:] + [nxt]
                if c == WHITE:
                    color[nxt] = GREY
                    pos[nxt] = len(path)
                    path.append(nxt)
                    stack.append(iter(graph.get(nxt, ())))
                    advanced = True
                    break
            if not advanced:
                stack.pop()
                done = path.pop()
                del pos[done]
                color[done] = BLACK
    return None


def _strongly_connected(graph: Mapping[N, Iterable[N]]) -> list[list[N]]:
    """Tarjan's algorithm, iterative; components in discovery order."""
    index: dict[N, int] = {}
    low: dict[N, int] = {}
    on_stack: set[N] = set()
    stack: list[N] = []
    comps: list[list[N]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph.get(root, ())))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            pushed = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(graph.get(nxt, ()))))
                    pushed = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if pushed:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp: list[N] = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                comps.append(comp)
    return comps


def _cycle_within(graph: Mapping[N, Iterable[N]], members: set[N], start: N) -> list[N]:
    # BFS inside one component finds the shortest way back to `start`.
    parent: dict[N, N] = {}
    queue = deque([start])
    seen = {start}
    while queue:
        node = queue.popleft()
        for nxt in graph.get(node, ()):
            if nxt == start:
                path = [node]
                while path[-1] != start:
                    path.append(parent[path[-1]])
                path.reverse()
                return path + [start]
            if nxt in members and nxt not in seen:
                seen.add(nxt)
                parent[nxt] = node
                queue.append(nxt)
    raise AssertionError("component without a cycle")  # pragma: no cover


def find_all_cycles(graph: Mapping[N, Iterable[N]]) -> list[list[N]]:
    """One representative cycle per strongly connected component that has one."""
    cycles: list[list[N]] = []
    for comp in _strongly_connected(graph):
        if len(comp) == 1:
            only = comp[0]
            if only in set(graph.get(only, ())):
                cycles.append([only, only])
            continue
        members = set(comp)
        # Start from the component's first node in the mapping's order so
        # the report is stable between start-ups.
        start = next(n for n in graph if n in members)
        cycles.append(_cycle_within(graph, members, start))
    return cycles


def would_create_cycle(
    graph: Mapping[N, Iterable[N]], node: N, new_upstreams: Iterable[N]
) -> list[N] | None:
    """The cycle that giving `node` these upstreams would create, or None.

    `new_upstreams` replaces node's current upstreams, as saving a schedule's
    `depends_on` does. The path follows upstream links: [node, u, ..., node].
    """
    ups = list(dict.fromkeys(new_upstreams))
    if node in ups:
        return [node, node]
    parent: dict[N, N] = {u: node for u in ups}
    queue = deque(ups)
    while queue:
        cur = queue.popleft()
        links = ups if cur == node else graph.get(cur, ())
        for nxt in links:
            if nxt == node:
                path = [cur]
                while path[-1] != node:
                    path.append(parent[path[-1]])
                path.reverse()
                return path + [node]
            if nxt not in parent:
                parent[nxt] = cur
                queue.append(nxt)
    return None


def gate(order: Iterable[N], upstreams: Mapping[N, Iterable[N]], failed: set[N]) -> set[N]:
    """Nodes blocked because an upstream failed or was itself blocked.

    `order` must be topological so one pass sees every upstream's verdict.
    A node in `failed` is reported as failed, not blocked, yet still blocks
    what depends on it.
    """
    blocked: set[N] = set()
    for node in order:
        if node in failed:
            continue
        for up in upstreams.get(node, ()):
            if up in failed or up in blocked:
                blocked.add(node)
                break
    return blocked


def descendants(graph_downstream: Mapping[N, Iterable[N]], node: N) -> set[N]:
    """Every node reachable downstream of `node` (itself only through a cycle)."""
    seen: set[N] = set()
    queue = deque(graph_downstream.get(node, ()))
    while queue:
        cur = queue.popleft()
        if cur in seen:
            continue
        seen.add(cur)
        queue.extend(graph_downstream.get(cur, ()))
    return seen


def invert(graph: Mapping[N, Iterable[N]]) -> dict[N, list[N]]:
    """Turn node -> upstreams into node -> downstreams (or back)."""
    out: dict[N, list[N]] = {n: [] for n in graph}
    for n, links in graph.items():
        for m in links:
            out.setdefault(m, []).append(n)
    return out
