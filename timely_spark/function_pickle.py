"""How a worker function travels to other processes and executors: cloudpickle, plus
the names and source lines of the files its code came from.

A traceback raised in a function defined in a notebook cell or a script must show the
user's own file and source line, even on an executor that has neither.  Recent
cloudpickle releases name the file of every function they pickle by value
``<dynamic-code>``; older ones keep the name but never the source.  So this module
pickles code objects whole (``marshal``, which keeps the file name, as the driver and
its workers run the same Python version anyway), sends the source lines of those files
along (as :mod:`linecache` has them on the driver: a notebook cell's lines live only
there), and the receiving side registers them in its own :mod:`linecache`, where
:mod:`traceback` finds them.

>>> fn = loads_function(dumps_function(lambda x: x + 1))
>>> fn(1), fn.__code__.co_filename
(2, '<doctest timely_spark.function_pickle[0]>')
"""

from __future__ import annotations

import io
import linecache
import marshal
import pickle
import types
from collections import OrderedDict
from typing import Any, Callable

import cloudpickle

__all__ = ["dumps_function", "loads_function"]

SOURCE_FILE_LIMIT = 1 << 20     # bytes: a larger source file is not sent (its frames show no line)
REGISTERED_FILES_LIMIT = 256    # source files a long-lived process keeps registered, newest kept

_registered: OrderedDict[str, None] = OrderedDict()


class _CodeKeepingPickler(cloudpickle.Pickler):
    """A cloudpickle pickler that keeps code objects whole and notes their files."""

    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file, protocol=5)
        self.files: set[str] = set()

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, types.CodeType):
            self.files.update(_files_of(obj))
            return marshal.loads, (marshal.dumps(obj),)
        return super().reducer_override(obj)


def _files_of(code: types.CodeType) -> set[str]:
    files = {code.co_filename}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            files |= _files_of(const)
    return files


def _source(filename: str) -> list[str]:
    lines = linecache.getlines(filename)
    return lines if sum(map(len, lines)) <= SOURCE_FILE_LIMIT else []


def dumps_function(fn: Callable) -> bytes:
    """``fn`` pickled with cloudpickle, its code objects with their file names, and the
    source lines of those files (each up to ``SOURCE_FILE_LIMIT`` bytes)."""
    with io.BytesIO() as buffer:
        pickler = _CodeKeepingPickler(buffer)
        pickler.dump(fn)
        payload = buffer.getvalue()
    sources = {name: lines for name in sorted(pickler.files) if (lines := _source(name))}
    return pickle.dumps((sources, payload), protocol=5)


def loads_function(data: bytes) -> Callable:
    """The function :func:`dumps_function` sent, its source lines registered in this
    process's :mod:`linecache` (the newest ``REGISTERED_FILES_LIMIT`` files are kept)."""
    sources, payload = pickle.loads(data)
    for name, lines in sources.items():
        # no modification time: linecache.checkcache keeps the entry, as it does IPython's cells
        linecache.cache[name] = (sum(map(len, lines)), None, lines, name)
        _registered[name] = None
        _registered.move_to_end(name)
    while len(_registered) > REGISTERED_FILES_LIMIT:
        linecache.cache.pop(_registered.popitem(last=False)[0], None)
    return cloudpickle.loads(payload)
