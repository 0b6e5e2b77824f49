"""Every Python example in the README runs and prints what the README says it prints.

The convention for shown output: a top-level line that calls ``print(...)``
states what it prints in a comment, either a trailing one on the same line or, when the
line has none, the comment lines right below it (for output too long for one line)::

    print(ts.execute(work, threads=2))      # ['done', 'done']
    print(tracker.frontier(t))              # Antichain([5]): nothing before 5 can arrive
    print(table.to_pylist())
    # [{'user': 'ann', ...},
    #  {'user': 'bob', ...}]

What that print call writes (not what its arguments print while they run) must equal
the comment, whitespace runs counted as one space; the comment may go on with
``: an explanation`` after the output.  A comment starting with
``e.g.`` shows output that varies between runs and is not compared.  Other comments
(on other lines, or on lines that are not a ``print``) are prose.
"""

import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", README, re.S)
MARK = "@@readme-output {} {}@@"


def shown_outputs(code):
    """``{line number: expected output}`` for the block's print lines that show their output."""
    lines = code.splitlines()
    comments = {tok.start[0]: tok.string[1:].strip()
                for tok in tokenize.generate_tokens(io.StringIO(code).readline) if tok.type == tokenize.COMMENT}
    shown = {}
    for number, line in enumerate(lines, 1):
        if not line.startswith("print("):
            continue
        if number in comments:
            expected = comments[number]
        else:
            below = []
            while number + len(below) < len(lines) and lines[number + len(below)].startswith("#"):
                below.append(comments[number + len(below) + 1])
            if not below:
                continue
            expected = " ".join(below)
        if not expected.startswith("e.g."):
            shown[number] = expected
    return shown


def instrument(code, shown):
    """The block with each print line whose output is shown calling a print that marks where its own output
    begins and ends (after its arguments ran, so their own printing stays outside)."""
    lines = code.splitlines()
    for number in shown:
        lines[number - 1] = f"_readme_print({number})(" + lines[number - 1][len("print("):]
    helper = ("_readme_print = lambda number: lambda *args, **kwargs: ("
              f"print({MARK!r}.format('begin', number), flush=True), print(*args, **kwargs), "
              f"print({MARK!r}.format('end', number), flush=True))")
    return helper + "\n" + "\n".join(lines) + "\n"


def printed(stdout, number):
    begin, end = MARK.format("begin", number), MARK.format("end", number)
    return stdout.split(begin + "\n", 1)[1].split(end, 1)[0]


def matches(output, expected):
    """The printed output is the comment, or the comment's beginning followed by ``: explanation``."""
    output, expected = " ".join(output.split()), " ".join(expected.split())
    return expected == output or expected.startswith(output + ":")


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_example_runs_and_prints_what_it_shows(code):
    shown = shown_outputs(code)
    done = subprocess.run([sys.executable, "-c", instrument(code, shown)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    for number, expected in shown.items():
        output = printed(done.stdout, number)
        assert matches(output, expected), (f"line {number} of the block, {code.splitlines()[number - 1]!r}, "
                                           f"printed {output.strip()!r}; the README shows {expected!r}")


def test_the_convention_finds_the_shown_outputs():
    shown = [expected for code in BLOCKS for expected in shown_outputs(code).values()]
    assert "['done', 'done']" in shown and any(s.startswith("Antichain([5])") for s in shown)
    assert len(shown) >= 5
    code = "print(1)  # 1\nprint(2)\n# 2\n#  and more\nprint(3)  # e.g. 3\nx = 4  # 4\nprint(5)\n\n# prose\n"
    assert shown_outputs(code) == {1: "1", 2: "2 and more"}
    assert matches("Antichain([])\n", "Antichain([]): the stream has ended")
    assert not matches("Antichain([5])\n", "Antichain([]): the stream has ended")


def test_readme_has_examples_and_the_ci_command():
    assert len(BLOCKS) >= 3
    ci = (Path(__file__).resolve().parent.parent / ".ci" / "run").read_text()
    command = ("python3 -m venv .venv && . .venv/bin/activate && pip install -c constraints.txt -e '.[dev]' && "
               "ruff check . && mypy timely_spark && python -m pytest")
    assert command in README and command in ci
