"""Locations in a dataflow graph: operator output ports and input ports.

From progress tracking's point of view an output port is a *source* of
timestamped messages and an input port a *target*.  Node 0 of a scope stands
for the scope's parent: its outputs are the scope's inputs and its inputs are
the scope's outputs.

>>> Source(1, 0), Target(2, 1)
(Source(node=1, port=0), Target(node=2, port=1))
>>> Source(1, 0) == Target(1, 0)
False
"""

from __future__ import annotations

from typing import NamedTuple, Union

__all__ = ["Source", "Target", "Location"]


class Source(NamedTuple):
    """Output port ``port`` of operator ``node``."""

    node: int
    port: int

    def __eq__(self, other: object) -> bool:
        return type(other) is Source and tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash((0, self.node, self.port))


class Target(NamedTuple):
    """Input port ``port`` of operator ``node``."""

    node: int
    port: int

    def __eq__(self, other: object) -> bool:
        return type(other) is Target and tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash((1, self.node, self.port))


Location = Union[Source, Target]
