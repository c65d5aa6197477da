"""Anytime-valid intervals and comparisons (``--intervals anytime`` and ``anytime-asymptotic``).

The modules import one way, each only from the ones above it in this list (a test builds the
import graph from the source, function-level imports included, and fails on a cycle):

1. :mod:`~receval.estimators.anytime.betting` — betting confidence sequences on bounded streams
   (Waudby-Smith & Ramdas 2024): bets, capitals, bisected ends.  No other receval import.
2. :mod:`~receval.estimators.anytime.control` — predictable control variates (popularity
   strata, the judge's scores) and the labels known from earlier steps.
3. :mod:`~receval.estimators.anytime.stream` — the stream of per-draw terms read from
   ``samples.tsv`` (rounds, sources, mixtures) and its checks.
4. :mod:`~receval.estimators.anytime.sequences` — the per-quantity sequences: precision, the
   pool's correct facts, the pool coverage θ, and the joint recall / F1 ends over a θ grid.
5. :mod:`~receval.estimators.anytime.cells` — F1's joint ends over the θ grid's cells, found
   lazily (one evaluation for most cells instead of a bisection each; the same ends).
6. :mod:`~receval.estimators.anytime.pairs` — paired test-by-betting sequences per ordered pair
   and Holm (the tiers and rank sets).
7. :mod:`~receval.estimators.anytime.f1` — the true facts' sequence, F1's paired tests and the
   one-stream-per-system recall / F1 tests (built on the pair machinery above it).
8. :mod:`~receval.estimators.anytime.method` — :class:`AnytimeIntervals`, the interval method
   (registered as ``anytime``): every sequence of a run, the comparisons, the run record; its
   docstring states the method and why it is valid.
9. :mod:`~receval.estimators.anytime.asymptotic` — :class:`AsymptoticIntervals`
   (``anytime-asymptotic``): Gaussian sequences on the same stream.

The package imports none of them itself: the registry names the interval methods by module
path, so ``import receval`` stays light.
"""
