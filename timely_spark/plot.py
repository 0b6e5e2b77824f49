"""Pictures of progress: frontiers over wall-clock time, records per epoch (matplotlib).

* :func:`plot_frontiers` -- from logged engine events (``worker.log_register()``):
  how each probe's frontier advanced over time;
* :func:`plot_capture` -- from a captured stream's events: records per time, and
  how the stream's frontier advanced, event by event.

Both return a matplotlib Figure and, given ``path``, save it there (PNG, SVG...).
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

from .capture.event import Messages, Progress
from .progress import MutableAntichain, sort_key, timestamp

__all__ = ["plot_frontiers", "plot_capture", "frontier_series"]


def _pyplot() -> Any:
    import matplotlib

    if matplotlib.get_backend().lower() not in ("module://matplotlib_inline.backend_inline",):
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def _first(frontier: list) -> Any:
    """A frontier as one number to plot: its least element (the outer part of a Product)."""
    if not frontier:
        return None
    return timestamp.show(min(frontier, key=sort_key))


def frontier_series(events: Iterable[dict]) -> dict[tuple, tuple[list, list]]:
    """Per ``(probe name, worker)``: the step line to draw, ``(seconds, least times)``.

    Each probe's least frontier time, from its frontier events; once its frontier is
    empty (the stream ended) the line keeps its last value to the end of the log, so
    a probe that stopped early still shows where it stood.

    >>> events = [{"event": "frontier", "name": "p", "worker": 0, "elapsed": 0.1, "frontier": (2,)},
    ...           {"event": "frontier", "name": "p", "worker": 0, "elapsed": 0.2, "frontier": ()},
    ...           {"event": "shutdown", "name": "", "worker": 0, "elapsed": 0.9, "frontier": ()}]
    >>> frontier_series(events)
    {('p', 0): ([0.1, 0.9], [2, 2])}
    """
    events = list(events)
    end = max((e["elapsed"] for e in events), default=0.0)
    points: dict[tuple, list] = {}
    for e in events:
        if e["event"] == "frontier":
            points.setdefault((e["name"], e["worker"]), []).append((e["elapsed"], _first(list(e["frontier"]))))
    series = {}
    for key, pts in points.items():
        xs = [x for x, y in pts if y is not None]
        ys = [y for x, y in pts if y is not None]
        if xs:
            xs.append(end)
            ys.append(ys[-1])
        series[key] = (xs, ys)
    return series


def plot_frontiers(events: Iterable[dict], path: Optional[str] = None, title: str = "Probe frontiers") -> Any:
    """Step plot of each probe's least frontier time against seconds since its worker
    started (see :func:`frontier_series`); a dotted line marks when a probe's stream ended."""
    plt = _pyplot()
    events = list(events)
    series = frontier_series(events)
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for (name, worker), (xs, ys) in sorted(series.items()):
        ax.step(xs, ys, where="post", label=f"{name} (worker {worker})")
        done = [e["elapsed"] for e in events if e["event"] == "frontier" and e["name"] == name
                and e["worker"] == worker and not e["frontier"]]
        if done:
            ax.axvline(done[0], linestyle=":", color="grey")
    ax.set_xlabel("seconds since the worker started")
    ax.set_ylabel("frontier (least time)")
    ax.set_title(title)
    if series:
        ax.legend(loc="upper left", fontsize="small")
    fig.tight_layout()
    if path:
        fig.savefig(path)
    return fig


def plot_capture(events: Iterable[Any], path: Optional[str] = None, title: str = "Captured stream") -> Any:
    """Two panels: records per time, and the stream's least frontier time after each event."""
    plt = _pyplot()
    counts: dict[Any, int] = {}
    frontier = MutableAntichain()
    started = False
    steps: list[tuple[int, Any]] = []
    for i, event in enumerate(events):
        if isinstance(event, Messages):
            counts[event.time] = counts.get(event.time, 0) + len(event.data)
            if not started:
                frontier.update_iter([(_zero(event.time), 1)])
                started = True
        elif isinstance(event, Progress):
            if not started and event.updates:
                frontier.update_iter([(_zero(event.updates[0][0]), 1)])
                started = True
            frontier.update_iter(event.updates)
            steps.append((i, _first(frontier.elements())))
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 5))
    times = sorted(counts, key=sort_key)
    top.bar([str(t) for t in times], [counts[t] for t in times])
    top.set_xlabel("time")
    top.set_ylabel("records")
    top.set_title(title)
    bottom.step([i for i, y in steps if y is not None], [y for i, y in steps if y is not None], where="post")
    bottom.set_xlabel("event number")
    bottom.set_ylabel("frontier (least time)")
    fig.tight_layout()
    if path:
        fig.savefig(path)
    return fig


def _zero(t: Any) -> Any:
    from .progress import minimum

    return minimum(t)
