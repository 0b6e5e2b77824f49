"""Probes: watch a stream's frontier from outside the dataflow."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..progress import Antichain, MutableAntichain, sort_key
from .operator import OperatorBuilder

if TYPE_CHECKING:
    from .stream import Stream

__all__ = ["ProbeHandle", "probe", "probe_with"]


def _probed(ask: Any, *times: int) -> Any:
    """A worker function for the examples: ``ask(probe)`` for a probe on an input
    advanced to ``times``, once the probe has caught up."""
    def work(worker: Any) -> Any:
        inp, probe = worker.dataflow(lambda s: (lambda i, st: (i, st.probe()))(*s.new_input()))
        for t in times:
            inp.advance_to(t)
        worker.step_while(lambda: probe.less_than(times[-1]), timeout=10)
        return ask(probe)
    return work


class ProbeHandle:
    """The frontier of the probed stream(s): the times that may still appear there.

    Until the dataflow first runs, the frontier conservatively holds the minimum time.

    >>> import timely_spark as ts
    >>> def work(worker):
    ...     inp, probe = worker.dataflow(lambda s: (lambda i, st: (i, st.probe()))(*s.new_input()))
    ...     inp.advance_to(3)
    ...     worker.step_while(lambda: probe.less_than(3), timeout=10)
    ...     return repr(probe)
    >>> ts.execute(work)
    ['ProbeHandle(Antichain([3]))']
    """

    def __init__(self, name: str = "probe") -> None:
        self.name = name
        self._frontier = frontier = MutableAntichain()
        # the frontier's own methods, bound here: a probe is asked at every step, so each question
        # costs one call, not two (the methods below document them)
        self.less_than = frontier.less_than          # type: ignore[method-assign]
        self.less_equal = frontier.less_equal        # type: ignore[method-assign]
        self.update_iter = frontier.update_iter      # type: ignore[method-assign,assignment]

    def less_than(self, t: Any) -> bool:
        """Whether a time strictly before ``t`` may still appear.

        >>> import timely_spark as ts
        >>> ts.execute(_probed(lambda p: (p.less_than(3), p.less_than(4)), 3))
        [(False, True)]
        """
        return self._frontier.less_than(t)

    def less_equal(self, t: Any) -> bool:
        """Whether ``t`` or an earlier time may still appear.

        >>> import timely_spark as ts
        >>> ts.execute(_probed(lambda p: (p.less_equal(2), p.less_equal(3)), 3))
        [(False, True)]
        """
        return self._frontier.less_equal(t)

    def done(self) -> bool:
        """Whether no time at all can appear any more.

        >>> import timely_spark as ts
        >>> def work(worker):
        ...     inp, probe = worker.dataflow(lambda s: (lambda i, st: (i, st.probe()))(*s.new_input()))
        ...     inp.close()
        ...     worker.step_while(lambda: not probe.done(), timeout=10)
        ...     return probe.done()
        >>> ts.execute(work)
        [True]
        """
        return self._frontier.is_empty()

    @property
    def frontier(self) -> Antichain:
        """The frontier itself.

        >>> import timely_spark as ts
        >>> ts.execute(_probed(lambda p: p.frontier, 1, 5))
        [Antichain([5])]
        """
        return self._frontier.frontier()

    def update_iter(self, changes: Any) -> list:
        """Apply frontier changes ``[(time, diff), ...]`` (the probe operators do);
        returns the changes to the frontier itself.

        >>> handle = ProbeHandle()
        >>> handle.update_iter([(2, 1), (5, 1)])
        [(2, 1)]
        >>> handle.update_iter([(2, -1)]), handle.frontier
        ([(2, -1), (5, 1)], Antichain([5]))
        """
        return self._frontier.update_iter(changes)

    def __repr__(self) -> str:
        return f"ProbeHandle({self.frontier!r})"


def probe(stream: "Stream") -> ProbeHandle:
    """A :class:`ProbeHandle` that shows this stream's frontier.

    >>> import timely_spark as ts
    >>> def work(w):
    ...     inp, probe = w.dataflow(lambda s: (lambda i, st: (i, st.probe()))(*s.new_input()))
    ...     inp.advance_to(3)
    ...     w.step_while(lambda: probe.less_than(3), timeout=10)
    ...     return probe.frontier
    >>> ts.execute(work)
    [Antichain([3])]
    """
    handle = ProbeHandle()
    probe_with(stream, handle)
    return handle


def probe_with(stream: "Stream", handle: ProbeHandle) -> "Stream":
    """Add this stream's frontier to ``handle`` (several streams may share one) and
    return the stream itself.

    >>> import timely_spark as ts
    >>> def work(w):
    ...     handle = ts.ProbeHandle()
    ...     def build(s):
    ...         a, b = s.new_input(), s.new_input()
    ...         a[1].probe_with(handle).concat(b[1]).probe_with(handle)
    ...         return a[0], b[0]
    ...     a, b = w.dataflow(build)
    ...     a.advance_to(2); b.advance_to(5)
    ...     w.step_while(lambda: handle.less_than(2), timeout=10)
    ...     return handle.frontier
    >>> ts.execute(work)
    [Antichain([2])]
    """
    b = OperatorBuilder(stream.scope, "Probe")
    inp = b.new_input(stream, frontier=handle)
    minimum = stream.scope.minimum
    handle.update_iter([(minimum, 1)])   # until the first run
    started = [False]
    logged: list[Any] = [None]
    worker = stream.scope.worker

    def logic() -> None:
        inp.take()
        if not started[0]:
            started[0] = True
            handle.update_iter([(minimum, -1)])
        logger = worker.logger
        if logger is not None:
            now = tuple(sorted(handle.frontier, key=sort_key))
            if now != logged[0]:
                logged[0] = now
                logger.log("frontier", name=handle.name, frontier=now, detail=repr(list(now)))

    b.build(logic, notify=True, initial_capabilities=False)
    return stream
