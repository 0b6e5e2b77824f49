"""A worker function's remote traceback shows the user's file and source line, with any
cloudpickle the package allows, even when that file exists only in the driver's
linecache (a notebook cell)."""

import linecache

import pytest

import timely_spark as ts
from timely_spark import function_pickle
from timely_spark.function_pickle import dumps_function, loads_function

CELL = "/nonexistent/ipykernel_0/cell_7.py"      # as IPython names a cell: a file that is not on disk
CELL_SOURCE = ("def work(worker):\n"
               "    ratio = 7 // (worker.index - 1)   # the user's own line\n"
               "    return ratio\n")


def notebook_cell(name: str = CELL):
    """``work`` as a notebook defines it: compiled from a cell whose lines only linecache has."""
    lines = CELL_SOURCE.splitlines(keepends=True)
    linecache.cache[name] = (len(CELL_SOURCE), None, lines, name)
    namespace: dict = {}
    exec(compile(CELL_SOURCE, name, "exec"), namespace)
    return namespace["work"]


def test_a_cell_function_failing_in_another_process_shows_the_cell_line():
    with pytest.raises(ts.WorkerError) as err:
        ts.execute(notebook_cell(), processes=2, timeout=30)
    assert err.value.worker == 1
    assert f'File "{CELL}", line 2, in work' in err.value.remote_traceback
    assert "7 // (worker.index - 1)   # the user's own line" in err.value.remote_traceback


def test_the_receiving_side_registers_the_lines_it_was_sent():
    data = dumps_function(notebook_cell())
    del linecache.cache[CELL]                           # as in a fresh process
    work = loads_function(data)
    assert work.__code__.co_filename == CELL
    assert linecache.getline(CELL, 2).strip().startswith("ratio = 7 // (worker.index - 1)")


def test_a_long_lived_process_keeps_only_the_newest_files(monkeypatch):
    monkeypatch.setattr(function_pickle, "REGISTERED_FILES_LIMIT", 2)
    names = [f"/nonexistent/ipykernel_0/cell_{i}.py" for i in range(3)]
    sent = [dumps_function(notebook_cell(n)) for n in names]
    for n in names:
        del linecache.cache[n]
    for data in sent:
        loads_function(data)
    assert [n in linecache.cache for n in names] == [False, True, True]
