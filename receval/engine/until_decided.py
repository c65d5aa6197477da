"""``sample --until-decided`` on the engine path: each look scored from the runs' aggregates
(the view of ``score``'s engine path, :class:`receval.engine.score.BundleView`), the next
round drawn in SQL by the engine's hashed draws.

The look is :func:`receval.until_decided.next_look` on the view: the same paired anytime tests,
open pairs and weights as on the loaded task (the view's sample arrays equal
:func:`~receval.estimators.sample_data.build_sample_data`'s).  The round is then

* the focus draws: :func:`receval.until_decided.allocate` of the batch less its floor share
  over the systems' weights, as in memory;
* the floor draws (:func:`receval.until_decided.floor_draws` of them): each picks a system
  with outputs uniformly by the hashed uniform of ``floor ␟ seed ␟ round ␟ d``
  (:func:`receval.engine.sampled.draw_uniform`), then a fact of it; recorded with
  ``mixture_prob`` = q₀(x) from the drawn facts' members;
* every system's draws drawn at once by :func:`receval.engine.sampled.sample_round` (focus
  draws first, floor draws numbered after them, as in memory), in the order the hashed keys
  give (``order`` = ``random``).

The draws are a deterministic function of (seed, round, system, draw index) and the systems'
facts: the same on every engine and file layout and in the in-memory loop.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: what the engine path scores the looks with (``score``'s engine path; ``ppi``: the judge as
#: the streams' control, :mod:`receval.engine.judge_anytime`)
ENGINE_LOOP_ESTIMATORS = ("joint", "simple", "ppi")


def view_for_looks(bundle, target: str, rank_by: str, confidence: float, intervals: str,
                   estimator: str, engine: Any = "duckdb"):  # fmt: skip
    """The engine path's view of ``bundle`` scored as a look is (anytime intervals); a
    ValueError naming what it cannot score."""
    from receval.engine.score import engine_view
    from receval.options import ScoreOptions, check_score_options

    if estimator not in ENGINE_LOOP_ESTIMATORS:
        raise ValueError(
            f"the engine path scores the looks with {' or '.join(ENGINE_LOOP_ESTIMATORS)}, "
            f"not --estimator {estimator}"
        )
    options = check_score_options(
        ScoreOptions(
            estimator=estimator,
            intervals=intervals,
            rank_by=rank_by,
            confidence=confidence,
            target=target,
        )
    )
    return engine_view(str(bundle.root), options, engine, True)


def floor_systems(systems: list[str], draws: int, seed: int, round_number: int) -> np.ndarray:
    """Per system of ``systems`` (those with outputs), its floor draws: each of the ``draws``
    picks one uniformly by a hashed uniform (module docstring)."""
    from receval.draw_hash import floor_counts

    return floor_counts(len(systems), draws, seed, round_number)


def until_decided_round(
    bundle,
    batch: int,
    *,
    seed: int,
    rank_by: str = "f1",
    confidence: float = 0.95,
    budget: int | None = None,
    distribution: str = "uniform",
    target: str = "micro",
    top: int | None = None,
    intervals: str | None = None,
    estimator: str = "joint",
    engine: Any = "duckdb",
):
    """:func:`receval.until_decided.until_decided_round` of ``bundle`` (a
    :class:`~receval.bundle.Bundle`) on the engine path (module docstring); not written."""
    from receval.engine.sampled import sample_round
    from receval.until_decided import (
        FLOOR_SHARE,
        LOOP_INTERVALS,
        UntilDecidedRound,
        allocate,
        check_until_decided,
        drawn_round,
        floor_draws,
        next_look,
    )

    if distribution != "uniform":
        raise ValueError(
            f"the engine path draws --until-decided rounds uniform, not {distribution!r}"
        )
    check_until_decided(batch, confidence, budget)
    intervals = intervals or LOOP_INTERVALS
    view = view_for_looks(bundle, target, rank_by, confidence, intervals, estimator, engine)
    look = next_look(
        view, batch, rank_by=rank_by, confidence=confidence, budget=budget, target=target,
        top=top, intervals=intervals, estimator=estimator,
    )  # fmt: skip
    if isinstance(look, UntilDecidedRound):
        return look
    state, weight, n, name, k = look
    n_floor = floor_draws(n, FLOOR_SHARE)
    focus = allocate(weight, n - n_floor)
    sizes = view.summary.sizes
    alive = [s for s, size in zip(state.systems, sizes, strict=True) if size > 0]
    floor = dict(zip(alive, floor_systems(alive, n_floor, seed, k).tolist(), strict=True))
    focus_of = {s: int(c) for s, c in zip(state.systems, focus, strict=True)}
    counts = {s: focus_of.get(s, 0) + floor.get(s, 0) for s in state.systems}
    counts = {s: c for s, c in counts.items() if c > 0}
    drawn = sample_round(
        bundle, counts, seed=seed, name=name, engine=engine if isinstance(engine, str) else
        "duckdb", systems=sorted(counts), focus={s: focus_of.get(s, 0) for s in counts},
    )  # fmt: skip
    return drawn_round(state, drawn.samples, drawn.to_annotate, name, rank_by)
