"""Modules imported on first use: every xdist worker collects every test module, so a heavy
library imported at module level costs each worker its import time even where no test uses it."""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import Any


def lazy_import(name: str) -> ModuleType:
    """A stand-in for module ``name`` that imports it on first public attribute access.

    Collection probes every module global for private names (``_mock_name``, ``__wrapped__``);
    those do not import the module (a real module has none of them either)."""
    stand_in = ModuleType(name)

    def __getattr__(attr: str) -> Any:
        if attr.startswith("_") and name not in sys.modules:
            raise AttributeError(attr)
        return getattr(importlib.import_module(name), attr)

    stand_in.__dict__["__getattr__"] = __getattr__  # PEP 562: called for missing names only
    return stand_in
