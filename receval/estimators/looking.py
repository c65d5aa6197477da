"""Looking detected: sample rounds drawn for some systems only, and what ``score`` does about it.

The bootstrap intervals assume every sample size was fixed before any label was seen.  An
organiser who scores, looks at the leaderboard and tops up some systems (``receval sample
--adaptive --system …``, or by hand) breaks that: the top-up's sizes depend on the first round's
labels.  ``samples.tsv`` shows it as a *top-up round*: a round after the first that drew for
some of the systems sampled before it but not for all of them (:func:`topup_rounds`; a round
that only adds systems never sampled before is not one).

**What a top-up after looking does to the bootstrap** (``bench/flags.py --only looking``: a
null world of 12 equally good systems, 20 draws each, then the best three by F1 topped up to the
adaptive planner's size for a 0.05 half-width, 30 repetitions).  Pooled recall ν̂_i = Σ g_i f/q0 /
Σ f/q0 (Chaganty et al. 2017) shares its denominator, the pool's correct facts, across all
systems: the topped-up systems' numerators rest on fresh draws while the denominator keeps the
other systems' first-round draws — the very draws that made them look worse.  Their pooled
recall was biased by +0.056 on 0.2 and its 95 % intervals covered 0.52 ± 0.09, recall and F1
0.73 ± 0.08; the other systems' numbers, chosen *not* to be topped up for looking worse, kept
their first-round selection (precision covered 0.80 ± 0.04, pooled recall 0.87 ± 0.04); and the
step-down tiers split the equal systems in 0.33 ± 0.09 of the repetitions (nominal 0.05).  Only
the topped-up systems' precision (fresh draws outweighing the selected ones) covered (0.96).

**So the default switches to the anytime intervals** (:mod:`receval.estimators.anytime`:
betting confidence sequences, valid whatever rule chose the sizes): in the same study they
covered every number (0.94–1.0) and never split the tiers; they are wider where the draws are
few (pooled recall's half-width 0.24–0.26 against the bootstrap's 0.07; the other systems'
precision 0.18 against 0.08; the topped-up systems' precision as narrow: 0.019 against 0.022) — but a narrow interval that misses half the time, on the systems
the organiser looked at, is not an answer.  ``ScoreOptions.intervals`` = ``"auto"`` (the
default, :func:`resolve_intervals`) picks ``anytime`` when ``samples.tsv`` has a top-up round
and the anytime intervals can serve the run (no target recall, no query clusters, no annotator
resampling), and ``bootstrap`` otherwise; the ``interval`` column, ``run.json`` (``looking``)
and the report's warnings say so.  An explicit ``intervals="bootstrap"`` (``--intervals
bootstrap``) is honoured, and then every number such a round makes unreliable is flagged in
``note`` (:func:`looking_notes`): pooled recall, recall and F1 of every system (their common
denominator carries the selection), and precision of every system except those the top-up
rounds gave most of their own draws.

**Why ``auto`` picks the betting sequences, not ``anytime-asymptotic``** (issue 37; measured
with ``bench/anytime_auto.py``: the scenario above with first rounds of 10, 20, 30 and 100 draws
per system in the null world and 10 and 20 in an uneven one, both looks scored).  Both covered at both
looks and never split the tiers.  The asymptotic sequences bet on a system only once its
importance weights reach a Kish effective size of 100 (``WARMUP_ESS``), so after a first round
of 10–30 draws the systems not topped up get precision [0, 1] (half-width 0.50 against the
betting 0.14–0.35), at 10 draws every pooled recall too (betting 0.44); they were narrower on
recall and F1 at 20–30 draws (F1 0.15–0.26 against 0.24–0.35) and wider on every metric at 100
(recall and F1 0.094–0.101 against 0.060–0.067).  Where weights are skewed they cover only
through that warm-up, at 2.1× the betting width (``bench/anytime_asymptotic.py --only
population``, 240 draws).  They are cheaper (0.2 against 0.6–1.1 CPU s per score in these
12-system worlds; 2.3–2.5× against 5.5–6.4× the bootstrap's cold CPU time on ``data/kbp-sim``,
``bench/anytime_speed.py --asymptotic``), but an interval that says nothing about the precision
of the systems the organiser did not top up is not the better default.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from receval.estimators.sample_data import SampleData
from receval.run_record import LookingBlock, TopupRound

#: ``ScoreOptions.intervals`` default: ``bootstrap``, or ``anytime`` after a top-up round
AUTO = "auto"
#: appended to the ``interval`` column when ``auto`` chose the anytime intervals
CHOSEN_ANYTIME = " (chosen by default: samples.tsv has rounds drawn for only some systems)"
#: a topped-up system's precision stays unflagged when the top-up rounds gave it at least this
#: share of its own draws (fresh draws outweigh the first-round ones it was chosen on).  Measured
#: where the share was 0.9 and more (bench/flags.py: covered 0.956); 0.5 itself is a choice, not
#: a measurement: below it the selected draws are the majority
FRESH_SHARE = 0.5


def topup_mask(rounds: np.ndarray, systems: np.ndarray) -> np.ndarray:
    """Which (round, system) samplers belong to a top-up round (bool, like ``rounds``).

    ``rounds`` are 0-based round numbers in recording order and ``systems`` system codes, one
    per sampler that drew something.  A round is a top-up when it drew for some systems sampled
    in an earlier round but not for all of them.
    """
    rounds, systems = np.asarray(rounds), np.asarray(systems)
    out = np.zeros(rounds.size, bool)
    before: set = set()
    for r in np.unique(rounds):
        mine = rounds == r
        drawn = set(systems[mine].tolist())
        if drawn & before and not before <= drawn:
            out |= mine
        before |= drawn
    return out


def topup_rounds(samples: pd.DataFrame) -> list[tuple[str, int, int]]:
    """The top-up rounds of a ``samples.tsv`` frame: ``(round, systems drawn, systems sampled
    up to it)`` in recording order (empty without any)."""
    if samples is None or not len(samples) or not {"sample", "system"} <= set(samples.columns):
        return []
    pairs = samples[["sample", "system"]].astype(str).drop_duplicates()
    names = pd.unique(pairs["sample"])
    rounds = pd.Index(names).get_indexer(pairs["sample"])
    codes = pd.factorize(pairs["system"])[0]
    mask = topup_mask(rounds, codes)
    out = []
    for r in np.unique(rounds[mask]):
        upto = np.unique(codes[rounds <= r]).size
        out.append((str(names[r]), int(np.unique(codes[rounds == r]).size), int(upto)))
    return out


def resolve_intervals(task: Any, options: Any) -> tuple[Any, str]:
    """``options`` with ``intervals`` = ``"auto"`` resolved (module docstring), and why ('' when
    the user chose, or when the bootstrap serves a design without top-up rounds)."""
    if getattr(options, "intervals", AUTO) != AUTO:
        return options, ""
    from receval.estimators.registry import get_estimator

    bootstrap = dataclasses.replace(options, intervals="bootstrap")
    if not get_estimator(options.estimator).sample_based:  # a census: no interval to choose
        return bootstrap, ""
    topups = topup_rounds(getattr(task, "samples", None))
    if not topups:
        return bootstrap, ""
    where = describe(topups)
    blocker = _anytime_blocker(options)
    if blocker:
        return bootstrap, (
            f"samples.tsv has rounds drawn for only some systems ({where}), but {blocker}: kept "
            "the bootstrap intervals and flagged the numbers such a round makes unreliable"
        )
    return dataclasses.replace(options, intervals="anytime"), (
        f"intervals: anytime, chosen because samples.tsv has rounds drawn for only some systems "
        f"({where}): sizes chosen after looking at the labels bias the bootstrap intervals "
        "(in simulated campaigns the topped-up systems' pooled recall intervals covered 0.52 and "
        "tiers split equal systems in 33 % of repetitions), while the anytime intervals hold "
        "whatever chose the sizes; --intervals bootstrap keeps the bootstrap (with those numbers "
        "flagged)"
    )


def describe(topups: list[tuple[str, int, int]]) -> str:
    """``round-2: 3 of 12 systems, ...``"""
    return ", ".join(f"{name}: {k} of {n} systems" for name, k, n in topups)


def _anytime_blocker(options: Any) -> str:
    """Why the anytime intervals cannot serve ``options`` ('' when they can)."""
    from receval.estimators.registry import get_interval_method

    if getattr(options, "annotator_resampling", False):
        return "annotator_resampling needs the bootstrap"
    try:
        get_interval_method("anytime").check(dataclasses.replace(options, intervals="anytime"))
    except ValueError as error:
        return f"the anytime intervals cannot serve this run ({error})"
    return ""


@dataclass(frozen=True)
class Looking:
    """The top-up rounds of a run's sample data and each system's share of them."""

    rounds: tuple[tuple[str, int, int], ...]  # (round, systems drawn, systems sampled up to it)
    fresh: np.ndarray  # (m,) share of the system's own judged draws from top-up rounds


def detect_looking(data: SampleData) -> Looking | None:
    """The top-up rounds of ``data`` (None without any)."""
    if data.J == 0 or data.sampler_round.size != data.sampler_system.size:
        return None
    drawing = data.sampler_n > 0
    late = np.zeros(drawing.size, bool)
    late[drawing] = topup_mask(data.sampler_round[drawing], data.sampler_system[drawing])
    if not late.any():
        return None
    rounds = []
    for r in np.unique(data.sampler_round[late]):
        mine = (data.sampler_round == r) & drawing
        upto = np.unique(data.sampler_system[(data.sampler_round <= r) & drawing]).size
        name = data.sampler_names[int(np.flatnonzero(mine)[0])][0]
        rounds.append((str(name), int(np.unique(data.sampler_system[mine]).size), int(upto)))
    m = data.m
    own = np.bincount(data.sampler_system, weights=data.sampler_n, minlength=m)
    fresh = np.bincount(data.sampler_system[late], weights=data.sampler_n[late], minlength=m)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(own > 0, fresh / own, 0.0)
    return Looking(tuple(rounds), share)


def looking_notes(looking: Looking, notes: list[list[str]], census: np.ndarray) -> None:
    """Flag, per system, the numbers a top-up after looking makes unreliable (module text)."""
    where = describe(list(looking.rounds))
    why = (
        f"samples.tsv has rounds drawn for only some systems ({where}): if their sizes were chosen "
        "after looking at the labels, this bootstrap interval may miss (measured: 0.52 coverage "
        "for topped-up systems' pooled recall); "
        "--intervals anytime holds after looking"
    )
    for i in range(len(notes)):
        if not census[i] and looking.fresh[i] < FRESH_SHARE:
            notes[i].append(f"precision: flagged: {why}")
        notes[i].append(f"pooled_recall: flagged: {why}")


def flag_looking(data: SampleData, notes: list[list[str]], method: str) -> list[str]:
    """With the bootstrap intervals, flag what the top-up rounds of ``data`` make unreliable
    (:func:`looking_notes`) and return the run's warning; nothing for other methods (the anytime
    intervals hold after looking) or without top-up rounds."""
    looking = detect_looking(data)
    if looking is None or method != "bootstrap":
        return []
    looking_notes(looking, notes, data.census)
    return [
        f"sample rounds after the first drew for only some systems ({describe(list(looking.rounds))}): "
        "if their sizes were chosen after looking at the labels, the bootstrap intervals (which "
        "assume sizes fixed in advance) can miss and the tiers split equal systems; the numbers "
        "this makes unreliable are flagged in note.  --intervals anytime (the default for such a "
        "sample) holds whatever chose the sizes; topping up every open system alike (receval "
        "sample --adaptive plans one common size) keeps the bootstrap valid"
    ]


def looking_record(data: SampleData, options: Any, chosen: str) -> LookingBlock | None:
    """run.json's ``looking`` block: the top-up rounds and what the run did about them (None
    without any)."""
    looking = detect_looking(data)
    if looking is None:
        return None
    return LookingBlock(
        topup_rounds=tuple(
            TopupRound(round=name, systems_drawn=k, systems_sampled=n)
            for name, k, n in looking.rounds
        ),
        intervals=options.intervals,
        chosen_by_default=bool(chosen),
        why=chosen
        or (
            "intervals chosen by the user: numbers a top-up after looking makes unreliable "
            "are flagged in note"
            if options.intervals == "bootstrap"
            else "intervals chosen by the user; they hold after looking"
        ),
    )
