"""GPT-2's byte-level alphabet (how Hugging Face and tokenmill files write
token bytes as text), and loading tokenizer files with the collector paused."""

import gc
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokenmill.errors import TokenmillError
from tokenmill.formats import load_any
from tokenmill.formats.bytelevel import byte_to_char, from_byte_level, to_byte_level
from tokenmill.memory import gc_paused

ALPHABET = set(byte_to_char())


def test_alphabet_is_gpt2s():
    table = byte_to_char()
    assert len(ALPHABET) == 256
    assert table[ord(" ")] == "Ġ" and table[ord("\n")] == "Ċ" and table[ord("a")] == "a"
    assert to_byte_level(b" the") == "Ġthe"


@given(st.binary(max_size=40))
def test_bytes_round_trip_one_character_per_byte(value):
    text = to_byte_level(value)
    assert text == "".join(byte_to_char()[b] for b in value)
    assert from_byte_level(text) == value


@given(st.binary(max_size=10), st.characters().filter(lambda c: c not in ALPHABET), st.data())
def test_characters_outside_the_alphabet_are_refused(value, bad, data):
    text = to_byte_level(value)
    at = data.draw(st.integers(0, len(text)))
    with pytest.raises(ValueError, match="not in the byte-level alphabet"):
        from_byte_level(text[:at] + bad + text[at:])


@pytest.mark.parametrize("enabled", [True, False])
def test_gc_paused_restores_the_collector(enabled):
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        with pytest.raises(RuntimeError), gc_paused():
            assert not gc.isenabled()
            raise RuntimeError
        assert gc.isenabled() == enabled
    finally:
        (gc.enable if was else gc.disable)()


def test_loading_leaves_the_collector_on(tmp_path):
    assert gc.isenabled()
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "tokenmill", "mode": "byte"}))
    with pytest.raises(TokenmillError, match="malformed"):
        load_any(bad)
    assert gc.isenabled()
