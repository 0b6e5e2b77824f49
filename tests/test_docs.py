"""The README and the user guide (``docs/``): every Python example runs and prints what the page says it
prints, and the guide builds with MkDocs with warnings as errors.

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

Every ```` ```python ```` block runs, in a fresh Python process, as written.  A block that
uses Spark (``ts.spark``, ``pyspark`` or ``SparkSession`` outside comments and strings) is
slow: it runs in the slow set, with a longer timeout; so does a block right after the
line ``<!-- test: slow -->``.
"""

import io
import os
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

from .machine_paths import machine_folders

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
MARK = "@@docs-output {} {}@@"
SLOW_MARK = "<!-- test: slow -->"
COMMAND = ("python3 -m venv .venv && . .venv/bin/activate && pip install -c constraints.txt -e '.[dev]' && "
           "ruff check . && mypy timely_spark && python -m pytest")


def uses_spark(code):
    """Whether the code (its comments left out) starts or takes a SparkSession."""
    tokens = tokenize.generate_tokens(io.StringIO(code).readline)
    text = " ".join(tok.string for tok in tokens if tok.type not in (tokenize.COMMENT, tokenize.STRING))
    return bool(re.search(r"\bts \. spark\b|\bpyspark\b|\bSparkSession\b", text))


def python_blocks(text):
    """``[(line number of the fence, code, slow)]`` for the ```` ```python ```` blocks of a page."""
    blocks = []
    for match in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M):
        before = text[:match.start()]
        slow = before.rstrip("\n").endswith(SLOW_MARK) or uses_spark(match.group(1))
        blocks.append((before.count("\n") + 1, match.group(1), slow))
    return blocks


def examples():
    params = []
    for page in PAGES:
        name = str(page.relative_to(ROOT))
        for line, code, slow in python_blocks(page.read_text()):
            marks = [pytest.mark.slow, pytest.mark.timeout(420)] if slow else []
            params.append(pytest.param(name, line, code, slow, id=f"{name}:{line}", marks=marks))
    return params


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
        lines[number - 1] = f"_docs_print({number})(" + lines[number - 1][len("print("):]
    helper = ("_docs_print = lambda number: lambda *args, **kwargs: ("
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


@pytest.mark.parametrize("page, line, code, slow", examples())
def test_example_runs_and_prints_what_it_shows(page, line, code, slow):
    shown = shown_outputs(code)
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"    # as in an activated venv
    done = subprocess.run([sys.executable, "-c", instrument(code, shown)], capture_output=True, text=True,
                          timeout=400 if slow else 120, cwd=ROOT, env=dict(os.environ, PATH=path))
    assert done.returncode == 0, f"{page}:{line}\n{done.stderr[-4000:]}"
    for number, expected in shown.items():
        output = printed(done.stdout, number)
        assert matches(output, expected), (f"{page}:{line + number}, {code.splitlines()[number - 1]!r}, "
                                           f"printed {output.strip()!r}; the page shows {expected!r}")


def test_the_convention_finds_the_shown_outputs():
    shown = [expected for page in PAGES for _, code, _ in python_blocks(page.read_text())
             for expected in shown_outputs(code).values()]
    assert "['done', 'done']" in shown and any(s.startswith("Antichain([5])") for s in shown)
    assert len(shown) >= 10
    code = "print(1)  # 1\nprint(2)\n# 2\n#  and more\nprint(3)  # e.g. 3\nx = 4  # 4\nprint(5)\n\n# prose\n"
    assert shown_outputs(code) == {1: "1", 2: "2 and more"}
    assert matches("Antichain([])\n", "Antichain([]): the stream has ended")
    assert not matches("Antichain([5])\n", "Antichain([]): the stream has ended")
    page = f"text\n\n```python\nprint(1)\n```\n\n{SLOW_MARK}\n```python\nx = 2\n```\n```python\ns = ts.spark.run\n```\n"
    assert python_blocks(page) == [(3, "print(1)\n", False), (8, "x = 2\n", True), (11, "s = ts.spark.run\n", True)]
    assert not uses_spark("x = 1  # df.groupBy in Spark: ts.spark.transform(...)\n")


def test_readme_is_a_short_front_door_with_the_test_command():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    assert len(python_blocks(readme)) >= 3
    assert COMMAND in readme
    if (ROOT / "constraints.txt").exists():         # CI runs the README's command as written
        assert COMMAND in (ROOT / ".ci" / "run").read_text()


def test_no_page_names_an_issue_number_or_a_folder_of_one_machine():
    for page in PAGES:
        text = page.read_text()
        assert not re.search(r"\bissue \d+", text, re.I), page
        assert not any(folder in text for folder in machine_folders(ROOT)), page


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_the_guide_builds_with_warnings_as_errors(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          capture_output=True, text=True, cwd=ROOT, timeout=280,
                          env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))
    assert done.returncode == 0, done.stderr[-4000:]
    api = (tmp_path / "site" / "api" / "index.html").read_text()
    assert "timely_spark.execute" in api and "ts.execute" in api     # mkdocstrings rendered the docstrings,
    assert '<span class="gp">&gt;&gt;&gt; </span>' in api and ":class:`" not in api   # doctests as code
    assert 'id="timely_spark.dataflow.stream.Stream.map"' in api       # operators shown as Stream's methods
