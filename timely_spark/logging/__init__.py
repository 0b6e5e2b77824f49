"""Engine event logging: a per-worker registry of handlers for named event streams."""

from .events import FIELDS, event
from .registry import Logger, Registry

__all__ = ["FIELDS", "Logger", "Registry", "event"]
