"""Retrieval: plans of pointers, the deterministic engine, and the resolver under a budget."""

from memrepo.retrieval.plan import Plan, Pointer
from memrepo.retrieval.resolver import Block, Resolved, resolve

__all__ = ["Block", "Plan", "Pointer", "Resolved", "resolve"]
