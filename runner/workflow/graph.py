"""A workflow's dependency graph: its steps in layers (Kahn's algorithm), and the cycles that keep some out.

``edges`` maps each step to the steps it depends on (in the order the plan found them); ``order`` is the
declaration order, which breaks every tie, so a plan is the same on every run. Iterative throughout: a
10,000-step chain does not reach the recursion limit.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

__all__ = ["cycles", "dependents", "layers"]

_Edges = Mapping[str, Mapping[str, object]]


def dependents(step_ids: Sequence[str], edges: _Edges) -> dict[str, list[str]]:
    """step -> the steps that depend on it, in ``step_ids``' order."""
    found: dict[str, list[str]] = {step_id: [] for step_id in step_ids}
    for step_id in step_ids:
        for dep in edges.get(step_id, {}):
            found[dep].append(step_id)
    return found


def layers(order: Sequence[str], edges: _Edges) -> tuple[list[list[str]], list[list[str]]]:
    """The layers (layer n: the steps whose dependencies all sit in earlier layers, each in declaration order),
    and each cycle among the steps left over (as :func:`cycles` gives them; none when every step is placed)."""
    index = {step_id: n for n, step_id in enumerate(order)}
    waiting = {step_id: len(edges.get(step_id, {})) for step_id in order}
    after = dependents(order, edges)
    found: list[list[str]] = []
    current = [step_id for step_id in order if waiting[step_id] == 0]
    while current:
        found.append(current)
        current = sorted(_released(current, after, waiting), key=index.__getitem__)
    if sum(map(len, found)) == len(order):
        return found, []
    return found, cycles({step_id for step_id, count in waiting.items() if count > 0}, edges, index)


def _released(layer: list[str], after: Mapping[str, list[str]], waiting: dict[str, int]) -> Iterator[str]:
    """The steps whose last dependency is in ``layer`` (``waiting`` counts each step's dependencies not placed)."""
    for step_id in layer:
        for dependent in after[step_id]:
            waiting[dependent] -= 1
            if waiting[dependent] == 0:
                yield dependent


def cycles(remaining: set[str], edges: _Edges, index: Mapping[str, int]) -> list[list[str]]:
    """Each cycle among ``remaining`` once, as the steps in turn (each needs the next, the last the first),
    starting from the one declared first."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    reported: set[str] = set()
    found: list[list[str]] = []

    def within(step_id: str) -> Iterator[str]:
        return iter(sorted((d for d in edges[step_id] if d in remaining), key=index.__getitem__))

    for start in sorted(remaining, key=index.__getitem__):
        if start in state:
            continue
        path: list[str] = [start]
        state[start] = 1
        stack = [within(start)]
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                stack.pop()
                state[path.pop()] = 2
            elif state.get(nxt) == 1:
                cycle = path[path.index(nxt) :]
                if not reported.intersection(cycle):
                    reported.update(cycle)
                    found.append(_rotated(cycle, index))
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append(within(nxt))
    return found


def _rotated(cycle: list[str], index: Mapping[str, int]) -> list[str]:
    first = min(range(len(cycle)), key=lambda n: index[cycle[n]])
    return cycle[first:] + cycle[:first]
