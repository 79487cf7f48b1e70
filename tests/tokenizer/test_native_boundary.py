"""The boundary between Python and the Rust core: typed constructors (one per
mode, no mode strings or long positional lists), one exception type for every
error of the core (`_native.NativeError`, a ValueError), buffers checked before
they are read, and user input never a panic."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokenmill import _native
from tokenmill.errors import TokenmillError
from tokenmill.io.arrow import arrow_buffers, large_text, text_bytes, valid_utf8
from tokenmill.tokenizer import Tokenizer


def strided(data: bytes) -> memoryview:
    """A view of every other byte of twice the data: not C-contiguous."""
    doubled = bytes(b for c in data for b in (c, 0))
    view = memoryview(doubled)[::2]
    assert not view.c_contiguous and view.tobytes() == data
    return view


DOCS = pa.array(["hello world", "hi there"], pa.large_string())


def test_native_error_is_one_exception_type():
    assert issubclass(_native.NativeError, ValueError)
    with pytest.raises(_native.NativeError, match="invalid pre-tokenization pattern"):
        _native.Counter.byte("(unclosed")
    with pytest.raises(_native.NativeError, match="invalid pre-tokenization pattern"):
        _native.pretokenize("text", "(unclosed")


def test_each_mode_has_its_own_typed_entry_point():
    # No mode strings cross the boundary: byte mode's pre-tokenizer takes a
    # pattern, char mode's a lowercase flag.
    assert _native.pretokenize("Hello world", "cl100k") == ["Hello", " world"]
    assert _native.char_words("Hello  wide\tWorld", lowercase=True) == ["hello", "wide", "world"]
    with pytest.raises(TypeError):
        _native.pretokenize("text", "byte", "cl100k")


@pytest.mark.parametrize("which", ["offsets", "data"])
def test_strided_buffers_are_refused_not_misread(which):
    offsets, data, start, n = arrow_buffers(DOCS)
    args = {"offsets": offsets, "data": data}
    args[which] = strided(bytes(args[which]))
    encoder = _native.Encoder.byte("cl100k", [], [])
    calls = [
        lambda: _native.char_alphabet(args["offsets"], args["data"], start, n),
        lambda: encoder.encode_batch(args["offsets"], args["data"], start, n),
        lambda: _native.Counter.byte().add(args["offsets"], args["data"], start, n, 0),
        lambda: _native.train_merges(
            args["offsets"], args["data"], start, n, memoryview(bytes(8 * n)), None, 1
        ),
    ]
    for call in calls:
        with pytest.raises(_native.NativeError, match=f"{which} is not a C-contiguous buffer"):
            call()


def test_strided_counts_are_refused():
    offsets, data, start, n = arrow_buffers(DOCS)
    with pytest.raises(_native.NativeError, match="counts is not a C-contiguous"):
        _native.train_merges(offsets, data, start, n, strided(bytes(8 * n)), None, 1)


def test_contiguous_copies_of_the_same_buffers_work():
    offsets, data, start, n = arrow_buffers(DOCS)
    encoder = _native.Encoder.byte("cl100k", [], [])
    ids, lens = encoder.encode_batch(
        memoryview(bytes(offsets)), memoryview(bytes(data)), start, n, None, True
    )
    assert len(lens) == 4 * n and len(ids) == 4 * len("hello worldhi there")


@pytest.mark.parametrize(("wide", "parallel"), [(True, False), (True, True), (False, False)])
def test_ids_come_back_as_a_read_only_buffer_that_outlives_its_views(wide, parallel):
    # One thread's ids are the core's own vector, lent to PyArrow without a
    # copy: the buffer must hold the ids' little-endian bytes, refuse writes,
    # and stay valid once only PyArrow holds it.
    docs = pa.array(["hello world"] * 3000, pa.large_string())
    encoder = _native.Encoder.byte("cl100k", [], [])
    ids, _ = encoder.encode_batch(*arrow_buffers(docs), None, wide, parallel)
    view = memoryview(ids)
    assert view.readonly and view.nbytes == len(ids) == (4 if wide else 2) * 11 * 3000
    with pytest.raises(TypeError):
        view[0] = 1
    values = pa.Array.from_buffers(
        pa.uint32() if wide else pa.uint16(), 11 * 3000, [None, pa.py_buffer(ids)]
    )
    del ids, view
    assert values.to_pylist()[:11] == list(b"hello world")


def test_counts_of_the_wrong_length_are_an_error_not_a_panic():
    offsets, data, start, n = arrow_buffers(DOCS)
    for size in (0, 8 * n - 1, 8 * n + 8):
        with pytest.raises(_native.NativeError, match="counts for 2 words"):
            _native.train_merges(offsets, data, start, n, memoryview(bytes(size)), None, 1)


def test_constructors_are_typed_per_mode():
    with pytest.raises(TypeError):
        _native.Encoder("byte", "cl100k", False, [])  # no mode strings
    with pytest.raises(TypeError):
        _native.Counter("byte", "cl100k", False)
    with pytest.raises(TypeError):  # options are keywords
        _native.Encoder.char([], [], ["a", "</w>"], 1, 2)
    char = _native.Encoder.char([(0, 1)], [3], ["a", "</w>"], end_of_word=1, unk=2)
    assert char.encode("a b") == [3, 2, 1]
    assert _native.Encoder.byte("gpt2", [(104, 105)], [256]).encode("hi") == [256]
    with pytest.raises(_native.NativeError, match="byte_ids has 3 entries, not 256"):
        _native.Encoder.byte("cl100k", [], [], byte_ids=[0, 1, 2])
    with pytest.raises(_native.NativeError, match="2 merges but 1 merge ids"):
        _native.Encoder.byte("gpt2", [(104, 105), (256, 105)], [256])


def test_a_finished_counter_says_so():
    counter = _native.Counter.char(lowercase=True)
    counter.add(*arrow_buffers(DOCS), 0)
    counter.finish()
    with pytest.raises(_native.NativeError, match="counter already finished"):
        counter.finish()
    with pytest.raises(_native.NativeError, match="counter already finished"):
        counter.add(*arrow_buffers(DOCS), 0)


def test_the_tokenizer_turns_native_errors_into_tokenmill_errors():
    tok = Tokenizer(pattern=r"(a|aa)+(?=b)|[\s\S]", special_tokens=["<|endoftext|>"])
    with pytest.raises(TokenmillError, match="pattern failed"):
        tok.encode("a" * 40 + "c")
    with pytest.raises(TokenmillError, match="pattern failed"):
        tok.encode_batch(["a" * 40 + "c"])
    bad = Tokenizer(pattern="(unclosed", special_tokens=["<|endoftext|>"])
    with pytest.raises(TokenmillError, match="malformed tokenizer"):
        bad._checked("file.json", compile_pattern=False)
    with pytest.raises(TokenmillError, match="file.json: invalid pre-tokenization pattern"):
        bad._checked("file.json")


@given(
    st.lists(st.one_of(st.none(), st.text(max_size=12)), max_size=30),
    st.integers(0, 30),
    st.integers(0, 30),
)
def test_text_arrays_widened_and_counted_as_arrow_does(values, start, length):
    """io.arrow's large_text and text_bytes, which spare reading Parquet text an
    import of pyarrow.compute, give what Arrow's cast and byte lengths give, on
    slices and with nulls."""
    import pyarrow.compute as pc

    arr = pa.array(values, pa.string()).slice(start, length)
    wide = large_text(arr)
    wide.validate(full=True)
    assert wide.type == pa.large_string() and wide.equals(arr.cast(pa.large_string()))
    assert text_bytes(wide) == (pc.sum(pc.binary_length(wide)).as_py() or 0)
    kept = wide.drop_null()
    assert text_bytes(kept) == (pc.sum(pc.binary_length(kept)).as_py() or 0)


def arrow_says_utf8(arr: pa.Array) -> bool:
    try:
        arr.validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True


# Bytes near UTF-8's edges: lead bytes, continuations, overlongs, surrogates.
EDGY = st.binary(max_size=8) | st.lists(
    st.sampled_from(
        [
            0x41,
            0x80,
            0xBF,
            0xC0,
            0xC3,
            0xA9,
            0xE2,
            0x82,
            0xAC,
            0xED,
            0xA0,
            0xF0,
            0x9F,
            0x98,
            0x80,
            0xF4,
            0x90,
            0xFF,
        ]
    ),
    max_size=8,
).map(bytes)


@given(
    st.lists(st.one_of(st.none(), st.text(max_size=8).map(str.encode), EDGY), max_size=20),
    st.integers(0, 20),
    st.integers(0, 20),
    st.booleans(),
)
def test_the_native_utf8_check_agrees_with_arrow(values, start, length, large):
    """readers take io.arrow.valid_utf8's word for a batch of text (Arrow's
    full validation is ten times slower): it says valid only where Arrow does,
    on slices, with nulls, and with 32- or 64-bit offsets."""
    binary = pa.array(values, pa.large_binary() if large else pa.binary())
    arr = binary.view(pa.large_string() if large else pa.string()).slice(start, length)
    assert valid_utf8(arr) == arrow_says_utf8(arr)
