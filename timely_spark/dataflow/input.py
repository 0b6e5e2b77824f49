"""Inputs: feeding records into a dataflow from the worker's own code."""

from __future__ import annotations

from itertools import islice
from typing import TYPE_CHECKING, Any, Iterable

from ..progress import check_time, less_equal
from .operator import OperatorBuilder
from .operators.batches import as_record_batches, is_table_like
from .operators.generic import source

if TYPE_CHECKING:
    from .stream import Stream

__all__ = ["InputHandle", "new_input", "to_stream", "BATCH"]

#: Records an input buffers (and ``to_stream`` reads) before sending them as one batch.
BATCH = 4096


def _seen(*steps: Any) -> Any:
    """A worker function for the examples: run ``step(inp)`` for each step on an input
    whose stream is collected, then return ``(time, record)`` pairs that came out."""
    def work(worker: Any) -> Any:
        out: list = []
        inp = worker.dataflow(lambda s: (lambda i, st: (i, st.inspect_time(lambda t, x: out.append((t, x)))))(
            *s.new_input()))[0]
        for step in steps:
            step(inp)
        inp.close()
        while worker.step():
            pass
        return out
    return work


class InputHandle:
    """Send records at the input's current time; advance the time; close.

    ``send`` buffers records and sends them in batches; ``advance_to``, ``close``
    and every ``worker.step()`` flush the buffer.  Advancing promises that no more
    records at earlier times will come from this worker, which is what lets
    frontiers move.

    >>> import timely_spark as ts
    >>> def work(worker):
    ...     out = []
    ...     inp, probe = worker.dataflow(lambda s: (lambda i, st: (i, st.inspect(out.append).probe()))(*s.new_input()))
    ...     inp.send_batch([1, 2]); inp.advance_to(1); inp.send(3); inp.close()
    ...     worker.step_while(lambda: not probe.done(), timeout=10)
    ...     return out
    >>> ts.execute(work)
    [[1, 2, 3]]
    """

    def __init__(self, scope: Any, name: str = "Input") -> None:
        b = OperatorBuilder(scope, name)
        self.name = name
        self._output, self.stream = b.new_output()
        self._cap = b.initial_capability()
        self._now = self._cap.time                 # the capability's time, kept here (read at every send)
        self._buffer: list = []
        self._closed = False
        self._like = scope.minimum
        self._graph = scope.subgraph
        self._early: list[tuple[Any, list]] = []   # sent while the dataflow is being built
        self._pin: Any = None                      # a snapshot's pin (see pin / unpin)
        self._hold_on_close = False                # keep a capability once closed (see hold_when_closed)
        self._hold: Any = None                     # that capability, until release_hold
        self._closed_at: Any = None                # the time when closed
        self._sent_now = False                     # whether records went out at the current time
        self._unflushed = scope.worker.unflushed_inputs   # where it names itself while its buffer holds records
        b.build(self._release)
        self._activate = b.info().activate

    def _release(self) -> None:
        """The input operator's logic: send what arrived before the dataflow was built
        (its consumers are connected now; the counts go out in this run's batch)."""
        if self._early:
            early, self._early = self._early, []
            for t, batch in early:
                self._output.unstable_push(t, batch)     # at the time of a capability held

    def _push(self, batch: list) -> None:
        self._sent_now = True
        if self._graph.finalized:
            self._output.unstable_push(self._now, batch)
        else:
            self._early.append((self._now, batch))
        self._activate()

    @property
    def time(self) -> Any:
        """The time at which records are sent now (once closed: the time it had then).

        >>> import timely_spark as ts
        >>> ts.execute(lambda w: (lambda i: (i.advance_to(4), i.time)[1])(w.dataflow(lambda s: s.new_input()[0])))
        [4]
        """
        return self._cap.time if self._cap.valid else self._closed_at

    @property
    def closed(self) -> bool:
        """Whether the input was closed.

        >>> import timely_spark as ts
        >>> ts.execute(lambda w: (lambda i: (i.close(), i.closed)[1])(w.dataflow(lambda s: s.new_input()[0])))
        [True]
        """
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"input {self.name!r} is closed; nothing more can be sent")

    def send(self, record: Any) -> None:
        """Send one record at the current time (buffered; sent in batches).

        >>> import timely_spark as ts
        >>> ts.execute(_seen(lambda inp: inp.send("a"), lambda inp: inp.send("b")))
        [[(0, 'a'), (0, 'b')]]
        """
        if self._closed:
            self._check_open()
        buf = self._buffer
        if not buf:
            self._unflushed[self] = None       # flushed at the next step (a subscript: no call)
        buf.append(record)
        if len(buf) >= BATCH:
            self.flush()

    def send_batch(self, records: Iterable[Any]) -> None:
        """Send a batch as it is (after anything buffered).  A ``pyarrow.Table``, a
        RecordBatch or a pandas DataFrame is sent as its record batches.

        >>> import timely_spark as ts
        >>> ts.execute(_seen(lambda inp: inp.send_batch(range(3))))
        [[(0, 0), (0, 1), (0, 2)]]
        """
        self._check_open()
        self.flush()
        if is_table_like(records):
            records = as_record_batches(records)
        batch = records if isinstance(records, list) else list(records)
        if batch:
            self._push(batch)

    def flush(self) -> None:
        """Send the buffered records now (the worker does it at every step).

        >>> import timely_spark as ts
        >>> ts.execute(_seen(lambda inp: inp.send(1), lambda inp: inp.flush()))
        [[(0, 1)]]
        """
        if self._buffer:
            buf, self._buffer = self._buffer, []
            self._push(buf)

    def advance_to(self, t: Any) -> None:
        """Move to time ``t``: no more records at earlier times will come from this input
        on this worker.  Raises ValueError if ``t`` is earlier than the current time.

        >>> import timely_spark as ts
        >>> ts.execute(_seen(lambda inp: inp.send("x"), lambda inp: inp.advance_to(2), lambda inp: inp.send("y")))
        [[(0, 'x'), (2, 'y')]]
        """
        if self._closed:
            self._check_open()
        now = self._now
        if type(t) is int and type(now) is int and t >= now:   # (int times: the checks below, without their calls)
            pass
        else:
            check_time(t, self._like)
            if not less_equal(now, t):
                raise ValueError(f"input {self.name!r}: cannot advance to {t!r}, before its current time {now!r}")
        if self._buffer:
            self.flush()
        if t != now:
            self._sent_now = False
        self._cap.downgrade(t)
        self._now = t

    # ---- snapshots: an input is a pinnable source (see state_hook.PinnableSource) ----------
    def pin(self, t: Any) -> None:
        """Hold a capability at ``t`` until :meth:`unpin`, whatever the input does
        meanwhile (advance past ``t``, close): a snapshot at ``t`` uses it so that no
        frontier passes ``t`` while the workers save.  ``t`` must be >= the input's time
        (or >= the pin already held); a closed input holds nothing to pin, but moves the
        hold it keeps (:meth:`hold_when_closed`) to ``t``.

        >>> import timely_spark as ts
        >>> def work(w):
        ...     inp, probe = w.dataflow(lambda s: (lambda i, st: (i, st.probe()))(*s.new_input()))
        ...     inp.pin(2); inp.advance_to(5)
        ...     w.step_while(lambda: probe.less_than(2), timeout=10)
        ...     held = probe.frontier
        ...     inp.unpin()
        ...     w.step_while(lambda: probe.less_than(5), timeout=10)
        ...     return held, probe.frontier
        >>> ts.execute(work)
        [(Antichain([2]), Antichain([5]))]
        """
        if self._pin is not None:
            self._pin.downgrade(t)
        elif self._cap.valid:
            self._pin = self._cap.delayed(t)
        if self._hold is not None and less_equal(self._hold.time, t):
            self._hold.downgrade(t)               # a closed input's hold moves with the snapshot

    @property
    def resume_time(self) -> Any:
        """Where a run restored from a snapshot would have to start this input again:
        its current time while open; once closed, its time then, or the next time if
        records went out at that time (integer times).

        >>> import timely_spark as ts
        >>> def work(w):
        ...     a, b = w.dataflow(lambda s: (s.new_input()[0], s.new_input()[0]))
        ...     a.advance_to(3); a.close(); b.advance_to(3); b.send(1); b.close()
        ...     return a.resume_time, b.resume_time
        >>> ts.execute(work)
        [(3, 4)]
        """
        if not self._closed:
            return self._cap.time
        return self._closed_at + 1 if self._sent_now else self._closed_at

    def unpin(self) -> None:
        """Release the pin :meth:`pin` holds (idempotent)."""
        if self._pin is not None:
            pin, self._pin = self._pin, None
            pin.drop()

    def hold_when_closed(self) -> None:
        """Once closed, keep a capability at :attr:`resume_time` (moved by :meth:`pin`
        and :meth:`unpin` to a later snapshot's time) until :meth:`release_hold`: with a
        checkpoint, the final snapshot then holds the dataflow at its time like any other
        (operators see no end of input before it saves).

        >>> import timely_spark as ts
        >>> def work(w):
        ...     inp, probe = w.dataflow(lambda s: (lambda i, st: (i, st.probe()))(*s.new_input()))
        ...     inp.hold_when_closed(); inp.advance_to(3); inp.close()
        ...     w.step_while(lambda: probe.less_than(3), timeout=10)
        ...     held = probe.frontier
        ...     inp.release_hold()
        ...     w.step_while(lambda: not probe.done(), timeout=10)
        ...     return held, probe.frontier
        >>> ts.execute(work)
        [(Antichain([3]), Antichain([]))]
        """
        self._hold_on_close = True

    @property
    def holding(self) -> bool:
        """Whether the input is closed and still keeps its hold (:meth:`hold_when_closed`).

        >>> import timely_spark as ts
        >>> def work(w):
        ...     inp = w.dataflow(lambda s: s.new_input()[0])
        ...     inp.hold_when_closed(); inp.close()
        ...     held = inp.holding
        ...     inp.release_hold()
        ...     return held, inp.holding
        >>> ts.execute(work)
        [(True, False)]
        """
        return self._hold is not None

    def release_hold(self) -> None:
        """Give up the hold a closed input keeps (:meth:`hold_when_closed`; idempotent;
        see :attr:`holding` for an example)."""
        if self._hold is not None:
            hold, self._hold = self._hold, None
            hold.drop()

    def close(self) -> None:
        """Flush and give up the input's capability: the input ends (idempotent).  The
        worker closes its inputs itself when the worker function returns.

        >>> import timely_spark as ts
        >>> ts.execute(_seen(lambda inp: inp.send("last"), lambda inp: inp.close()))
        [[(0, 'last')]]
        """
        if not self._closed:
            self.flush()
            self._closed = True
            self._closed_at = self._cap.time
            if self._hold_on_close:
                at = self.resume_time
                if self._pin is not None and not less_equal(self._pin.time, at):
                    at = self._pin.time           # pinned later (a snapshot under way): hold there
                self._hold = self._cap.delayed(at)
            self._cap.drop()


def new_input(scope: Any, name: str = "Input") -> tuple[InputHandle, "Stream"]:
    """``(InputHandle, Stream)``: records sent through the handle appear on the stream.
    The worker closes the handle when the worker function returns.  In a run restored
    from a snapshot at time ``t`` (``worker.restored_time``), the input starts at ``t``.

    >>> import timely_spark as ts
    >>> def work(worker):
    ...     inp, stream = worker.dataflow(lambda s: s.new_input("Numbers"))
    ...     inp.send(1)
    ...     return inp.name, inp.time
    >>> ts.execute(work)
    [('Numbers', 0)]
    """
    handle = InputHandle(scope, name)
    worker = scope.worker
    worker.track_input(handle)
    if scope.subgraph.parent is None:          # a dataflow's own input: snapshots pin it
        worker.register_source(handle)
        restored = worker.restored_time_of(scope)
        if restored is not None:               # a restored dataflow: the input starts at the snapshot's time
            handle.advance_to(restored)
    return handle, handle.stream


class _AtMinimum:
    """``to_stream`` as a snapshot sees it: a source that sent everything at the minimum
    time (so a snapshot is taken at a later time, once all of it was processed)."""

    closed = True

    def __init__(self, minimum: Any) -> None:
        self.time = minimum
        self.resume_time = minimum + 1 if isinstance(minimum, int) else minimum

    def pin(self, t: Any) -> None:
        pass

    def unpin(self) -> None:
        pass


def to_stream(scope: Any, iterable: Iterable[Any], name: str = "ToStream") -> "Stream":
    """A stream of the iterable's records at the minimum time, read in batches of
    :data:`BATCH` as the dataflow runs (every worker sends all of them).  A
    ``pyarrow.Table``, RecordBatch or pandas DataFrame gives a columnar stream of its
    record batches.  With snapshots, its records are in every snapshot (one is taken
    only once they were all processed), so a run restored from one sends none of them.

    >>> import timely_spark as ts
    >>> _ = ts.example(lambda s: s.to_stream([1, 2]).inspect(print))
    1
    2
    """
    it = iter(as_record_batches(iterable) if is_table_like(iterable) else iterable)
    worker = scope.worker
    if scope.subgraph.parent is None:
        worker.register_source(_AtMinimum(scope.minimum))
        restored = worker.restored_time_of(scope)
        if restored is not None and restored != scope.minimum:
            it = iter(())                      # restored: its records (at the minimum time) are in the snapshot

    def constructor(cap: Any, info: Any) -> Any:
        def logic(output: Any) -> None:
            if not cap.valid:
                return
            batch = list(islice(it, BATCH))
            if batch:
                output.session(cap).give_batch(batch)
            if len(batch) < BATCH:
                cap.drop()
            else:
                info.activate()

        return logic

    return source(scope, name, constructor)
