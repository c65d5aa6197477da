"""Scoring a task: estimates, bootstrap intervals and ranks for every system, in one pass.

Data flow::

    Task ──build_sample_data──> SampleData ──terms (precision.py, recall.py)──> per-row terms
         ──bootstrap.run_bootstrap (shared replicates)──> point / replicate / jackknife metrics
         ──> leaderboard frame, pool frame, truth check

Estimators (``estimator=``):

* ``joint`` (default): joint precision, pool coverage θ̂ from exhaustive units, reweighted pooled
  recall ν̂, true recall θ̂·ν̂ (Chaganty et al. 2017).
* ``simple``: each system's own sample for precision, exhaustive units alone for recall.
* ``official``: the TAC Cold Start closed-world census (:mod:`receval.official.scores`).
"""

from __future__ import annotations

import dataclasses
import warnings as pywarnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from receval.estimators.base import (
    LEADERBOARD_COLUMNS,
    METRICS,
    Estimator,
    ScoringContext,
    ScoringOutput,
    TermLayout,
    bootstrap_stages,
)
from receval.estimators.bootstrap import (
    BootstrapRun,
    Replicates,
    draw_replicates,
    reevaluate,
    row_weights,
    run_bootstrap,
)
from receval.estimators.looking import (
    CHOSEN_ANYTIME,
    flag_looking,
    looking_record,
    resolve_intervals,
)
from receval.estimators.recall import f1_score
from receval.estimators.registry import get_estimator, get_interval_method
from receval.estimators.reliability import pool_notes, reliability_notes
from receval.estimators.sample_data import SampleData, build_sample_data, repeated_facts
from receval.estimators.small_sample import metric_draws
from receval.leaderboard import (
    best_per_team,
    rank_confidence_sets,
    replicate_ranks,
    significance_tiers,
)
from receval.options import (
    AUTO,
    PRECISION_FORMS,
    CheckedOptions,
    ScoreOptions,
    check_score_options,
)
from receval.run_record import (
    BootstrapBlock,
    CurveRecord,
    DesignBlock,
    IntervalRecord,
    OptionsBlock,
    RankingBlock,
    RecordParts,
    SystemTarget,
    TargetBlock,
)
from receval.task import Task

__all__ = ["LEADERBOARD_COLUMNS", "METRICS", "ScoreOptions", "bootstrap_stages", "score_task"]


def ignored_only(task: Task) -> str:
    """`` (K of those facts ...)`` when K drawn facts without a label have votes, every one an
    ``ignore`` vote (which leaves the vote out): they wait for a label that counts."""
    drawn = task.samples["fact"].to_numpy(np.int64)
    pending = np.unique(drawn[~np.isin(drawn, task.labels.index.to_numpy(np.int64))])
    k = int(np.isin(pending, task.judgments["fact"].to_numpy(np.int64)).sum())
    if not k:
        return ""
    return f" ({k} of those facts have only ignore votes, which leave the vote out)"


def pending_message(draws: int, facts: int, cli: bool = False, ignored: str = "") -> str:
    """Why scoring stops while sample draws are unlabelled, and the two ways on (naming the
    option as the API takes it, or with ``cli`` as the command line does); ``ignored`` is
    :func:`ignored_only`."""
    from receval.errors import option_text

    return option_text(
        f"{draws} sample draws ({facts} distinct facts) have no label yet{ignored}; scoring now would "
        "bias the estimates (the unlabelled draws are typically the rarer facts): label them "
        "(to_annotate.tsv lists them; add the labels to judgments.tsv), or score anyway with "
        "{allow_pending=True}, which leaves them out and assumes their labels are missing at "
        "random",
        cli=cli,
    )


def universe_correct(run: BootstrapRun) -> tuple[float, np.ndarray]:
    """𝒴̂ = Ŷ / θ̂, the estimated number of correct facts in the universe (point, replicates).

    Ŷ is the Horvitz–Thompson estimate of the pool's correct facts from the judged draws, θ̂ the
    pool coverage from the exhaustive units (Chaganty et al. 2017); a consistent estimate, NaN
    where θ̂ is 0 or unknown.  The one place the ratio is formed.
    """
    theta = run.point["pool_coverage"][0]
    with np.errstate(invalid="ignore", divide="ignore"):
        reps = run.replicates["pool_correct"][:, 0] / run.replicates["pool_coverage"][:, 0]
        point = float(run.point["pool_correct"][0] / theta) if theta > 0 else np.nan
    return point, reps


def estimated_true_facts(
    task: Task, *, seed: int = 0, bootstrap: int = 400
) -> tuple[float, float, float] | None:
    """𝒴̂ with its 95% percentile bootstrap interval, ``(estimate, lower, upper)``; None where the
    task has no judged draws or no exhaustive unit with a correct fact.

    Draws still unlabelled are left out (as with ``allow_pending``): this feeds a recall axis,
    not a published estimate.
    """
    data = build_sample_data(task)
    if data.K == 0 or data.U == 0:
        return None
    options = ScoreOptions(
        bootstrap=bootstrap, seed=seed, allow_pending=True, intervals="bootstrap"
    )
    row = score_task(task, options).pool.set_index("quantity").loc["true_facts"]
    if not np.isfinite(row["estimate"]) or row["estimate"] <= 0:
        return None
    return float(row["estimate"]), float(row["lower"]), float(row["upper"])


def true_metrics(task: Task) -> pd.DataFrame | None:
    """True precision, pooled recall, recall and F1 per system from ``truth.tsv`` (None without it).

    Facts output by a system but absent from truth make the truth incomplete: then None.
    """
    if task.truth is None:
        return None
    if hasattr(task, "true_metrics"):  # the engine path: from the truth's memberships
        return task.true_metrics()
    from receval.estimators.classes import class_view, truth_classes

    canon = truth_classes(task)
    if canon is not None:  # the truth names classes: the true metrics count each class once
        task = class_view(task, canon)
    value = pd.Series(task.truth["value"].to_numpy(), index=task.truth["fact"].to_numpy())
    out = task.outputs
    labels = value.reindex(out["fact"]).to_numpy()
    if np.isnan(labels).any():
        return None
    frame = pd.DataFrame(
        {"system": out["system"].to_numpy(), "fact": out["fact"].to_numpy(), "label": labels}
    )
    pool_true = frame.loc[frame["label"] == 1, "fact"].nunique()
    universe_true = int((value == 1).sum())
    g = frame.groupby("system", observed=True)["label"]
    correct = g.sum()
    metrics = pd.DataFrame({"precision": g.mean()})
    metrics["pooled_recall"] = correct / pool_true if pool_true else np.nan
    metrics["recall"] = correct / universe_true if universe_true else np.nan
    metrics["f1"] = f1_score(metrics["precision"].to_numpy(), metrics["recall"].to_numpy())
    metrics.attrs["pool_coverage"] = pool_true / universe_true if universe_true else np.nan
    metrics.attrs["pool_correct"] = pool_true
    metrics.attrs["universe_correct"] = universe_true
    return metrics


@dataclass(frozen=True)
class Fitted:
    """One estimator fitted to a task: its context, terms, the shared bootstrap run and the
    interval method that turns it into intervals and comparisons."""

    ctx: ScoringContext
    estimator: Estimator
    intervals: Any  # an IntervalMethod
    terms: dict[str, np.ndarray]
    replicates: Replicates
    run: BootstrapRun
    ratio_form: np.ndarray  # (m,) bool: joint precision in the self-normalised form
    sizes: Any = None  # EffectiveSizes behind each system's numbers (reliability flags)

    @property
    def draw_layout(self) -> TermLayout:
        return self.estimator.layouts(self.ctx)["draws"]


def score_task(
    task: Task,
    options: ScoreOptions,
    replicates: Replicates | None = None,
    engine: Any = None,
) -> ScoringOutput:
    """Estimate every metric for every system of ``task`` with shared bootstrap replicates.

    Steps: check the options and the sample data (:func:`_sample_data`), fit the estimator with
    the shared bootstrap (:func:`fit`), write each system's notes, the metric columns with
    intervals, precision at the target recall, ranks / rank sets / tiers, then the pool table,
    the truth check and the run record.  A census estimator counts in ``engine``
    (:mod:`receval.engine`; None: the task's embedded DuckDB).
    """
    if not isinstance(options, CheckedOptions):  # a library caller's: checked here, once
        options = check_score_options(options)
    # intervals "auto": the bootstrap, or anytime after a top-up round (estimators/looking.py)
    options, chosen = resolve_intervals(task, options)
    estimator, method = pipeline_components(task, options)
    if not estimator.sample_based:
        out = estimator.score(task, options, engine)
        out.warnings[:0] = input_warnings(task)
        return out
    data, warnings = _sample_data(task, options)
    warnings[:0] = input_warnings(task) + ([chosen] if chosen else [])
    fitted = fit(ScoringContext(task, data, options), estimator, replicates, method)
    sizes = fitted.sizes
    notes = reliability_notes(sizes, data.census)
    _system_notes(fitted, notes, warnings)
    board = _metric_columns(fitted, notes, sizes)
    run = fitted.run
    point_metrics, rep_metrics = dict(run.point), dict(run.replicates)
    target_info = None
    if options.target_recall is not None:
        target_info = _target(fitted)
        _normalise_curves(target_info.curves, run, data, fitted.ratio_form)
        point_metrics["precision_at_target"] = target_info.point
        rep_metrics["precision_at_target"] = target_info.replicates
        _target_columns(board, target_info, fitted, notes)
    comparisons = _rank_columns(board, point_metrics, rep_metrics, fitted, notes)
    _missing_notes(board, rep_metrics, target_info is not None, notes)
    board = _finish_board(board, notes, fitted)
    if chosen and options.intervals == "anytime":
        board["interval"] = board["interval"] + CHOSEN_ANYTIME
    with pywarnings.catch_warnings():  # θ̂ without exhaustive units is NaN, said in `note`
        pywarnings.filterwarnings("ignore", "All-NaN slice", RuntimeWarning)
        pywarnings.filterwarnings("ignore", "Mean of empty slice", RuntimeWarning)
        pool = _pool_frame(fitted, sizes)
    parts = _record_parts(fitted, sizes, comparisons)
    for block in (estimator.record(fitted.ctx, run), looking_record(data, options, chosen)):
        if block is not None:
            parts = parts.replace(**{block.KEY: block})
    if target_info is not None:
        parts = parts.replace(**_target_blocks(task, data, options, target_info))
    return ScoringOutput(
        options=options,
        leaderboard=board,
        pool=pool,
        conflicts=task.merged.conflicts,
        truth_check=_truth_check(task, board, pool, options),
        warnings=warnings,
        run=run,
        replicates=fitted.replicates,
        record=parts,
        curves={} if target_info is None else target_info.curves,
    )


def input_warnings(task: Task) -> list[str]:
    """Warnings about the input runs that hold for every estimator (run.json ``warnings``)."""
    if not task.duplicate_rows:
        return []
    return [duplicate_rows_warning(task.duplicate_rows)]


def duplicate_rows_warning(rows: int) -> str:
    """The warning about ``rows`` input run rows collapsed into facts already output."""
    return (
        f"{rows} duplicate output row(s) collapsed: a system output the same fact "
        "more than once (the same answer again, or another spelling of it); each system's fact "
        "counts once, with its highest score"
    )


def _sample_data(task: Task, options: ScoreOptions) -> tuple[SampleData, list[str]]:
    """The task's sample arrays, after every check of the data that must pass before estimating."""
    warnings: list[str] = []
    build = getattr(task, "sample_data", None)  # the engine path's view builds its own
    data = build(options.target) if build else build_sample_data(task, options.target)
    if data.K == 0:
        from receval.errors import BundleError

        where = task.files.get("samples", task.root / "samples.tsv")
        raise BundleError(
            where,
            None,
            "no judged sample draws: the sample-based estimators need samples.tsv with labelled draws "
            "(run `receval sample`, annotate to_annotate.tsv, add the labels to judgments.tsv), "
            "or use --estimator official for a census of the judgments",
        )
    if data.unjudged_draws and not options.allow_pending:
        from receval.errors import BundleError

        raise BundleError(
            task.files.get("samples", task.root / "samples.tsv"),
            None,
            pending_message(data.unjudged_draws, data.unjudged_facts, ignored=ignored_only(task)),
            cli_message=pending_message(
                data.unjudged_draws, data.unjudged_facts, cli=True, ignored=ignored_only(task)
            ),
        )
    if data.unjudged_draws:
        warnings.append(
            f"{data.unjudged_draws} sample draws ({data.unjudged_facts} distinct facts) have no label yet and were "
            "left out; the estimates assume the missing labels are missing at random "
            "(annotate to_annotate.tsv to remove this caveat)"
        )
    return data, warnings


def _concrete_intervals(options: ScoreOptions) -> ScoreOptions:
    """``intervals='auto'`` from a direct caller means the bootstrap (:func:`score_task`
    resolves it first, from the bundle's rounds: :mod:`receval.estimators.looking`)."""
    if options.intervals == AUTO:
        return dataclasses.replace(options, intervals="bootstrap")
    return options


def pipeline_components(task: Task, options: ScoreOptions) -> tuple[Estimator, Any]:
    """The per-run components of a score run: a fresh estimator and interval method from the
    registry (their caches live as long as the run).  The estimator checks the task (e.g. a
    judge file); the options were checked once, by :func:`receval.options.check_score_options`."""
    options = _concrete_intervals(options)
    estimator = get_estimator(options.estimator)
    estimator.check(task, options)
    return estimator, get_interval_method(options.intervals)


def fit(
    ctx: ScoringContext,
    estimator: Estimator,
    replicates: Replicates | None = None,
    method: Any = None,
) -> Fitted:
    """Terms, replicates and the bootstrap run (joint precision in the chosen form per system);
    ``method`` is the run's interval method (None: a fresh one of ``options.intervals``)."""
    if ctx.options.intervals == AUTO:
        ctx = dataclasses.replace(ctx, options=_concrete_intervals(ctx.options))
    options = ctx.options
    stages = estimator.stages(ctx)
    terms = estimator.terms(ctx)
    rng = np.random.default_rng(options.seed)
    if method is None:
        method = get_interval_method(options.intervals)
    if replicates is None:  # a method that reads no replicates gets none (B = 0)
        B = options.bootstrap if method.needs_bootstrap else 0
        replicates = draw_replicates(stages, B, rng, seed=options.seed)
    run = run_bootstrap(
        stages, terms, estimator.statistic(ctx), replicates, jackknife=options.method == "BCa"
    )
    layout = estimator.layouts(ctx)["draws"]
    # chosen for every estimator: the curves at a target recall are normalised with it
    ratio_form = choose_precision_form(
        run, options.precision_form, ctx.data, terms["draws"], layout
    )
    if options.annotator_resampling:
        from receval.estimators.annotators import resample_annotators

        # a generator of its own: the resampling counts stay those of the default run
        labels_rng = np.random.default_rng([options.seed, 20])
        run = resample_annotators(ctx, estimator, run, replicates, labels_rng)
        ratio_form = choose_precision_form(
            run, options.precision_form, ctx.data, terms["draws"], layout
        )
    if estimator.precision_forms and ratio_form.any():
        run = reevaluate(run, estimator.statistic(ctx, ratio_form))
    # the draws each metric's variance rests on: intervals expanded for small samples
    sizes = estimator.effective_sizes(ctx, terms)
    run = dataclasses.replace(run, draws=metric_draws(sizes, run))
    return Fitted(ctx, estimator, method, terms, replicates, run, ratio_form, sizes)


def _system_notes(fitted: Fitted, notes: list[list[str]], warnings: list[str]) -> None:
    """Per-system notes and run warnings about the data (aliases, units, empty submissions)."""
    task, data, estimator = fitted.ctx.task, fitted.ctx.data, fitted.estimator
    m = data.m
    _class_warnings(data, estimator, warnings)
    warnings.extend(flag_looking(data, notes, fitted.intervals.name))
    warnings.extend(fitted.intervals.run_warnings(fitted.ctx))
    if mixed_unit_designs(task):
        warnings.append(MIXED_UNITS)
        for i in range(m):
            notes[i].append("recall: " + MIXED_UNITS)
    repeated = repeated_facts(task)
    if repeated:
        warnings.append(
            f"{repeated} correct facts were found in more than one exhaustive unit but exhaustive.tsv "
            "has no 'documents' column (the number of units supporting each fact): pool coverage "
            "then weights facts by how many units support them, not the fact-level share that "
            "pooled recall uses"
        )
    empty = data.sizes == 0
    if empty.any():
        warnings.append(
            f"{int(empty.sum())} empty submission(s) ({', '.join(np.array(data.systems)[empty])}): "
            "scored with precision undefined and recall 0"
        )
    for i in np.flatnonzero(empty):
        notes[i].append("empty submission (no outputs): precision undefined, recall 0")
    estimator.system_notes(fitted.ctx, notes)
    fitted.intervals.system_notes(fitted.ctx, notes)
    for i in np.flatnonzero(data.census & ~empty):
        notes[i].append("precision: census (every output judged): exact, no sampling interval")
    if data.U == 0:
        warnings.append(
            "no exhaustive units: true recall (pool coverage × pooled recall) cannot be estimated; "
            "pooled recall is reported (draw units with `receval sample --exhaustive-units M`)"
        )
        for i in range(m):
            notes[i].append("recall: no exhaustive units, pool coverage unknown")
    estimator.run_warnings(fitted.ctx, warnings)


def _metric_columns(fitted: Fitted, notes: list[list[str]], sizes) -> pd.DataFrame:
    """One row per system: counts, each metric with its interval, effective sample sizes."""
    task, data = fitted.ctx.task, fitted.ctx.data
    board = pd.DataFrame({"system": data.systems})
    board["team"] = board["system"].map(task.teams)
    board["outputs"] = data.sizes.astype(int)
    board["judged"] = data.judged.astype(int)
    for metric in METRICS:
        with pywarnings.catch_warnings():  # a metric nothing estimates: NaN, said in `note`
            pywarnings.filterwarnings("ignore", "All-NaN slice", RuntimeWarning)
            pywarnings.filterwarnings("ignore", "Mean of empty slice", RuntimeWarning)
            est = fitted.intervals.estimate(fitted.ctx, fitted.run, metric)
        board[metric] = est.point
        for i, text in est.notes.items():
            notes[i].append(text)
        board[f"{metric}_lo"] = est.lower
        board[f"{metric}_hi"] = est.upper
    if data.census.any():
        for col in ("precision_lo", "precision_hi"):
            board.loc[data.census, col] = board.loc[data.census, "precision"]
    _clip_and_flag(board, notes, data.census)
    board["precision_ess"] = np.round(np.where(data.census, np.nan, sizes.precision), 1)
    board["pooled_recall_ess"] = np.round(sizes.pooled_recall, 1)
    return board


def _target_columns(board: pd.DataFrame, target_info, fitted: Fitted, notes) -> None:
    """Precision at the target recall with its interval, method and Dimm back-test."""
    data = fitted.ctx.data
    draws = None if fitted.run.draws is None else fitted.run.draws["precision"]
    low, high = fitted.intervals.interval(
        fitted.ctx.options, target_info.point, target_info.replicates, draws=draws
    )
    board["precision_at_target"] = target_info.point
    board["precision_at_target_lo"] = low
    board["precision_at_target_hi"] = high
    board["precision_at_target_method"] = target_info.method
    # how far Dimm's curve through the system's end point strays from its own estimated
    # curve within ±0.15 recall (max |X − P|): large values say "do not trust the model here"
    board["precision_at_target_backtest"] = [
        target_info.details.get(name, {}).get("backtest_max_dev") for name in data.systems
    ]
    for i in range(data.m):
        notes[i].extend(target_info.notes[i])
        notes[i].extend(
            f"precision_at_target: {f}" for f in target_info.flags[i] if "recall distance" in f
        )


def _rank_columns(board, point_metrics, rep_metrics, fitted: Fitted, notes):
    """rank, the simultaneous rank sets and tiers from one family of pairwise comparisons
    (the interval method's)."""
    options = fitted.ctx.options
    key = options.rank_by
    if key not in point_metrics:
        raise ValueError(
            f"cannot rank by {key!r}: give --target-recall to rank by precision_at_target"
        )
    board["rank"] = replicate_ranks(point_metrics[key][None, :])[0]
    comparisons = fitted.intervals.comparisons(
        fitted.ctx, point_metrics[key], rep_metrics.get(key), key
    )
    with pywarnings.catch_warnings():  # a metric no replicate estimates (recall without units)
        pywarnings.filterwarnings("ignore", "All-NaN slice", RuntimeWarning)
        board["rank_lo"], board["rank_hi"] = rank_confidence_sets(comparisons, point_metrics[key])
    board.loc[np.isnan(point_metrics[key]), ["rank", "rank_lo", "rank_hi"]] = np.nan
    for i in np.flatnonzero(np.isnan(point_metrics[key])):
        notes[i].append(f"rank: {key} cannot be estimated")
    tiers = significance_tiers(
        point_metrics[key], rep_metrics[key], level=options.confidence, comparisons=comparisons
    )
    board["tier"] = [str(t) if t else "" for t in tiers]
    return comparisons


def _missing_notes(board: pd.DataFrame, rep_metrics, with_target: bool, notes) -> None:
    """Say why a metric or its interval is missing."""
    for metric in (*METRICS, *(["precision_at_target"] if with_target else [])):
        missing = board[metric].isna().to_numpy()
        for i in np.flatnonzero(missing):
            if not any(n.startswith(metric.split("_")[0]) for n in notes[i]):
                notes[i].append(f"{metric}: cannot be estimated from the available labels")
        no_interval = ~missing & board[f"{metric}_lo"].isna().to_numpy()
        for i in np.flatnonzero(no_interval):
            share = float(np.isnan(rep_metrics[metric][:, i]).mean())
            if not any(n.startswith(f"{metric}: no interval") for n in notes[i]):
                notes[i].append(
                    f"{metric}: no interval: {share:.1%} of the bootstrap replicates cannot be evaluated "
                    "(too few labels for a stable interval)"
                )


#: the ``note`` of every system scored with ``target="macro"``
MACRO_NOTE = (
    "precision macro-averaged (every query the system answered weighs the same; --target macro); "
    "recall micro"
)


def _mark_macro(board: pd.DataFrame, notes: list[list[str]]) -> None:
    """Say in ``estimator``, ``interval`` and ``note`` that precision is a macro average."""
    board["estimator"] = board["estimator"] + " (macro)"
    board["interval"] = board["interval"] + " (target macro)"
    for system_notes in notes:
        system_notes.insert(0, MACRO_NOTE)


def _finish_board(board: pd.DataFrame, notes: list[list[str]], fitted: Fitted) -> pd.DataFrame:
    """The leaderboard in rank order with the contract columns and the notes."""
    board["estimator"] = fitted.estimator.name
    board["interval"] = (
        fitted.intervals.label(fitted.ctx.options, fitted.replicates.B)
        + fitted.estimator.interval_note
    )
    if fitted.ctx.options.target == "macro":
        _mark_macro(board, notes)
    board["note"] = ["; ".join(n) for n in notes]
    board = board.sort_values(["rank", "system"], na_position="last", kind="stable").reset_index(
        drop=True
    )
    board["best_of_team"] = best_per_team(board).to_numpy()
    target_cols = [c for c in board.columns if c.startswith("precision_at_target")]
    board = board[
        [
            *LEADERBOARD_COLUMNS,
            *target_cols,
            "best_of_team",
            "precision_ess",
            "pooled_recall_ess",
            "estimator",
            "interval",
            "note",
        ]
    ]

    return board


def _record_parts(fitted: Fitted, sizes, comparisons) -> RecordParts:
    """The scoring stage's blocks of the run record (``run.json``) for a sample-based run:
    options, bootstrap, design, ranking, and what the interval method records."""
    data, options = fitted.ctx.data, fitted.ctx.options
    bootstrap = BootstrapBlock(
        B=fitted.replicates.B,
        seed=options.seed,
        method=options.method,
        level=options.confidence,
        clusters="queries" if options.cluster_queries else None,
        labels=_labels_info(options),
    )
    ranking = _ranking_block(options, comparisons)
    caveat = small_sample_caveat(options.tiers, data, round(1 - options.confidence, 12))
    if caveat and fitted.intervals.needs_bootstrap:  # the step-down tests' caveat
        ranking = ranking.replace(small_sample=caveat)
    parts = RecordParts(
        options=OptionsBlock.of(options),
        bootstrap=bootstrap,
        design=_design_block(fitted, sizes),
        ranking=ranking,
    )
    return _with_interval_record(parts, fitted.intervals.record(fitted.ctx))


def _design_block(fitted: Fitted, sizes) -> DesignBlock:
    """The ``design`` block of ``run.json``: samplers, draws, units, precision forms, weights."""
    task, data = fitted.ctx.task, fitted.ctx.data
    ratio_form = fitted.ratio_form
    return DesignBlock(
        samplers=len(data.sampler_names),
        draws_judged=data.K,
        draws_unjudged=data.unjudged_draws,
        drawn_facts=int(data.facts.size),
        exhaustive_units=data.U,
        designs=tuple(sorted(set(data.sampler_design))),
        precision_forms={
            name: ("census" if data.census[i] else "ratio" if ratio_form[i] else "unbiased")
            for i, name in enumerate(data.systems)
        }
        if fitted.estimator.precision_forms
        else None,
        unit_weights="Hansen-Hurwitz draws/prob (pps-wr) or Horvitz-Thompson 1/prob "
        "(prob = inclusion probability) or uniform",
        fact_multiplicity="exhaustive.tsv documents column (1/d weights)"
        if "documents" in task.exhaustive.columns
        else None,
        effective_sizes={
            "pool_coverage": round(sizes.pool_coverage, 1),
            "pooled_recall_denominator": round(sizes.pooled_recall_den, 1),
        },
    )


def _ranking_block(options, comparisons) -> RankingBlock:
    """The ``ranking`` block of ``run.json``: the tier procedure, its guarantee and rank sets."""
    return RankingBlock(
        by=options.rank_by,
        tiers=comparisons.describe(),
        procedure=options.tiers,
        why="one simultaneous family of pairwise tests gives tiers and rank sets whose "
        "family-wise error is at most alpha; marginal bootstrap p-values that can be 0 let "
        "Holm split equally good systems into several tiers"
        if options.tiers == "stepdown"
        else "marginal tests chosen with --tiers; no simultaneous guarantee for rank sets"
        if options.tiers == "bh"
        else "marginal tests with Holm's correction (never-zero p-values), chosen with --tiers",
        alpha=round(1 - options.confidence, 12),
        B=comparisons.B,
        replicates_dropped=comparisons.dropped,
        rank_sets="simultaneous rank confidence sets from the same pairwise comparisons "
        "(Mogstad, Romano, Shaikh & Wilhelm 2024): rank_lo = 1 + #significantly better, "
        "rank_hi = S - #significantly worse"
        if options.tiers != "bh"
        else "rank sets from BH-corrected comparisons: no simultaneous coverage guarantee",
        rank="1 + number of systems with a strictly larger estimate",
    )


def _with_interval_record(parts: RecordParts, record: IntervalRecord | None) -> RecordParts:
    """The parts with what a non-bootstrap interval method records: its ``intervals`` block,
    and the ``ranking`` and ``bootstrap`` fields it sets."""
    if record is None:
        return parts
    return parts.replace(
        intervals=record.intervals,
        ranking=parts.ranking.replace(**record.ranking),
        bootstrap=parts.bootstrap.replace(**record.bootstrap),
    )


#: below this many judged own draws per system the max-t step-down's family-wise error was
#: measured above nominal (0.07–0.11 at n = 50 in a fixed null world, 0.05 by n = 200;
#: bench/topup.py --design equal)
STEPDOWN_ASYMPTOTIC_N = 200


def small_sample_caveat(procedure: str, data: SampleData, alpha: float) -> str:
    """A sentence for run.json and the report when the step-down tests rest on small samples
    ('' otherwise): their family-wise error bound is asymptotic (Romano & Wolf 2005, thm. 3)."""
    if procedure != "stepdown" or data.K == 0:
        return ""
    own = np.bincount(data.sampler_system, weights=data.sampler_n, minlength=data.m)
    sampled = own[(own > 0) & ~data.census]
    if sampled.size == 0 or sampled.min() >= STEPDOWN_ASYMPTOTIC_N:
        return ""
    return (
        f"the smallest system sample has {int(sampled.min())} judged draws (< "
        f"{STEPDOWN_ASYMPTOTIC_N}): the step-down's family-wise error <= {alpha:g} holds "
        "asymptotically; in simulated worlds of equally good systems with 50 draws each it "
        "measured 0.06-0.11 at a nominal 0.05, so a tier boundary between close systems may be "
        "a false split"
    )


def _labels_info(options: ScoreOptions) -> str:
    """What the intervals are about with respect to the labels (run.json ``bootstrap.labels``)."""
    if options.annotator_resampling:
        return (
            "widened by annotator disagreement: each fact's votes resampled with replacement and "
            "merged again in every replicate (centred on the merged labels); a merge rule's bias "
            "(a fact most annotators get wrong) is not corrected"
        )
    return (
        "conditional on the merged labels: the merged label of each fact is taken as the truth; "
        "annotator disagreement is not in the intervals (--annotator-resampling adds it)"
    )


def _target_blocks(task: Task, data: SampleData, options: ScoreOptions, target_info) -> dict:
    """The target-recall stage's blocks of the run record: ``target`` and ``curves``."""
    from receval.estimators.target import BACKTEST_LIMIT

    target = TargetBlock(
        recall=options.target_recall,
        prevalence=options.prevalence
        if options.prevalence is not None
        else (target_info.prevalence if task.config.universe_size else None),
        prevalence_source="--prevalence"
        if options.prevalence is not None
        else ("[universe] size" if task.config.universe_size else None),
        universe_size=task.config.universe_size,
        backtest_limit=BACKTEST_LIMIT,
        systems={name: SystemTarget.from_json(d) for name, d in target_info.details.items()},
    )
    curves = {
        name: CurveRecord(
            method="sample",
            kind="interval",
            guarantee=f"percentile bootstrap {options.confidence:.0%} interval of the importance-weighted "
            "precision of the top k (Ĉ(k)/k) from the judged draws that hit this system's output",
            size=int(data.sizes[data.systems.index(name)]),
            annotations=len(curve),
            flags=(),
        )
        for name, curve in target_info.curves.items()
    }
    return {"target": target, "curves": curves}


def _target(fitted: Fitted):
    from receval.estimators.target import precision_at_target

    task, data, options, run = fitted.ctx.task, fitted.ctx.data, fitted.ctx.options, fitted.run
    universe_point, universe_reps = universe_correct(run)
    draws = next(s for s in fitted.estimator.stages(fitted.ctx) if s.name == "draws")
    return precision_at_target(
        data,
        task.outputs,
        row_weights(draws, fitted.replicates),
        fitted.terms["draws"][:, fitted.draw_layout["pooled_num"]],
        universe_point,
        universe_reps,
        run.point["recall"],
        run.replicates["recall"],
        run.point["precision"],
        run.replicates["precision"],
        options.target_recall,
        task.config.universe_size,
        prevalence=options.prevalence,
        level=options.confidence,
    )


def _true_facts_row(fitted: Fitted, interval: str) -> dict:
    """pool.csv's ``true_facts`` row: 𝒴̂ = Ŷ/θ̂ with its interval (no jackknife: BCa falls
    back to percentile)."""
    universe, universe_reps = universe_correct(fitted.run)
    draws = None if fitted.run.draws is None else fitted.run.draws["pool_coverage"]
    low, high = fitted.intervals.interval(
        fitted.ctx.options,
        np.array([universe]),
        universe_reps[:, None],
        bounds=(0.0, np.inf),
        draws=draws,  # θ̂'s units: Ŷ's draws are many more
    )
    return {
        "quantity": "true_facts",
        "estimate": universe,
        "lower": low[0],
        "upper": high[0],
        "kind": "estimate",
        "interval": interval.replace("BCa", "percentile"),
        "description": "estimated correct facts in the universe (pool correct / θ̂)",
        "note": "" if np.isfinite(universe) else "pool coverage unknown or zero",
    }


def _pool_frame(fitted: Fitted, sizes=None) -> pd.DataFrame:
    task, data, run = fitted.ctx.task, fitted.ctx.data, fitted.run
    interval = fitted.intervals.label(fitted.ctx.options, fitted.replicates.B)
    rows = []
    for name, what in (
        ("pool_coverage", "θ̂: share of correct facts that some system output"),
        ("pool_correct", "estimated correct facts in the (sampled) pool"),
    ):
        bounds = (0.0, 1.0) if name == "pool_coverage" else (0.0, np.inf)
        est = fitted.intervals.estimate(fitted.ctx, run, name, bounds)
        note = est.notes.get(0, "")
        if name == "pool_coverage" and data.U == 0:
            note = "no exhaustive units"
        elif name == "pool_coverage" and sizes is not None:
            note = "; ".join(filter(None, [note, pool_notes(sizes)]))
        if name == "pool_coverage" and mixed_unit_designs(task):
            note = "; ".join(filter(None, [note, MIXED_UNITS]))
        rows.append(
            {
                "quantity": name,
                "estimate": est.point[0],
                "lower": est.lower[0],
                "upper": est.upper[0],
                "kind": "estimate",
                "interval": interval,
                "description": what,
                "note": note,
            }
        )
    rows.append(_true_facts_row(fitted, interval))
    counts = {
        "pool_size": (task.pool_size, "distinct facts output by some system"),
        "exhaustive_units": (len(set(data.unit_names)), "units annotated exhaustively"),
        "exhaustive_facts": (int(data.unit_found.sum()), "correct facts found in them"),
        "exhaustive_facts_in_pool": (int(data.unit_pooled.sum()), "of which some system output"),
    }
    if sizes is not None:
        counts["pool_coverage_ess"] = (
            round(sizes.pool_coverage, 1),
            "effective sample size (Kish) of pool coverage's denominator over exhaustive units",
        )
        counts["pooled_recall_ess"] = (
            round(sizes.pooled_recall_den, 1),
            "effective sample size (Kish) of pooled recall's denominator over judged-correct draws",
        )
    for name, (value, what) in counts.items():
        rows.append(
            {
                "quantity": name,
                "estimate": value,
                "lower": value,
                "upper": value,
                "kind": "count",
                "interval": "",
                "description": what,
                "note": "",
            }
        )
    return pd.DataFrame(rows)


MIXED_UNITS = (
    "flagged: exhaustive_units.tsv mixes units without prob (uniform, weight 1) and units with "
    "prob (weighted): their weights are on different scales, so pool coverage is not a valid "
    "estimate (give every unit its inclusion probability, or score the rounds separately)"
)


def mixed_unit_designs(task: Task) -> bool:
    """Whether some exhaustive units have a ``prob`` and others have none."""
    units = task.exhaustive_units
    if not len(units) or "prob" not in units.columns:
        return False
    missing = pd.to_numeric(units["prob"], errors="coerce").isna().to_numpy()
    return bool(missing.any() and not missing.all())


def _class_warnings(data: SampleData, estimator: Estimator, warnings: list[str]) -> None:
    """Say that equivalence classes are counted once, and how many outputs could be aliases
    that no judgment names (:mod:`receval.estimators.classes`)."""
    if not data.aliased_classes:
        return
    classes, unresolved = data.aliased_classes, data.unresolved_outputs
    text = (
        f"{classes} equivalence classes in the judgments hold more than one correct fact: every "
        "estimator counts a class once (TAC's rule: a second alias output by a system is a "
        "redundant duplicate, ignored; the pool and pool coverage count classes)"
    )
    if unresolved:
        text += (
            f"; {unresolved} unjudged outputs of those queries could be aliases nobody classed "
            "(each counts as a fact of its own, which over-states precision and recall if it is "
            "one): give every alias of a judged correct answer its equivalence_class"
        )
        text += estimator.class_caveat()
    warnings.append(text)


#: truth_check tolerance: estimates and truths are sums of up to ~1e7 float64 terms, so their
#: rounding differs by at most ~1e7 · 2⁻⁵³ ≈ 1e-9 in relative terms
COVER_TOLERANCE = 1e-9


def covers_truth(lo: float, hi: float, true: float) -> bool | None:
    """Whether [lo, hi] holds ``true`` up to :data:`COVER_TOLERANCE` (None without an interval)."""
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return None
    tol = COVER_TOLERANCE * max(1.0, abs(true))
    return bool(lo - tol <= true <= hi + tol)


def _stratified_variance(values: np.ndarray, strata: np.ndarray) -> np.ndarray:
    """Σ_s n_s · Var_s(values) (columns): the variance of a sum of i.i.d. draws per stratum."""
    J = int(strata.max()) + 1 if strata.size else 0
    n = np.bincount(strata, minlength=J).astype(float)[:, None]
    s1 = np.zeros((J, values.shape[1]))
    s2 = np.zeros((J, values.shape[1]))
    np.add.at(s1, strata, values)
    np.add.at(s2, strata, values**2)
    with np.errstate(invalid="ignore", divide="ignore"):
        var = np.where(n > 0, s2 / np.maximum(n, 1) - (s1 / np.maximum(n, 1)) ** 2, 0.0)
    return (n * np.maximum(var, 0.0)).sum(axis=0)


def choose_precision_form(
    run: BootstrapRun,
    form: str,
    data: SampleData,
    draw_terms: np.ndarray | None = None,
    layout: TermLayout | None = None,
) -> np.ndarray:
    """Which systems get the self-normalised joint precision (m,) bool.

    ``unbiased``: none (Σ t f/q, unbiased, can leave [0, 1]); ``ratio``: all (Σ t f/q / Σ t/q,
    within [0, 1], consistent); ``auto`` (default): the unbiased form, except for systems where
    it is not range-respecting — its estimate ± 1.96 standard errors leaves [0, 1] (precision near
    0 or 1, few draws) — which get the ratio (every system gets it when equivalence classes
    leave |X_i| unknown: ``data.sizes_known``); ``min-variance``: per system the form with the
    smaller estimated variance (in bench/validity.py choosing on the estimated variance cost
    1–2 points of coverage: the chosen form's variance tends to be the underestimated one, so
    it is not the default).  The standard errors come from the draws themselves, not the
    bootstrap, so the choice (and every point estimate) does not depend on the resampling plan:
    Σ_j n_j Var_j(term) for the sum (Chaganty et al. 2017, Theorem 1) and the same for the
    ratio's linearisation (term − π̂ · mass) / M̂ (delta method).  Recorded per system in
    run.json (``precision_forms``).
    """
    if form not in PRECISION_FORMS:
        raise ValueError(f"unknown precision form {form!r} (known: {', '.join(PRECISION_FORMS)})")
    m = data.m
    if form == "unbiased":
        return np.zeros(m, bool)
    if form == "ratio" or not data.sizes_known:
        return np.ones(m, bool)
    point = run.point["precision_unbiased"]
    if draw_terms is None or layout is None or not draw_terms.size:
        with np.errstate(invalid="ignore"):
            var_u = np.nanvar(run.replicates["precision_unbiased"], axis=0)
            var_r = np.nanvar(run.replicates["precision_ratio"], axis=0)
    else:
        joint, mass = draw_terms[:, layout["joint"]], draw_terms[:, layout["mass"]]
        total = mass.sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio_point = joint.sum(axis=0) / total
            linear = (joint - ratio_point * mass) / total
        var_u = _stratified_variance(np.nan_to_num(joint), data.draw_sampler)
        var_r = _stratified_variance(np.nan_to_num(linear), data.draw_sampler)
        var_r = np.where(np.isfinite(ratio_point), var_r, np.nan)
    outside = (point < 0) | (point > 1)
    if form == "auto":
        half = 1.96 * np.sqrt(np.nan_to_num(var_u))
        outside |= (point - half < 0) | (point + half > 1)
        return np.where(np.isnan(var_r), False, outside)
    return np.where(np.isnan(var_r), False, (var_r <= var_u) | np.isnan(var_u) | outside)


def _normalise_curves(curves: dict, run: BootstrapRun, data: SampleData, ratio: np.ndarray) -> None:
    """Self-normalise the curves of systems whose precision uses the ratio form.

    The curve's Ĉ(k)/k uses the unbiased weights; dividing by the same system's mass estimate
    Σ t/q (which estimates 1) makes it the self-normalised curve, so it still ends at the
    leaderboard's precision.  The factor is the full-sample one (intervals are scaled with it).
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        factor = run.point["precision_ratio"] / run.point["precision_unbiased"]
    for i, name in enumerate(data.systems):
        if name in curves and ratio[i] and not data.census[i] and np.isfinite(factor[i]):
            curve = curves[name]
            for col in ("precision", "lower", "upper"):
                if col in curve:
                    curve[col] = np.clip(curve[col] * factor[i], 0.0, 1.0)


def _clip_and_flag(board: pd.DataFrame, notes: list[list[str]], census: np.ndarray) -> None:
    """Clip printed precision to [0, 1] and flag intervals that collapsed to a point."""
    for metric in METRICS:
        cols = [metric, f"{metric}_lo", f"{metric}_hi"]
        raw = board[cols].to_numpy(float)
        clipped = np.clip(raw, 0.0, 1.0)
        outside = ~np.isnan(raw) & (raw != clipped)
        for i in np.flatnonzero(outside[:, 0]):
            notes[i].append(f"{metric}: estimate {raw[i, 0]:.3f} clipped to [0, 1]")
        board[cols] = clipped
        lo, hi = clipped[:, 1], clipped[:, 2]
        collapsed = ~np.isnan(lo) & (lo == hi)
        if metric == "precision":
            collapsed &= ~census
        for i in np.flatnonzero(collapsed):
            if not any(n.startswith(f"{metric}: flagged") for n in notes[i]):
                notes[i].append(
                    f"{metric}: flagged: the interval collapsed to a point (every bootstrap "
                    "replicate gives the same value): not a confidence interval"
                )


def _truth_check(
    task: Task, board: pd.DataFrame, pool: pd.DataFrame, options: ScoreOptions
) -> pd.DataFrame | None:
    truth = true_metrics(task)
    if truth is None:
        return None
    rows = []
    for _, r in board.iterrows():
        for metric in METRICS:
            true = float(truth.loc[r["system"], metric])
            est = r[metric]
            lo, hi = r[f"{metric}_lo"], r[f"{metric}_hi"]
            rows.append(
                {
                    "system": r["system"],
                    "metric": metric,
                    "true": true,
                    "estimate": est,
                    "error": est - true,
                    "lower": lo,
                    "upper": hi,
                    "covered": covers_truth(lo, hi, true),
                }
            )
    theta_row = pool[pool["quantity"] == "pool_coverage"].iloc[0]
    true_theta = truth.attrs["pool_coverage"]
    rows.append(
        {
            "system": "(pool)",
            "metric": "pool_coverage",
            "true": true_theta,
            "estimate": theta_row["estimate"],
            "error": theta_row["estimate"] - true_theta,
            "lower": theta_row["lower"],
            "upper": theta_row["upper"],
            "covered": covers_truth(theta_row["lower"], theta_row["upper"], true_theta),
        }
    )
    return pd.DataFrame(rows)
