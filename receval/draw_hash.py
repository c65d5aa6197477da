"""The hashed uniforms every ``sample`` draw is made from, in memory and in every engine.

A draw is a deterministic function of ``(seed, round, system, draw index)`` and the system's
facts (:mod:`receval.engine.draws` documents how a uniform becomes a fact; the in-memory path,
:func:`receval.design.hashed_precision_samples`, locates the same fact in the loaded outputs).
The uniforms are MD5 hashes of texts joined by :data:`SEP` (ASCII unit separator, ␟):

========================================  ============================================
text hashed                               used for
========================================  ============================================
``seed ␟ r ␟ j ␟ d``                      draw ``d`` of system ``j`` in round ``r``
                                          (:func:`draw_uniform`)
``seed ␟ r ␟ floor␟ ␟ d``                 ``--until-decided``'s floor draw ``d``: which
                                          system it goes to (:func:`floor_counts`)
``seed ␟ r ␟ unit␟ ␟ d``                  weighted exhaustive unit draw ``d``
``unit ␟ seed ␟ r ␟ u``                   the key of unit ``u`` (uniform units: the
                                          ``m`` smallest keys)
``order ␟ seed ␟ r ␟ j ␟ d``              the key that puts a round's rows in a random
                                          order (:func:`order_keys`)
========================================  ============================================

The first 60 bits of an MD5 are uniform on ``[0, 2⁶⁰)`` and, for distinct texts, independent
for every purpose a sample round has (MD5's collision weaknesses need chosen inputs); a
uniform is the key shifted to 52 bits over 2⁵², exact in float64.  So the draws of a round are
i.i.d. from the recorded design, as with a seeded generator (Chaganty et al. 2017, §3), and
reproducible on any machine, engine and partitioning of the runs.  Only the ``n`` draws are
hashed, never the ``N`` output rows.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd

#: keys are 60-bit integers
KEY_BITS = 60
#: the separator of the hashed fields (ASCII unit separator)
SEP = "\x1f"


def python_key(text: str) -> int:
    """The 60-bit key of ``text``: the first 15 hex digits of its MD5 (a drawn fact's ``h``)."""
    return int(hashlib.md5(text.encode("utf-8")).hexdigest()[:15], 16)


def keys(prefix: str, suffixes) -> np.ndarray:
    """:func:`python_key` of ``prefix + str(s)`` for every ``s`` of ``suffixes`` (the MD5 state
    of the prefix computed once)."""
    base = hashlib.md5(prefix.encode("utf-8"))
    out = np.empty(len(suffixes), dtype=np.int64)
    for i, suffix in enumerate(suffixes):
        h = base.copy()
        h.update(str(suffix).encode("utf-8"))
        out[i] = int.from_bytes(h.digest()[:8], "big") >> (64 - KEY_BITS)
    return out


def draw_uniform(seed: int, round_number: int, system: str, draws: int) -> np.ndarray:
    """``u`` in [0, 1) for draws 1..``draws`` of ``system`` in round ``round_number``: the first
    60 bits of MD5(``seed ␟ round ␟ system ␟ d``) over 2⁶⁰ (exact in float64 after the shift)."""
    head = f"{int(seed)}{SEP}{int(round_number)}{SEP}{system}{SEP}"
    key = keys(head, range(1, draws + 1))  # per draw, not per output row: n_j hashes
    return (key >> 8).astype(np.float64) / float(1 << (KEY_BITS - 8))


def order_keys(seed: int, round_number: int, systems: np.ndarray, draws: np.ndarray) -> np.ndarray:
    """The key that puts a round's rows in a random order (``order`` = ``random``): that of
    ``order ␟ seed ␟ round ␟ system ␟ draw``."""
    systems = np.asarray(systems, dtype=object)
    draws = np.asarray(draws, dtype=np.int64)
    out = np.empty(len(systems), dtype=np.int64)
    for system in pd.unique(systems):
        at = np.flatnonzero(systems == system)
        head = f"order{SEP}{int(seed)}{SEP}{int(round_number)}{SEP}{system}{SEP}"
        out[at] = keys(head, draws[at].tolist())
    return out


def random_order(seed: int, round_number: int, systems: np.ndarray, draws: np.ndarray):
    """The positions that put a round's rows (``systems``, ``draws``: each row's system and
    draw index, in (system, draw) order) in the random order of :func:`order_keys`."""
    return np.argsort(order_keys(seed, round_number, systems, draws))


def floor_counts(alive: int, draws: int, seed: int, round_number: int) -> np.ndarray:
    """``--until-decided``'s floor draws per system (``alive`` systems with outputs, in sorted
    order): each of the ``draws`` picks one uniformly, ⌊u · alive⌋ with ``u`` the hashed uniform
    of ``floor ␟`` (:func:`draw_uniform`)."""
    u = draw_uniform(seed, round_number, f"floor{SEP}", draws)
    pick = np.minimum(np.floor(u * alive).astype(np.int64), alive - 1)
    return np.bincount(pick, minlength=alive)
