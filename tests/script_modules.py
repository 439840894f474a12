"""Importing a module of scripts/ in a test as the scripts import one another (scripts/ on sys.path)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


@contextmanager
def script_module(name: str) -> Iterator[ModuleType]:
    """``scripts/NAME.py`` imported, with scripts/ on sys.path until the block ends."""
    sys.path.insert(0, str(SCRIPTS))
    try:
        yield importlib.import_module(name)
    finally:
        sys.path.remove(str(SCRIPTS))
