"""The lock files agree with pyproject.toml (docs/installing.md): constraints.txt pins a
version in every range, and constraints-oldest.txt pins each direct dependency at the
lower bound pyproject.toml claims, so the oldest lane tests exactly the claimed bounds."""

from collections import defaultdict
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

try:
    import tomllib
except ImportError:         # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
# the package's own requirements and every extra's (the dev extra pulls in the others by naming the package itself)
REQUIREMENTS = sorted({str(r): r for r in (Requirement(line) for group in [PROJECT["dependencies"],
                                                                          *PROJECT["optional-dependencies"].values()]
                                           for line in group)
                       if canonicalize_name(r.name) != canonicalize_name(PROJECT["name"])}.values(), key=str)


def pins(lock: str) -> dict:
    """``{name: [versions pinned, one per environment marker]}``."""
    found = defaultdict(list)
    for line in (ROOT / lock).read_text().splitlines():
        pin = line.split("#")[0].partition(";")[0].strip()
        if pin:
            name, _, version = pin.partition("==")
            found[canonicalize_name(name)].append(Version(version))
    return found


def lower_bound(req: Requirement) -> Version:
    (bound,) = [Version(s.version) for s in req.specifier if s.operator == ">="]
    return bound


@pytest.mark.parametrize("req", REQUIREMENTS, ids=str)
def test_the_lock_pins_a_version_in_every_range(req):
    versions = pins("constraints.txt")[canonicalize_name(req.name)]
    assert versions and all(req.specifier.contains(v) for v in versions), (
        f"constraints.txt pins {req.name} at {versions}, outside {req}: run bash .ci/lock")


@pytest.mark.parametrize("req", REQUIREMENTS, ids=str)
def test_the_oldest_lock_pins_every_lower_bound(req):
    versions = pins("constraints-oldest.txt")[canonicalize_name(req.name)]
    assert versions and min(versions) == lower_bound(req), (
        f"constraints-oldest.txt pins {req.name} at {versions}, not at the lower bound of {req}: "
        f"run bash .ci/lock")
