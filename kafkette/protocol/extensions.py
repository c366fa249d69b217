"""Loading kafkette's optional C extensions.

Each is built by ``pip install`` when a compiler is there; without it, or with
the environment variable ``KAFKETTE_NO_EXTENSIONS=1``, the pure-Python code runs.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType


def extensions_disabled() -> bool:
    """Whether ``KAFKETTE_NO_EXTENSIONS=1`` asks for the pure-Python code everywhere."""
    return os.environ.get("KAFKETTE_NO_EXTENSIONS") == "1"


def load_extension(name: str) -> ModuleType | None:
    """The compiled module ``name``, or None when it is disabled or was not built."""
    if extensions_disabled():
        return None
    try:
        return importlib.import_module(name)
    except ImportError:  # not built: no compiler at install time
        return None
