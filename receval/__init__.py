"""receval: fair, label-efficient evaluation of many systems in shared tasks.

The public API (scipy.stats-like: plain functions, frozen results, options checked up front):

Tasks
    load_task(path)                 read and validate a task bundle folder -> Task
    Bundle(path)                    the folder's owner: .load() -> Task, locked writers
                                    (.record_round, .add_judgments, .add_units, .append), .engine()
    Task.from_frames(runs=, ...)    build a Task from pandas/Arrow tables, no files
    BundleError                     bad input: "<file>:<line>: <what is wrong>"

Scoring
    score(task, options=None, **fields) -> ScoreResult     fields of ScoreOptions: estimator=,
          intervals=, bootstrap=, confidence=, method=, seed=, target_recall=, rank_by=, ...
        .leaderboard .pool .conflicts .per_query .annotation .pooling_bias .truth_check
        .curves .run (RunRecord, written as run.json) .write(out_dir) (one atomic output set)

Annotation
    sample(task, per_system, *, seed=, ...) -> SampleRound   draw a sample round
    sample_round(bundle, per_system, *, seed=, ...)         draw and record one, under the lock
    plan_sample(task, target_width, ...) -> DataFrame      adaptive per-system sizes

Precision curves of ranked lists (Sabharwal & Sedghi 2017, Sabharwal & Xue 2018)
    curve_method(name, **params) -> CurveMethod   plan(size, labels) / estimate(size, labels)
    run_curve(method, size, oracle) -> CurveEstimate
    curve_budget(method, size, ...) -> dict       labels needed, without labels

Bundle operations (one per CLI command; receval.operations)
    validate(task) -> Validation                    counts, designs, agreement, conflicts
    budget(task, total, ...) -> DataFrame           half-widths for `total` more draws
    add_judgments(task, files, ...) -> AddResult    label files into judgments.tsv
    export_label_studio(task, out) -> Exported      pending facts as Label Studio tasks
    import_trec(out, runs, qrels=...) / import_tac_kbp(out, runs, ...) -> Imported
    curve_plan(task, system, method, ...) -> CurvePlan       next curve batch (written)
    curve_estimate(task, system, method, ...) -> SystemCurve  the curve with its bounds

Extrapolation and simulation
    extrapolate(precision, recall, prevalence, target) -> ExtrapolationResult   (Dimm 2015)
    simulate(out, *, seed=, **config) -> Path     synthetic bundle with ground truth

Heavy modules are imported on first use, so ``import receval`` and the CLI start fast.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "load_task": ("receval.task", "load_task"),
    "Task": ("receval.task", "Task"),
    "Bundle": ("receval.bundle", "Bundle"),
    "BundleError": ("receval.errors", "BundleError"),
    "score": ("receval.api", "score"),
    "ScoreResult": ("receval.api", "ScoreResult"),
    "RunRecord": ("receval.run_record", "RunRecord"),
    "ScoreOptions": ("receval.options", "ScoreOptions"),
    "sample": ("receval.api", "sample"),
    "sample_round": ("receval.api", "sample_round"),
    "plan_sample": ("receval.api", "plan_sample"),
    "simulate": ("receval.api", "simulate"),
    "extrapolate": ("receval.api", "extrapolate"),
    "curve_method": ("receval.curves", "make_method"),
    "run_curve": ("receval.curves", "run_to_completion"),
    "curve_budget": ("receval.curves", "curve_budget"),
    "validate": ("receval.operations", "validate"),
    "budget": ("receval.operations", "budget"),
    "add_judgments": ("receval.judgments", "add_judgments"),
    "export_label_studio": ("receval.operations", "export_label_studio"),
    "import_trec": ("receval.operations", "import_trec"),
    "import_tac_kbp": ("receval.operations", "import_tac_kbp"),
    "curve_plan": ("receval.operations", "curve_plan"),
    "curve_estimate": ("receval.operations", "curve_estimate"),
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    try:
        module, attribute = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'receval' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
