"""The ``judge-strata`` designs (``sample --by-judge``) on ``score``'s engine path: what their
probabilities s_j(x) = a/|X_j| + (1 − a) u_h(x)/Σ_h N_jh u_h (:mod:`receval.design`) need of
the runs, from SQL.

A fact's level h(x) is its judge's level (:func:`receval.judge.judge_levels`), a function of the
judge table alone: the engine judge computes it for every fact the judge graded (table
``judge_levels`` of :mod:`receval.engine.judge`, the loader's levels); a fact it did not grade
takes the last level.  What the design needs beyond that is one small aggregation: N_jh, each
system's distinct facts at each graded level (:data:`LEVEL_COUNTS`; the ungraded level's count
is |X_j| less the others).  Python holds an (m × (L + 1)) table and the small tables' facts'
levels; the sums go through :func:`receval.engine.draws.strata_mass`, as in memory, so the
probabilities are the same bits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from receval.engine.base import Engine
    from receval.engine.sampled_data import SmallTables
    from receval.engine.summary import RunSummary

#: one judge's levels of the facts it graded (``judge_levels``: :mod:`receval.engine.judge`)
JUDGE_LEVELS = "SELECT query_id, answer, level FROM judge_levels WHERE j = {j}"

#: per (system, level): the system's distinct graded facts at that level, over ``{source}``
LEVEL_COUNTS = """
SELECT system, level, count(*) AS facts FROM (
    SELECT n.system, l.level FROM {source} n
    JOIN strata_levels l ON n.query_id = l.query_id AND n.answer = l.answer
    GROUP BY n.system, n.query_id, {h}, l.level
) t GROUP BY system, level
"""


@dataclass(frozen=True)
class JudgeLevels:
    """One judge's strata on the engine path: ``counts`` (m, L + 1) every system's distinct
    facts per level (the last: not graded), ``small`` (F,) the level of every small-table
    fact."""

    counts: np.ndarray
    small: np.ndarray

    @property
    def missing(self) -> int:
        """The level of a fact the judge did not grade."""
        return self.counts.shape[1] - 1


def judge_levels(
    judge, name: str, small: SmallTables, summary: RunSummary, batches=None
) -> JudgeLevels | None:
    """The :class:`JudgeLevels` of judge ``name`` from the engine judge ``judge``'s session
    (its runs' view ``normed`` and table ``judge_levels``); None when the judge table holds no
    judge of that name.  ``batches``: DuckDB, one run file per system, the systems in batches
    (each batch's counts are its own: the groups hold one system)."""
    if judge is None or name not in judge.names:
        return None
    engine: Engine = judge.engine
    j = judge.names.index(name)
    engine.create_table("strata_levels", JUDGE_LEVELS.format(j=j))
    return _levels(engine, small, summary, batches)


def _levels(engine: Engine, small: SmallTables, summary: RunSummary, batches) -> JudgeLevels:
    from receval.engine.summary import _in_systems

    top = engine.query("SELECT max(level) AS top FROM strata_levels")["top"].iloc[0]
    missing = 0 if pd.isna(top) else int(top) + 1  # judge_levels: 0..L-1 graded, L missing
    h = engine.dialect.hash64("n.answer")
    sources = [_in_systems(engine, b) for b in batches] if batches else ["normed"]
    parts = [engine.query(LEVEL_COUNTS.format(source=s, h=h)) for s in sources]
    frame = pd.concat(parts, ignore_index=True)
    systems = pd.Index(summary.systems)
    counts = np.zeros((len(systems), missing + 1), np.int64)
    at = (systems.get_indexer(frame["system"]), frame["level"].to_numpy(np.int64))
    counts[at] = frame["facts"].to_numpy(np.int64)
    counts[:, missing] = summary.sizes.astype(np.int64) - counts[:, :missing].sum(axis=1)
    facts = small.facts
    engine.register(
        "strata_small",
        pd.DataFrame(
            {
                "fact": np.arange(len(facts), dtype=np.int64),
                "query_id": facts["query_id"].to_numpy(object),
                "answer": facts["answer"].to_numpy(object),
            }
        ),
    )
    graded = engine.query(
        "SELECT s.fact, l.level FROM strata_small s JOIN strata_levels l "
        "ON s.query_id = l.query_id AND s.answer = l.answer"
    )
    level = np.full(len(facts), missing, np.int64)
    level[graded["fact"].to_numpy(np.int64)] = graded["level"].to_numpy(np.int64)
    return JudgeLevels(counts=counts, small=level)


def strata_probabilities(
    design: str, levels: JudgeLevels | None, sizes: np.ndarray, systems: np.ndarray,
    facts: np.ndarray,
) -> np.ndarray:  # fmt: skip
    """s_j(x) of the ``judge-strata`` ``design`` for system codes ``systems`` at small-table
    facts ``facts`` (each output by its system), as :func:`receval.design._judge_strata`
    computes it from the output rows (its ValueErrors, same messages)."""
    table = level_probabilities(design, levels, sizes)
    return table[np.asarray(systems, np.int64), levels.small[np.asarray(facts, np.int64)]]


def level_probabilities(design: str, levels: JudgeLevels | None, sizes: np.ndarray) -> np.ndarray:
    """(m, number of weights): s_j of the ``judge-strata`` ``design`` at a fact of each level
    in each system's output, s_j(h) = a/|X_j| + (1 − a) u_h/Σ_h N_jh u_h (elementwise as
    :func:`receval.design._judge_strata`: the same bits; a system without outputs gets inf or
    NaN, never read)."""
    from receval.design import JUDGE_STRATA_FLOOR, floored_share, parse_judge_strata
    from receval.engine.draws import strata_mass

    name, u = parse_judge_strata(design)
    if levels is None:
        raise ValueError(f"the design {design!r} needs judge {name!r}'s grades (judge.tsv)")
    if levels.missing >= u.size:  # some output has a level beyond the weights
        used = np.flatnonzero(levels.counts.sum(axis=0))
        if used.size and used.max() >= u.size:
            raise ValueError(
                f"the design {design!r} has {u.size} weights, judge {name!r} more levels"
            )
    counts = levels.counts[:, : u.size]
    if counts.shape[1] < u.size:
        counts = np.pad(counts, ((0, 0), (0, u.size - counts.shape[1])))
    total = strata_mass(counts, u)
    size = np.asarray(sizes, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return floored_share(size[:, None], total[:, None], u[None, :], JUDGE_STRATA_FLOOR)
