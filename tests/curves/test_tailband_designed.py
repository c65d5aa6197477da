"""`curve budget --json` states TailBand's designed half-width, and no realised band is wider
(issue 36 item 4): lists of 0/1 labels at low, middling and high precision, several seeds, so
every design TailBand picks from the head's precision is exercised."""

from __future__ import annotations

import numpy as np
import pytest

from receval.curves.budget import curve_budget
from receval.curves.tailband import TailBand


def _labels(size: int, level: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    wave = level + 0.25 * np.sin(np.arange(1, size + 1) / size * 7.0)
    return (rng.random(size) < np.clip(wave, 0.0, 1.0)).astype(float)


@pytest.mark.parametrize("size", [6000, 20000])
@pytest.mark.parametrize("level", [0.05, 0.5, 0.95])
def test_the_realised_band_never_exceeds_the_designed_halfwidth(size, level):
    for seed in (0, 1):
        method = TailBand(seed=seed)
        designed = method.designed_halfwidth(size)
        labels = _labels(size, level, seed)
        est = method.run(size, lambda ranks, y=labels: y[np.asarray(ranks) - 1])
        realised = float(np.max(est.upper - est.lower) / 2.0)
        assert designed is not None and 0.0 < designed <= 0.5
        assert realised <= designed + 1e-12, (size, level, seed, realised, designed)


def test_every_band_method_states_a_designed_halfwidth():
    for method in ("stratband", "tailband"):
        record = curve_budget(method, 20000)
        assert isinstance(record["halfwidth"], float) and 0 < record["halfwidth"] < 0.5
    assert TailBand(eta=0.1).designed_halfwidth(20000) is None  # about noisy labels: none
