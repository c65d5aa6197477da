"""Option vocabularies shared by the library and the command line (no heavy imports here).

The CLI builds its ``click.Choice`` lists from these tuples and :func:`check_score_options`
validates the same values at the library boundary, so the two can never disagree; it is the one
check of a score run's options, and returns :class:`CheckedOptions`, which the pipeline takes
without checking again.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from receval.errors import OptionError
from receval.estimators.registry import estimator_names, interval_method_names

#: the registered estimators and interval methods (receval.estimators.registry)
ESTIMATORS = estimator_names()
#: ``auto``: the bootstrap, or anytime when samples.tsv has top-up rounds
#: (:func:`receval.estimators.looking.resolve_intervals`)
AUTO = "auto"
INTERVALS = (AUTO, *interval_method_names())
#: the bootstrap interval's ``--method``
INTERVAL_METHODS = ("percentile", "basic", "BCa")
WEIGHTINGS = ("size", "overlap")
TARGETS = ("micro", "macro")
RANK_KEYS = ("f1", "recall", "precision", "pooled_recall", "precision_at_target")
TIER_CORRECTIONS = ("stepdown", "holm", "bh")
PRECISION_FORMS = ("auto", "unbiased", "ratio", "min-variance")
SAMPLE_DISTRIBUTIONS = ("uniform", "entity-relation")
PLANNING_BOUNDS = ("expected", "paper", "exchangeable")
BUDGET_BOUNDS = PLANNING_BOUNDS
CURVE_ESTIMATORS = ("hoeffding", "clopper-pearson", "bernstein")
ENGINES = ("duckdb", "spark")
CURVE_METHODS = ("random", "logstrat", "paula", "adastrat", "stratband", "tailband")
WIDTH_FOR = ("both", "precision", "recall")
UNJUDGED_RULES = ("wrong", "ignore")
AVERAGES = ("micro", "macro")
MIN_BOOTSTRAP = 50
MAX_BOOTSTRAP = 100_000
CONFIDENCE_RANGE = (0.5, 0.999)
TARGET_RECALL_RANGE = (0.01, 0.99)


def planned_estimators() -> tuple[str, ...]:
    """The registered estimators ``budget`` and ``sample --adaptive`` plan for: the joint
    mixture's (``mixture_weights``) and those that add the judge to it (``uses_judge``)."""
    from receval.estimators.registry import estimator_class

    return tuple(
        n for n in estimator_names() if (c := estimator_class(n)).mixture_weights or c.uses_judge
    )


def interval_choices() -> tuple[str, ...]:
    """``auto`` and the registered interval methods (the CLI's ``--intervals`` choices)."""
    return (AUTO, *interval_method_names())


def check_choice(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    """``ValueError`` naming the option unless ``value`` is one of ``allowed``."""
    if value not in allowed:
        raise OptionError(f"{{{name}={value!r}}} is not one of {', '.join(map(repr, allowed))}")


def check_range(name: str, value: Any, low: float, high: float) -> None:
    if not isinstance(value, int | float) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{name}={value!r} must be a number in [{low}, {high}]")


def check_score_options(options: Any) -> CheckedOptions:
    """The one check of a score run's options: :class:`CheckedOptions`, or ``ValueError``
    (an :class:`~receval.errors.OptionError` naming the option) for any invalid field.

    Checks every vocabulary and range, the combinations that cannot work (BCa with clustered
    resampling, ranking by precision at target without a target recall, ...), the options only
    some components take (refused naming the components that take them) and the chosen interval
    method's own combinations, before any work.  :func:`receval.score`, ``sample
    --until-decided`` and :func:`receval.scoring.score_task` (for a caller that passes plain
    :class:`ScoreOptions`) go through it; what it returns is not checked again.
    """
    check_choice("estimator", options.estimator, estimator_names())
    check_choice("intervals", getattr(options, "intervals", AUTO), interval_choices())
    check_choice("method", options.method, INTERVAL_METHODS)
    check_choice("weighting", options.weighting, WEIGHTINGS)
    check_choice("target", options.target, TARGETS)
    check_choice("rank_by", options.rank_by, RANK_KEYS)
    check_choice("tiers", options.tiers, TIER_CORRECTIONS)
    check_choice("precision_form", getattr(options, "precision_form", "auto"), PRECISION_FORMS)
    if not isinstance(options.bootstrap, int) or isinstance(options.bootstrap, bool):
        raise ValueError(f"bootstrap={options.bootstrap!r} must be an integer")
    check_range("bootstrap", options.bootstrap, MIN_BOOTSTRAP, MAX_BOOTSTRAP)
    check_range("confidence", options.confidence, *CONFIDENCE_RANGE)
    if not isinstance(options.seed, int) or isinstance(options.seed, bool) or options.seed < 0:
        raise ValueError(
            f"seed={options.seed!r} must be a non-negative integer (receval.score also takes None "
            "for fresh entropy or a numpy.random.Generator)"
        )
    if options.target_recall is not None:
        check_range("target_recall", options.target_recall, *TARGET_RECALL_RANGE)
    if options.prevalence is not None:
        check_range("prevalence", options.prevalence, 1e-9, 0.99)
    _check_combinations(options)
    _check_interval_method(options)
    if isinstance(options, CheckedOptions):
        return options
    return CheckedOptions(**{f.name: getattr(options, f.name) for f in fields(ScoreOptions)})


def _check_interval_method(options: Any) -> None:
    """The chosen interval method's own refusals (``auto`` resolves to a method only where that
    method can serve the run: :func:`receval.estimators.looking.resolve_intervals`)."""
    from receval.estimators.registry import interval_method_class

    method = getattr(options, "intervals", AUTO)
    if method != AUTO:
        interval_method_class(method)().check(options)


#: The most draws one sample round may ask for: far beyond any annotation budget, and a bound
#: on the memory a mistyped size would claim (``--per-system 1000000000000`` tried 44 TiB).
MAX_ROUND_DRAWS = 10_000_000


def check_seed(seed: Any) -> None:
    """``OptionError`` unless ``seed`` is an integer >= 0 (what numpy's seeding accepts)."""
    import numbers

    if not isinstance(seed, numbers.Integral) or isinstance(seed, bool) or seed < 0:
        raise OptionError(f"{{seed={seed!r}}} must be an integer >= 0")


def check_round_draws(draws: int) -> None:
    """``OptionError`` for a round of more than :data:`MAX_ROUND_DRAWS` draws."""
    if draws > MAX_ROUND_DRAWS:
        raise OptionError(
            f"a round of {draws:,} draws is more than {MAX_ROUND_DRAWS:,} (each draw is a label "
            "to collect): ask for fewer"
        )


def resolve_seed(seed: Any) -> int:
    """The integer seed a run uses and records (numpy/scipy ``rng`` conventions).

    An integer is used as given; ``None`` draws fresh entropy from the operating system; a
    :class:`numpy.random.Generator` (or ``RandomState``) draws one integer from it (advancing
    it).  The result is what ``run.json`` records, so any run can be repeated with
    ``seed=<recorded>``.
    """
    import numbers

    if isinstance(seed, numbers.Integral) and not isinstance(seed, bool):
        check_seed(seed)
        return int(seed)
    import numpy as np

    if seed is None:
        return int(np.random.SeedSequence().generate_state(1, np.uint64)[0] >> 1)
    if isinstance(seed, np.random.Generator | np.random.RandomState):
        return int(seed.integers(2**63) if hasattr(seed, "integers") else seed.randint(2**31))
    raise ValueError(
        f"seed={seed!r} must be an integer, None (fresh entropy) or a numpy.random.Generator"
    )


def _check_official(options: Any) -> None:
    _check_official_values(options)
    _check_owned(options)
    average = getattr(options, "average", None)
    if average is not None and options.target != "micro" and options.target != average:
        raise OptionError(f"{{target={options.target!r}}} contradicts {{average={average!r}}}")


def _check_official_values(options: Any) -> None:
    """unjudged and average among their choices, cutoff a positive integer (when given)."""
    for name, allowed in (("unjudged", UNJUDGED_RULES), ("average", AVERAGES)):
        value = getattr(options, name, None)
        if value is not None:
            check_choice(name, value, allowed)
    cutoff = getattr(options, "cutoff", None)
    if cutoff is not None and (
        not isinstance(cutoff, int) or isinstance(cutoff, bool) or cutoff < 1
    ):
        raise ValueError(f"cutoff={cutoff!r} must be a positive integer")


#: ScoreOptions fields that only the components declaring them take (``options`` of an
#: estimator or interval method class), with the value that means "not given"
OWNED_OPTIONS: dict[str, Any] = {"unjudged": None, "average": None, "cutoff": None}


def names_of(test: Any, kind: str = "estimator") -> str:
    """The registered components whose class passes ``test``, for messages: ``'a'``,
    ``'a' or 'b'``, ``'a', 'b' or 'c'``."""
    from receval.estimators.registry import (
        estimator_class,
        estimator_names,
        interval_method_class,
        interval_method_names,
    )

    if kind == "estimator":
        names = [n for n in estimator_names() if test(estimator_class(n))]
    else:
        names = [n for n in interval_method_names() if test(interval_method_class(n))]
    quoted = [f"{{{kind}={n!r}}}" for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]


def _check_owned(options: Any) -> None:
    """The options only some estimators take (:data:`OWNED_OPTIONS`), given to one that does
    not declare them, are refused naming the estimators that take them."""
    from receval.estimators.registry import estimator_class

    declared = estimator_class(options.estimator).options
    given = [
        n
        for n, unset in OWNED_OPTIONS.items()
        if getattr(options, n, unset) is not unset and n not in declared
    ]
    if given:
        verb = "applies" if len(given) == 1 else "apply"
        names = ", ".join(f"{{{n}}}" for n in given)
        owners = names_of(lambda cls: given[0] in cls.options)
        raise OptionError(f"{names} {verb} to {owners} only")


def _census(options: Any) -> bool:
    """Whether the chosen estimator is a census (no sample, no interval): its registered
    class says so (``sample_based``)."""
    from receval.estimators.registry import estimator_class

    return not estimator_class(options.estimator).sample_based


def _sampled() -> str:
    """The sample-based estimators, for messages."""
    return names_of(lambda cls: cls.sample_based)


def _check_combinations(options: Any) -> None:
    _check_official(options)
    if options.cluster_queries and options.method == "BCa":
        raise OptionError(
            "{cluster_queries} works with {method='percentile'} or {method='basic'} "
            "(BCa needs a jackknife)"
        )
    if options.cluster_queries and options.target != "micro":
        raise OptionError("{cluster_queries} is implemented for {target='micro'} only")
    if getattr(options, "annotator_resampling", False):
        _check_annotator_resampling(options)
    if options.rank_by == "precision_at_target" and options.target_recall is None:
        raise OptionError("{rank_by='precision_at_target'} needs {target_recall}")
    if _census(options) and options.target_recall is not None:
        raise OptionError(f"{{target_recall}} needs a sample-based estimator ({_sampled()})")


def _check_annotator_resampling(options: Any) -> None:
    """annotator_resampling redraws the draws' labels: a bootstrap of the sample-based
    estimators without query clusters or a jackknife."""
    if not isinstance(options.annotator_resampling, bool):
        raise ValueError(
            f"annotator_resampling={options.annotator_resampling!r} must be True or False"
        )
    if _census(options):
        raise OptionError(f"{{annotator_resampling}} needs a sample-based estimator ({_sampled()})")
    if options.cluster_queries or options.method == "BCa":
        raise OptionError(
            "{annotator_resampling} works with {method='percentile'} or {method='basic'} and "
            "without {cluster_queries}"
        )
    from receval.estimators.registry import interval_method_class

    # auto resolves to the bootstrap where annotator resampling is asked for (looking.py)
    method = "bootstrap" if getattr(options, "intervals", AUTO) == AUTO else options.intervals
    if "annotator_resampling" not in interval_method_class(method).options:
        takes = names_of(lambda cls: "annotator_resampling" in cls.options, "intervals")
        raise OptionError(f"{{annotator_resampling}} works with {takes} only")


@dataclass(frozen=True)
class ScoreOptions:
    """Everything that determines a score run (written to run.json)."""

    estimator: str = "joint"
    weighting: str = "size"
    bootstrap: int = 1000
    confidence: float = 0.95
    method: str = "percentile"
    seed: int = 0
    rank_by: str = "f1"
    target: str = "micro"
    target_recall: float | None = None
    prevalence: float | None = None
    tiers: str = "stepdown"
    cluster_queries: bool = False
    #: official estimator only: unjudged responses ``"wrong"`` (trec_eval) or ``"ignore"`` (TAC);
    #: None takes the bundle's ``[official] unjudged``
    unjudged: str | None = None
    #: official estimator only: ``"micro"`` or ``"macro"``; None follows ``target``
    average: str | None = None
    #: official estimator only: score each system's top K responses per query (P@K divides by K)
    cutoff: int | None = None
    allow_pending: bool = False
    precision_form: str = "auto"
    #: the interval method (:mod:`receval.estimators.intervals`): ``bootstrap`` or a registered
    #: one; ``auto``: the bootstrap, or ``anytime`` when samples.tsv has rounds drawn for some
    #: systems only (:mod:`receval.estimators.looking`)
    intervals: str = "auto"
    #: resample each fact's annotator votes in every bootstrap replicate and merge them again, so
    #: disagreement widens the intervals (:mod:`receval.estimators.annotators`); by default the
    #: intervals are conditional on the merged labels
    annotator_resampling: bool = False


@dataclass(frozen=True)
class CheckedOptions(ScoreOptions):
    """:class:`ScoreOptions` that passed :func:`check_score_options`, the one check: what the
    scoring pipeline takes without checking again."""


def check_judge_scale(scale) -> None:
    """``scale`` is (lo, hi), two finite numbers with lo < hi (``ValueError`` otherwise)."""
    import math

    ok = isinstance(scale, tuple | list) and len(scale) == 2
    try:
        lo, hi = (float(v) for v in scale) if ok else (math.nan, math.nan)
    except (TypeError, ValueError):
        lo, hi = math.nan, math.nan
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"judge_scale={scale!r} must be (lo, hi), two numbers with lo < hi")
