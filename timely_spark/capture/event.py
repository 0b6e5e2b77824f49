"""The event model of captured streams, defined in :mod:`timely_spark.dataflow.operators.event`."""

from ..dataflow.operators.event import Event, EventQueue, Messages, Progress, as_source

__all__ = ["Messages", "Progress", "Event", "EventQueue", "as_source"]
