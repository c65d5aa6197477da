"""The run record: every parameter, version and input of a score run (``run.json``).

One typed, frozen record is built by :func:`receval.score` and written by
:meth:`receval.ScoreResult.write`; the report reads the same file back.  Keys this version does
not model (written by a newer receval, or added by an estimator) are kept in ``extra`` and
written back unchanged, so a record survives a round trip.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

_ORDER = (
    "receval_version",
    "task",
    "options",
    "bootstrap",
    "design",
    "warnings",
    "ranking",
    "created",
    "inputs",
    "merge",
    "target",
    "curves",
    "replicates_file",
)
_ALWAYS = {"receval_version", "task", "options", "bootstrap", "warnings", "created", "inputs"}


@dataclass(frozen=True)
class RunRecord:
    """What a score run did, as written to ``run.json``.

    Attributes
    ----------
    receval_version, task : str
        The library version and the task name.
    options : Mapping
        The :class:`receval.scoring.ScoreOptions` of the run.
    bootstrap : Mapping or None
        ``B, seed, method, level, clusters``; None for the official census.
    design : Mapping or None
        Samplers, judged/unjudged draws, drawn facts, exhaustive units, design names.
    warnings : tuple of str
        Caveats printed during the run.
    ranking : Mapping or None
        The ranking key and the procedure behind tiers and rank intervals.
    created : str
        ISO-8601 UTC time of the run.
    inputs : Mapping
        ``task`` (where it was read from) and ``checksums`` (SHA-256 of every input file).
    merge : Mapping or None
        The merge rule, tie policy and number of conflicts.
    target, curves : Mapping or None
        With a target recall: per-system method, β, backtest and flags; curve records.
    replicates_file : str or None
        ``replicates.npz`` when the replicates were saved.
    extra : Mapping
        Any further keys, kept in order after the modelled ones.
    """

    receval_version: str
    task: str
    options: Mapping[str, Any]
    bootstrap: Mapping[str, Any] | None
    warnings: tuple[str, ...] = ()
    created: str = ""
    inputs: Mapping[str, Any] = field(default_factory=dict)
    design: Mapping[str, Any] | None = None
    ranking: Mapping[str, Any] | None = None
    merge: Mapping[str, Any] | None = None
    target: Mapping[str, Any] | None = None
    curves: Mapping[str, Any] | None = None
    replicates_file: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of ``run.json`` (optional keys that are None are left out)."""
        out: dict[str, Any] = {}
        for key in _ORDER:
            value = getattr(self, key)
            if value is None and key not in _ALWAYS:
                continue
            out[key] = list(value) if key == "warnings" else value
        out.update(self.extra)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunRecord:
        """Read a record back from the object :meth:`to_dict` wrote."""
        known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        missing = [k for k in ("receval_version", "task", "options") if k not in data]
        if missing:
            raise ValueError(f"run record lacks {', '.join(missing)}")
        kwargs = {k: v for k, v in data.items() if k in known}
        kwargs["warnings"] = tuple(kwargs.get("warnings") or ())
        kwargs.setdefault("bootstrap", None)
        extra = {k: v for k, v in data.items() if k not in known}
        return cls(**kwargs, extra=extra)

    def replace(self, **changes: Any) -> RunRecord:
        """A copy with ``changes`` applied (records are frozen)."""
        return dataclasses.replace(self, **changes)
