"""The run record: every parameter, version and input of a score run (``run.json``).

One typed, frozen model, composed of one block per component of the run:

==================  =========================  ==================================================
key                 block                      written by
==================  =========================  ==================================================
``options``         :class:`OptionsBlock`      the checked options (:mod:`receval.options`)
``bootstrap``       :class:`BootstrapBlock`    the scoring stage (None for a census)
``design``          :class:`DesignBlock`       the scoring stage: samplers, draws, units
``ranking``         :class:`RankingBlock`      the scoring stage: tiers and rank sets
``inputs``          :class:`InputsBlock`       the task: where it was read, checksums
``merge``           :class:`MergeBlock`        the task: merge rule, ties, conflicts
``target``          :class:`TargetBlock`       the target-recall stage (per system
                                               :class:`SystemTarget`)
``curves``          :class:`CurveRecord`       the target-recall stage, per system
``official``        :class:`OfficialBlock`     the official census estimator
``intervals``       :class:`IntervalsBlock`    a non-bootstrap interval method
                                               (:class:`IntervalRecord`)
``judge``           :class:`JudgeBlock`        the prediction-powered estimator
``looking``         :class:`LookingBlock`      top-up rounds and auto intervals
``pooling_bias``    :class:`PoolingBiasBlock`  the leave-one-team-out diagnostic
``judge_audit``     :class:`JudgeAuditBlock`   the judge audit (:mod:`receval.judge_audit`)
``anonymise``       :class:`AnonymiseBlock`    where the pseudonym key came from
==================  =========================  ==================================================

:func:`run_record` is the one function that composes them (the API, and through it the command
line, call it); :meth:`RunRecord.to_json` is what ``run.json`` holds and
:meth:`RunRecord.from_json` reads it back — the report, ``leaderboard`` and every other reader go
through it.  Reading is tolerant: a key missing from a file written by an older version takes
its default, a part of another shape reads as empty, and keys this version does not model are
kept (``extra``) and written back, in the file's order, so a record survives a round trip.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

if TYPE_CHECKING:
    from receval.task import Task

__all__ = [
    "AnonymiseBlock",
    "Block",
    "BootstrapBlock",
    "CalibrationBin",
    "CurveRecord",
    "DesignBlock",
    "FlaggedSystem",
    "InputsBlock",
    "IntervalRecord",
    "IntervalsBlock",
    "JudgeAuditBlock",
    "JudgeAuditEntry",
    "JudgeBlock",
    "JudgeSystem",
    "LookingBlock",
    "MergeBlock",
    "OfficialBlock",
    "OptionsBlock",
    "PoolingBiasBlock",
    "RankingBlock",
    "RecordParts",
    "RunRecord",
    "SystemTarget",
    "TargetBlock",
    "TopupRound",
    "run_record",
]

B = TypeVar("B", bound="Block")


def opt(**meta: Any) -> Any:
    """A key written only when set (or when the file it was read from had it)."""
    return field(default=None, metadata={"optional": True, **meta})


def req(default: Any = None, **meta: Any) -> Any:
    """A key always written (``None`` as null)."""
    if isinstance(default, dict):
        return field(default_factory=dict, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class Block:
    """A typed, frozen part of ``run.json``: :meth:`to_json` writes its keys, :meth:`from_json`
    reads them back (missing keys take their defaults; unknown ones are kept in ``extra``;
    ``key_order`` remembers the order of the keys read, so a round trip is exact)."""

    #: the block's key in :class:`RunRecord` (for a block a component returns)
    KEY: ClassVar[str] = ""

    extra: Mapping[str, Any] = field(default_factory=dict, kw_only=True, repr=False)
    key_order: tuple[str, ...] = field(default=(), kw_only=True, repr=False, compare=False)

    def _names(self) -> list[str]:
        return [f.name for f in dataclasses.fields(self) if f.name not in ("extra", "key_order")]

    def to_json(self) -> dict[str, Any]:
        """The JSON object of this block (optional keys that are unset are left out)."""
        names = self._names()
        meta = {f.name: f.metadata for f in dataclasses.fields(self)}
        order = [*self.key_order, *(n for n in names if n not in self.key_order)]
        order += [k for k in self.extra if k not in order]
        read = set(self.key_order)
        out: dict[str, Any] = {}
        for name in order:
            if name in self.extra:
                out[name] = self.extra[name]
                continue
            if name not in meta or name in out:
                continue
            value = getattr(self, name)
            if value is None and meta[name].get("optional") and name not in read:
                continue
            out[name] = _plain(value)
        return out

    @classmethod
    def from_json(cls: type[B], data: Any) -> B:
        """Read the block from a JSON object (anything else reads as an empty block)."""
        if not isinstance(data, Mapping):
            data = {}
        known = {f.name: f for f in dataclasses.fields(cls) if f.name not in ("extra", "key_order")}
        kwargs = {k: _read(known[k], v) for k, v in data.items() if k in known}
        extra = {k: v for k, v in data.items() if k not in known}
        return cls(**kwargs, extra=extra, key_order=tuple(map(str, data)))

    def replace(self: B, **changes: Any) -> B:
        """A copy with ``changes`` applied (blocks are frozen)."""
        return dataclasses.replace(self, **changes)


def _plain(value: Any) -> Any:
    if isinstance(value, Block):
        return value.to_json()
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def _read(f: dataclasses.Field, value: Any) -> Any:
    """A JSON value as field ``f`` holds it: nested blocks typed, lists as tuples."""
    if "block" in f.metadata:
        return None if value is None else f.metadata["block"].from_json(value)
    if "blocks" in f.metadata:
        kind = f.metadata["blocks"]
        return (
            {str(k): kind.from_json(v) for k, v in value.items()}
            if isinstance(value, Mapping)
            else {}
        )
    if "items" in f.metadata:
        kind = f.metadata["items"]
        return tuple(kind.from_json(v) for v in value) if isinstance(value, list) else ()
    return tuple(value) if isinstance(value, list) else value


# --------------------------------------------------------------------------- the blocks


@dataclass(frozen=True)
class OptionsBlock(Block):
    """``options``: the :class:`~receval.options.ScoreOptions` of the run, as checked."""

    estimator: str | None = opt()
    weighting: str | None = opt()
    bootstrap: int | None = opt()
    confidence: float | None = opt()
    method: str | None = opt()
    seed: int | None = opt()
    rank_by: str | None = opt()
    target: str | None = opt()
    target_recall: float | None = opt()
    prevalence: float | None = opt()
    tiers: str | None = opt()
    cluster_queries: bool | None = opt()
    unjudged: str | None = opt()
    average: str | None = opt()
    cutoff: int | None = opt()
    allow_pending: bool | None = opt()
    precision_form: str | None = opt()
    intervals: str | None = opt()
    annotator_resampling: bool | None = opt()

    @classmethod
    def of(cls, options: Any) -> OptionsBlock:
        """The block of a :class:`~receval.options.ScoreOptions` (every field written)."""
        return cls.from_json(dataclasses.asdict(options))


@dataclass(frozen=True)
class BootstrapBlock(Block):
    """``bootstrap``: replicates, seed, interval method and level, clusters, labels."""

    B: int | None = req()
    seed: int | None = req()
    method: str | None = req()
    level: float | None = req()
    clusters: str | None = req()
    labels: str | None = opt()


@dataclass(frozen=True)
class DesignBlock(Block):
    """``design``: samplers, judged and unjudged draws, drawn facts, exhaustive units, designs,
    each system's precision form, the unit weights and the effective sizes."""

    samplers: int | None = req()
    draws_judged: int | None = req()
    draws_unjudged: int | None = req()
    drawn_facts: int | None = req()
    exhaustive_units: int | None = req()
    designs: tuple[str, ...] = req(())
    precision_forms: Mapping[str, str] | None = req()
    unit_weights: str | None = req()
    fact_multiplicity: str | None = req()
    effective_sizes: Mapping[str, float] | None = req()


@dataclass(frozen=True)
class RankingBlock(Block):
    """``ranking``: the ranking key, the tests behind tiers and rank sets and their guarantee."""

    by: str | None = req()
    tiers: str | None = req()
    procedure: str | None = req()
    why: str | None = req()
    alpha: float | None = req()
    B: int | None = req()
    replicates_dropped: int | None = req()
    rank_sets: str | None = req()
    rank: str | None = req()
    small_sample: str | None = opt()


@dataclass(frozen=True)
class IntervalsBlock(Block):
    """``intervals``: what a non-bootstrap interval method did (the anytime sequences)."""

    method: str | None = req()
    what: str | None = opt()
    stream: str | None = opt()
    shuffled_rounds: int | None = opt()
    legacy_rounds: int | None = opt()
    splits: str | None = opt()
    assumptions: tuple[str, ...] | None = opt()
    draws: int | None = opt()
    floor_draws: int | None = opt()
    points: str | None = opt()
    precision_control: str | None = opt()
    pooled_recall_test: str | None = opt()
    guarantee: str | None = opt()
    min_effective_sample_size: float | None = opt()


@dataclass(frozen=True)
class IntervalRecord(Block):
    """What an interval method records (:meth:`IntervalMethod.record`): its ``intervals``
    block, and the fields of ``ranking`` and ``bootstrap`` it sets."""

    intervals: IntervalsBlock | None = field(
        default=None, metadata={"optional": True, "block": IntervalsBlock}
    )
    ranking: Mapping[str, Any] = req({})
    bootstrap: Mapping[str, Any] = req({})


@dataclass(frozen=True)
class InputsBlock(Block):
    """``inputs``: where the task was read from and the SHA-256 of every input file."""

    task: str | None = opt()
    checksums: Mapping[str, str] | None = opt()


@dataclass(frozen=True)
class MergeBlock(Block):
    """``merge``: the merge rule, the tie policy and the number of annotator conflicts."""

    rule: str | None = req()
    tie: str | None = req()
    conflicts: int | None = req()


@dataclass(frozen=True)
class PoolingBiasBlock(Block):
    """``pooling_bias``: how pooling_bias.csv's official scores were counted."""

    unjudged: str | None = req()
    average: str | None = req()


@dataclass(frozen=True)
class OfficialBlock(Block):
    """``official``: the census's averaging, unjudged rule, cutoff and description."""

    KEY: ClassVar[str] = "official"

    average: str | None = req()
    unjudged: str | None = req()
    cutoff: int | None = req()
    description: str | None = req()


@dataclass(frozen=True)
class SystemTarget(Block):
    """One system's precision at the target recall: the method (curve, Dimm's extrapolation, or
    refused), β, the back-test and the flags."""

    recall: float | None = opt()
    precision: float | None = opt()
    method: str | None = req()
    rank_at_target: float | None = opt()
    beta: float | None = opt()
    prevalence: float | None = opt()
    backtest_max_dev: float | None = opt()
    backtest_anchor_recall: float | None = opt()
    backtest_distance: float | None = opt()
    backtest_gap: float | None = opt()
    backtest_se: float | None = opt()
    refused: str | None = opt()
    flags: tuple[str, ...] = req(())
    #: the share of bootstrap replicates whose curve falls short of the target (recorded, not
    #: noted: issue 37's measurement) and the Kish effective number of correct draws behind the
    #: yield at the target (curve systems)
    short_of_target: float | None = opt()
    draws_at_target: float | None = opt()


@dataclass(frozen=True)
class TargetBlock(Block):
    """``target``: R_T, the prevalence and its source, the back-test limit, every system's
    :class:`SystemTarget`."""

    recall: float | None = req()
    prevalence: float | None = req()
    prevalence_source: str | None = req()
    universe_size: int | None = req()
    backtest_limit: float | None = req()
    systems: Mapping[str, SystemTarget] = req({}, blocks=SystemTarget)

    def system(self, name: str) -> SystemTarget:
        """``systems[name]``; an empty record when the system has none."""
        return self.systems.get(name) or SystemTarget()


@dataclass(frozen=True)
class CurveRecord(Block):
    """``curves[system]``: a precision curve's method, kind, guarantee, size, labels, flags."""

    method: str | None = opt()
    kind: str | None = opt()
    guarantee: str | None = opt()
    size: int | None = opt()
    annotations: int | None = opt()
    flags: tuple[str, ...] | None = opt()


@dataclass(frozen=True)
class TopupRound(Block):
    """One top-up round: its name, the systems it drew for, those sampled up to it."""

    round: str | None = req()
    systems_drawn: int | None = req()
    systems_sampled: int | None = req()


@dataclass(frozen=True)
class LookingBlock(Block):
    """``looking``: the top-up rounds and what the run did about them."""

    KEY: ClassVar[str] = "looking"

    topup_rounds: tuple[TopupRound, ...] = req((), items=TopupRound)
    intervals: str | None = req()
    chosen_by_default: bool | None = req()
    why: str | None = req()


@dataclass(frozen=True)
class JudgeSystem(Block):
    """``judge.systems[system]``: λ, the judge-only precision, agreement with the labels and
    the effective extra labels."""

    lambda_precision: float | None = req()
    lambda_pooled_recall: float | None = req()
    judge_precision: float | None = req()
    scored_share: float | None = req()
    labelled_facts: int | None = req()
    correlation: float | None = req()
    mean_abs_error: float | None = req()
    effective_extra_labels: float | None = req()


@dataclass(frozen=True)
class CalibrationBin(Block):
    """One bin of the judge's reliability diagram: score range, facts, mean score, share
    correct."""

    lo: float | None = req()
    hi: float | None = req()
    facts: int | None = req()
    mean_score: float | None = req()
    share_correct: float | None = req()


@dataclass(frozen=True)
class JudgeBlock(Block):
    """``judge``: the prediction-powered estimator's judge audited against the human labels."""

    KEY: ClassVar[str] = "judge"

    judges: tuple[str, ...] = req(())
    labelled_scored_facts: int | None = req()
    labelled_unscored_facts: int | None = req()
    correlation: float | None = req()
    mean_abs_error: float | None = req()
    calibration: tuple[CalibrationBin, ...] = req((), items=CalibrationBin)
    coefficients: str | None = req()
    effective_extra_labels: str | None = req()
    systems: Mapping[str, JudgeSystem] = req({}, blocks=JudgeSystem)
    combination: Mapping[str, Any] | None = opt()
    calibration_method: str | None = opt()


@dataclass(frozen=True)
class FlaggedSystem(Block):
    """A system the judge audit flags as favoured or disfavoured."""

    flag: str | None = req()
    excess: float | None = req()
    p: float | None = req()
    p_adjusted: float | None = req()


@dataclass(frozen=True)
class JudgeAuditEntry(Block):
    """``judge_audit.judges[judge]``: κ, α, the labelled and imputed facts, flagged systems."""

    test: str | None = req()
    labelled_facts: int | None = req()
    kappa: float | None = req()
    alpha: float | None = req()
    imputed_pool_facts: int | None = req()
    flagged: Mapping[str, FlaggedSystem] = req({}, blocks=FlaggedSystem)


@dataclass(frozen=True)
class JudgeAuditBlock(Block):
    """``judge_audit``: the favouritism test and per judge its agreement with the labels."""

    test: str | None = req()
    permutations: int | None = req()
    normal_above: str | None = req()
    level: float | None = req()
    kappa: str | None = req()
    alpha: str | None = req()
    alpha_all_judges: float | None = req()
    labels_saved_median: float | None = req()
    judges: Mapping[str, JudgeAuditEntry] = req({}, blocks=JudgeAuditEntry)


@dataclass(frozen=True)
class AnonymiseBlock(Block):
    """``anonymise``: where the pseudonym key came from (never the key)."""

    key: str | None = req()


# --------------------------------------------------------------------------- the record


@dataclass(frozen=True)
class RecordParts:
    """The blocks a scoring stage produced, before the run's inputs are added: what
    :func:`receval.scoring.score_task` (and the official census) hand to :func:`run_record`."""

    options: OptionsBlock
    bootstrap: BootstrapBlock | None = None
    design: DesignBlock | None = None
    ranking: RankingBlock | None = None
    target: TargetBlock | None = None
    curves: Mapping[str, CurveRecord] | None = None
    official: OfficialBlock | None = None
    intervals: IntervalsBlock | None = None
    judge: JudgeBlock | None = None
    looking: LookingBlock | None = None

    def to_json(self) -> dict[str, Any]:
        """The parts as JSON (the keys :func:`run_record` writes for them)."""
        return {
            f.name: _plain(getattr(self, f.name))
            for f in dataclasses.fields(self)
            if getattr(self, f.name) is not None
        }

    def replace(self, **changes: Any) -> RecordParts:
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class RunRecord(Block):
    """What a score run did, as written to ``run.json`` (module docstring: one block per
    component).

    Attributes
    ----------
    receval_version, task : str
        The library version and the task name.
    options : OptionsBlock
        The options of the run.
    bootstrap : BootstrapBlock or None
        ``B, seed, method, level, clusters, labels``; None for the official census.
    design, ranking : DesignBlock, RankingBlock or None
        The sample design and the ranking procedure (sample-based runs).
    warnings : tuple of str
        Caveats printed during the run.
    created : str
        ISO-8601 UTC time of the run.
    inputs, merge : InputsBlock, MergeBlock
        Where the task was read from with the checksums; the merge rule and conflicts.
    target, curves : TargetBlock, mapping of CurveRecord, or None
        With a target recall: per-system method, β, back-test and flags; curve records.
    replicates_file : str or None
        ``replicates.npz`` when the replicates were saved.
    official, intervals, judge, looking, pooling_bias, judge_audit, anonymise : block or None
        The blocks of the components that ran (module docstring).
    extra : Mapping
        Keys this version does not model, kept in order.
    """

    receval_version: str = req("")
    task: str = req("")
    options: OptionsBlock = field(default_factory=OptionsBlock, metadata={"block": OptionsBlock})
    bootstrap: BootstrapBlock | None = field(default=None, metadata={"block": BootstrapBlock})
    design: DesignBlock | None = field(
        default=None, metadata={"optional": True, "block": DesignBlock}
    )
    warnings: tuple[str, ...] = req(())
    ranking: RankingBlock | None = field(
        default=None, metadata={"optional": True, "block": RankingBlock}
    )
    created: str = req("")
    inputs: InputsBlock = field(default_factory=InputsBlock, metadata={"block": InputsBlock})
    merge: MergeBlock | None = field(default=None, metadata={"optional": True, "block": MergeBlock})
    target: TargetBlock | None = field(
        default=None, metadata={"optional": True, "block": TargetBlock}
    )
    curves: Mapping[str, CurveRecord] | None = field(
        default=None, metadata={"optional": True, "blocks": CurveRecord}
    )
    replicates_file: str | None = opt()
    official: OfficialBlock | None = field(
        default=None, metadata={"optional": True, "block": OfficialBlock}
    )
    intervals: IntervalsBlock | None = field(
        default=None, metadata={"optional": True, "block": IntervalsBlock}
    )
    judge: JudgeBlock | None = field(default=None, metadata={"optional": True, "block": JudgeBlock})
    looking: LookingBlock | None = field(
        default=None, metadata={"optional": True, "block": LookingBlock}
    )
    pooling_bias: PoolingBiasBlock | None = field(
        default=None, metadata={"optional": True, "block": PoolingBiasBlock}
    )
    judge_audit: JudgeAuditBlock | None = field(
        default=None, metadata={"optional": True, "block": JudgeAuditBlock}
    )
    anonymise: AnonymiseBlock | None = field(
        default=None, metadata={"optional": True, "block": AnonymiseBlock}
    )

    @classmethod
    def from_json(cls, data: Any) -> RunRecord:
        """Read ``run.json`` back (tolerant: see the module docstring)."""
        record = super().from_json(data)
        return record.replace(warnings=tuple(str(w) for w in record.warnings or ()))

    @classmethod
    def misshapen(cls, data: Mapping[str, Any]) -> tuple[str, str] | None:
        """The first part of a ``run.json`` object of a JSON kind this model cannot read, as
        ``(key, "object" or "list")`` (None when every part reads; a missing or null part
        reads as absent).  For readers that refuse a hand-edited file instead of reading the
        part as empty."""
        for f in dataclasses.fields(cls):
            value = data[f.name] if f.name in data else None
            if value is None:
                continue
            if ("block" in f.metadata or "blocks" in f.metadata) and not isinstance(value, dict):
                return f.name, "object"
            if f.name == "warnings" and not isinstance(value, list):
                return f.name, "list"
        return None

    # the names of earlier versions
    def to_dict(self) -> dict[str, Any]:
        """Same as :meth:`to_json`."""
        return self.to_json()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunRecord:
        """Same as :meth:`from_json`."""
        return cls.from_json(data)

    # what readers ask of a record
    @property
    def estimator(self) -> str:
        """The estimator's registered name (``options.estimator``), "" when not recorded."""
        value = self.options.estimator
        return "" if value is None else str(value)

    @property
    def target_recall(self) -> Any:
        """R_T: ``options.target_recall`` when the key is there, else ``target.recall``."""
        if "target_recall" in self.options.key_order or self.options.target_recall is not None:
            return self.options.target_recall
        return None if self.target is None else self.target.recall

    @property
    def level(self) -> Any:
        """The interval level: ``bootstrap.level``, else ``options.confidence``."""
        if self.bootstrap is not None and (
            "level" in self.bootstrap.key_order or self.bootstrap.level is not None
        ):
            return self.bootstrap.level
        return self.options.confidence

    def system_target(self, system: str) -> SystemTarget:
        """``target.systems[system]``; empty when absent."""
        return SystemTarget() if self.target is None else self.target.system(system)

    def system_curve(self, system: str) -> CurveRecord:
        """``curves[system]``; empty when absent."""
        return (self.curves or {}).get(system) or CurveRecord()


def run_record(
    task: Task,
    parts: RecordParts,
    warnings: list[str] | tuple[str, ...],
    conflicts: int,
    *,
    judge_audit: JudgeAuditBlock | None = None,
    anonymise: str | None = None,
    created: str | None = None,
) -> RunRecord:
    """The run record of a score run on ``task``: the scoring stage's ``parts``, the run's
    ``warnings``, its inputs (where, checksums), the merge and its ``conflicts``, how
    pooling_bias.csv counts, the judge audit and where the pseudonym key came from.  The one
    place a :class:`RunRecord` is composed (``created``: now, when not given)."""
    from datetime import datetime, timezone

    from receval import __version__
    from receval.official.rules import OfficialPolicy

    if created is None:
        created = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return RunRecord(
        receval_version=__version__,
        task=task.name,
        options=parts.options,
        bootstrap=parts.bootstrap,
        design=parts.design,
        warnings=tuple(warnings),
        ranking=parts.ranking,
        created=created,
        inputs=InputsBlock(task=str(task.root), checksums=task.checksums()),
        merge=MergeBlock(
            rule=task.config.merge_rule, tie=task.config.tie_policy, conflicts=conflicts
        ),
        target=parts.target,
        curves=parts.curves,
        official=parts.official,
        intervals=parts.intervals,
        judge=parts.judge,
        looking=parts.looking,
        pooling_bias=PoolingBiasBlock(
            unjudged=OfficialPolicy().resolved_unassessed(task), average="micro"
        ),
        judge_audit=judge_audit,
        anonymise=None if anonymise is None else AnonymiseBlock(key=anonymise),
    )
