"""Dependency cycles between committed transactions (Adya's G0 and G1c, as Jepsen reports them).

The graph's nodes are committed transactions (:class:`~chaos.history.Txn` names); its edges:

- ``ww`` (write-write): in one partition's log (the final read, which is read_committed), a
  record of transaction ``a`` directly followed, among committed transactions' records, by one
  of ``b`` (``a != b``): ``a -> b``.
- ``wr`` (write-read): transaction ``b`` consumed (``Txn.reads``) a value that committed
  transaction ``a`` wrote: ``a -> b``. Only consume-transform-produce transactions read.

``g0`` is a cycle of ``ww`` edges only; ``g1c`` a cycle of ``ww`` and ``wr`` edges holding at
least one ``wr`` edge. Each strongly connected component is reported once, with one of its
cycles as the example (Tarjan's algorithm, iterative; components of one node are no cycle since
an edge never joins a transaction to itself).
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable, Mapping
from itertools import pairwise
from typing import Any

from chaos.history import History

__all__ = ["dependency_edges", "find_cycles", "strongly_connected"]

Graph = Mapping[str, Iterable[str]]


def dependency_edges(history: History) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """The ``ww`` and ``wr`` edges between committed transactions of ``history``."""
    writer = {v: t.txn for t in history.txns if t.outcome == "committed" for v in t.values}
    ww: dict[str, set[str]] = defaultdict(set)
    wr: dict[str, set[str]] = defaultdict(set)
    logs: dict[tuple[str, int], dict[int, str]] = defaultdict(dict)
    for poll in history.final_reads:
        for topic, partition, offset, value in poll.records:
            if value in writer:
                logs[(topic, partition)][offset] = writer[value]
    for log in logs.values():
        for a, b in pairwise(log[o] for o in sorted(log)):
            if a != b:
                ww[a].add(b)
    for txn in history.txns:
        if txn.outcome != "committed":
            continue
        for value in txn.reads:
            source = writer.get(value)
            if source is not None and source != txn.txn:
                wr[source].add(txn.txn)
    return ww, wr


def strongly_connected(graph: Graph) -> list[list[str]]:
    """The strongly connected components of ``graph`` with more than one node, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    nodes = sorted(set(graph) | {b for targets in graph.values() for b in targets})
    for root in nodes:
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = [(root, sorted(graph.get(root, ())))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, pending = work[-1]
            if pending:
                nxt = pending.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(graph.get(nxt, ()))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return sorted(components)


def _path(graph: Graph, start: str, goal: str, inside: set[str]) -> list[str]:
    """A shortest path ``start .. goal`` inside ``inside`` (breadth first); exists in a component."""
    came: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        if node == goal:
            break
        for nxt in sorted(graph.get(node, ())):
            if nxt in inside and nxt not in came:
                came[nxt] = node
                queue.append(nxt)
    path = [goal]
    while (previous := came.get(path[-1])) is not None:
        path.append(previous)
    return path[::-1]


def find_cycles(history: History) -> dict[str, list[dict[str, Any]]]:
    """``{"g0": [...], "g1c": [...]}``: one example per cycle component, ``cycle`` as the list of
    transactions ``[a, b, ..., a]`` and ``edges`` the kind of each step."""
    ww, wr = dependency_edges(history)
    found: dict[str, list[dict[str, Any]]] = {"g0": [], "g1c": []}
    for component in strongly_connected(ww):
        members = set(component)
        a = component[0]
        b = next(t for t in sorted(ww[a]) if t in members)
        cycle = [a, *_path(ww, b, a, members)]
        found["g0"].append({"cycle": cycle, "edges": ["ww"] * (len(cycle) - 1), "transactions": len(component)})
    both: dict[str, set[str]] = defaultdict(set)
    for edges in (ww, wr):
        for a, targets in edges.items():
            both[a] |= targets
    for component in strongly_connected(both):
        members = set(component)
        read_edge = next(((a, b) for a in component for b in sorted(wr.get(a, ())) if b in members), None)
        if read_edge is None:
            continue  # a ww-only component: reported as g0
        a, b = read_edge
        cycle = [a, *_path(both, b, a, members)]
        kinds = ["wr" if y in wr.get(x, set()) else "ww" for x, y in pairwise(cycle)]
        found["g1c"].append({"cycle": cycle, "edges": kinds, "transactions": len(component)})
    return found
