"""Operators with several outputs, returned by name: partition, branch, branch_when, ok_err.

All are thin wrappers over :func:`split`, which routes each input batch into one
list per output with a single call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, NamedTuple

from ..operator import OperatorBuilder

if TYPE_CHECKING:
    from ..stream import Stream

__all__ = ["BranchOut", "OkErrOut", "split", "partition", "branch", "branch_when", "ok_err"]


class BranchOut(NamedTuple):
    """The outputs of :func:`branch` and :func:`branch_when`: ``falses`` and ``trues``
    (it also unpacks as ``falses, trues``).

    >>> import timely_spark as ts
    >>> _ = ts.example(lambda s: s.to_stream(range(4)).branch(lambda x: x % 2).trues.inspect(print))
    1
    3
    """

    falses: "Stream"
    trues: "Stream"


class OkErrOut(NamedTuple):
    """The outputs of :func:`ok_err`: ``oks`` (results) and ``errs`` (``(record,
    exception)`` pairs); it also unpacks as ``oks, errs``.

    >>> import timely_spark as ts
    >>> _ = ts.example(lambda s: s.to_stream([2, 0]).ok_err(lambda x: 4 // x).errs
    ...                .inspect(lambda e: print(e[0], type(e[1]).__name__)))
    0 ZeroDivisionError
    """

    oks: "Stream"
    errs: "Stream"


def split(stream: "Stream", name: str, outputs: list[str], route: Callable[[Any, list], list]) -> list["Stream"]:
    """An operator with one output per name in ``outputs``: ``route(time, batch)``
    returns one list per output, sent at the batch's time (empty lists: nothing).

    >>> import timely_spark as ts
    >>> def build(s):
    ...     low, high = split(s.to_stream([1, 9, 2]), "Halves", ["low", "high"],
    ...                       lambda t, b: [[x for x in b if x < 5], [x for x in b if x >= 5]])
    ...     high.inspect(print)
    >>> _ = ts.example(build)
    9
    """
    b = OperatorBuilder(stream.scope, name)
    inp = b.new_input(stream)
    handles, streams = zip(*(b.new_output(n) for n in outputs))
    pushes = [h.unstable_push for h in handles]
    take = inp.take                      # counts what it takes as consumed

    def logic() -> None:
        for t, data in take():
            for push, part in zip(pushes, route(t, data)):
                if part:
                    push(t, part)

    b.build(logic, initial_capabilities=False)
    return list(streams)


def partition(stream: "Stream", parts: int, route: Callable[[Any], int], name: str = "Partition") -> list["Stream"]:
    """Split into ``parts`` streams, named by number: each record goes to stream
    ``route(record)``, which must be in ``0..parts-1`` (else the operator fails,
    naming the record).

    >>> import timely_spark as ts
    >>> def build(s):
    ...     even, odd = s.to_stream(range(5)).partition(2, lambda x: x % 2)
    ...     odd.inspect(print)
    >>> _ = ts.example(build)
    1
    3
    """
    def fn(t: Any, data: list) -> list:
        out: list[list] = [[] for _ in range(parts)]
        appends = [o.append for o in out]
        for x in data:
            i = route(x)
            if not 0 <= i < parts:
                raise ValueError(f"operator {name!r}: route returned {i!r} for {x!r}, not in 0..{parts - 1}")
            appends[i](x)
        return out

    return split(stream, name, [str(i) for i in range(parts)], fn)


def branch(stream: "Stream", predicate: Callable[[Any], bool], name: str = "Branch") -> BranchOut:
    """Split by a predicate on each record: a :class:`BranchOut` whose ``trues`` has the
    records for which ``predicate`` holds and ``falses`` the others.

    >>> import timely_spark as ts
    >>> def build(s):
    ...     out = s.to_stream([1, 50, 2]).branch(lambda x: x > 10)
    ...     out.trues.inspect(print)
    >>> _ = ts.example(build)
    50
    """
    def fn(t: Any, data: list) -> list:
        yes: list = []
        no: list = []
        for x in data:
            (yes if predicate(x) else no).append(x)
        return [no, yes]

    return BranchOut(*split(stream, name, ["falses", "trues"], fn))


def branch_when(stream: "Stream", predicate: Callable[[Any], bool], name: str = "BranchWhen") -> BranchOut:
    """Split by a predicate on each batch's *time* (one call per batch): a
    :class:`BranchOut` of the batches whose time fails and passes it.

    >>> import timely_spark as ts
    >>> def build(s):
    ...     early, late = s.to_stream([7]).branch_when(lambda t: t >= 1)
    ...     early.inspect(print)
    >>> _ = ts.example(build)
    7
    """
    return BranchOut(*split(stream, name, ["falses", "trues"],
                            lambda t, data: [[], data] if predicate(t) else [data, []]))


def ok_err(stream: "Stream", f: Callable[[Any], Any], name: str = "OkErr") -> OkErrOut:
    """Apply ``f`` to every record: an :class:`OkErrOut` with ``oks``, the results where
    ``f`` returns, and ``errs``, ``(record, exception)`` where it raises an Exception.

    >>> import timely_spark as ts
    >>> def build(s):
    ...     ok, err = s.to_stream(["1", "x", "3"]).ok_err(int)
    ...     ok.inspect(print)
    ...     err.inspect(lambda e: print("bad:", e[0], type(e[1]).__name__))
    >>> _ = ts.example(build)
    1
    3
    bad: x ValueError
    """
    def fn(t: Any, data: list) -> list:
        ok, err = [], []
        for x in data:
            try:
                ok.append(f(x))
            except Exception as exc:  # the point of ok_err: failures become data
                err.append((x, exc))
        return [ok, err]

    return OkErrOut(*split(stream, name, ["oks", "errs"], fn))
