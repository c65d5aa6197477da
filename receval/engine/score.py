"""``score`` on the engine path: the whole output set of a Parquet bundle from SQL aggregates,
in memory that does not grow with the number of output rows.

:func:`engine_view` decides and builds: a :class:`BundleView` (the :class:`~receval.task.Task`
the scoring pipeline reads, without a single output row) whose sample arrays
(:mod:`receval.engine.sampled_data`) and diagnostics come from three aggregations over the runs
(:mod:`receval.engine.summary`).  :func:`receval.api.score` then runs the same estimators,
intervals, ranks and writers as on the in-memory path: the files are the same (tests compare
them byte for byte); ``run.json`` adds ``engine_path``.

When: the runs are Parquet and either ``out_of_core=True`` (``--out-of-core``), or nothing was
said and they hold at least :data:`ENGINE_PATH_ROWS` rows (Parquet metadata: free to read).
What the engine path scores: the ``joint``, ``simple`` and ``ppi`` estimators (the judge table
read by the engine, :mod:`receval.engine.judge`; rounds of every design below:
:mod:`receval.engine.judge_designs`; with anytime intervals the streams' judge maps too,
:mod:`receval.engine.judge_anytime`) with bootstrap intervals
(every ``--method``, ``--target``, ``--cluster-queries``, ``--rank-by``, ``--tiers``,
``--replicates``) or anytime intervals (``--intervals anytime``, ``anytime-asymptotic``, and
``auto`` when it resolves to them: the pool's popularity strata come from one more aggregation,
:mod:`receval.engine.popularity`), with exhaustive units (true recall θ̂·ν̂: the units' facts
join the membership aggregation), ``--until-decided`` rounds (their floor draws' q₀ from the
drawn facts' memberships), equivalence classes in the judgments (each class counted once:
:func:`summarise_classes`, :func:`receval.engine.sampled_data.class_tables`; the official
pooling-bias counts per class: :func:`official_counts_classed`), ``truth.tsv`` (the true
metrics from the truth facts' memberships), entity-relation rounds (their design inferred and
checked as the loader does: :func:`receval.engine.sampled_data.samplers_of`), ``--by-judge``
rounds (their judge-strata design from the judge's levels: :mod:`receval.engine.strata`),
anytime intervals with classes and entity-relation rounds (:func:`stream_designs`),
``conflicts.csv`` with the loader's fact ids (:func:`loader_fact_ids`), and ``--estimator
ppi`` with the judge audit (the judge table read by the engine: :mod:`receval.engine.judge`).
Not: the ``judge-uncertainty`` design, rounds drawn ``--by-judge`` by several judges with
anytime intervals, ``--weighting overlap``, ``--target-recall``,
``--annotator-resampling`` or other estimators (:func:`unsupported` names the first one met:
an error with ``--out-of-core``; at size without it, the in-memory path with a run warning,
:data:`IN_MEMORY_AT_SIZE`).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from receval.engine.sampled_data import SmallTablesView

if TYPE_CHECKING:
    from receval.engine.base import Engine
    from receval.engine.sampled_data import Classes, SmallTables
    from receval.engine.summary import RunSummary
    from receval.estimators.sample_data import SampleData

#: from this many Parquet run rows on, ``score`` takes the engine path unless told otherwise
ENGINE_PATH_ROWS = 10_000_000
#: the estimators the engine path scores
ENGINE_ESTIMATORS = ("joint", "simple", "ppi")
#: the interval methods the engine path computes (``auto`` resolves to one of them)
ENGINE_INTERVALS = ("auto", "bootstrap", "anytime", "anytime-asymptotic")
#: the anytime ones (they read the pool's popularity strata)
ANYTIME = ("anytime", "anytime-asymptotic")

NO_ROWS = (
    "the engine path holds no output rows (score --out-of-core): {what} is not available; "
    "score with --in-memory"
)


@dataclass(frozen=True, eq=False)
class BundleView(SmallTablesView):
    """What the scoring pipeline reads of a task, from a bundle's small tables and its runs'
    aggregates: ``outputs``, ``raw_outputs`` and ``facts`` raise instead of loading."""

    root: Path
    small: SmallTables = field(repr=False)
    summary: RunSummary = field(repr=False)
    engine_name: str = "duckdb"
    #: the anytime intervals' strata (:func:`popularity_cells`): the per (system, query,
    #: stratum) facts and each design's floor (by name); None when not asked
    popularity: tuple[pd.DataFrame, dict[str, float]] | None = field(default=None, repr=False)
    #: the judgments' equivalence classes (:func:`summarise_classes`), None without any
    classes: Classes | None = field(default=None, repr=False)
    #: the loader's fact id of each conflicting judged fact (:func:`loader_fact_ids`), indexed
    #: by its small-table id: conflicts.csv's ``fact`` as the in-memory path numbers it
    conflict_ids: pd.Series | None = field(default=None, repr=False)
    #: the judge table read by the engine (:mod:`receval.engine.judge`); None without one
    engine_judge: Any = field(default=None, repr=False)

    @property
    def judge(self) -> Any:
        """The judge (its table's rows: ``len``), read by the engine; None without one."""
        return self.engine_judge

    @property
    def truth(self) -> pd.DataFrame | None:
        return self.small.truth

    def true_metrics(self) -> pd.DataFrame | None:
        """The true metrics against ``truth.tsv``
        (:func:`receval.engine.sampled_data.true_metrics`, what
        :func:`receval.scoring.true_metrics` computes from the output rows)."""
        from receval.engine.sampled_data import true_metrics

        return true_metrics(self.small, self.summary)

    @property
    def exhaustive_units(self) -> pd.DataFrame:
        return self.small.exhaustive_units

    @property
    def exhaustive(self) -> pd.DataFrame:
        return self.small.exhaustive

    @property
    def samples_source(self) -> Path:
        return self.small.samples_path

    @property
    def systems(self) -> list[str]:
        return self.summary.systems

    @property
    def teams(self) -> dict[str, str]:
        return self.summary.teams

    @property
    def empty_systems(self) -> tuple[str, ...]:
        return tuple(s for s, n in zip(self.systems, self.summary.rows, strict=True) if n == 0)

    @property
    def duplicate_rows(self) -> int:
        return self.summary.duplicate_rows

    @property
    def pool_size(self) -> int:
        return self.summary.pool_size

    @cached_property
    def merged(self):
        """The merged labels (small-table fact ids), the conflicts numbered as the loader
        numbers facts (:attr:`conflict_ids`)."""
        import dataclasses

        from receval.engine.sampled_data import merged_labels

        merged = merged_labels(self.small)
        if self.conflict_ids is None or not len(merged.conflicts):
            return merged
        conflicts = merged.conflicts.copy()
        conflicts["fact"] = self.conflict_ids.reindex(conflicts["fact"]).to_numpy(np.int64)
        return dataclasses.replace(merged, conflicts=conflicts)

    @property
    def labels(self) -> pd.Series:
        return self.merged.labels

    @cached_property
    def designs(self):
        """s_j(x) of the rounds' designs (:class:`receval.engine.sampled_data.EngineDesigns`;
        a ``judge-strata`` design's levels from :attr:`engine_judge`'s session)."""
        from receval.engine.sampled_data import EngineDesigns

        designs = EngineDesigns(self.small, self.summary, self.engine_judge, judge_batches(self))
        if self.engine_judge is not None:  # ppi's sums over other designs than uniform
            self.engine_judge.designs = designs
        return designs

    @cached_property
    def samplers(self) -> list:
        from receval.engine.sampled_data import samplers_of

        return samplers_of(self.small, self.summary, self.designs)

    def stream_designs(self, data: SampleData) -> tuple[dict, Any]:
        """The anytime stream's design arrays and popularity strata
        (:func:`stream_designs`), read by :func:`receval.estimators.anytime.stream.build_stream`
        instead of the output rows."""
        return stream_designs(self, data)

    def judge_stream_controls(self, data: SampleData, st: Any, strata: int):
        """The judge's stream maps and their sums over the runs for the anytime streams
        (:func:`receval.engine.judge_anytime.stream_controls`), read by
        :func:`receval.estimators.judge_stream.judged_terms` instead of the output rows."""
        from receval.engine.judge_anytime import stream_controls

        return stream_controls(self, data, st, strata)

    def floor_probabilities(self, design: str, facts: np.ndarray) -> np.ndarray:
        """q₀(x) = (1/m) Σ_j p_j(x) of the drawn facts ``facts`` (small-table fact ids) under
        ``design`` (:func:`receval.estimators.anytime.stream.drawn_floor_probabilities`,
        what ``--until-decided`` records as ``mixture_prob``), from their memberships."""
        summary = self.summary
        members = summary.members
        codes = pd.Index(summary.systems).get_indexer(members["system"])
        fact = members["fact"].to_numpy(np.int64)
        if design == "uniform":
            p = (1.0 / np.maximum(summary.sizes, 1))[codes]
        else:  # the design's probability of each member (the drawn strings: no classes)
            p = self.designs.at_function(design)(codes, fact)
        per_fact = np.bincount(fact, weights=p, minlength=len(self.small.facts))
        alive = max(int((summary.rows > 0).sum()), 1)
        return per_fact[np.asarray(facts, np.int64)] / alive

    def sample_data(self, target: str = "micro") -> SampleData:
        """The estimators' arrays (:func:`receval.engine.sampled_data.engine_sample_data`)."""
        from receval.engine.sampled_data import engine_sample_data

        def build(small, summary, target):
            return engine_sample_data(small, summary, target, self.classes, self.designs)

        return _cached_data(self, target, build)

    def checksums(self) -> dict[str, str]:
        from receval.task import Task

        return Task.checksums(self)  # type: ignore[arg-type]  (reads files and root only)

    @property
    def outputs(self):
        raise RuntimeError(NO_ROWS.format(what="task.outputs"))

    @property
    def raw_outputs(self):
        raise RuntimeError(NO_ROWS.format(what="task.raw_outputs"))

    @property
    def facts(self):
        raise RuntimeError(NO_ROWS.format(what="task.facts"))

    def diagnostics(self, joint: pd.DataFrame | None) -> dict[str, pd.DataFrame]:
        """``per_query``, ``annotation``, ``pooling_bias`` and ``agreement`` (the in-memory
        path's tables, from the aggregates)."""
        from receval.agreement import agreement_by_round

        return {
            "per_query": per_query_table(self),
            "annotation": annotation_table(self),
            "pooling_bias": pooling_bias_table(self, joint),
            "agreement": agreement_by_round(self),
        }

    def record(self) -> dict[str, Any]:
        """run.json's ``engine_path``: how the runs were read."""
        return {
            "engine": self.engine_name,
            "rows": int(self.summary.rows.sum()),
            "why": "score read the Parquet runs with SQL aggregates; no output row was held in "
            "memory (receval.engine.score)",
        }


def judge_batches(view: BundleView) -> list[list[str]] | None:
    """The batches of systems the engine judge's DuckDB session scans one run file per system
    in (:func:`receval.engine.summary.system_batches`); None on Spark or other layouts."""
    from receval.bundle import Bundle

    judge = view.engine_judge
    if judge is None or judge.engine.name != "duckdb":
        return None
    _, by_system = run_layout(Bundle(view.root), view.small)
    return None if by_system is None else system_batches_of(view.summary, by_system)


def _cached_data(view: BundleView, target: str, build) -> SampleData:
    cache = view.__dict__.setdefault("_data", {})
    if target not in cache:
        cache[target] = build(view.small, view.summary, target)
    return cache[target]


# ---------------------------------------------------------------------------------------------
# choosing the path


def parquet_rows(bundle) -> int | None:
    """Rows of the bundle's Parquet runs (from the files' metadata), or None when some run
    table is not Parquet."""
    import pyarrow.parquet as pq

    single = bundle.table("runs")
    if single is not None and single.suffix.lower() != ".parquet":
        return None  # a text table: not read here (listing the runs would load it)
    sources = bundle.parquet_runs()
    if sources is None:
        return None
    return sum(pq.ParquetFile(path).metadata.num_rows for path, _ in sources)


def unsupported(options, small: SmallTables) -> str:
    """Why the engine path cannot score this run ('' when it can): the first option or table
    met that it does not cover, named as the command line names it."""
    from types import SimpleNamespace

    from receval.estimators.looking import resolve_intervals

    if options.estimator not in ENGINE_ESTIMATORS:
        return f"--estimator {options.estimator} (the engine path scores {', '.join(ENGINE_ESTIMATORS)})"
    checks = (
        (options.weighting == "overlap", "--weighting overlap (needs every fact's overlaps)"),
        (options.target_recall is not None, "--target-recall (needs every output's score)"),
        (options.annotator_resampling, "--annotator-resampling"),
        (options.intervals not in ENGINE_INTERVALS, f"--intervals {options.intervals}"),
    )
    for bad, what in checks:
        if bad:
            return what
    resolved, _ = resolve_intervals(SimpleNamespace(samples=small.samples), options)
    if resolved.intervals not in ENGINE_INTERVALS:
        return f"--intervals {options.intervals} (resolves to {resolved.intervals} here)"
    designs = _designs_unsupported(options, small)
    if designs:
        return designs
    for table in small.optional:
        if table == "truth" and small.truth is not None:
            continue
        if table == "judge":  # read by the engine (receval.engine.judge)
            continue
        return f"{table}.tsv (the engine path reads no {table.replace('_', ' ')} table)"
    if _anytime(options, small) and len(_strata_judges(small)) > 1:
        return (
            "rounds drawn --by-judge by several judges with anytime intervals (one judge's levels)"
        )
    for column in ("provenance", "relation_provenance", "ec_mention_type"):
        if (
            column in small.judgments
            and (small.judgments[column].astype(str).str.strip() != "").any()
        ):
            return f"judgments.tsv column {column} (official matching beyond facts)"
    if "hop" in small.queries or _single_valued(small.queries):
        return "queries.tsv with hops or single-valued slots (official matching beyond facts)"
    return ""


def _designs_unsupported(options, small: SmallTables) -> str:
    """What of the rounds' declared designs the engine path does not score ('' when it can)."""
    declared = _declared_designs(small)
    if "judge-uncertainty" in declared:
        return "rounds drawn --by-judge with the judge-uncertainty design (its scores per output)"
    return ""


def _late_problem(options, view: BundleView) -> str:
    """What :func:`unsupported` could not see before the runs were summarised ('' when the
    engine path can score).  Nothing now: ppi's sums take the rounds of every design the
    engine path scores, declared or inferred (:mod:`receval.engine.judge_designs`)."""
    return ""


def _has_classes(small: SmallTables) -> bool:
    """Whether some judgment names an equivalence class."""
    ec = small.judgments["equivalence_class"].astype(str).str.strip()
    return bool((~ec.isin(("", "0"))).any())


def _declared_designs(small: SmallTables) -> set[str]:
    """The designs samples.tsv declares (its ``design`` column)."""
    if "design" not in small.samples:
        return set()
    return set(small.samples["design"].fillna("").astype(str).str.strip()) - {""}


def _strata_judges(small: SmallTables) -> set[str]:
    """The judges of the ``judge-strata`` designs samples.tsv declares."""
    from receval.engine.plan_designs import strata_names

    return strata_names(_declared_designs(small))


def _single_valued(queries: pd.DataFrame) -> bool:
    from receval.formats.tac_kbp import SINGLE_VALUED_SLOTS

    if "slot" not in queries:
        return False
    return bool(queries["slot"].fillna("").astype(str).str.strip().isin(SINGLE_VALUED_SLOTS).any())


def engine_view(task: Any, options, engine: Any, out_of_core: bool | None) -> BundleView | None:
    """The engine path's view of ``task`` (a bundle path), or None for the in-memory path
    (module docstring).  ValueError when ``out_of_core`` asks for it and it cannot score."""
    return engine_path(task, options, engine, out_of_core)[0]


def engine_path(
    task: Any, options, engine: Any, out_of_core: bool | None
) -> tuple[BundleView | None, str]:
    """(:func:`engine_view`, a warning when a bundle of at least :data:`ENGINE_PATH_ROWS`
    Parquet run rows is scored in memory because the engine path cannot score these options
    or tables: what it cannot score, '' otherwise)."""
    if out_of_core is False or not isinstance(task, (str, Path)):
        if out_of_core and not isinstance(task, (str, Path)):
            raise ValueError("out_of_core needs a bundle path, not a loaded task")
        return None, ""
    return _engine_path(task, options, engine, out_of_core)


#: the warning of a large Parquet bundle scored in memory
IN_MEMORY_AT_SIZE = (
    "scored in memory although the runs hold {rows:,} Parquet rows (about {gb:.1f} GB at "
    "~80 bytes a row): the engine path (--out-of-core) cannot score with {problem}"
)


def _engine_path(task, options, engine: Any, out_of_core: bool | None):
    from receval.bundle import Bundle

    bundle = Bundle(task)
    bundle.check_folder()
    rows = parquet_rows(bundle)
    if rows is None:
        if out_of_core:
            raise ValueError(
                "--out-of-core reads Parquet runs; this bundle's runs are text tables "
                "(convert them to Parquet, or score in memory)"
            )
        return None, ""
    if out_of_core is None and rows < ENGINE_PATH_ROWS:
        return None, ""
    from receval.engine.sampled_data import read_small_tables

    small = read_small_tables(bundle, truth=True)
    problem = unsupported(options, small)
    if problem:
        if out_of_core:
            raise ValueError(f"the engine path (--out-of-core) cannot score with {problem}")
        return None, IN_MEMORY_AT_SIZE.format(rows=rows, gb=rows * 80 / 1e9, problem=problem)
    name = engine if isinstance(engine, str) else getattr(engine, "name", "duckdb")
    levelled = _anytime(options, small) and bool(_strata_judges(small))  # strata: judge's session
    summary, popularity, classes, ids = summarise_with_classes(
        bundle, small, engine, _anytime(options, small) and not levelled
    )
    judge = None
    if bundle.table("judge") is not None:
        from receval.engine.judge import open_engine_judge

        judge = open_engine_judge(bundle, small, summary, engine)
    designs = None
    if levelled:
        popularity, designs = judge_popularity(bundle, small, summary, classes, judge)
    view = BundleView(
        root=bundle.root,
        small=small,
        summary=summary,
        engine_name=name,
        popularity=popularity,
        classes=classes,
        conflict_ids=ids,
        engine_judge=judge,
    )
    if designs is not None:  # computed once (the judge's per-level counts)
        view.__dict__["designs"] = designs
    problem = _late_problem(options, view)
    if problem:
        if out_of_core:
            raise ValueError(f"the engine path (--out-of-core) cannot score with {problem}")
        return None, IN_MEMORY_AT_SIZE.format(rows=rows, gb=rows * 80 / 1e9, problem=problem)
    return view, ""


def _anytime(options, small: SmallTables) -> bool:
    """Whether ``options`` resolve to anytime intervals on this bundle (they read the pool's
    popularity strata)."""
    from types import SimpleNamespace

    from receval.estimators.looking import resolve_intervals

    resolved, _ = resolve_intervals(SimpleNamespace(samples=small.samples), options)
    return resolved.intervals in ANYTIME


# ---------------------------------------------------------------------------------------------
# the runs' aggregates


@contextlib.contextmanager
def parquet_engine(bundle, engine: Any):
    """An engine with the bundle's Parquet runs as view ``runs`` (answers read per its
    ``[matching] strip``): ``engine`` itself when it is a connected engine (left open), else a
    new one of that name (DuckDB bounded, spilling, insertion order not kept), closed after.
    DuckDB's out-of-memory error becomes one line."""
    from receval.engine.base import connect, one_line_oom
    from receval.engine.sampled import register_runs

    sources = bundle.parquet_runs()
    if sources is None:
        raise ValueError("the engine path reads Parquet runs")
    own = engine is None or isinstance(engine, str)
    name = engine or "duckdb"
    con = connect(name, **({"on_disk": True} if name == "duckdb" else {})) if own else engine
    try:
        with one_line_oom():
            register_runs(con, sources, strip=bundle.config().matching.strip)
            yield con
    finally:
        if own:
            con.close()


def empty_submissions(bundle) -> tuple[str, ...]:
    """Systems whose ``runs/<system>.parquet`` has no rows (scored as empty submissions)."""
    import pyarrow.parquet as pq

    sources = bundle.parquet_runs() or []
    if len(sources) < 2:
        return ()
    return tuple(
        keys["system"]
        for path, keys in sources
        if "system" in keys
        and path.parent.name == "runs"
        and pq.ParquetFile(path).metadata.num_rows == 0
    )


def summarise_bundle(bundle, small: SmallTables, engine: Any = "duckdb") -> RunSummary:
    """The runs' aggregates (:func:`receval.engine.summary.summarise_runs`) of ``bundle``."""
    return summarise_for_scoring(bundle, small, engine)[0]


def summarise_for_scoring(
    bundle, small: SmallTables, engine: Any = "duckdb", popularity: bool = False
) -> tuple[RunSummary, tuple[pd.DataFrame, float] | None]:
    """:func:`summarise_bundle`, and with ``popularity`` the anytime intervals' strata
    (:func:`receval.engine.popularity.stratum_cells`) in the same engine session."""
    summary, strata, _, _ = summarise_with_classes(bundle, small, engine, popularity, classes=False)
    return summary, strata


def run_layout(bundle, small: SmallTables) -> tuple[dict[str, Path], list[str] | None]:
    """The bundle's run files (also recorded in ``small.files``), and its systems when every
    Parquet run file names its system by its location (one file or folder per system: the
    scans then run in batches of systems), else None."""
    files = {**bundle.run_files()}
    small.files.update(files)
    sources = bundle.parquet_runs() or []
    if sources and all("system" in keys for _, keys in sources):
        return files, sorted({keys["system"] for _, keys in sources})
    return files, None


def summarise_session(
    con,
    bundle,
    small: SmallTables,
    files: dict[str, Path],
    by_system: list[str] | None,
    pool: bool = True,
) -> RunSummary:
    """The view ``normed`` over ``con``'s runs and their summary
    (:func:`receval.engine.summary.summarise_runs`; ``pool``: with the pool's facts)."""
    from receval.engine.summary import register_normed, summarise_runs

    register_normed(con, small.config.matching)
    return summarise_runs(
        con,
        small.facts.reset_index(),
        files,
        set(small.queries["query_id"]),
        empty_submissions(bundle),
        by_system,
        pool,
    )


def summarise_with_classes(
    bundle,
    small: SmallTables,
    engine: Any = "duckdb",
    popularity: bool = False,
    classes: bool = True,
) -> tuple[RunSummary, tuple[pd.DataFrame, float] | None, Classes | None, pd.Series | None]:
    """:func:`summarise_for_scoring` and, with ``classes``, the judgments' equivalence classes
    (:func:`summarise_classes`; None when no class holds two facts) and the loader's ids of
    the conflicting judged facts (:func:`loader_fact_ids`; None without conflicts), in one
    engine session."""
    files, by_system = run_layout(bundle, small)
    with parquet_engine(bundle, engine) as con:
        summary = summarise_session(con, bundle, small, files, by_system)
        found = summarise_classes(con, small, summary, by_system) if classes else None
        strata = popularity_cells(con, small, summary, by_system, found) if popularity else None
        ids = loader_fact_ids(con, small, summary, by_system) if classes else None
    _check_universe(small, summary)
    return summary, strata, found, ids


def popularity_cells(
    con: Engine,
    small: SmallTables,
    summary: RunSummary,
    by_system: list[str] | None,
    classes: Classes | None,
) -> tuple[pd.DataFrame, dict[str, float]]:
    """The anytime intervals' strata (:func:`receval.engine.popularity.stratum_cells`): the
    per (system, query, stratum) facts and the floor of the uniform design and of each other
    design the rounds have (:func:`receval.engine.sampled_data.samplers_of`), over the pool's
    facts other than the members of equivalence classes (:func:`aliased_facts`: each class
    is one fact of the scored view, :func:`stream_designs` adds it)."""
    from receval.engine.popularity import stratum_cells
    from receval.engine.sampled_data import design_probabilities, samplers_of
    from receval.engine.summary import system_batches

    duck = by_system is not None and con.name == "duckdb"
    batches = system_batches(summary.cells, by_system) if duck else None
    names = sorted({s.design for s in samplers_of(small, summary)} - {"uniform"})
    designs = {
        name: design_probabilities(small, summary, name).rename("p").reset_index() for name in names
    }
    out = None
    if classes is not None:
        facts = small.facts.loc[aliased_facts(classes), ["query_id", "answer"]]
        out = facts.reset_index(drop=True)
    queries = list(small.queries["query_id"])
    return stratum_cells(con, summary.systems, summary.sizes, queries, batches, designs, out)


def judge_popularity(bundle, small: SmallTables, summary: RunSummary, classes, judge):
    """(:func:`popularity_cells` split by the judge's level, the rounds' designs
    (:class:`receval.engine.sampled_data.EngineDesigns`)) for rounds drawn ``--by-judge``
    with anytime intervals, scanned in the engine judge's session (its ``normed`` view and
    ``judge_levels`` table, :mod:`receval.engine.judge`): a ``judge-strata`` design's p is one
    value per (system, level), so its κ_ib and floor need every cell's level."""
    from receval.design import parse_judge_strata
    from receval.engine.plan_designs import PLAN_LEVELS, is_strata
    from receval.engine.popularity import stratum_cells
    from receval.engine.run_files import create_view
    from receval.engine.sampled_data import EngineDesigns, design_probabilities, samplers_of
    from receval.engine.strata import level_probabilities

    (name,) = _strata_judges(small)
    if judge is None or name not in judge.names:  # the loader's error (samples.tsv's line)
        samplers_of(small, summary, EngineDesigns(small, summary, judge, None))
        level_probabilities(next(d for d in _declared_designs(small) if is_strata(d)), None, [])
    con = judge.engine
    _, by_system = run_layout(bundle, small)
    duck = by_system is not None and con.name == "duckdb"
    batches = system_batches_of(summary, by_system) if duck else None
    designs = EngineDesigns(small, summary, judge, batches)
    levels = designs.judge_levels(name)
    q, h = con.dialect.hash64("query_id"), con.dialect.hash64("answer")
    sql = PLAN_LEVELS.format(q=q, h=h, j=judge.names.index(name))
    create_view(con, "popularity_levels", sql, materialise=True)
    per_design = {}
    for design in sorted({s.design for s in samplers_of(small, summary, designs)} - {"uniform"}):
        if is_strata(design):
            table = level_probabilities(design, designs.judge_levels(parse_judge_strata(design)[0]),
                                        summary.sizes)  # fmt: skip
            i, b = np.nonzero(np.isfinite(table))
            per_design[design] = pd.DataFrame(
                {"system": np.asarray(summary.systems, object)[i], "level": b, "p": table[i, b]}
            )
        else:
            per_design[design] = design_probabilities(small, summary, design).rename("p")
            per_design[design] = per_design[design].reset_index()
    out = None
    if classes is not None:
        facts = small.facts.loc[aliased_facts(classes), ["query_id", "answer"]]
        out = facts.reset_index(drop=True)
    queries = list(small.queries["query_id"])
    popularity = stratum_cells(con, summary.systems, summary.sizes, queries, batches, per_design,
                               out, levels.missing)  # fmt: skip
    return popularity, designs


def aliased_facts(classes: Classes) -> np.ndarray:
    """The small-table facts that belong to a class holding two facts or more (sorted)."""
    canon = classes.canon
    size = np.bincount(canon, minlength=canon.size)
    return np.flatnonzero(size[canon] > 1)


#: the distinct facts each query of ``class_queries`` has in ``{source}`` (a group per fact of
#: those queries, then per query), or in ``class_query_parts`` (one batch of systems' facts)
QUERY_FACTS = """
SELECT query_id, count(*) AS facts FROM (
    SELECT src.query_id, {h} AS a FROM {source} src
    JOIN class_queries c ON src.query_id = c.query_id GROUP BY src.query_id, {h}
) t GROUP BY query_id
"""
QUERY_PARTS = """
SELECT src.query_id, {h} AS a FROM {source} src
JOIN class_queries c ON src.query_id = c.query_id GROUP BY src.query_id, {h}
"""
QUERY_MERGE = """
SELECT query_id, count(*) AS facts FROM (
    SELECT query_id, a FROM class_query_parts GROUP BY query_id, a
) t GROUP BY query_id
"""


def summarise_classes(
    con: Engine, small: SmallTables, summary: RunSummary, by_system: list[str] | None
) -> Classes | None:
    """The judgments' equivalence classes (:class:`receval.engine.sampled_data.Classes`): the
    canonical facts from the small tables, the memberships collapsed per class, and one more
    aggregation over the runs' rows of the queries where a class holds two facts (their
    distinct facts: the outputs that could be aliases nobody judged).  None without classes."""
    from receval.engine.sampled_data import Classes, class_canon, collapse_members

    canon = class_canon(small)
    if canon is None:
        return None
    moved = np.flatnonzero(canon != np.arange(canon.size))
    queries = sorted(pd.unique(small.facts["query_id"].to_numpy()[moved]))
    duck = by_system is not None and con.name == "duckdb"
    batches = system_batches_of(summary, by_system) if duck else None
    return Classes(
        canon=canon,
        members=collapse_members(summary.members, canon),
        query_facts=query_facts(con, queries, batches),
    )


def system_batches_of(summary: RunSummary, by_system: list[str]) -> list[list[str]]:
    from receval.engine.summary import system_batches

    return system_batches(summary.cells, by_system)


def query_facts(con: Engine, queries: list[str], batches: list[list[str]] | None) -> pd.Series:
    """Distinct facts (64-bit hashes of the normalised answer, as :data:`RUN_CELLS` counts
    them) the runs output in each of ``queries``: :data:`QUERY_FACTS` in one query, or (DuckDB,
    one file per system) each batch's :data:`QUERY_PARTS` in a table merged by
    :data:`QUERY_MERGE` (an aggregate over a hundred UNION ALL branches does not stay bounded:
    :mod:`receval.engine.summary`)."""
    from receval.engine.summary import _in_systems

    h = con.dialect.hash64("answer")
    con.register("class_queries", pd.DataFrame({"query_id": list(queries)}, dtype=object))
    if not batches:
        frame = con.query(QUERY_FACTS.format(h=h, source="normed"))
    else:
        for i, batch in enumerate(batches):
            sql = QUERY_PARTS.format(h=h, source=_in_systems(con, batch))
            if i == 0:
                con.create_table("class_query_parts", sql)
            else:
                con.con.execute(f"INSERT INTO class_query_parts {sql}")
        frame = con.query(QUERY_MERGE)
        con.con.execute("DROP TABLE class_query_parts")
    return frame.set_index("query_id")["facts"].astype(np.int64)


#: per conflicting fact (``conflict_facts``: fact, cq, ca), the distinct facts (64-bit hashes)
#: of its query in ``{source}`` whose answer sorts before its own
FACTS_BELOW = """
SELECT fact, count(*) AS below FROM (
    SELECT c.fact, {h} AS a FROM {source} src
    JOIN conflict_facts c ON src.query_id = c.cq AND src.answer < c.ca GROUP BY c.fact, {h}
) t GROUP BY fact
"""
BELOW_PARTS = """
SELECT c.fact, {h} AS a FROM {source} src
JOIN conflict_facts c ON src.query_id = c.cq AND src.answer < c.ca GROUP BY c.fact, {h}
"""
BELOW_MERGE = """
SELECT fact, count(*) AS below FROM (
    SELECT fact, a FROM below_parts GROUP BY fact, a
) t GROUP BY fact
"""


def loader_fact_ids(
    con: Engine, small: SmallTables, summary: RunSummary, by_system: list[str] | None
) -> pd.Series | None:
    """The fact id the loader gives each conflicting judged fact x (the rank of its
    ``(query_id, answer)`` among the facts of the runs and of the small tables, sorted): the
    runs' distinct facts of the queries before q(x) and of q(x) with a smaller answer
    (:data:`QUERY_FACTS`, :data:`FACTS_BELOW`: two more aggregations, run only when the
    judgments conflict), plus the small tables' facts before x (its small-table id) less those
    the runs output (counted twice).  Indexed by small-table id; None without conflicts."""
    from receval.engine.sampled_data import merged_labels

    conflicts = merged_labels(small).conflicts
    if not len(conflicts):
        return None
    facts = np.unique(conflicts["fact"].to_numpy(np.int64))
    duck = by_system is not None and con.name == "duckdb"
    batches = system_batches_of(summary, by_system) if duck else None
    queries = sorted(small.queries["query_id"])
    per_query = query_facts(con, queries, batches).reindex(queries, fill_value=0)
    before = pd.Series(np.cumsum(per_query.to_numpy()) - per_query.to_numpy(), index=queries)
    frame = small.facts.loc[facts]
    below = _facts_below(con, frame, batches)
    pooled = np.zeros(len(small.facts), np.int64)
    pooled[summary.members["fact"].to_numpy(np.int64)] = 1
    pooled_before = np.cumsum(pooled) - pooled
    ids = (
        before.reindex(frame["query_id"]).to_numpy(np.int64)
        + below.reindex(facts, fill_value=0).to_numpy(np.int64)
        + facts
        - pooled_before[facts]
    )
    return pd.Series(ids, index=facts)


def _facts_below(con: Engine, frame: pd.DataFrame, batches: list[list[str]] | None) -> pd.Series:
    """:data:`FACTS_BELOW` of the facts of ``frame`` (``query_id, answer`` by fact id)."""
    from receval.engine.summary import _in_systems

    h = con.dialect.hash64("src.answer")
    con.register(
        "conflict_facts",
        pd.DataFrame(
            {
                "fact": frame.index.to_numpy(np.int64),
                "cq": frame["query_id"].to_numpy(object),
                "ca": frame["answer"].to_numpy(object),
            }
        ),
    )
    if not batches:
        out = con.query(FACTS_BELOW.format(h=h, source="normed"))
    else:
        for i, batch in enumerate(batches):
            sql = BELOW_PARTS.format(h=h, source=_in_systems(con, batch))
            if i == 0:
                con.create_table("below_parts", sql)
            else:
                con.con.execute(f"INSERT INTO below_parts {sql}")
        out = con.query(BELOW_MERGE)
        con.con.execute("DROP TABLE below_parts")
    return out.set_index("fact")["below"].astype(np.int64)


def _check_universe(small: SmallTables, summary: RunSummary) -> None:
    from receval.task import _check_universe as check

    check(small.config, small.files, summary.pool_size)


# ---------------------------------------------------------------------------------------------
# diagnostics from the aggregates


def _fact_systems(view: BundleView) -> pd.Series:
    """How many systems output each fact of the small tables (indexed by fact id)."""
    members = view.summary.members
    counts = members.groupby("fact")["system"].size()
    return counts.reindex(np.arange(len(view.small.facts)), fill_value=0)


def per_query_table(view: BundleView) -> pd.DataFrame:
    """``per_query.csv`` (:func:`receval.diagnostics.per_query`) from the aggregates."""
    from receval.diagnostics import exhaustive_columns, judged_columns, sort_per_query

    labels = view.labels
    cells = view.summary.cells
    q = view.queries[["query_id"]].copy()
    q["outputs"] = q["query_id"].map(cells.groupby("query_id")["facts"].sum()).fillna(0).astype(int)
    q["systems"] = q["query_id"].map(cells.groupby("query_id").size()).fillna(0).astype(int)
    in_pool = _fact_systems(view) > 0
    judged = view.small.facts[in_pool.to_numpy() & view.small.facts.index.isin(labels.index)]
    judged_columns(q, judged, labels, view.merged.conflicts)
    exhaustive_columns(q, view.exhaustive)
    return sort_per_query(q)


def annotation_table(view: BundleView) -> pd.DataFrame:
    """``annotation.csv`` (:func:`receval.diagnostics.annotation_spend`) from the aggregates."""
    from receval.diagnostics import annotation_frame

    labelled = np.zeros(len(view.small.facts), bool)
    labelled[view.labels.index.to_numpy(np.int64)] = True
    shared = _fact_systems(view).to_numpy() > 1
    return annotation_frame(view.samples, view.systems, shared, labelled)


def pooling_bias_table(view: BundleView, joint: pd.DataFrame | None) -> pd.DataFrame:
    """``pooling_bias.csv`` (:func:`receval.diagnostics.pooling_bias`) from the aggregates:
    the official census and its leave-one-team-out variant counted per system from the
    judged facts' copies in each run and the rows per (system, query)
    (:func:`official_counts`), the same numbers as the engine's SQL census."""
    from receval.diagnostics import pooling_bias_frame

    summary = view.summary
    outputs = summary.rows > 0
    team_of = pd.Series(
        [summary.teams[s] for s in np.array(summary.systems)[outputs]],
        index=np.array(summary.systems)[outputs],
        dtype=object,
    )
    teams = sorted(set(team_of))
    members = _judged_members(view)
    owner = _one_team(members, summary.teams)
    labelled = members.drop_duplicates("fact")
    labelled = labelled[labelled["fact"].isin(view.labels.index)]
    one = owner.reindex(labelled["fact"]).dropna()
    unique_judged = one.value_counts().reindex(teams, fill_value=0)
    counts = official_counts_classed if _has_classes(view.small) else official_counts
    base = counts(view, members, owner, leave_out=False)
    lto = counts(view, members, owner, leave_out=True)
    return pooling_bias_frame(
        team_of,
        summary.unique_facts().reindex(teams, fill_value=0),
        unique_judged,
        base,
        lto,
        joint,
    )


def _judged_members(view: BundleView) -> pd.DataFrame:
    """``fact, system, copies, team, category`` of every (judged fact, system that output it);
    ``category`` is the assessment the official scorer matches (a correct one if any, else the
    first in file order: :data:`receval.official.sql.CHOSEN`), as a code."""
    from receval.official.sql import CATEGORY_CODES

    judg = view.judgments
    codes = judg["category"].map(CATEGORY_CODES).to_numpy(np.int64)
    order = np.lexsort((np.arange(len(judg)), codes != 0, judg["fact"].to_numpy(np.int64)))
    chosen = pd.Series(codes[order], index=judg["fact"].to_numpy(np.int64)[order])
    chosen = chosen[~chosen.index.duplicated()]
    members = view.summary.members
    members = members[members["fact"].isin(chosen.index)].copy()
    members["team"] = members["system"].map(view.summary.teams)
    members["category"] = chosen.reindex(members["fact"]).to_numpy(np.int64)
    return members


def _one_team(members: pd.DataFrame, teams: dict[str, str]) -> pd.Series:
    """The team of each judged fact that one team only output (others absent)."""
    per_fact = members.groupby("fact")["team"].agg(["min", "max"])
    return per_fact.loc[per_fact["min"] == per_fact["max"], "min"]


def official_counts(
    view: BundleView, members: pd.DataFrame, owner: pd.Series, *, leave_out: bool
) -> pd.DataFrame:
    """Official micro precision, recall and F1 per system (index ``system``), the counts of
    :data:`receval.official.sql.OFFICIAL_COUNTS` (``leave_out``:
    :data:`~receval.official.sql.LEAVE_TEAM_OUT_COUNTS`, each team's unique facts
    unassessed for its own systems) for fact-matched bundles without single-valued slots."""
    from receval.official.rules import official_rates, policy_words

    post_word = {"right": "right", "wrong": "wrong", "ignore": "ignored"}
    words = {k: post_word[v] for k, v in policy_words(view, None).items()}
    summary = view.summary
    systems = pd.Index(summary.systems)
    m = len(systems)
    rows = summary.rows.astype(float)
    cells = summary.cells
    judged_queries = set(view.judgments["query_id"])
    in_judged = cells[cells["query_id"].isin(judged_queries)].groupby("system")
    rows_judged = in_judged["n_rows"].sum().reindex(systems, fill_value=0).to_numpy(float)
    facts_judged = in_judged["facts"].sum().reindex(systems, fill_value=0).to_numpy(float)
    category = members["category"].to_numpy(np.int64)
    if leave_out:
        lost = owner.reindex(members["fact"]).to_numpy(object) == members["team"].to_numpy(object)
        category = np.where(lost, 4, category)
    sys_code = systems.get_indexer(members["system"])
    copies = members["copies"].to_numpy(float)
    by_cat = np.zeros((5, m))
    distinct = np.zeros((5, m))
    np.add.at(by_cat, (category, sys_code), copies)
    np.add.at(distinct, (category, sys_code), 1.0)
    assessed_rows = by_cat[:4].sum(axis=0)
    assessed_facts = distinct[:4].sum(axis=0)
    if leave_out:  # every unassessed response takes the policy (no judged-query rule)
        unassessed_rows, unassessed_facts = rows - assessed_rows, summary.sizes - assessed_facts
    else:  # an unassessed response to a query nobody judged is ignored
        unassessed_rows, unassessed_facts = (
            rows_judged - assessed_rows,
            facts_judged - assessed_facts,
        )
    post = {"right": [0], "wrong": [1], "ignored": [3]}
    post[words["inexact"]].append(2)
    right_rows = by_cat[post["right"]].sum(axis=0)
    first_right = distinct[post["right"]].sum(axis=0)
    wrong_rows = by_cat[post["wrong"]].sum(axis=0)
    if words["unassessed"] == "right":
        right_rows, first_right = right_rows + unassessed_rows, first_right + unassessed_facts
    elif words["unassessed"] == "wrong":
        wrong_rows = wrong_rows + unassessed_rows
    duplicates = right_rows - first_right
    right = first_right + (duplicates if words["duplicate"] == "right" else 0)
    wrong = wrong_rows + (duplicates if words["duplicate"] == "wrong" else 0)
    gt = np.full(m, float(_ground_truth(view)))
    if leave_out:
        gt = gt - _ground_truth_lost(view, owner).reindex(
            [summary.teams[s] for s in systems], fill_value=0
        ).to_numpy(float)
    rated = official_rates(pd.DataFrame({"right": right, "wrong": wrong, "gt": gt}))
    rated.index = pd.Index(systems, name="system")
    return rated[["precision", "recall", "f1"]]


def official_counts_classed(
    view: BundleView, members: pd.DataFrame, owner: pd.Series, *, leave_out: bool
) -> pd.DataFrame:
    """:func:`official_counts` when the judgments name equivalence classes, counted as
    :func:`receval.official.responses.categorize_responses` counts them (the in-memory path's
    scorer for such bundles): a right response is credited once per (system, class) — the class
    of the fact's chosen assessment, the fact itself when it names none — and the others are
    duplicates; an unassessed response taken as right is never a duplicate; the recall
    denominator counts the distinct (query, class) of the correct or inexact judgments.  With
    ``leave_out`` each team is scored as :func:`receval.diagnostics.leave_team_out_rescore`
    scores it: its unique facts' judgments dropped (their responses unassessed, ignored in a
    query no judgment is left in) and their classes gone unless another judgment names them."""
    from receval.official.rules import official_rates, policy_words

    post_word = {"right": "right", "wrong": "wrong", "ignore": "ignored"}
    words = {k: post_word[v] for k, v in policy_words(view, None).items()}
    summary = view.summary
    systems = pd.Index(summary.systems)
    team = np.array([summary.teams[s] for s in systems], dtype=object)
    lost_fact = np.zeros(len(view.small.facts), bool)
    if leave_out:
        lost_fact[owner.index.to_numpy(np.int64)] = True
    category = members["category"].to_numpy(np.int64)
    if leave_out:
        lost = owner.reindex(members["fact"]).to_numpy(object) == members["team"].to_numpy(object)
        category = np.where(lost, 4, category)
    credit = _credited_classes(view).reindex(members["fact"]).to_numpy(object)
    sys_code = systems.get_indexer(members["system"])
    copies = members["copies"].to_numpy(float)
    m = len(systems)
    by_cat = np.zeros((5, m))
    np.add.at(by_cat, (category, sys_code), copies)
    post = {"right": [0], "wrong": [1], "ignored": [3]}
    post[words["inexact"]].append(2)
    is_right = np.isin(category, post["right"])
    firsts = pd.DataFrame({"s": sys_code[is_right], "c": credit[is_right]}).drop_duplicates()
    first_right = np.bincount(firsts["s"].to_numpy(np.int64), minlength=m).astype(float)
    right_rows = by_cat[post["right"]].sum(axis=0)
    duplicates = right_rows - first_right
    unassessed = _rows_in_judged_queries(view, systems, team, lost_fact, owner, leave_out)
    unassessed = unassessed - by_cat[:4].sum(axis=0)
    right = first_right + (duplicates if words["duplicate"] == "right" else 0)
    wrong = by_cat[post["wrong"]].sum(axis=0) + (duplicates if words["duplicate"] == "wrong" else 0)
    if words["unassessed"] == "right":
        right = right + unassessed
    elif words["unassessed"] == "wrong":
        wrong = wrong + unassessed
    gt = _class_ground_truth(view, team, lost_fact, owner, leave_out)
    rated = official_rates(pd.DataFrame({"right": right, "wrong": wrong, "gt": gt}))
    rated.index = pd.Index(systems, name="system")
    return rated[["precision", "recall", "f1"]]


def _judgment_classes(judg: pd.DataFrame) -> pd.Series:
    """The class each correct or inexact judgment names (``fact:<id>`` when it names none or
    ``0``), '' for the other judgments (:func:`receval.official.responses.categorize_responses`)."""
    ec = judg["equivalence_class"].fillna("").astype(str).str.strip()
    ec = ec.where(ec != "0", "")
    ec = ec.where(ec != "", "fact:" + judg["fact"].astype(str))
    return ec.where(judg["category"].isin(("correct", "inexact")).to_numpy(), "")


def _credited_classes(view: BundleView) -> pd.Series:
    """Per judged fact: the class its chosen assessment (a correct one if any, else the first
    in file order) credits, keyed with its query."""
    from receval.official.sql import CATEGORY_CODES

    judg = view.judgments
    codes = judg["category"].map(CATEGORY_CODES).to_numpy(np.int64)
    fact = judg["fact"].to_numpy(np.int64)
    order = np.lexsort((np.arange(len(judg)), codes != 0, fact))
    key = (judg["query_id"].astype(str) + "\x1f" + _judgment_classes(judg)).to_numpy(object)
    chosen = pd.Series(key[order], index=fact[order])
    return chosen[~chosen.index.duplicated()]


def _rows_in_judged_queries(
    view: BundleView,
    systems: pd.Index,
    team: np.ndarray,
    lost_fact: np.ndarray,
    owner: pd.Series,
    leave_out: bool,
) -> np.ndarray:
    """Per system: its rows in the queries some judgment is left in (with ``leave_out``, the
    judgments of facts unique to the system's team dropped)."""
    judg = view.judgments
    cells = view.summary.cells
    if not leave_out:
        judged = cells[cells["query_id"].isin(set(judg["query_id"]))]
        return (
            judged.groupby("system")["n_rows"].sum().reindex(systems, fill_value=0).to_numpy(float)
        )
    fact = judg["fact"].to_numpy(np.int64)
    of = owner.reindex(fact).to_numpy(object)
    out = np.zeros(len(systems))
    for name in pd.unique(team):
        gone = lost_fact[fact] & (of == name)
        queries = set(judg.loc[~gone, "query_id"])
        ours = cells[cells["system"].isin(systems[team == name]) & cells["query_id"].isin(queries)]
        rows = ours.groupby("system")["n_rows"].sum()
        out[systems.get_indexer(rows.index)] = rows.to_numpy(float)
    return out


def _class_ground_truth(
    view: BundleView, team: np.ndarray, lost_fact: np.ndarray, owner: pd.Series, leave_out: bool
) -> np.ndarray:
    """Per system: the distinct (query, class) of the correct or inexact judgments (with
    ``leave_out``: of those left once its team's unique facts are dropped)."""
    judg = view.judgments
    ec = _judgment_classes(judg)
    classed = (ec != "").to_numpy()
    key = (judg["query_id"].astype(str) + "\x1f" + ec).to_numpy(object)
    if not leave_out:
        return np.full(len(team), float(pd.unique(key[classed]).size))
    fact = judg["fact"].to_numpy(np.int64)
    of = owner.reindex(fact).to_numpy(object)
    gt = {
        name: float(pd.unique(key[classed & ~(lost_fact[fact] & (of == name))]).size)
        for name in pd.unique(team)
    }
    return np.array([gt[name] for name in team])


def _classed(view: BundleView) -> np.ndarray:
    """The recall denominator's classes: the facts with a correct or inexact judgment."""
    judg = view.judgments
    return np.unique(
        judg.loc[judg["category"].isin(("correct", "inexact")), "fact"].to_numpy(np.int64)
    )


def _ground_truth(view: BundleView) -> int:
    return int(_classed(view).size)


def _ground_truth_lost(view: BundleView, owner: pd.Series) -> pd.Series:
    """Per team: the classes only that team output (they leave with its unique facts)."""
    classed = owner.reindex(_classed(view)).dropna()
    return classed.value_counts()


# ---------------------------------------------------------------------------------------------
# the anytime intervals' design arrays from the aggregates


def stream_designs(view: BundleView, data: SampleData) -> tuple[dict, Any]:
    """``({design: _Design}, Strata)``: what
    :func:`receval.estimators.anytime.stream.build_stream` computes from the output rows
    (:func:`~receval.estimators.anytime.stream._design_arrays`,
    :func:`~receval.estimators.anytime.control.popularity_strata`) for every design of the
    rounds (uniform and entity-relation: each constant over a (system, query) cell), from the
    per (system, query, stratum) facts (:mod:`receval.engine.popularity`).

    Every output of system i in query q has p_i(q) and target t_iq (micro: 1/|X_i|; macro:
    1/(Q_i |X_i ∩ q|), as :func:`~receval.estimators.sample_data.query_targets`), so κ_i, κ_ib
    (least p/t over X_i, and over its facts in stratum b) and the stratum masses Σ t are minima
    and sums over the cells.  With equivalence classes the scored view has one fact per class
    (:func:`receval.engine.sampled_data.class_tables`): the members of a class holding several
    facts leave their cells and the class joins as rows of its own (:func:`_class_rows`), drawn
    with its members' summed probability (the design probability belongs to what was drawn)."""
    from receval.engine.sampled_data import _design_at_drawn, class_tables
    from receval.estimators.anytime.control import STRATA, Strata
    from receval.estimators.anytime.stream import _Design

    if view.popularity is None:
        raise RuntimeError(NO_ROWS.format(what="the anytime strata (not summarised)"))
    cells, floors = view.popularity
    raw, classes = view.summary, view.classes
    scored = class_tables(view.small, raw, classes)[1] if classes is not None else raw
    systems = pd.Index(raw.systems)
    m = len(systems)
    cells = _unaliased_cells(view, cells)
    extra = _class_rows(view, scored, data.target_kind, sorted(set(data.sampler_design)))
    i = np.concatenate([systems.get_indexer(cells["system"]), extra["i"]]).astype(np.int64)
    b = np.concatenate([cells["stratum"].to_numpy(np.int64), extra["b"]]).astype(np.int64)
    facts = np.concatenate([cells["facts"].to_numpy(float), np.ones(extra["i"].size)])
    t = np.concatenate(
        [_cell_targets(scored, cells, i[: len(cells)], data.target_kind), extra["t"]]
    )
    mass = np.zeros((m, STRATA))
    np.add.at(mass, (i, b), facts * t)
    count = np.zeros((m, STRATA))
    np.add.at(count, (i, b), facts)
    present = facts > 0
    designs = {}
    for design in sorted(set(data.sampler_design)):
        at = view.designs.at_function(design)
        p = np.concatenate([_cell_probabilities(view, cells, design), extra["s"][design]])
        ratio = (p / t)[present]
        kappa = np.full(m, np.inf)
        np.minimum.at(kappa, i[present], ratio)
        kappa_b = np.full((STRATA, m), np.inf)
        np.minimum.at(kappa_b, (b[present], i[present]), ratio)
        floor = min(floors[design], extra["floor"][design])
        designs[design] = _Design(
            _design_at_drawn(raw, data.facts, data.member, at, classes),
            np.where(np.isfinite(kappa), kappa, 0.0),
            floor,
            np.where(np.isfinite(kappa_b), kappa_b, 0.0),
        )
    return designs, Strata(_fact_strata(view, STRATA), mass, count)


def _cell_probabilities(view: BundleView, cells: pd.DataFrame, design: str) -> np.ndarray:
    """p_i(x) of ``design`` at the outputs of each (system, query, stratum[, level]) cell: per
    (system, query), or per (system, level) for a ``judge-strata`` design (its cells carry the
    judge's level: :func:`judge_popularity`)."""
    from receval.engine.plan_designs import is_strata

    if is_strata(design):
        from receval.design import parse_judge_strata
        from receval.engine.strata import level_probabilities

        levels = view.designs.judge_levels(parse_judge_strata(design)[0])
        table = level_probabilities(design, levels, view.summary.sizes)
        codes = pd.Index(view.summary.systems).get_indexer(cells["system"])
        return table[codes, cells["level"].to_numpy(np.int64)]
    key = pd.MultiIndex.from_frame(cells[["system", "query_id"]])
    return view.designs.cells(design).reindex(key).to_numpy(float)


def _unaliased_cells(view: BundleView, cells: pd.DataFrame) -> pd.DataFrame:
    """The (system, query, stratum) cells without the members of classes holding several
    facts (each counted in the cell of its own popularity), as the scored view has them."""
    from receval.estimators.anytime.control import STRATA

    if view.classes is None:
        return cells
    members = view.summary.members
    aliased = aliased_facts(view.classes)
    fact = members["fact"].to_numpy(np.int64)
    popularity = np.bincount(fact, minlength=len(view.small.facts))
    moved = members[np.isin(fact, aliased)]
    fact = moved["fact"].to_numpy(np.int64)
    gone = pd.DataFrame(
        {
            "system": moved["system"].to_numpy(object),
            "query_id": view.small.facts["query_id"].to_numpy(object)[fact],
            "stratum": np.minimum(popularity[fact], STRATA) - 1,
        }
    )
    by = ["system", "query_id", "stratum"]
    if "level" in cells:  # split by the strata judge's level (judge_popularity)
        (name,) = _strata_judges(view.small)
        gone["level"] = view.designs.judge_levels(name).small[fact]
        by.append("level")
    less = gone.groupby(by).size()
    key = pd.MultiIndex.from_frame(cells[by])
    out = cells.copy()
    out["facts"] = out["facts"] - less.reindex(key, fill_value=0).to_numpy(np.int64)
    return out


def _class_rows(view: BundleView, scored: RunSummary, target: str, names: list[str]) -> dict:
    """The classes holding several facts as rows of the scored view, one per (class, system
    that output a member): ``i`` system code, ``b`` stratum (systems that output a member),
    ``t`` target, ``s`` per design the members' summed p; and per design ``floor`` the least
    Σ_j s over the classes (inf without any)."""
    from receval.engine.sampled_data import fact_targets
    from receval.estimators.anytime.control import STRATA

    none = {"i": np.zeros(0, np.int64), "b": np.zeros(0, np.int64), "t": np.zeros(0)}
    if view.classes is None:
        return {**none, "s": {d: np.zeros(0) for d in names}, "floor": dict.fromkeys(names, np.inf)}
    classes, raw = view.classes, view.summary
    systems = pd.Index(raw.systems)
    aliased = aliased_facts(classes)
    canon_of = classes.canon
    members = raw.members[np.isin(raw.members["fact"].to_numpy(np.int64), aliased)]
    fact = members["fact"].to_numpy(np.int64)
    code = systems.get_indexer(members["system"])
    rows = pd.DataFrame({"c": canon_of[fact], "i": code}).drop_duplicates(ignore_index=True)
    rows = rows.sort_values(["c", "i"], ignore_index=True)
    popularity = rows.groupby("c")["i"].transform("size").to_numpy(np.int64)
    canon = np.unique(rows["c"].to_numpy(np.int64))
    member = np.zeros((canon.size, len(systems)), bool)
    at_row = np.searchsorted(canon, rows["c"].to_numpy(np.int64))
    member[at_row, rows["i"].to_numpy(np.int64)] = True
    t_all = fact_targets(view.small, scored, canon, member, target)
    out = {
        "i": rows["i"].to_numpy(np.int64),
        "b": np.minimum(popularity, STRATA) - 1,
        "t": t_all[at_row, rows["i"].to_numpy(np.int64)],
        "s": {},
        "floor": {},
    }
    for design in names:
        s = view.designs.at_function(design)(code, fact)
        summed = pd.Series(s).groupby([canon_of[fact], code]).sum()
        key = pd.MultiIndex.from_arrays([rows["c"].to_numpy(np.int64), rows["i"].to_numpy()])
        out["s"][design] = summed.reindex(key).to_numpy(float)
        per_class = pd.Series(out["s"][design]).groupby(rows["c"].to_numpy(np.int64)).sum()
        out["floor"][design] = float(per_class.min()) if len(per_class) else np.inf
    return out


def _cell_targets(summary: RunSummary, cells: pd.DataFrame, i: np.ndarray, target: str):
    """t_i(x) of the outputs of each (system, query, stratum) cell (one value per cell)."""
    if target == "micro":
        return 1.0 / summary.sizes[i]
    per = summary.cells.set_index(["system", "query_id"])["facts"].astype(float)
    per_query = per.reindex(pd.MultiIndex.from_frame(cells[["system", "query_id"]])).to_numpy()
    answered = summary.cells.groupby("system").size().astype(float)
    queries = answered.reindex(cells["system"]).to_numpy(float)
    return 1.0 / (per_query * queries)


def _fact_strata(view: BundleView, strata: int) -> np.ndarray:
    """Each small-table fact's stratum: the systems that output it, capped at ``strata``,
    minus one (-1 outside the pool), from the memberships (per class with classes)."""
    members = view.summary.members if view.classes is None else view.classes.members
    popularity = np.bincount(
        members["fact"].to_numpy(np.int64), minlength=len(view.small.facts)
    )  # one row per (fact, system)
    return np.where(popularity > 0, np.minimum(popularity, strata) - 1, -1)


# ---------------------------------------------------------------------------------------------
# the estimator's core alone


def bundle_sample_data(bundle, *, target: str = "micro", engine: str = "duckdb") -> SampleData:
    """:func:`engine_sample_data` of ``bundle``: its small tables read, its runs summarised in
    ``engine`` (:func:`summarise_bundle`)."""
    from receval.engine.sampled_data import engine_sample_data, read_small_tables

    small = read_small_tables(bundle)
    summary, _, classes, _ = summarise_with_classes(bundle, small, engine)
    judge = None
    if bundle.table("judge") is not None:  # a judge-strata round's levels
        from receval.engine.judge import open_engine_judge

        judge = open_engine_judge(bundle, small, summary, engine)
    view = BundleView(bundle.root, small, summary, engine, classes=classes, engine_judge=judge)
    return engine_sample_data(small, summary, target, classes, view.designs)


def joint_estimates(
    bundle,
    *,
    bootstrap: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    engine: str = "duckdb",
) -> pd.DataFrame:
    """Joint precision and pooled recall of every system from :func:`bundle_sample_data`
    (Chaganty et al. 2017, §3: π̂_i, Theorem 1; ν̂_i self-normalised), in the precision form
    ``score`` picks by default (``auto``), with **percentile bootstrap** intervals at ``level``
    (``bootstrap`` replicates shared by all systems, seeded).  The estimator's core; ``score``
    on the engine path (:mod:`receval.engine.score`) writes the whole output set.

    Returns ``system, outputs, precision, precision_lo, precision_hi, pooled_recall,
    pooled_recall_lo, pooled_recall_hi, interval``.
    """
    from receval.errors import BundleError
    from receval.estimators.base import ScoringContext
    from receval.estimators.joint import JointEstimator
    from receval.scoring import fit

    data = bundle_sample_data(bundle, engine=engine)
    if data.K == 0:
        raise BundleError(bundle.root / "samples.tsv", None, "no judged sample draws")
    run = fit(ScoringContext.of(data, bootstrap=bootstrap, seed=seed), JointEstimator()).run
    tail = (1.0 - level) / 2 * 100
    out = pd.DataFrame({"system": data.systems, "outputs": data.sizes.astype(np.int64)})
    for metric in ("precision", "pooled_recall"):
        out[metric] = run.point[metric].reshape(-1)
        lo, hi = np.nanpercentile(run.replicates[metric], [tail, 100 - tail], axis=0)
        out[f"{metric}_lo"], out[f"{metric}_hi"] = lo, hi
    out["interval"] = f"percentile bootstrap {level:g} (B={bootstrap})"
    return out
