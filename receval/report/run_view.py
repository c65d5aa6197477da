"""``run.json`` as the report reads it: one typed view with every part present.

:class:`receval.run_record.RunRecord` is what ``receval score`` writes; the report must also read
folders written by older versions and files edited by hand, where a part may be missing, null or
of another shape.  :meth:`RunView.of` takes the JSON object once and gives every part as a mapping
(empty when absent), so the report's sections read ``view.target.get("recall")`` instead of
``(run.get("target") or {}).get("recall")`` chains.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["RunView"]


def _part(run: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = run.get(key)
    return value if isinstance(value, Mapping) else {}


@dataclass(frozen=True)
class RunView:
    """The parts of one ``run.json`` the report shows.

    Attributes
    ----------
    raw : Mapping
        The JSON object as read.
    options, design, merge, ranking, target, curves, inputs, official, pooling_bias : Mapping
        The part of that name; empty when ``run.json`` has none.
    bootstrap : Mapping or None
        The bootstrap record; None (or empty) for a run without resampling (the official census).
    warnings : tuple of str
        The run's warnings.
    """

    raw: Mapping[str, Any]
    options: Mapping[str, Any] = field(default_factory=dict)
    bootstrap: Mapping[str, Any] | None = None
    design: Mapping[str, Any] = field(default_factory=dict)
    merge: Mapping[str, Any] = field(default_factory=dict)
    ranking: Mapping[str, Any] = field(default_factory=dict)
    target: Mapping[str, Any] = field(default_factory=dict)
    curves: Mapping[str, Any] = field(default_factory=dict)
    inputs: Mapping[str, Any] = field(default_factory=dict)
    official: Mapping[str, Any] = field(default_factory=dict)
    pooling_bias: Mapping[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    @classmethod
    def of(cls, run: Mapping[str, Any]) -> RunView:
        """The view of a ``run.json`` object (any part may be missing)."""
        parts = (
            "options",
            "design",
            "merge",
            "ranking",
            "target",
            "curves",
            "inputs",
            "official",
            "pooling_bias",
        )
        boot = run.get("bootstrap")
        return cls(
            raw=run,
            bootstrap=boot if isinstance(boot, Mapping) else None,
            warnings=tuple(str(w) for w in run.get("warnings") or []),
            **{name: _part(run, name) for name in parts},
        )

    @property
    def estimator(self) -> str:
        """The estimator's registered name (``options.estimator``), "" when not recorded."""
        value = self.options.get("estimator")
        return "" if value is None else str(value)

    @property
    def target_recall(self) -> Any:
        """R_T: ``options.target_recall`` when the key is there, else ``target.recall``."""
        return self.options.get("target_recall", self.target.get("recall"))

    def system_target(self, system: str) -> Mapping[str, Any]:
        """``target.systems[system]`` (method, β, back-test, flags); empty when absent."""
        systems = self.target.get("systems")
        info = systems.get(system) if isinstance(systems, Mapping) else None
        return info if isinstance(info, Mapping) else {}

    def system_curve(self, system: str) -> Mapping[str, Any]:
        """``curves[system]`` (method, size, labels, guarantee, flags); empty when absent."""
        info = self.curves.get(system)
        return info if isinstance(info, Mapping) else {}
