"""What a function's ``main.py`` does around its imports, before gunicorn forks the worker.

functions-framework imports ``main.py`` in gunicorn's master, then forks the worker that serves
requests. Around those imports::

    from memrepo import prefork

    prefork.begin()
    try:
        import ...  # everything a request needs
    finally:
        prefork.end()

* :func:`begin` turns the cyclic garbage collector off (the imports make thousands of long-lived
  objects and no garbage; collections while loading cost ~100 ms of a cold start here) and sets
  ``PYDANTIC_DISABLE_PLUGINS=__all__`` unless it is set: at its first model pydantic otherwise
  reads the entry points of every installed distribution looking for plugins (15-40 ms in a venv
  of ~190 packages); memrepo uses none, and ``""`` re-enables them
  (https://docs.pydantic.dev/latest/concepts/plugins/).
* :func:`end` moves every object made so far out of the collector's reach (``gc.freeze``), so
  collections in the worker neither scan nor copy the pages it shares with the master, and turns
  the collector back on: the recipe of the ``gc`` module's documentation for forking servers.
  Call it in ``finally``: a process must not go on without its collector after a failed import.
"""

from __future__ import annotations

import gc
import os


def begin() -> None:
    """Disable the cyclic GC and pydantic's plugin lookup for the imports that follow."""
    gc.disable()
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")


def end() -> None:
    """Freeze what the imports made (``gc.freeze``) and enable the cyclic GC again."""
    gc.freeze()
    gc.enable()
