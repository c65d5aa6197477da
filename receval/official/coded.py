"""The official closed-world census over integer codes, in process (numpy), for fact-matched
bundles.

The same counts as the response-by-response pandas scorer
(:func:`receval.official.responses.categorize_responses`) and the SQL census
(:func:`receval.official.census.official_census`, :func:`receval.official.census.leave_team_out`),
counted from the task's integer codes (system, team, hop-0 query, fact) with a few ``bincount``
and one ``unique`` per call: no string per row, no engine.  It covers the bundles
:func:`receval.official.rules.fact_matched` accepts (no provenance on both sides, every class one
fact, no mention types, no ``hop`` column on the runs), i.e. every TREC bundle and every bundle
that is not TAC; for those the rules of :mod:`receval.official.scores` reduce to:

* a response is matched to the assessment of its fact (a correct one if any, else the first in
  file order); *unassessed* when none;
* post-policy class from the category and the :class:`OfficialPolicy`; an unassessed response to
  a query nobody judged is ignored (trec_eval skips topics absent from the qrels);
* one right response per (system, fact) (equivalently per class), and per (system, query) for a
  single-valued slot; the others are duplicates (``policy.duplicate``);
* ``gt`` of a query: its distinct correct or inexact judged facts (at most 1 for a
  single-valued slot).

This is a census of the assessed pool: exact counts, no sampling uncertainty, biased as an
estimate of true precision and recall (see :mod:`receval.official.scores`).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from receval.formats.coded import codes_in
from receval.official.rules import (
    COUNT_COLUMNS,
    OfficialPolicy,
    fact_matched,
    hop0_queries,
    official_rates,
    policy_words,
)
from receval.task import Task

#: Category codes (as the SQL census numbers them); 4 = unassessed.
_CATEGORY = {"correct": 0, "wrong": 1, "inexact": 2, "ignore": 3}
_UNASSESSED = 4
#: Post-policy codes.
_RIGHT, _WRONG, _IGNORED = 0, 1, 2
_WORD = {"right": _RIGHT, "wrong": _WRONG, "ignore": _IGNORED}

#: Count columns of one (system, query) cell, before the duplicate rule moves right responses.
_PRE_COLUMNS = (
    "assessed_correct",
    "assessed_wrong",
    "assessed_inexact",
    "assessed_ignore",
    "unassessed",
)


@dataclass(frozen=True)
class CodedResponses:
    """The hop-0 run rows of a fact-matched task as integer codes.

    ``system`` indexes ``task.systems``, ``team`` the sorted teams, ``query`` the hop-0 queries
    (``queries``: ``query_id``, ``single`` in ``task.queries`` order), ``fact`` the task's fact
    ids; ``rows`` the kept positions of ``task.raw_outputs`` (None: all rows).  Per fact,
    ``category`` is the matched assessment's category (4: none); per hop-0 query,
    ``judged_query`` says it has a judgment and ``gt`` counts its classes; ``classed_query``,
    ``classed_fact`` list the distinct correct or inexact judged facts (the classes)."""

    n_systems: int
    system: np.ndarray
    team: np.ndarray
    query: np.ndarray
    fact: np.ndarray
    rows: np.ndarray | None
    queries: pd.DataFrame
    teams: list[str]
    category: np.ndarray
    judged_query: np.ndarray
    classed_query: np.ndarray
    classed_fact: np.ndarray
    gt: np.ndarray
    #: no (system, fact) pair on two rows (checked by the caller): no duplicate to count
    distinct_pairs: bool = False
    #: per-query count frames already counted, by (policy words, cutoff); ``"owners"``: each
    #: fact's one team (:func:`fact_owners`)
    counted: dict = field(default_factory=dict, compare=False, repr=False)


def coded_responses(task: Task) -> CodedResponses:
    """:class:`CodedResponses` of a fact-matched ``task`` (see the module docstring)."""

    queries = hop0_queries(task)
    query_index = pd.Index(queries["query_id"])
    raw = task.raw_outputs
    query = codes_in(raw["query_id"], query_index)  # int32 codes: 4 bytes per row
    keep = query >= 0
    rows = None if keep.all() else np.flatnonzero(keep)
    teams = sorted(set(task.teams.values()))
    system = codes_in(raw["system"], pd.Index(task.systems))
    team = codes_in(raw["team"], pd.Index(teams))
    fact = raw["fact"].to_numpy(np.int64)
    if rows is not None:
        system, team, query, fact = system[rows], team[rows], query[rows], fact[rows]
    return responses_of_codes(
        queries, task.judgments, teams, (system, team, query, fact), len(task.systems),
        len(task.facts), rows
    )  # fmt: skip


def responses_of_codes(
    queries: pd.DataFrame,
    judgments: pd.DataFrame,
    teams: list[str],
    codes: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    n_systems: int,
    n_facts: int,
    rows: np.ndarray | None = None,
    distinct_pairs: bool = False,
) -> CodedResponses:
    """:class:`CodedResponses` from the rows' (system, team, query, fact) ``codes`` and the
    judgments (``query_id, fact, category``): :func:`coded_responses` without a task
    (:mod:`receval.official.direct` reads the codes from the run tables).  ``distinct_pairs``:
    the caller checked that no (system, fact) pair is on two rows."""
    system, team, query, fact = codes
    query_index = pd.Index(queries["query_id"])
    jq = _indexer_few(query_index, judgments["query_id"])
    jkeep = jq >= 0
    jfact = judgments["fact"].to_numpy(np.int64)[jkeep]
    jcat = _category_codes(judgments["category"])[jkeep]
    judged_query = np.zeros(len(queries), dtype=bool)
    judged_query[jq[jkeep]] = True
    classed = (jcat == _CATEGORY["correct"]) | (jcat == _CATEGORY["inexact"])
    classed_fact, first = np.unique(jfact[classed], return_index=True)
    classed_query = jq[jkeep][classed][first].astype(np.int64)
    single = queries["single"].to_numpy(bool)
    gt = np.bincount(classed_query, minlength=len(queries)).astype(np.int64)
    return CodedResponses(
        n_systems=n_systems,
        system=system,
        team=team,
        query=query,
        fact=fact,
        rows=rows,
        queries=queries,
        teams=teams,
        category=_chosen_category(jfact, jcat, n_facts),
        judged_query=judged_query,
        classed_query=classed_query,
        classed_fact=classed_fact,
        gt=np.where(single, np.minimum(gt, 1), gt),
        distinct_pairs=distinct_pairs,
    )


def _indexer_few(index: pd.Index, values: pd.Series) -> np.ndarray:
    """``index.get_indexer(values)`` looked up once per distinct value (a few queries)."""
    codes, distinct = pd.factorize(values, use_na_sentinel=False)
    return index.get_indexer(distinct)[codes]


def _category_codes(category: pd.Series) -> np.ndarray:
    """``category.map(_CATEGORY)`` as int64, mapped once per distinct category."""
    codes, distinct = pd.factorize(category, use_na_sentinel=False)
    return pd.Series(distinct).map(_CATEGORY).to_numpy(np.int64)[codes]


def register_responses(task: object, coded: CodedResponses) -> None:
    """Use ``coded`` as the coded responses of ``task`` (a view without row frames,
    :class:`receval.official.direct.OfficialView`)."""
    _CODED[task] = coded


def _chosen_category(fact: np.ndarray, category: np.ndarray, n_facts: int) -> np.ndarray:
    """Per fact, the category of the assessment a response matches: the first correct one in
    file order, else the first one; 4 (unassessed) for facts nobody assessed."""
    out = np.full(n_facts, _UNASSESSED, dtype=np.int8)
    if not len(fact):
        return out
    order = np.lexsort((np.arange(len(fact)), category != _CATEGORY["correct"], fact))
    sorted_fact = fact[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = sorted_fact[1:] != sorted_fact[:-1]
    out[sorted_fact[first]] = category[order[first]]
    return out


def trec_eval_rank_codes(task: Task, coded: CodedResponses) -> np.ndarray:
    """1-based rank of each coded response within its (system, query) in trec_eval's order
    (score as float32 decreasing, then document id decreasing in code-point order; unscored
    last; file order when no row has a score): :func:`receval.official.responses.trec_eval_rank`
    over codes."""
    raw = task.raw_outputs
    n = len(coded.system)
    score = raw["score"].to_numpy(dtype=float) if "score" in raw.columns else None
    if score is not None and coded.rows is not None:
        score = score[coded.rows]
    if score is None or np.isnan(score).all():
        order = np.lexsort((np.arange(n), coded.query, coded.system))
    else:
        doc = _code_point_order(raw["answer_raw"])
        if coded.rows is not None:
            doc = doc[coded.rows]
        # negated: decreasing score (NaN stays NaN and sorts last) and decreasing document id
        order = np.lexsort((-doc, -score.astype(np.float32), coded.query, coded.system))
    group = coded.system[order].astype(np.int64) * (len(coded.queries) + 1) + coded.query[order]
    start = np.ones(n, dtype=bool)
    start[1:] = group[1:] != group[:-1]
    begin = np.maximum.accumulate(np.where(start, np.arange(n), 0))
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n) - begin + 1
    return rank


def _code_point_order(column: pd.Series) -> np.ndarray:
    """Per row, the position of its text among the column's distinct values in code-point
    order (a Categorical's codes when its categories are sorted)."""
    if not isinstance(column.dtype, pd.CategoricalDtype):
        column = column.astype(str).astype("category")
    categories = column.cat.categories
    codes = column.cat.codes.to_numpy().astype(np.int64)
    if categories.is_monotonic_increasing:
        return codes
    order = np.argsort(categories.to_numpy(dtype=object), kind="stable")
    position = np.empty(len(order), dtype=np.int64)
    position[order] = np.arange(len(order))
    return position[codes]


def cell_counts(
    coded: CodedResponses,
    category: np.ndarray,
    policy_words: dict[str, str],
    keep: np.ndarray | None = None,
    unjudged_queries_ignored: bool = True,
) -> np.ndarray:
    """Official counts per (system, query) cell: an int64 array (systems × queries, 11) in the
    order of :data:`receval.official.rules.COUNT_COLUMNS` without ``gt``.

    ``category`` is each response's matched category (0 correct, 1 wrong, 2 inexact, 3 ignore,
    4 unassessed); ``policy_words`` maps ``inexact``, ``unassessed`` and ``duplicate`` to right,
    wrong or ignore; ``keep`` selects responses (a cutoff); ``unjudged_queries_ignored``: an
    unassessed response to a query nobody judged is ignored (the official census; the SQL
    leave-one-team-out counts it by the policy).
    """
    n_sys, n_query = coded.n_systems, len(coded.queries)
    system, query, fact = coded.system, coded.query, coded.fact
    if keep is not None:
        system, query, fact, category = system[keep], query[keep], fact[keep], category[keep]
    cells = n_sys * n_query
    post_of = np.array(
        [
            _RIGHT,
            _WRONG,
            _WORD[policy_words["inexact"]],
            _IGNORED,
            _WORD[policy_words["unassessed"]],
        ],
        dtype=np.int8,
    )
    # one bincount per block of rows: 5 categories x 3 post-policy classes per cell
    table = np.zeros(cells * 15, dtype=np.int64)
    pairs = [np.zeros(0, np.int64)]  # right classed responses: (fact, system) pair ...
    pair_cells = [np.zeros(0, np.int64)]  # ... and cell
    for start in range(0, len(system), COUNT_BLOCK_ROWS):
        block = slice(start, start + COUNT_BLOCK_ROWS)
        cell = system[block].astype(np.int64) * n_query + query[block]
        cat = category[block]
        post = post_of[cat]
        if unjudged_queries_ignored:
            post[(cat == _UNASSESSED) & ~coded.judged_query[query[block]]] = _IGNORED
        table += np.bincount(cell * 15 + cat * 3 + post, minlength=cells * 15)
        if coded.distinct_pairs:  # no (system, fact) repeats: no duplicate per fact
            continue
        classed = (post == _RIGHT) & ((cat == _CATEGORY["correct"]) | (cat == _CATEGORY["inexact"]))
        rows = np.flatnonzero(classed)
        pairs.append(fact[block][rows].astype(np.int64) * n_sys + system[block][rows])
        pair_cells.append(cell[rows])
    table = table.reshape(cells, 5, 3)
    by_category = table.sum(axis=2)
    by_post = table.sum(axis=1)
    # duplicates: right responses beyond the first per (system, fact) among classed ones, then
    # beyond the first per (system, query) for a single-valued slot
    pair, pair_cell = np.concatenate(pairs), np.concatenate(pair_cells)
    _, first = np.unique(pair, return_index=True)
    per_fact = np.bincount(pair_cell, minlength=cells) - np.bincount(
        pair_cell[first], minlength=cells
    )
    single = np.tile(coded.queries["single"].to_numpy(bool), n_sys)
    remaining = by_post[:, _RIGHT] - per_fact
    duplicates = per_fact + np.where(single, np.maximum(remaining - 1, 0), 0)
    moved = np.zeros((cells, 3), dtype=np.int64)
    moved[:, _WORD[policy_words["duplicate"]]] = duplicates
    post_counts = by_post - np.outer(duplicates, [1, 0, 0]) + moved
    outputs = by_category.sum(axis=1)
    judged = outputs - by_category[:, _UNASSESSED]
    return np.column_stack([outputs, judged, by_category, duplicates, post_counts]).astype(np.int64)


#: Rows counted per step of :func:`cell_counts`: its temporaries (about 30 bytes per row) stay
#: bounded whatever the task's size.
COUNT_BLOCK_ROWS = 1 << 22

#: Largest task (run rows) counted in process by default; larger ones go to the task's embedded
#: DuckDB, which spills to disk (:func:`receval.official.census.default_engine`).  The task is
#: in memory either way and the count here holds 12 bytes of codes per row (blocks bound the
#: rest), DuckDB's tables 13: at 3·10⁷ TREC run rows the pooling-bias diagnostic took 6.1 s of
#: CPU here against 28.7 s in DuckDB, the same peak memory (the loaded task's, 4.4 GB) and the
#: same bytes (the limit was 10⁷).
IN_PROCESS_ROWS = 100_000_000

#: each task's coded responses, kept while the task lives (a Task is frozen)
_CODED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def in_process(task: Task) -> bool:
    """True when the official census of ``task`` is counted here rather than by an engine:
    a fact-matched bundle (:func:`receval.official.rules.fact_matched`) of at most
    :data:`IN_PROCESS_ROWS` run rows."""

    return len(task.raw_outputs) <= IN_PROCESS_ROWS and fact_matched(task)


def cached_responses(task: Task) -> CodedResponses:
    """:func:`coded_responses` of ``task``, computed once per task."""
    coded = _CODED.get(task)
    if coded is None:
        coded = _CODED[task] = coded_responses(task)
    return coded


def per_query_counts(
    task: Task, policy: OfficialPolicy | None = None, cutoff: int | None = None
) -> pd.DataFrame:
    """Official counts per (system, hop-0 query) of a fact-matched task: the frame of
    :func:`receval.official.scores.official_per_query` before its rates (``system, team,
    query_id`` + count columns + ``evaluated``), every system × query cell, systems in
    ``task.systems`` order.  With ``cutoff`` K only each system's top K responses per query
    (:func:`trec_eval_rank_codes`) count."""
    coded = cached_responses(task)
    words = policy_words(task, policy)
    key = (tuple(sorted(words.items())), cutoff)
    if key not in coded.counted:  # the score and the pooling-bias diagnostic share it
        coded.counted[key] = _per_query_frame(task, coded, words, cutoff)
    return coded.counted[key].copy()


def _per_query_frame(
    task: Task, coded: CodedResponses, words: dict[str, str], cutoff: int | None
) -> pd.DataFrame:

    keep = None if cutoff is None else trec_eval_rank_codes(task, coded) <= cutoff
    counts = cell_counts(coded, coded.category[coded.fact], words, keep)
    index = pd.MultiIndex.from_product(
        [task.systems, coded.queries["query_id"].tolist()], names=["system", "query_id"]
    )
    frame = pd.DataFrame(counts, index=index, columns=COUNT_COLUMNS[:-1])
    frame["gt"] = np.tile(coded.gt, coded.n_systems)
    judged = np.tile(coded.judged_query, coded.n_systems)
    frame["evaluated"] = ((counts[:, 0] > 0) & judged).astype(np.int64)
    out = frame.reset_index()
    out.insert(1, "team", out["system"].map(task.teams))
    return out


def leave_team_out_coded(task: Task, policy: OfficialPolicy | None = None) -> pd.DataFrame:
    """Official micro P/R/F1 of every system with its team's unique facts left out of the pool,
    counted as :func:`receval.official.census.leave_team_out` counts it (the same frame: index
    ``system``; ``right, wrong, gt, precision, recall, f1``).

    A response on a fact that only its own team output loses its assessment (it is unassessed:
    the policy's ``unassessed`` class), and each team's recall denominator loses the classes
    only it found (a single-valued query's one class when all its classes are the team's).
    """

    coded = cached_responses(task)
    owner = fact_owners(coded)
    blocks = [slice(s, s + COUNT_BLOCK_ROWS) for s in range(0, len(coded.fact), COUNT_BLOCK_ROWS)]
    category = np.empty(len(coded.fact), dtype=np.int8)
    for block in blocks:
        fact = coded.fact[block]
        category[block] = np.where(owner[fact] >= 0, _UNASSESSED, coded.category[fact])
    counts = cell_counts(
        coded, category, policy_words(task, policy), unjudged_queries_ignored=False
    )
    per_system = counts.reshape(coded.n_systems, len(coded.queries), -1).sum(axis=1)
    team_of = pd.Index(coded.teams).get_indexer([task.teams[s] for s in task.systems])
    gt = int(coded.gt.sum()) - _classes_lost(coded, owner)[team_of]
    rated = official_rates(
        pd.DataFrame({"right": per_system[:, -3], "wrong": per_system[:, -2], "gt": gt})
    )
    return pd.DataFrame(
        {
            "right": per_system[:, -3].astype(np.int64),
            "wrong": per_system[:, -2].astype(np.int64),
            "gt": gt.astype(np.int64),
            "precision": rated["precision"].to_numpy(float),
            "recall": rated["recall"].to_numpy(float),
            "f1": rated["f1"].to_numpy(float),
        },
        index=pd.Index(task.systems, name="system"),
    )


def fact_owners(coded: CodedResponses) -> np.ndarray:
    """:func:`one_team` of the coded responses, computed once (kept in ``coded.counted``)."""
    if "owners" not in coded.counted:
        coded.counted["owners"] = one_team(coded.fact, coded.team, len(coded.category))
    return coded.counted["owners"]


def one_team(fact: np.ndarray, team: np.ndarray, n_facts: int) -> np.ndarray:
    """Per fact, the code of the one team that output it; -1 when several teams or none did.
    Two scatters per block of :data:`COUNT_BLOCK_ROWS` rows (no sort, no ``ufunc.at``): each
    fact takes the team of one of its rows, then every row of another team marks it shared."""
    owner = np.full(n_facts, -1, dtype=np.int64)
    blocks = [slice(s, s + COUNT_BLOCK_ROWS) for s in range(0, len(fact), COUNT_BLOCK_ROWS)]
    for block in blocks:
        owner[fact[block]] = team[block]
    shared = np.zeros(n_facts, dtype=bool)
    for block in blocks:
        rows = fact[block]
        shared[rows[team[block] != owner[rows]]] = True
    owner[shared] = -1
    return owner


def _classes_lost(coded: CodedResponses, owner: np.ndarray) -> np.ndarray:
    """Per team: recall-denominator classes that vanish with its unique facts (``owner``: per
    fact the one team that output it, else -1)."""
    n_teams, n_query = len(coded.teams), len(coded.queries)
    single = coded.queries["single"].to_numpy(bool)[coded.classed_query]
    own = owner[coded.classed_fact]
    lost = np.bincount(own[~single & (own >= 0)], minlength=n_teams)
    # a single-valued query's class is lost when every class of it is one and the same team's
    query, own = coded.classed_query[single], own[single]
    lo = np.full(n_query, n_teams, dtype=np.int64)
    hi = np.full(n_query, -2, dtype=np.int64)
    np.minimum.at(lo, query, own)
    np.maximum.at(hi, query, own)
    whole = (lo == hi) & (lo >= 0)
    return lost + np.bincount(lo[whole], minlength=n_teams)
