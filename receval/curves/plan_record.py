"""The curve plan record (``TASK/curve_plan.json``): the seed of each system's curve plan drawn
without an explicit seed, so that the plan stays reproducible and ``curve estimate`` reuses it.

A fresh seed comes from the operating system's entropy (:class:`numpy.random.SeedSequence`), so
no ranked list can be built from the plan in advance (with a fixed default seed the plan would be
a public function of N).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from receval.errors import BundleError

#: the record's file name in the task folder
CURVE_PLAN_RECORD = "curve_plan.json"


def seeded(method: str) -> bool:
    """Whether the curve ``method`` draws at random (takes a ``seed``)."""
    from receval.curves import METHODS

    return "seed" in {f.name for f in dataclasses.fields(METHODS[method])}


def plan_record(root: Path) -> dict:
    """The record of ``root`` (``{}`` when there is none); ``BundleError`` for a file that is
    not one."""
    path = Path(root) / CURVE_PLAN_RECORD
    if not path.exists():
        return {}
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise BundleError(path, 1, f"not a curve plan record ({exc})") from None
    if not isinstance(record, dict) or not isinstance(record.get("plans", {}), dict):
        raise BundleError(path, 1, "not a curve plan record (no 'plans' object)")
    return record


def recorded_seed(root: Path, system: str, method: str) -> int | None:
    """The seed recorded for ``system``'s ``method`` plan, or None."""
    entry = plan_record(root).get("plans", {}).get(f"{system}/{method}")
    if entry is not None and isinstance(entry.get("seed"), int):
        return int(entry["seed"])
    return None


def planned_seed(root: Path, system: str, method: str) -> tuple[int, str]:
    """(seed, what to say) for a plan without a seed: the recorded one, else a fresh one."""
    seed = recorded_seed(root, system, method)
    where = Path(root) / CURVE_PLAN_RECORD
    if seed is not None:
        return seed, f"seed {seed} (recorded in {where})"
    import numpy as np

    seed = int(np.random.SeedSequence().entropy)
    return seed, f"seed {seed} (drawn at random; recorded in {where})"


def record_plan(root: Path, system: str, method: str, params: dict[str, Any]) -> None:
    """Record the seed (and parameters) of ``system``'s ``method`` plan."""
    from receval.report.writers import write_json

    plans = dict(plan_record(root).get("plans", {}))
    plans[f"{system}/{method}"] = {
        "system": system,
        "method": method,
        "seed": int(params["seed"]),
        "parameters": params,
    }
    write_json(Path(root) / CURVE_PLAN_RECORD, {"plans": plans})


def estimate_seed(root: Path, system: str, method: str, seed: int | None) -> int:
    """``seed``, else the seed recorded when planning, else 0 (the seed before plans drew one)."""
    if seed is not None:
        return seed
    recorded = recorded_seed(root, system, method)
    return 0 if recorded is None else recorded
