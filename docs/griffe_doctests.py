"""A Griffe extension for the API reference: the package's docstrings are reStructuredText-flavoured
(doctest examples, ``:class:`` roles); this shows each doctest example as a fenced ``pycon`` block and
each role as inline code, so that MkDocs renders them as written."""

from __future__ import annotations

import re
from typing import Any

from griffe import Extension

ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|exc|obj):`(~?)([^`]+)`")


def _code(role: re.Match) -> str:
    """A Sphinx role as inline code: ``:class:`~a.B``` as ```B```, ``:class:`a.B``` as ```a.B```."""
    return f"`{role.group(2).split('.')[-1] if role.group(1) else role.group(2)}`"


def fence_doctests(text: str) -> str:
    """``text`` with each doctest example (a ``>>>`` line, its ``...`` continuations and its output, up to a
    blank line) inside a fenced ``pycon`` block, and Sphinx roles turned into inline code (tested by
    ``tests/test_docs.py`` through the built API reference).
    """
    out: list[str] = []
    inside = False
    for line in text.splitlines():
        if not inside and line.lstrip().startswith(">>>"):
            out.append("```pycon")
            inside = True
        elif inside and not line.strip():
            out.append("```")
            inside = False
        out.append(line if inside else ROLE.sub(_code, line))
    if inside:
        out.append("```")
    return "\n".join(out)


class DoctestFences(Extension):
    def on_instance(self, *, obj: Any, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = fence_doctests(obj.docstring.value)


class StreamMethods(Extension):
    """``Stream``'s and ``Scope``'s class bodies make operator functions methods (``map = core.map``): show
    them as the functions they are, with their docstrings, instead of as undocumented attributes."""

    def on_package(self, *, pkg: Any, **kwargs: Any) -> None:
        for path in ("dataflow.stream.Stream", "dataflow.scope.Scope"):
            self.resolve(pkg[path])

    @staticmethod
    def resolve(cls: Any) -> None:
        from griffe import Alias

        module = cls.module
        for name, member in list(cls.members.items()):
            if member.is_alias or not member.is_attribute or member.value is None:
                continue
            head, _, attr = str(member.value).partition(".")
            source = module.members.get(head)
            if source is None or not source.is_alias:
                continue
            target = f"{source.target_path}.{attr}" if attr else source.target_path
            cls.set_member(name, Alias(name, target, parent=cls))
