"""take_lists: the rows of a column of ids taken slice by slice equal Arrow's
take, for short and long documents, list and large_list, uint16 and uint32,
sliced and chunked columns, repeated and empty picks."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from tokenmill.io import arrow
from tokenmill.io.arrow import take_lists


def column(rng, documents: int, longest: int, kind, dtype) -> pa.Array:
    lengths = rng.integers(0, longest + 1, documents)
    offsets = np.zeros(documents + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    values = pa.array(rng.integers(0, 60000, int(offsets[-1])).astype(dtype))
    if kind is pa.ListArray:
        return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), values)
    return pa.LargeListArray.from_arrays(pa.array(offsets), values)


@pytest.mark.parametrize("kind", [pa.ListArray, pa.LargeListArray])
@pytest.mark.parametrize("dtype", [np.uint16, np.uint32])
@pytest.mark.parametrize("longest", [0, 5, 3000])  # none, short (Arrow's take), long (slices)
@pytest.mark.parametrize("slices_always", [False, True])
def test_equal_to_arrows_take(kind, dtype, longest, slices_always, monkeypatch):
    if slices_always:
        monkeypatch.setattr(arrow, "SLICE_IDS", 0)
    rng = np.random.default_rng(longest)
    ids = column(rng, 300, longest, kind, dtype)
    for lists in (ids, ids.slice(17, 200), pa.chunked_array([ids.slice(0, 150)])):
        n = len(lists)
        for at in (rng.permutation(n), rng.integers(0, n, 2 * n), np.array([3, 3, 0]), []):
            at = np.asarray(at, np.int64)
            got = take_lists(lists, at)
            want = lists.take(pa.array(at, pa.int64()))
            if isinstance(want, pa.ChunkedArray):
                want = want.combine_chunks()
            assert got.type == lists.type
            assert got.equals(want)
