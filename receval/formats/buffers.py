"""Arrow arrays and numpy arrays through their buffers, without importing pandas.

pyarrow imports pandas (0.15-0.2 s) the first time it converts anything to or from Python:
``Array.to_numpy``, ``pa.array`` of a list or a numpy array, and every Python scalar a compute
function is given (``pc.greater(x, 0)``, ``fill_null("")``).  ``receval import trec`` needs no
pandas at all, so its columnar steps build their Arrow values here, from buffers.  Only
fixed-width arrays without nulls are converted (what those steps hold); anything else is a
``ValueError``, never a silent copy through pandas.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["arrow_array", "numpy_array", "scalar"]


def numpy_array(array: Any) -> np.ndarray:
    """A read-only numpy view of an Arrow array (or chunked array) of integers, floats or
    booleans without nulls (booleans, bit-packed in Arrow, are unpacked into a new array)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if array.null_count:
        raise ValueError("an array with nulls has no plain numpy view")
    if pa.types.is_boolean(array.type):
        return numpy_array(pc.cast(array, pa.uint8())).astype(bool)
    if not (pa.types.is_integer(array.type) or pa.types.is_floating(array.type)):
        raise ValueError(f"no plain numpy view of Arrow type {array.type}")
    dtype = np.dtype(array.type.to_pandas_dtype())
    data = array.buffers()[1]
    return np.frombuffer(data, dtype=dtype, count=len(array), offset=array.offset * dtype.itemsize)


def arrow_array(values: np.ndarray) -> Any:
    """An Arrow array over a one-dimensional numpy array of integers, floats or booleans
    (sharing its memory, except booleans, which are bit-packed)."""
    import pyarrow as pa

    values = np.ascontiguousarray(values)
    if values.dtype == bool:
        packed = np.packbits(values, bitorder="little")
        return pa.Array.from_buffers(pa.bool_(), len(values), [None, pa.py_buffer(packed)])
    kind = pa.from_numpy_dtype(values.dtype)
    return pa.Array.from_buffers(kind, len(values), [None, pa.py_buffer(values)])


def scalar(value: str | int) -> Any:
    """An Arrow string (``str``) or int64 (``int``) scalar."""
    import pyarrow as pa

    if isinstance(value, str):
        data = value.encode("utf-8")
        offsets = np.array([0, len(data)], dtype=np.int32)
        buffers = [None, pa.py_buffer(offsets), pa.py_buffer(data)]
        return pa.Array.from_buffers(pa.string(), 1, buffers)[0]
    return arrow_array(np.array([value], dtype=np.int64))[0]
