#!/usr/bin/env python3
"""Run the LoCoMo evaluation: same as ``memrepo eval locomo PATH [OPTIONS]``.

Example::

    .venv/bin/python scripts/eval_locomo.py ../shared/data/locomo/locomo-dev.json --out out/eval
"""

from __future__ import annotations

import typer
from memrepo.evaluation.locomo_eval import locomo_command

if __name__ == "__main__":
    typer.run(locomo_command)
