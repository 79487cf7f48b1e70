"""Arrow arrays without copies: handed to the native core, made from NumPy,
and rows of a column of ids taken."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from tokenmill import _native


def is_text(t: pa.DataType) -> bool:
    """Whether `t` is one of Arrow's string types (string, large_string, string_view)."""
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def one_array(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    """`arr` as one array: a chunked array's only chunk as it is, where
    combine_chunks would copy it (a document the size of memory, twice)."""
    if not isinstance(arr, pa.ChunkedArray):
        return arr
    return arr.chunk(0) if arr.num_chunks == 1 else arr.combine_chunks()


def arrow_buffers(arr: pa.Array) -> tuple[memoryview, memoryview, int, int]:
    """(offsets, data, start, length) of a large_string/large_binary array,
    the form in which the native core takes documents without copying."""
    arr = one_array(arr)
    _, offsets, data = arr.buffers()
    return byte_view(offsets or bytes(8)), byte_view(data or b""), arr.offset, len(arr)


def byte_view(buf: pa.Buffer | bytes) -> memoryview:
    """An unsigned-byte view without a copy (Arrow buffers export signed bytes)."""
    return memoryview(buf).cast("B")


def large_text(arr: pa.Array) -> pa.Array:
    """A string, large_string, binary or large_binary array as large_string
    (UTF-8 not checked here). A string array's 32-bit offsets are widened
    with numpy rather than by Arrow's cast, which would import
    pyarrow.compute (see io/readers.py)."""
    if arr.type == pa.large_string():
        return arr
    if arr.type != pa.string():
        return arr.cast(pa.large_string())
    validity, offsets, data = arr.buffers()
    n = arr.offset + len(arr)
    wide = np.frombuffer(offsets, np.int32, n + 1).astype(np.int64) if n else np.zeros(1, np.int64)
    return pa.Array.from_buffers(
        pa.large_string(),
        len(arr),
        [validity, pa.py_buffer(wide), data],
        arr.null_count,
        arr.offset,
    )


def text_bytes(docs: pa.Array) -> int:
    """The UTF-8 bytes of a large_string array's documents (nulls count 0)."""
    if docs.null_count:
        import pyarrow.compute as pc

        return pc.sum(pc.binary_length(docs)).as_py() or 0
    if not len(docs):
        return 0
    offsets = np.frombuffer(docs.buffers()[1], np.int64, docs.offset + len(docs) + 1)
    return int(offsets[-1] - offsets[docs.offset])


def valid_utf8(arr: pa.Array) -> bool:
    """Whether `arr`, a string or large_string array, is well-formed UTF-8
    text: checked by the native core (simdutf8, ten times Arrow's full
    validation on text of many scripts), bytes under nulls included. False
    also for any other type, or offsets the core refuses: the caller then
    asks Arrow, whose answer decides."""
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        return False
    return _native.valid_utf8(*arrow_buffers(large_text(arr)))


def from_numpy(values: np.ndarray) -> pa.Array:
    """A NumPy array of numbers as an Arrow array, without a copy."""
    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(
        pa.from_numpy_dtype(values.dtype), len(values), [None, pa.py_buffer(values)]
    )


def numbers(array: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A primitive Arrow array without nulls as NumPy, without a copy when in
    one chunk (Array.to_numpy, as pa.array, imports pandas: a fifth of a second)."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    data = array.buffers()[1]
    dtype = np.dtype(str(array.type))
    if data is None:
        return np.empty(0, dtype)
    return np.frombuffer(data, dtype)[array.offset : array.offset + len(array)]


# Above this many ids a document, on average, slices copied one by one beat
# Arrow's take, which builds and follows an index of every value.
SLICE_IDS = 128


def take_lists(lists: pa.Array | pa.ChunkedArray, at: np.ndarray) -> pa.Array:
    """lists[at] for a list array without nulls (a column of ids): documents
    of thousands of ids are copied slice by slice, about ten times faster
    than Arrow's take; short ones by Arrow's take."""
    lists = one_array(lists)
    offsets = numbers(lists.offsets)
    lengths = np.diff(offsets)[at]
    if not len(at) or lengths.mean() < SLICE_IDS:
        return lists.take(from_numpy(at))
    values = numbers(lists.values)
    starts = offsets[:-1][at].tolist()
    taken = np.concatenate(
        [values[s : s + n] for s, n in zip(starts, lengths.tolist(), strict=True)]
    )
    out = np.zeros(len(at) + 1, offsets.dtype)
    np.cumsum(lengths, out=out[1:])
    kind = pa.LargeListArray if pa.types.is_large_list(lists.type) else pa.ListArray
    return kind.from_arrays(from_numpy(out), from_numpy(taken), type=lists.type)
