"""Operators with several outputs: partition, branch, branch_when, ok_err."""

from __future__ import annotations

from typing import Any, Callable

from ..operator import OperatorBuilder

__all__ = ["partition", "branch", "branch_when", "ok_err"]


def split(stream: Any, name: str, parts: int, route: Callable[[Any, list], list]) -> list:
    """``route(time, batch)`` returns one list per output."""
    b = OperatorBuilder(stream.scope, name)
    inp = b.new_input(stream)
    outs, streams = zip(*(b.new_output() for _ in range(parts)))
    pushes = [o.push for o in outs]

    def logic() -> None:
        for t, data in inp.take():
            for push, part in zip(pushes, route(t, data)):
                if part:
                    push(t, part)

    b.build(logic, initial_capabilities=False)
    return list(streams)


def partition(stream: Any, parts: int, route: Callable[[Any], int], name: str = "Partition") -> list:
    def fn(t: Any, data: list) -> list:
        out: list[list] = [[] for _ in range(parts)]
        appends = [o.append for o in out]
        for x in data:
            i = route(x)
            if not 0 <= i < parts:
                raise ValueError(f"operator {name!r}: route returned {i!r} for {x!r}, not in 0..{parts - 1}")
            appends[i](x)
        return out

    return split(stream, name, parts, fn)


def branch(stream: Any, predicate: Callable[[Any], bool], name: str = "Branch") -> tuple:
    def fn(t: Any, data: list) -> list:
        yes, no = [], []
        for x in data:
            (yes if predicate(x) else no).append(x)
        return [no, yes]

    return tuple(split(stream, name, 2, fn))


def branch_when(stream: Any, predicate: Callable[[Any], bool], name: str = "BranchWhen") -> tuple:
    return tuple(split(stream, name, 2, lambda t, data: [[], data] if predicate(t) else [data, []]))


def ok_err(stream: Any, f: Callable[[Any], Any], name: str = "OkErr") -> tuple:
    def fn(t: Any, data: list) -> list:
        ok, err = [], []
        for x in data:
            try:
                ok.append(f(x))
            except Exception as exc:  # the point of ok_err: failures become data
                err.append((x, exc))
        return [ok, err]

    return tuple(split(stream, name, 2, fn))
