"""Retrieval: plans of pointers, the deterministic engine, and the resolver under a budget.

Names are imported on first access (PEP 562), so importing :mod:`memrepo.retrieval.service` (the
retrieval function's path) does not build the plan models or load the resolver before a request
needs them: a user without memory never does.
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING

from memrepo._lazy import lazy_attributes as _lazy_attributes

_LAZY = {
    "Block": "memrepo.retrieval.resolver",
    "Plan": "memrepo.retrieval.plan",
    "Pointer": "memrepo.retrieval.plan",
    "Resolved": "memrepo.retrieval.resolver",
    "resolve": "memrepo.retrieval.resolver",
}

if _TYPE_CHECKING:
    from memrepo.retrieval.plan import Plan, Pointer
    from memrepo.retrieval.resolver import Block, Resolved, resolve


__getattr__, __dir__ = _lazy_attributes(__name__, _LAZY, globals())


__all__ = ["Block", "Plan", "Pointer", "Resolved", "resolve"]
