"""The package's own data files (its Spark defaults, its log4j configuration), read where
the package is: a directory of an installed package, or a zip shipped with ``--py-files``
(where they are zip members, not files)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Optional

__all__ = ["package_text", "package_file"]


def package_text(name: str) -> str:
    """The text of the data file ``name`` beside this module ("" where the package was shipped without it).

    >>> "spark.ui.enabled" in package_text("spark-defaults.conf")
    True
    """
    try:
        return resources.files(__package__).joinpath(name).read_text()
    except OSError:
        return ""


def package_file(name: str) -> Optional[Path]:
    """The path of the data file ``name`` when it is a file a JVM can read, else None (a zip member).

    >>> package_file("log4j2.properties").name
    'log4j2.properties'
    """
    path = Path(__file__).with_name(name)
    return path if path.is_file() else None
