"""Synthetic TAC-KBP-style shared tasks with known ground truth.

:func:`simulate_world` draws a *world*: queries (entity + slot), the universe of true facts of
every query, the documents those facts live in, a larger universe of plausible wrong answers,
and the outputs of many systems grouped in teams.  :meth:`World.annotate` then runs an annotation
campaign on it (per-system precision samples drawn with :mod:`receval.design`, their labels, and
exhaustively annotated documents), and :func:`simulate_task` writes everything as a task bundle
with ``truth.tsv``.  World and annotation take separate generators, so a statistical test can
keep one world and redraw only the annotation.

The generative model (all draws from the generator passed in; nothing else is random)
------------------------------------------------------------------------------------------
*Queries.*  Entities (persons 60 %, organisations 40 %) get about ``slots_per_entity`` queries
each, every query a TAC-KBP slot of the entity's type (distinct while the type has enough).  A single-valued slot (date of
birth, headquarters, ...) has one true fact with probability 0.85, otherwise none; a list-valued
slot has a Poisson-lognormal number of true facts (lognormal σ = ``facts_dispersion``), scaled so
that queries hold ``facts_per_query`` true facts on average: a few queries hold most facts
(heavy tail), many hold one or none.

*Documents.*  Each entity's true facts are spread uniformly over ``≈ facts/facts_per_document``
documents of that entity (at least one), so every true fact lives in **exactly one** document
(its provenance) and a document holds a Poisson number of facts (possibly none).  Drawing
documents uniformly therefore gives every true fact the same inclusion probability, the premise
of the exhaustive-annotation estimators.

*Wrong answers.*  Each query has ``1 + Poisson(wrong_per_fact · (true facts + 1))`` candidate wrong
answers (queries with no true fact still attract wrong answers).  Answer strings are numbered in a
random order within the query, so a string never reveals its label.

*Systems.*  Teams get one member each plus a Dirichlet-multinomial share of the other systems
(sizes 1 to about 12 for the defaults; 1 to 9 in 2015).  A team draws a base precision and recall (logits,
mildly positively correlated across teams); its members are variants of the base system: a
member that outputs more (higher recall) has lower precision.  Both are squashed into
``precision_range`` and ``recall_range``.

*What a system outputs.*  Every candidate x has a base score (true facts: query effect +
document effect + own ease; wrong answers: query effect + an attractiveness of sd
``lure_spread``), and system i of team t
sees ``base(x) + team_spread · T[t, x] + member_spread · M[i, x]`` with independent standard
normal T and M.  System i outputs its ``k_i = r_i · |𝒴|`` best true facts and its
``k_i (1 − p_i) / p_i`` best wrong answers, so its true recall is r_i and its precision p_i
(up to rounding).  Consequences, all emergent rather than imposed: easy facts are found by many
systems and hard ones by none (pool coverage θ = |Y| / |𝒴| well below 1), team members share the
team component and overlap strongly, and attractive wrong answers are output by many systems of
several teams.

*Confidence.*  System i scores its outputs as if it had ranked the whole universe by a binormal
score (true facts ~ N(μ_i, 1), wrong answers ~ N(0, 1)) and output everything above a threshold
t_i; t_i and μ_i are set by its false-positive share and recall (:func:`_binormal_excess`), and
each output gets a draw of its class's normal truncated to (t_i, ∞), by inversion at a standard
normal noise shared within the team (teammates rank alike).  ``score = sigmoid(c_i + 1.5 ·
(latent − t_i) − 0.5)`` rounded to three decimals (c_i a per-system calibration offset), ties in
random order.  Read in score order, a list is the head of a binormal ranking: precision falls
smoothly with rank, from high at the top to the marginal precision at the cut-off, as ranked
retrieval curves do (the curves Dimm's extrapolation is built for).  ``confidence="logistic"``
keeps the earlier model, ``score = sigmoid(c_i + δ_i · correct + 0.8 · η[t, x] + 0.6 · ε)``
with δ_i per team from ``confidence_signal``: correct outputs score higher by a fixed margin
whatever the list's precision, so a low-precision list is nearly all correct at the top and
collapses at the end — curves no ranked-retrieval model describes (a test world for the
back-test of :mod:`receval.estimators.target`).

*Spelling.*  A share ``uppercase_teams`` of the teams spell every answer in upper case; the
bundle's default matching (case folding) maps both spellings onto the same fact.

What the defaults give (seed :data:`DEFAULT_TASK_SEED`, the embedded ``data/kbp-sim``): 70
systems in 18 teams, 317 queries, ~141,000 output rows, ~41,500 distinct facts output, 5,725 true
facts (0 to ~270 per query), θ = 0.66, precision 0.14–0.61, true recall 0.06–0.26; over seeds
the row count ranges ~95,000–230,000 and θ ~0.61–0.75.  (2015 Cold Start: ~70 systems, 18
teams, 317 queries, ~140,000 rows, ~60,000 distinct *(fact, provenance)* keys — the simulator's
facts carry no provenance in their identity, so it has fewer distinct outputs.)

The universe size written to ``task.toml`` (``[universe] size``, the denominator of the
prevalence ρ in Dimm's model) is the number of candidate facts of the world: every true fact
plus every candidate wrong answer, output or not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from receval.config import TaskConfig
from receval.design import (
    DISTRIBUTIONS,
    draw_exhaustive_units,
    draw_precision_samples,
    in_random_order,
)
from receval.estimators.recall import f1_score
from receval.formats.bundle import write_bundle

__all__ = [
    "DEFAULT_TASK_SEED",
    "Annotation",
    "SimulationConfig",
    "World",
    "simulate_task",
    "simulate_world",
    "split_seed",
]

#: The seed of the embedded default task ``data/kbp-sim`` (default :class:`SimulationConfig`).
DEFAULT_TASK_SEED = 2022

#: How systems' confidence scores rank their outputs (``SimulationConfig.confidence``).
CONFIDENCE_MODELS = ("binormal", "logistic")

#: TAC-KBP slots by entity type: (name, list-valued).
PERSON_SLOTS: tuple[tuple[str, bool], ...] = (
    ("per:alternate_names", True),
    ("per:date_of_birth", False),
    ("per:age", False),
    ("per:country_of_birth", False),
    ("per:city_of_birth", False),
    ("per:origin", True),
    ("per:date_of_death", False),
    ("per:cause_of_death", False),
    ("per:countries_of_residence", True),
    ("per:cities_of_residence", True),
    ("per:schools_attended", True),
    ("per:title", True),
    ("per:employee_or_member_of", True),
    ("per:religion", False),
    ("per:spouse", True),
    ("per:children", True),
    ("per:parents", True),
    ("per:siblings", True),
    ("per:other_family", True),
    ("per:charges", True),
)
ORG_SLOTS: tuple[tuple[str, bool], ...] = (
    ("org:alternate_names", True),
    ("org:political_religious_affiliation", True),
    ("org:top_members_employees", True),
    ("org:number_of_employees_members", False),
    ("org:members", True),
    ("org:member_of", True),
    ("org:subsidiaries", True),
    ("org:parents", True),
    ("org:founded_by", True),
    ("org:date_founded", False),
    ("org:date_dissolved", False),
    ("org:country_of_headquarters", False),
    ("org:city_of_headquarters", False),
    ("org:shareholders", True),
    ("org:employees_or_members", True),
    ("org:website", False),
)

_SINGLE_TRUE = 0.85  # P(a single-valued slot has its one true fact)
_PERSON_SHARE = 0.6
_RECALL_CENTRE = -1.7  # mean team logit of the recall position inside recall_range
_PRECISION_CENTRE = -0.2  # same for precision
_PR_CORRELATION = 0.4  # across teams
_MEMBER_SPREAD = 0.45  # sd of a variant's recall logit around its team's
_MEMBER_TRADEOFF = 0.6  # precision logit lost per unit of recall logit gained by a variant


@dataclass(frozen=True)
class SimulationConfig:
    """Everything that shapes a simulated task (defaults: TAC-KBP 2015 Cold Start scale).

    Parameters
    ----------
    systems, queries : how many systems and queries (2015: ~70 systems, 317 queries).
    teams : number of teams; default ``ceil(systems / 4)`` (70 systems -> 18 teams, as in 2015).
    name : the task's name in ``task.toml``.
    per_system : precision-sample draws per system (i.i.d., with replacement).
    exhaustive_units : documents annotated exhaustively; default: as many as hold about
        ``exhaustive_facts`` true facts on average.
    exhaustive_facts : see ``exhaustive_units``.
    annotators : labels per drawn fact; each annotator errs independently with probability
        ``annotator_error`` (default: one annotator, no noise, so labels equal the truth).
    distribution : the precision-sampling distribution (``uniform`` or ``entity-relation``).
    facts_per_query : mean number of true facts per query (the universe 𝒴, not only what
        systems find).
    facts_dispersion : σ of the lognormal behind the number of facts of a list-valued query.
    slots_per_entity : mean queries per entity.
    facts_per_document : mean true facts per document.
    wrong_per_fact : candidate wrong answers per (true fact + 1) of a query.
    precision_range, recall_range : where the systems' true precision and true recall lie.
    team_spread, member_spread : sd of the team and member components of a system's view of a
        candidate (the base score has variance ≈ 1.5); small ``member_spread`` = teammates
        overlap strongly, small ``team_spread`` = all systems find the same facts.
    query_spread, document_spread : sd of the query and document effects on how easy a true
        fact is to find (the query effect also drives how many wrong answers a query attracts).
    confidence_signal : range of δ_i, the logit by which a system's confidence in a correct
        output exceeds that in a wrong one (``confidence="logistic"`` only).
    confidence : ``"binormal"`` (default: each list is the head of a binormal ranking of the
        universe, so precision falls smoothly with rank) or ``"logistic"`` (the earlier model: a
        fixed confidence margin for correct outputs, curves that collapse at the end of the list).
    uppercase_teams : share of teams that spell answers in upper case.
    provenance : write each output's provenance document in ``runs.tsv`` (a true fact's own
        document; for a wrong answer a random document of the query's entity).  Off by default:
        nothing downstream needs it and it adds about a fifth to the bundle's size.
    documents_per_fact : mean number of documents that support a true fact (≥ 1; default 1:
        every fact lives in exactly one document).  Above 1, a fact is also mentioned in
        Poisson(documents_per_fact − 1) further documents of its entity (distinct, capped by the
        entity's documents), facts in more documents are easier to find (log d(x) is added to
        their base score, as for facts repeated across a news collection), and ``exhaustive.tsv``
        gets a ``documents`` column with d(x), the multiplicity θ̂'s fact-level weights need.
    alias_rate : share of true facts that also have an alias (another spelling of the same
        answer, in one TAC-style equivalence class with it; default 0: no aliases).  A system that
        outputs such a fact also outputs its alias with probability ½ (a redundant duplicate,
        which TAC counts once).  The truth, ``truth.tsv`` (``equivalence_class``) and
        :meth:`World.truth_metrics` then count classes; annotators give the class of a correct
        answer and list its aliases among the outputs (as TAC assessors class a query's
        responses together), and exhaustive annotators list each class once.
    """

    systems: int = 70
    queries: int = 317
    teams: int | None = None
    name: str = "kbp-sim"
    per_system: int = 150
    exhaustive_units: int | None = None
    exhaustive_facts: int = 150
    annotators: int = 1
    annotator_error: float = 0.0
    distribution: str = "uniform"
    facts_per_query: float = 19.0
    facts_dispersion: float = 1.1
    slots_per_entity: float = 2.5
    facts_per_document: float = 3.0
    wrong_per_fact: float = 25.0
    precision_range: tuple[float, float] = (0.1, 0.7)
    recall_range: tuple[float, float] = (0.05, 0.4)
    team_spread: float = 1.1
    member_spread: float = 0.5
    query_spread: float = 0.5
    document_spread: float = 0.5
    lure_spread: float = 0.3
    confidence_signal: tuple[float, float] = (0.5, 2.5)
    uppercase_teams: float = 0.2
    provenance: bool = False
    documents_per_fact: float = 1.0
    alias_rate: float = 0.0
    confidence: str = "binormal"

    def __post_init__(self) -> None:
        self._check_counts()
        self._check_shapes()

    def _positive_int(self, name: str) -> None:
        value = getattr(self, name)
        if not isinstance(value, int | np.integer) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive integer, not {value!r}")

    def _check_counts(self) -> None:
        """Sizes of the world and of the annotation campaign."""
        for name in ("systems", "queries", "annotators"):
            self._positive_int(name)
        if self.teams is not None:
            self._positive_int("teams")
            if self.teams > self.systems:
                raise ValueError(f"teams ({self.teams}) cannot exceed systems ({self.systems})")
        if self.exhaustive_units is not None and (
            not isinstance(self.exhaustive_units, int | np.integer) or self.exhaustive_units < 0
        ):
            raise ValueError(f"exhaustive_units must be >= 0, not {self.exhaustive_units!r}")
        if self.per_system < 0 or self.exhaustive_facts < 0:
            raise ValueError("per_system and exhaustive_facts must be >= 0")
        if not 0.0 <= self.annotator_error < 0.5:
            raise ValueError(f"annotator_error must be in [0, 0.5), not {self.annotator_error!r}")
        if self.distribution not in DISTRIBUTIONS:
            raise ValueError(
                f"unknown sampling distribution {self.distribution!r} (known: {', '.join(DISTRIBUTIONS)})"
            )
        if not str(self.name).strip():
            raise ValueError("name must be a non-empty string")

    def _check_shapes(self) -> None:
        """Ranges, rates and spreads that shape the simulated systems and documents."""
        for name in ("precision_range", "recall_range"):
            lo, hi = getattr(self, name)
            if not 0.0 < lo < hi <= 1.0:
                raise ValueError(f"{name} must be a pair lo < hi inside (0, 1], not {(lo, hi)!r}")
        lo, hi = self.confidence_signal
        if not lo <= hi:
            raise ValueError(f"confidence_signal must be a pair lo <= hi, not {(lo, hi)!r}")
        for name in ("facts_per_query", "slots_per_entity", "facts_per_document", "wrong_per_fact"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0")
        spreads = ("facts_dispersion", "team_spread", "member_spread", "query_spread")
        for name in (*spreads, "document_spread", "lure_spread"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0")
        if not self.documents_per_fact >= 1.0:
            raise ValueError(f"documents_per_fact must be >= 1, not {self.documents_per_fact!r}")
        if not 0.0 <= self.alias_rate <= 1.0:
            raise ValueError(f"alias_rate must be in [0, 1], not {self.alias_rate!r}")
        if not 0.0 <= self.uppercase_teams <= 1.0:
            raise ValueError("uppercase_teams must be in [0, 1]")
        if self.confidence not in CONFIDENCE_MODELS:
            raise ValueError(
                f"confidence must be one of {', '.join(CONFIDENCE_MODELS)}, not {self.confidence!r}"
            )

    @property
    def n_teams(self) -> int:
        """The number of teams actually used (``teams`` or its default)."""
        return self.teams if self.teams is not None else max(1, math.ceil(self.systems / 4))

    def as_dict(self) -> dict[str, object]:
        """The settings as plain values (for run cards and reports)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, eq=False)
class Annotation:
    """One simulated annotation campaign: the four annotation tables of a bundle."""

    samples: pd.DataFrame  # sample, system, query_id, answer, prob, draw, design, order
    judgments: pd.DataFrame  # query_id, answer, label, annotator, sample
    exhaustive_units: pd.DataFrame  # unit
    exhaustive: pd.DataFrame  # unit, query_id, answer

    def tables(self) -> dict[str, pd.DataFrame]:
        """The tables by bundle name."""
        return {
            "samples": self.samples,
            "judgments": self.judgments,
            "exhaustive_units": self.exhaustive_units,
            "exhaustive": self.exhaustive,
        }


@dataclass(frozen=True, eq=False)
class World:
    """A simulated world: the truth and every system's output, held as arrays.

    Candidates (true facts first, then wrong answers) are numbered ``0..universe_size-1``; that
    number is the fact id used by :attr:`outputs`.

    Attributes
    ----------
    config : the :class:`SimulationConfig` it was drawn from.
    queries : ``query_id, entity, slot``.
    systems, teams : system names and the team of each (sorted by team, then variant).
    documents : document ids; ``candidate_doc`` indexes it (-1 for wrong answers).
    candidate_query, candidate_answer, candidate_true, candidate_doc : per candidate.
    output_system, output_candidate, output_score, output_doc : one entry per system output
        (system index, candidate index, confidence, provenance document index).
    system_uppercase : whether the system spells answers in upper case.
    target_precision, target_recall : the p_i and r_i the systems were drawn with.
    """

    config: SimulationConfig
    queries: pd.DataFrame
    systems: tuple[str, ...]
    teams: tuple[str, ...]
    documents: np.ndarray
    candidate_query: np.ndarray
    candidate_answer: np.ndarray
    candidate_true: np.ndarray
    candidate_doc: np.ndarray
    output_system: np.ndarray
    output_candidate: np.ndarray
    output_score: np.ndarray
    output_doc: np.ndarray
    system_uppercase: np.ndarray
    target_precision: np.ndarray
    target_recall: np.ndarray
    #: further (true candidate, document) mentions beyond each fact's own document
    mention_candidate: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    mention_doc: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    #: the class (representative candidate id) of each candidate; empty = every candidate its own
    candidate_class: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))

    @cached_property
    def classes(self) -> np.ndarray:
        """Class representative of every candidate (itself unless it is an alias)."""
        if self.candidate_class.size:
            return self.candidate_class
        return np.arange(self.candidate_true.size, dtype=np.int64)

    @cached_property
    def representative(self) -> np.ndarray:
        """Whether each candidate is its class's representative (not an alias)."""
        return self.classes == np.arange(self.classes.size)

    @cached_property
    def fact_documents(self) -> np.ndarray:
        """d(x) per candidate: documents supporting it (1 + further mentions; 0 for wrong ones)."""
        d = self.candidate_true.astype(np.int64)
        np.add.at(d, self.mention_candidate, 1)
        return d

    # ------------------------------------------------------------------ sizes and the truth

    @property
    def universe_size(self) -> int:
        """Candidate facts in the world (true facts + candidate wrong answers)."""
        return int(self.candidate_true.size)

    @cached_property
    def n_true(self) -> int:
        """|𝒴|: the number of true facts (an equivalence class counts once)."""
        return int((self.candidate_true & self.representative).sum())

    @cached_property
    def pool(self) -> np.ndarray:
        """Candidate ids output by at least one system (sorted)."""
        return np.unique(self.output_candidate)

    @cached_property
    def pool_coverage(self) -> float:
        """θ = |Y| / |𝒴|: the share of all true facts that some system output."""
        pooled = np.unique(self.classes[self.pool])
        return float(self.candidate_true[pooled].sum() / self.n_true) if self.n_true else 0.0

    def truth_metrics(self) -> pd.DataFrame:
        """The true scores of every system (the targets the estimators aim at).

        Returns one row per system: ``system, team, outputs, correct, precision`` (|Y_i|/|X_i|),
        ``pooled_recall`` (|Y_i|/|Y|, Y the correct facts some system output), ``recall``
        (true recall |Y_i|/|𝒴|), ``f1`` (of precision and true recall) and ``pool_coverage``
        (θ = |Y|/|𝒴|, the same on every row).  Exact, from the full truth: these are the
        estimands of Chaganty et al. (2017) — π_i, ν_i, θ and r_i = θ · ν_i — that the
        estimators' unbiasedness / consistency tests compare against.
        """
        m = len(self.systems)
        # one output per (system, class): a redundant alias counts once, as TAC counts it
        pairs = np.unique(
            self.output_system.astype(np.int64) * self.classes.size
            + self.classes[self.output_candidate]
        )
        system, klass = pairs // self.classes.size, pairs % self.classes.size
        outputs = np.bincount(system, minlength=m)
        correct = np.bincount(system, weights=self.candidate_true[klass], minlength=m)
        pooled_true = float(self.candidate_true[np.unique(self.classes[self.pool])].sum())
        with np.errstate(invalid="ignore", divide="ignore"):
            precision = np.where(outputs > 0, correct / np.maximum(outputs, 1), np.nan)
            pooled = correct / pooled_true if pooled_true else np.full(m, np.nan)
            recall = correct / self.n_true if self.n_true else np.full(m, np.nan)
            f1 = f1_score(precision, recall)
        return pd.DataFrame(
            {
                "system": list(self.systems),
                "team": list(self.teams),
                "outputs": outputs.astype(np.int64),
                "correct": correct.astype(np.int64),
                "precision": precision,
                "pooled_recall": pooled,
                "recall": recall,
                "f1": f1,
                "pool_coverage": self.pool_coverage,
            }
        )

    # ------------------------------------------------------------------ tables

    @cached_property
    def _query_ids(self) -> np.ndarray:
        return self.queries["query_id"].to_numpy(dtype=object)

    @cached_property
    def outputs(self) -> pd.DataFrame:
        """One row per (system, fact), as :class:`receval.task.Task` ``outputs`` and
        :func:`receval.design.draw_precision_samples` expect: ``system, query_id, answer``
        (normalised), ``answer_raw`` (the system's spelling), ``fact`` (candidate id), ``copies``.
        """
        answer = self.candidate_answer[self.output_candidate]
        raw = answer.copy()
        upper = self.system_uppercase[self.output_system]
        if upper.any():
            raw[upper] = np.char.upper(answer[upper].astype(str)).astype(object)
        return pd.DataFrame(
            {
                "system": np.asarray(self.systems, dtype=object)[self.output_system],
                "query_id": self._query_ids[self.candidate_query[self.output_candidate]],
                "answer": answer,
                "answer_raw": raw,
                "fact": self.output_candidate.astype(np.int64),
                "copies": 1,
            }
        )

    def runs(self) -> pd.DataFrame:
        """``runs.tsv``: ``system, team, query_id, answer, score`` (+ ``provenance`` if configured)."""
        out = self.outputs
        runs = pd.DataFrame(
            {
                "system": out["system"].to_numpy(),
                "team": np.asarray(self.teams, dtype=object)[self.output_system],
                "query_id": out["query_id"].to_numpy(),
                "answer": out["answer_raw"].to_numpy(),
                "score": self.output_score,
            }
        )
        if self.config.provenance:
            runs["provenance"] = self.documents[self.output_doc]
        return runs

    def truth(self) -> pd.DataFrame:
        """``truth.tsv``: every true fact of the universe (C) and every wrong answer output (W)."""
        wrong_out = self.pool[~self.candidate_true[self.pool]]
        ids = np.concatenate([np.flatnonzero(self.candidate_true), wrong_out])
        ids = ids[np.lexsort((self.candidate_answer[ids], self.candidate_query[ids]))]
        truth = pd.DataFrame(
            {
                "query_id": self._query_ids[self.candidate_query[ids]],
                "answer": self.candidate_answer[ids],
                "label": np.where(self.candidate_true[ids], "C", "W").astype(object),
            }
        )
        if self.candidate_class.size:
            truth["equivalence_class"] = self._class_names(ids)
        return truth

    def _class_names(self, ids: np.ndarray) -> np.ndarray:
        """``equivalence_class`` of candidates: ``e<representative>`` for a true fact of a
        class with an alias, empty otherwise."""
        aliased = np.zeros(self.classes.size, bool)
        aliased[self.classes[~self.representative]] = True
        rep = self.classes[ids]
        named = aliased[rep] & self.candidate_true[ids]
        return np.where(named, np.char.add("e", rep.astype(str)), "").astype(object)

    def task_config(self) -> TaskConfig:
        """``task.toml``: the name and ``[universe] size`` = :attr:`universe_size`."""
        return TaskConfig(name=self.config.name, universe_size=self.universe_size)

    def tables(self, annotation: Annotation | None = None) -> dict[str, pd.DataFrame]:
        """The bundle tables (``queries, runs, truth`` and, given, the annotation's tables)."""
        tables = {"queries": self.queries, "runs": self.runs(), "truth": self.truth()}
        if annotation is not None:
            tables.update(annotation.tables())
        return tables

    # ------------------------------------------------------------------ annotation

    @cached_property
    def _fact_index(self) -> pd.Index:
        keys = self._query_ids[self.candidate_query] + "\x1f" + self.candidate_answer
        return pd.Index(keys)

    def candidate_ids(self, query_ids: ArrayLike, answers: ArrayLike) -> np.ndarray:
        """Candidate id of each (query_id, answer) pair (any letter case); -1 if not in the world."""
        q = np.asarray(query_ids, dtype=object)
        a = pd.Series(np.asarray(answers, dtype=object)).str.lower().to_numpy(dtype=object)
        return self._fact_index.get_indexer(q + "\x1f" + a)

    @cached_property
    def _unit_frame(self) -> pd.DataFrame:
        return pd.DataFrame({"unit": self.documents})

    @cached_property
    def _true_by_doc(self) -> tuple[np.ndarray, np.ndarray]:
        """True candidate ids sorted by document, and the start of each document's block."""
        true_ids = np.flatnonzero(self.candidate_true & self.representative)
        docs = self.candidate_doc[true_ids]
        order = np.argsort(docs, kind="stable")
        starts = np.searchsorted(docs[order], np.arange(self.documents.size + 1))
        return true_ids[order], starts

    def exhaustive_unit_count(self, exhaustive_facts: float | None = None) -> int:
        """Documents to draw so that they hold about ``exhaustive_facts`` true facts on average."""
        target = self.config.exhaustive_facts if exhaustive_facts is None else exhaustive_facts
        if self.n_true == 0:
            return 0
        m = round(target * self.documents.size / self.n_true)
        return int(min(max(m, 1 if target > 0 else 0), self.documents.size))

    def annotate(
        self,
        rng: np.random.Generator,
        *,
        per_system: int | None = None,
        exhaustive_units: int | None = None,
        exhaustive_facts: float | None = None,
        annotators: int | None = None,
        annotator_error: float | None = None,
        distribution: str | None = None,
        sample: str = "round-1",
    ) -> Annotation:
        """Simulate one annotation campaign on this world (arguments default to the config).

        1. Precision samples: ``per_system`` i.i.d. draws from every system's output with
           :func:`receval.design.draw_precision_samples` (``prob`` = s_j(x), as recorded in
           ``samples.tsv``).
        2. Judgments: every distinct drawn fact labelled once per annotator from the truth; each
           annotator flips the label with probability ``annotator_error``.
        3. Exhaustive annotation: ``exhaustive_units`` documents (default: enough for about
           ``exhaustive_facts`` true facts) drawn uniformly without replacement with
           :func:`receval.design.draw_exhaustive_units`; ``exhaustive`` lists every true fact
           of each drawn document (perfect exhaustive annotators).
        4. Order: the samples are put in a uniformly random order and marked ``order`` =
           ``random`` (:func:`receval.design.in_random_order`), as ``receval sample`` writes
           its rounds: ``--intervals anytime`` then reads the round draw by draw (rows grouped
           by system are a *legacy* round, from which pooled recall's sequence learns little).
           The permutation comes from a child of ``rng``'s seed sequence
           (:func:`_order_generator`), so the campaign's draws are those ``rng`` gave before
           the order was recorded, and later campaigns from the same ``rng`` are unchanged.

        Draw order (samples, then documents, then annotator errors) is fixed, so the campaign is
        a pure function of ``rng``'s state.
        """
        cfg = self.config
        per_system = cfg.per_system if per_system is None else per_system
        annotators = cfg.annotators if annotators is None else annotators
        error = cfg.annotator_error if annotator_error is None else annotator_error
        distribution = cfg.distribution if distribution is None else distribution
        if exhaustive_units is None:
            exhaustive_units = (
                cfg.exhaustive_units
                if cfg.exhaustive_units is not None and exhaustive_facts is None
                else self.exhaustive_unit_count(exhaustive_facts)
            )
        if annotators < 1 or not 0.0 <= error < 0.5:
            raise ValueError("need annotators >= 1 and annotator_error in [0, 0.5)")

        samples = draw_precision_samples(
            self.outputs, self.queries, per_system, rng, distribution=distribution, sample=sample
        )
        units = draw_exhaustive_units(self._unit_frame, int(exhaustive_units), rng)

        # judgments: each distinct drawn fact once per annotator
        drawn = np.unique(self.candidate_ids(samples["query_id"], samples["answer"]))
        if drawn.size and drawn[0] < 0:  # pragma: no cover - would be a bug in this module
            raise RuntimeError("a drawn answer is not a candidate of the world")
        drawn = self._with_aliases(drawn)
        truth = self.candidate_true[drawn]
        label = np.repeat(truth[:, None], annotators, axis=1)
        if error > 0:
            label ^= rng.random(label.shape) < error
        judgments = pd.DataFrame(
            {
                "query_id": np.repeat(self._query_ids[self.candidate_query[drawn]], annotators),
                "answer": np.repeat(self.candidate_answer[drawn], annotators),
                "label": np.where(label.ravel(), "C", "W").astype(object),
                "annotator": np.tile([f"ann{a + 1}" for a in range(annotators)], drawn.size),
                "sample": sample,
            }
        )
        if self.candidate_class.size:
            judgments["equivalence_class"] = np.repeat(self._class_names(drawn), annotators)

        exhaustive = self.exhaustive_annotation(units["unit"].to_numpy())
        samples = in_random_order(samples, _order_generator(rng))
        return Annotation(
            samples=samples,
            judgments=judgments,
            exhaustive_units=units[["unit"]],
            exhaustive=exhaustive,
        )

    def _with_aliases(self, drawn: np.ndarray) -> np.ndarray:
        """``drawn`` and every pooled member of the class of a drawn true fact (annotators list
        the aliases of a correct answer among the outputs, as TAC assessors class a query's
        responses together)."""
        if not self.candidate_class.size:
            return drawn
        hit = np.unique(self.classes[drawn[self.candidate_true[drawn]]])
        members = self.pool[np.isin(self.classes[self.pool], hit)]
        return np.union1d(drawn, members)

    def exhaustive_annotation(self, units: ArrayLike) -> pd.DataFrame:
        """Every true fact of each of ``units`` (document ids): ``unit, query_id, answer`` (and
        ``documents`` = d(x) when ``documents_per_fact`` > 1); perfect exhaustive annotators."""
        cfg = self.config
        doc_index = pd.Index(self.documents).get_indexer(np.asarray(units, dtype=object))
        ordered, starts = self._true_by_doc
        parts = [ordered[starts[d] : starts[d + 1]] for d in doc_index]
        found = np.concatenate(parts) if parts else np.array([], dtype=np.int64)
        found_doc = self.candidate_doc[found]
        if self.mention_candidate.size:  # facts also mentioned in other documents
            extra = np.isin(self.mention_doc, doc_index)
            found = np.r_[found, self.mention_candidate[extra]]
            found_doc = np.r_[found_doc, self.mention_doc[extra]]
        exhaustive = pd.DataFrame(
            {
                "unit": self.documents[found_doc],
                "query_id": self._query_ids[self.candidate_query[found]],
                "answer": self.candidate_answer[found],
            }
        )
        if cfg.documents_per_fact > 1:
            exhaustive["documents"] = self.fact_documents[found]
        return exhaustive


# ---------------------------------------------------------------------------------------------
# drawing a world


def _binormal_excess(
    noise: np.ndarray,
    system: np.ndarray,
    correct: np.ndarray,
    k: np.ndarray,
    w: np.ndarray,
    n_true: int,
    n_wrong: int,
) -> np.ndarray:
    """Each output's latent score above its system's cut-off, as if the system had ranked the
    whole universe by a binormal score and output its top k_i + w_i.

    System i scores a true fact ~ N(μ_i, 1) and a wrong answer ~ N(0, 1) and outputs everything
    above a threshold t_i: with recall r_i = k_i / n_true and false-positive share
    f_i = w_i / n_wrong, t_i = Φ̄⁻¹(f_i) and μ_i = t_i − Φ̄⁻¹(r_i).  An output's latent score is
    then a draw of the matching normal truncated to (t_i, ∞), here by inversion at
    u = Φ(noise) (``noise`` standard normal, shared within a team, so teammates rank alike):
    excess = Φ⁻¹(s) − Φ⁻¹((1 − u) s) with s = r_i (true) or f_i (wrong).  The list read in score
    order is the head of a binormal ranking — precision falls smoothly with rank, from high at
    the top to the marginal precision at the cut-off — the shape of ranked retrieval curves.
    """
    from scipy.special import ndtr, ndtri

    tiny = 1e-12
    recall = np.clip(k / max(n_true, 1), tiny, 1 - tiny)
    false_share = np.clip(w / max(n_wrong, 1), tiny, 1 - tiny)
    share = np.where(correct, recall[system], false_share[system])
    u = np.clip(ndtr(noise), 0.0, 1 - tiny)
    return ndtri(share) - ndtri((1.0 - u) * share)


def _squash(z: np.ndarray, bounds: tuple[float, float]) -> np.ndarray:
    lo, hi = bounds
    return lo + (hi - lo) / (1.0 + np.exp(-z))


def _ids(prefix: str, n: int, width: int = 3) -> np.ndarray:
    width = max(width, len(str(n)))
    return np.array([f"{prefix}{i + 1:0{width}d}" for i in range(n)], dtype=object)


def _rank_within(groups: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Rank (0-based) of each item within its group by ``keys``."""
    order = np.lexsort((keys, groups))
    g = groups[order]
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    first = np.repeat(starts, np.diff(np.r_[starts, g.size]))
    rank = np.empty(groups.size, dtype=np.int64)
    rank[order] = np.arange(groups.size) - first
    return rank


def _draw_queries(cfg: SimulationConfig, rng: np.random.Generator):
    """Queries (entity, slot, list-valued?) and the number of true facts of each."""
    q = cfg.queries
    n_entities = max(1, min(q, round(q / cfg.slots_per_entity)))
    entity = np.sort(np.r_[np.arange(n_entities), rng.integers(0, n_entities, q - n_entities)])
    person = rng.random(n_entities) < _PERSON_SHARE
    slot_names = np.empty(q, dtype=object)
    multi = np.empty(q, dtype=bool)
    starts = np.searchsorted(entity, np.arange(n_entities + 1))
    for e in range(n_entities):
        slots = PERSON_SLOTS if person[e] else ORG_SLOTS
        count = starts[e + 1] - starts[e]
        pick = rng.choice(len(slots), size=count, replace=count > len(slots))
        slot_names[starts[e] : starts[e + 1]] = [slots[i][0] for i in pick]
        multi[starts[e] : starts[e + 1]] = [slots[i][1] for i in pick]

    # true facts: single-valued slots 0/1, list-valued Poisson-lognormal (heavy tail)
    single_mean = _SINGLE_TRUE * (~multi).sum()
    list_mean = max(cfg.facts_per_query * q - single_mean, 0.0) / max(int(multi.sum()), 1)
    sigma = cfg.facts_dispersion
    lam = np.exp(rng.normal(math.log(max(list_mean, 1e-9)) - sigma**2 / 2, sigma, q))
    counts = np.where(multi, rng.poisson(lam), rng.random(q) < _SINGLE_TRUE).astype(np.int64)
    queries = pd.DataFrame(
        {
            "query_id": _ids("Q", q),
            "entity": _ids("E", n_entities)[entity],
            "slot": slot_names,
        }
    )
    return queries, entity, n_entities, counts


def _draw_systems(cfg: SimulationConfig, rng: np.random.Generator):
    """Team sizes, names, and the target precision / recall of every system."""
    n_teams = cfg.n_teams
    extra = rng.multinomial(cfg.systems - n_teams, rng.dirichlet(np.full(n_teams, 3.0)))
    sizes = 1 + extra
    team_of = np.repeat(np.arange(n_teams), sizes)
    member = np.arange(cfg.systems) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    team_names = _ids("T", n_teams, width=2)
    systems = tuple(f"{team_names[t]}_{k + 1}" for t, k in zip(team_of, member, strict=True))

    zr = rng.normal(0.0, 1.0, n_teams)
    zp = _PR_CORRELATION * zr + math.sqrt(1 - _PR_CORRELATION**2) * rng.normal(0, 1, n_teams)
    dev = rng.normal(0.0, _MEMBER_SPREAD, cfg.systems)
    recall = _squash(_RECALL_CENTRE + zr[team_of] + dev, cfg.recall_range)
    precision = _squash(
        _PRECISION_CENTRE + zp[team_of] - _MEMBER_TRADEOFF * dev + rng.normal(0, 0.2, cfg.systems),
        cfg.precision_range,
    )
    lo, hi = cfg.confidence_signal
    delta = (lo + (hi - lo) * rng.random(n_teams))[team_of]
    calibration = rng.normal(0.0, 0.5, n_teams)[team_of] + rng.normal(0.0, 0.2, cfg.systems)
    upper = (rng.random(n_teams) < cfg.uppercase_teams)[team_of]
    return (
        team_of,
        systems,
        tuple(team_names[team_of].tolist()),
        precision,
        recall,
        delta,
        calibration,
        upper,
    )


def simulate_world(config: SimulationConfig, rng: np.random.Generator) -> World:
    """Draw a world (queries, truth, documents, systems and their outputs) from ``config``.

    The generative model is described in the module docstring.  The result is exact ground
    truth: :meth:`World.truth_metrics` gives every system's true precision, pooled recall and
    true recall, and :attr:`World.pool_coverage` the true θ.  Deterministic given ``rng``'s state;
    numpy-vectorised over candidates (memory: one float32 row per team plus one per system at a
    time; 70 systems × 317 queries take a fraction of a second).
    """
    cfg = config
    queries, entity, n_entities, true_counts = _draw_queries(cfg, rng)
    q = cfg.queries
    team_of, systems, teams, precision, recall, delta, calibration, upper = _draw_systems(cfg, rng)
    m = cfg.systems

    # documents: each entity's true facts spread over its own documents
    facts_per_entity = np.bincount(entity, weights=true_counts, minlength=n_entities)
    docs_per_entity = np.maximum(1, np.rint(facts_per_entity / cfg.facts_per_document)).astype(int)
    doc_start = np.r_[0, np.cumsum(docs_per_entity)]
    documents = _ids("D", int(doc_start[-1]), width=4)

    # candidates: true facts, then wrong answers, each with the query it answers
    wrong_counts = 1 + rng.poisson(cfg.wrong_per_fact * (true_counts + 1))
    true_query = np.repeat(np.arange(q), true_counts)
    wrong_query = np.repeat(np.arange(q), wrong_counts)
    n_true, n_wrong = true_query.size, wrong_query.size
    true_entity = entity[true_query]
    true_doc = doc_start[true_entity] + np.floor(
        rng.random(n_true) * docs_per_entity[true_entity]
    ).astype(np.int64)
    cand_query = np.r_[true_query, wrong_query]
    cand_true = np.r_[np.ones(n_true, bool), np.zeros(n_wrong, bool)]
    cand_doc = np.r_[true_doc, np.full(n_wrong, -1, dtype=np.int64)]
    mention_candidate, mention_doc, log_docs = _extra_mentions(
        cfg, rng, true_entity, true_doc, doc_start, docs_per_entity
    )
    rank = _rank_within(cand_query, rng.random(cand_query.size))
    cand_answer = np.char.add("a", rank.astype(str)).astype(object)

    # base scores: how easy a true fact is to find / how attractive a wrong answer is
    query_ease = rng.normal(0.0, cfg.query_spread, q)
    doc_ease = rng.normal(0.0, cfg.document_spread, documents.size)
    query_lure = rng.normal(0.0, cfg.query_spread, q)
    base = np.r_[
        query_ease[true_query] + doc_ease[true_doc] + log_docs + rng.normal(0.0, 1.0, n_true),
        query_lure[wrong_query] + rng.normal(0.0, cfg.lure_spread, n_wrong),
    ].astype(np.float32)
    n = cand_query.size

    # selection: system i sees base + team_spread·T[t] + member_spread·M[i] and outputs its k_i
    # best true facts and w_i best wrong answers (one row of M at a time: memory O(teams × n))
    rlo, rhi = cfg.recall_range
    k_min = min(max(1, math.ceil(rlo * n_true)), n_true)
    k_max = max(k_min, math.floor(rhi * n_true))
    k = np.clip(np.rint(recall * n_true), k_min, k_max).astype(np.int64)
    w = np.minimum(np.rint(k * (1.0 - precision) / precision).astype(np.int64), n_wrong)
    w = np.where(k + w == 0, min(1, n_wrong), w)
    team_view = rng.standard_normal((cfg.n_teams, n), dtype=np.float32)
    team_view *= np.float32(cfg.team_spread)
    chosen = []
    for i in range(m):
        row = rng.standard_normal(n, dtype=np.float32)
        row *= np.float32(cfg.member_spread)
        row += team_view[team_of[i]]
        row += base
        picks = []
        if k[i] > 0:
            picks.append(np.argpartition(-row[:n_true], k[i] - 1)[: k[i]])
        if w[i] > 0:
            picks.append(n_true + np.argpartition(-row[n_true:], w[i] - 1)[: w[i]])
        chosen.append(np.sort(np.concatenate(picks)))
    out_system = np.repeat(np.arange(m), [c.size for c in chosen])
    out_cand = np.concatenate(chosen)

    # confidence: correct outputs score higher; teammates share most of the noise
    _, pair = np.unique(team_of[out_system] * n + out_cand, return_inverse=True)
    shared = rng.standard_normal(int(pair.max()) + 1 if pair.size else 0)
    if cfg.confidence == "logistic":
        logit = (
            calibration[out_system]
            + delta[out_system] * cand_true[out_cand]
            + 0.8 * shared[pair]
            + 0.6 * rng.standard_normal(out_cand.size)
        )
    else:
        noise = 0.8 * shared[pair] + 0.6 * rng.standard_normal(out_cand.size)
        excess = _binormal_excess(noise, out_system, cand_true[out_cand], k, w, n_true, n - n_true)
        logit = calibration[out_system] + 1.5 * excess - 0.5
    score = np.round(1.0 / (1.0 + np.exp(-logit)), 3)

    # provenance: a true fact's own document; a wrong answer cites a document of the entity
    out_query = cand_query[out_cand]
    out_entity = entity[out_query]
    random_doc = doc_start[out_entity] + np.floor(
        rng.random(out_cand.size) * docs_per_entity[out_entity]
    ).astype(np.int64)
    out_doc = np.where(cand_true[out_cand], cand_doc[out_cand], random_doc)

    aliases = _aliases(cfg, rng, n, n_true, out_system, out_cand, score, out_doc)
    if aliases is not None:
        cand_query, cand_answer, cand_true, cand_doc, classes = _alias_candidates(
            aliases[0], cand_query, cand_answer, cand_true, cand_doc
        )
        out_system, out_cand, score, out_doc = aliases[1:]
        out_query = cand_query[out_cand]
    else:
        classes = np.empty(0, np.int64)

    # rows ordered by system, query, falling score (equal scores in random order: a true fact's
    # candidate number is lower than a wrong one's, which must not decide ties)
    ties = () if cfg.confidence == "logistic" else (rng.random(score.size),)
    order = np.lexsort((*ties, -score, out_query, out_system))
    return World(
        config=cfg,
        queries=queries,
        systems=systems,
        teams=teams,
        documents=documents,
        candidate_query=cand_query,
        candidate_answer=cand_answer,
        candidate_true=cand_true,
        candidate_doc=cand_doc,
        output_system=out_system[order],
        output_candidate=out_cand[order],
        output_score=score[order],
        output_doc=out_doc[order],
        system_uppercase=upper,
        target_precision=precision,
        target_recall=recall,
        mention_candidate=mention_candidate,
        mention_doc=mention_doc,
        candidate_class=classes,
    )


def _aliases(cfg, rng, n, n_true, out_system, out_cand, score, out_doc):
    """(aliased true facts, output arrays with the alias rows added) or None (``alias_rate``
    0: nothing drawn, default worlds unchanged).  Alias candidate ``n + k`` spells aliased fact
    ``k``; a system outputting an aliased fact also outputs the alias with probability ½, with
    the same confidence and provenance."""
    if cfg.alias_rate <= 0:
        return None
    aliased = np.flatnonzero(rng.random(n_true) < cfg.alias_rate)
    alias_of = np.full(n, -1, np.int64)
    alias_of[aliased] = n + np.arange(aliased.size)
    extra = (alias_of[out_cand] >= 0) & (rng.random(out_cand.size) < 0.5)
    return (
        aliased,
        np.r_[out_system, out_system[extra]],
        np.r_[out_cand, alias_of[out_cand[extra]]],
        np.r_[score, score[extra]],
        np.r_[out_doc, out_doc[extra]],
    )


def _alias_candidates(aliased, cand_query, cand_answer, cand_true, cand_doc):
    """The candidate arrays with one alias per aliased fact appended, and every candidate's
    class representative."""
    n = cand_query.size
    classes = np.r_[np.arange(n, dtype=np.int64), aliased.astype(np.int64)]
    return (
        np.r_[cand_query, cand_query[aliased]],
        np.r_[cand_answer, np.char.add(cand_answer[aliased].astype(str), "-alias").astype(object)],
        np.r_[cand_true, np.ones(aliased.size, bool)],
        np.r_[cand_doc, cand_doc[aliased]],
        classes,
    )


def _extra_mentions(cfg, rng, true_entity, true_doc, doc_start, docs_per_entity):
    """Further documents of each true fact (``documents_per_fact`` > 1): candidate and document
    of each extra mention (distinct, not the fact's own document) and log d(x) per true fact.
    Draws nothing when ``documents_per_fact`` is 1, so default worlds are unchanged."""
    n_true = true_entity.size
    if cfg.documents_per_fact <= 1:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.zeros(n_true)
    extra = rng.poisson(cfg.documents_per_fact - 1.0, n_true)
    fact = np.repeat(np.arange(n_true), extra)
    ent = true_entity[fact]
    doc = doc_start[ent] + np.floor(rng.random(fact.size) * docs_per_entity[ent]).astype(np.int64)
    keep = doc != true_doc[fact]
    pairs = np.unique(np.stack([fact[keep], doc[keep]]), axis=1)
    d = 1 + np.bincount(pairs[0], minlength=n_true)
    return pairs[0].astype(np.int64), pairs[1].astype(np.int64), np.log(d)


# ---------------------------------------------------------------------------------------------
# the bundle


def split_seed(seed: int) -> tuple[np.random.Generator, np.random.Generator]:
    """Two independent generators from one seed: (world, annotation).

    :func:`simulate_task` uses them, so ``simulate_world(config, split_seed(s)[0])`` rebuilds the
    world of the bundle written with seed ``s`` and ``split_seed(s)[1]`` its annotation.
    """
    world_seq, annotation_seq = np.random.SeedSequence(seed).spawn(2)
    return np.random.default_rng(world_seq), np.random.default_rng(annotation_seq)


def simulate_task(
    out: Path | str,
    config: SimulationConfig | None = None,
    seed: int = 0,
    overwrite: bool = False,
) -> Path:
    """Simulate a world and one annotation campaign; write them as a task bundle at ``out``.

    Files: ``task.toml`` (name, ``[universe] size``), ``queries.tsv``, ``runs.tsv``,
    ``samples.tsv``, ``judgments.tsv``, ``exhaustive_units.tsv``, ``exhaustive.tsv`` and
    ``truth.tsv``.  Written atomically (:func:`receval.formats.bundle.write_bundle`); an existing
    non-empty ``out`` is refused unless ``overwrite``.  Deterministic for a seed: the world is
    drawn from ``split_seed(seed)[0]`` and the annotation from ``split_seed(seed)[1]``.
    """
    config = SimulationConfig() if config is None else config
    world_rng, annotation_rng = split_seed(seed)
    world = simulate_world(config, world_rng)
    annotation = world.annotate(annotation_rng)
    return write_bundle(out, world.tables(annotation), world.task_config(), overwrite=overwrite)


def _order_generator(rng: np.random.Generator) -> np.random.Generator:
    """A generator independent of ``rng`` that leaves ``rng``'s stream untouched: a child of its
    seed sequence (each call a new child), or ``rng`` itself when it has none."""
    bits = rng.bit_generator
    seq = getattr(bits, "seed_seq", None) or getattr(bits, "_seed_seq", None)
    if isinstance(seq, np.random.SeedSequence):
        return np.random.default_rng(seq.spawn(1)[0])
    return rng
