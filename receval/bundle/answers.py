"""Answer normalisation per ``[matching]``: :func:`normalize_answers` (Arrow kernels, no
per-row Python) and the whitespace the loader strips (:func:`_strip`).

Part of the bundle's reading (:mod:`receval.bundle`); the engine's SQL normalisation
(:mod:`receval.engine.matching`) is checked equal to it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from receval.config import Matching
from receval.formats.tables import WHITESPACE

_WHITESPACE = WHITESPACE  # every character str.isspace accepts
_WHITESPACE_CLASS = "[" + "".join(f"\\x{{{ord(c):x}}}" for c in _WHITESPACE) + "]+"


def normalize_answers(answers: pd.Series, matching: Matching) -> pd.Series:
    """Normalise answer strings per ``[matching]``: Unicode normal form, whitespace runs collapsed
    to one space, surrounding whitespace stripped, case folded (:meth:`str.casefold`).

    Vectorised with Arrow compute kernels (no per-row Python); only non-ASCII answers are
    case-folded in Python, because Arrow's lower-casing is not full case folding (``ß`` → ``ss``).
    The result equals the row-by-row Python definition, whitespace being :meth:`str.isspace`.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    index = answers.index
    answers = answers.astype(str)
    original = _arrow_strings(answers)
    out = original
    if matching.unicode:
        out = pc.utf8_normalize(out, form=matching.unicode)
    if matching.collapse_whitespace:
        out = pc.replace_substring_regex(out, _WHITESPACE_CLASS, " ")
    if matching.strip:
        out = pc.utf8_trim(out, characters=_WHITESPACE)
    if matching.casefold:
        ascii_only = pc.string_is_ascii(out).to_numpy(zero_copy_only=False)
        lowered = pc.utf8_lower(out)
        if not ascii_only.all():
            values = lowered.to_numpy(zero_copy_only=False).astype(object)
            rest = np.flatnonzero(~ascii_only)
            values[rest] = [v.casefold() for v in out.take(pa.array(rest)).to_pylist()]
            return pd.Series(values, index=index).astype(str)
        out = lowered
    if out is original or pc.all(pc.equal(out, original)).as_py() in (True, None):
        return answers  # nothing changed: share the input's buffers (answer_raw is the same)
    # set_axis, not Series(series, index=...): the latter aligns on the labels, and a frame
    # whose index is not 0..n-1 (filtered, deduplicated) would get other rows' answers
    return out.to_pandas().set_axis(index).astype(str)


def _arrow_strings(texts: pd.Series):
    """A text Series as an Arrow ``large_string`` array: its own buffers when Arrow-backed,
    else converted from its Python strings."""
    import pyarrow as pa

    if isinstance(texts.dtype, pd.StringDtype) and texts.dtype.storage == "pyarrow":
        values = pa.array(texts.array)
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        return values.cast(pa.large_string())
    return pa.array(texts.to_numpy(), type=pa.large_string())


def _strip(values):
    """Arrow strings stripped of :data:`_WHITESPACE` at both ends (:meth:`str.strip`)."""
    import pyarrow.compute as pc

    return pc.utf8_trim(values, characters=_WHITESPACE)
