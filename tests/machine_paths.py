"""What counts as a folder of one machine in the docs and the jobs: the checkout's own folder and
the folder it sits in (unless that is the temporary folder or the root, which examples may name)."""
import tempfile
from pathlib import Path


def machine_folders(checkout: Path) -> list:
    """``checkout/`` and, when it is not a shared place, its parent folder, each with a trailing slash."""
    folders = [f"{checkout}/"]
    if checkout.parent not in (Path(tempfile.gettempdir()).resolve(), Path("/")):
        folders.append(f"{checkout.parent}/")
    return folders
