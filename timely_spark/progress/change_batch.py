"""ChangeBatch: accumulated ``(item, diff)`` updates.

>>> b = ChangeBatch()
>>> b.update("a", 3); b.update("b", 1); b.update("a", -3)
>>> b.drain()
[('b', 1)]
>>> b.is_empty()
True
"""

from __future__ import annotations

from typing import Any, Hashable, Iterable, Iterator

__all__ = ["ChangeBatch"]


class ChangeBatch:
    """A multiset of signed counts that compacts away zeros.

    Updates accumulate in a dict, so any number of updates to one item cost one
    entry; :meth:`drain` hands the non-zero totals over and empties the batch.
    ``counts`` is that dict (totals may be zero until compacted): the engine's hot path
    reads it to skip empty batches without a call; everyone else uses the methods.
    """

    __slots__ = ("counts",)

    def __init__(self, updates: Iterable[tuple[Hashable, int]] = ()) -> None:
        self.counts: dict[Any, int] = {}
        self.extend(updates)

    def update(self, item: Hashable, diff: int) -> None:
        """Add ``diff`` to ``item``'s count."""
        if diff:
            counts = self.counts
            counts[item] = counts[item] + diff if item in counts else diff   # (no dict.get call)

    def extend(self, updates: Iterable[tuple[Hashable, int]]) -> None:
        """Add every ``(item, diff)`` of ``updates``."""
        counts = self.counts
        for item, diff in updates:
            if diff:
                counts[item] = counts.get(item, 0) + diff

    def unstable_take(self) -> dict[Any, int]:
        """The raw ``{item: total}`` dict, leaving the batch empty, in O(1).

        Unstable, for the engine's hot path: totals may be zero (not yet compacted),
        and an empty batch hands over its own (empty) dict: do not keep it.
        """
        counts = self.counts
        if counts:
            self.counts = {}
        return counts

    def unstable_has_updates(self) -> bool:
        """Whether any update was recorded since the last drain, in O(1).

        Unstable, for the engine's hot path: updates that cancel out still count.
        """
        return bool(self.counts)

    def compact(self) -> None:
        """Forget items whose count is zero."""
        self.counts = {k: v for k, v in self.counts.items() if v}

    def is_empty(self) -> bool:
        """Whether every count is zero (compacts first)."""
        if not self.counts:
            return True
        self.compact()
        return not self.counts

    def drain(self) -> list[tuple[Any, int]]:
        """Return the non-zero updates and leave the batch empty."""
        counts, self.counts = self.counts, {}
        return [(k, v) for k, v in counts.items() if v]

    def drain_into(self, other: "ChangeBatch") -> None:
        """Move every non-zero update into ``other``."""
        other.extend(self.drain())

    def items(self) -> list[tuple[Any, int]]:
        """The non-zero updates, leaving the batch as it is."""
        return [(k, v) for k, v in self.counts.items() if v]

    def __iter__(self) -> Iterator[tuple[Any, int]]:
        return iter(self.items())

    def __len__(self) -> int:
        return len(self.items())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ChangeBatch) and dict(self.items()) == dict(other.items())

    def __repr__(self) -> str:
        return f"ChangeBatch({self.items()!r})"
