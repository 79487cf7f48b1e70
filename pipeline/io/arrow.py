"""Arrow arrays handed to the native core without copying."""

from __future__ import annotations

import pyarrow as pa


def arrow_buffers(arr: pa.Array) -> tuple[memoryview, memoryview, int, int]:
    """(offsets, data, start, length) of a large_string/large_binary array,
    the form in which the native core takes documents without copying."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    _, offsets, data = arr.buffers()
    return byte_view(offsets or bytes(8)), byte_view(data or b""), arr.offset, len(arr)


def byte_view(buf: pa.Buffer | bytes) -> memoryview:
    """An unsigned-byte view without a copy (Arrow buffers export signed bytes)."""
    return memoryview(buf).cast("B")
