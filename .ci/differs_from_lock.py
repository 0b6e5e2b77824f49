"""Print the installed distributions whose versions differ from a lock file's pins for
this Python (``python differs_from_lock.py constraints.txt``): one ``name lock -> here``
line each, ``name (not in the lock) -> here`` for one the lock does not name."""

import sys
from importlib.metadata import distributions

from packaging.markers import Marker
from packaging.utils import canonicalize_name

locked = {}
for line in open(sys.argv[1]):
    pin, _, marker = line.split("#")[0].partition(";")
    if "==" in pin and (not marker.strip() or Marker(marker.strip()).evaluate()):
        name, _, version = pin.partition("==")
        locked[canonicalize_name(name)] = version.strip()
here = {canonicalize_name(d.metadata["Name"]): d.version for d in distributions()}
for name in sorted(set(here) - {"pip", "setuptools", "timely-spark"}):
    if locked.get(name) != here[name]:
        print(f"  {name} {locked.get(name, '(not in the lock)')} -> {here[name]}")
