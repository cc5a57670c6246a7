"""PEP 562 lazy attributes: a package's public names imported on first access.

A package ``__init__`` that re-exports names from its submodules would import all of them at
import time; with a name → module table it imports each submodule only when one of its names is
first read, so a cold start pays only for the path it uses::

    __getattr__, __dir__ = lazy_attributes(__name__, {"Memory": "memrepo.api"}, globals())

Keep the same names under ``if TYPE_CHECKING:`` imports so type checkers see them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_attributes(
    package: str, table: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return a module ``__getattr__`` and ``__dir__`` that import ``table``'s names lazily.

    Args:
        package: the module's name (``__name__``), for the error message.
        table: public name → the module that defines it under the same name.
        namespace: the module's ``globals()``; a name is stored there once imported, so later
            reads do not call ``__getattr__`` again.

    Returns:
        ``(__getattr__, __dir__)`` to assign at module level.
    """

    def __getattr__(name: str) -> Any:
        """Import a public name on first access (PEP 562).

        Raises:
            AttributeError: ``name`` is not in the table.
        """
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        """Return the module's names, the ones not imported yet included."""
        return sorted({*namespace, *table})

    return __getattr__, __dir__
