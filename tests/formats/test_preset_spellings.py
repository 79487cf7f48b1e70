"""tokenizer.json files spell the presets their own way (tokenizers' ByteLevel
regex, tiktoken's patterns as transformers' converter writes them). A spelling
is read as the preset (what `--extend` needs) only where tokenizers' own
splitting of every code point, in several contexts, is the preset's; the
spellings that split otherwise are refused by `--extend` with the reason."""

from __future__ import annotations

import json
from functools import cache

import pytest
import tokenizers

from tokenmill import _native
from tokenmill.config import Config
from tokenmill.errors import TokenmillError
from tokenmill.formats import hf, load_any, regex
from tokenmill.stages.train import load_base
from tokenmill.tokenizer import Tokenizer

# Alone (the text's start and end), after and before letters, spaces, digits,
# apostrophes (contractions), newlines; whitespace at the text's end.
TEMPLATES = (
    "{c}",
    " {c}",
    "{c}\n ",
    "a{c}a {c}1{c}'{c}\n{c}{c}A{c}s",
    " 'l{c}'r{c}'v{c}\t{c}123  {c}\r\n",
)

BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False}


def split_then_byte_level(pattern: str) -> dict:
    split = {
        "type": "Split",
        "pattern": {"Regex": pattern},
        "behavior": "Isolated",
        "invert": False,
    }
    return {"type": "Sequence", "pretokenizers": [split, {**BYTE_LEVEL, "use_regex": False}]}


SPELLINGS = {
    "bytelevel": ({**BYTE_LEVEL, "use_regex": True}, "gpt2"),
    **{
        f"split-{i}": (split_then_byte_level(p), preset)
        for i, (p, preset) in enumerate(regex.ONIG_SPELLINGS.items())
    },
}


def file_with(pre_tokenizer: dict) -> dict:
    d = hf.to_dict(Tokenizer.train(["hello world"], pattern="gpt2", vocab_size=260))
    return {**d, "pre_tokenizer": pre_tokenizer}


# Code points per text: one call splits many; a text that splits otherwise is
# then split code point by code point to name the one.
CHUNK = 512


# Every code point of the planes of many scripts and symbols (0, 1) and of
# tags and selectors (14); of the ideographs' planes (2, 3: blocks of one
# class, whose Unicode versions differ by whole blocks) every 13th; of the
# others (4-13, never assigned; 15-16, private use) every 97th.
STRIDES = {0: 1, 1: 1, 2: 13, 3: 13, 14: 1}


@cache
def code_points() -> list[str]:
    return [
        chr(c)
        for c in range(0x110000)
        if not 0xD800 <= c < 0xE000 and c % STRIDES.get(c >> 16, 97) == 0
    ]


@pytest.mark.parametrize("name", SPELLINGS)
def test_a_spelling_read_as_a_preset_splits_every_code_point_as_the_preset(name):
    pre_tokenizer, preset = SPELLINGS[name]
    pre = tokenizers.Tokenizer.from_str(json.dumps(file_with(pre_tokenizer))).pre_tokenizer
    pattern = _native.preset_regex(preset)

    def same(text: str) -> bool:
        theirs = [text[s:e] for _, (s, e) in pre.pre_tokenize_str(text)]
        return theirs == _native.pretokenize(text, pattern)

    points = code_points()
    for template in TEMPLATES:
        for k in range(0, len(points), CHUNK):
            chunk = points[k : k + CHUNK]
            if not same("".join(template.replace("{c}", c) for c in chunk)):
                texts = (template.replace("{c}", c) for c in chunk)
                wrong = next((t for t in texts if not same(t)), None)
                raise AssertionError((name, template, wrong or f"code points from {k}"))


@pytest.mark.parametrize("name", SPELLINGS)
def test_a_spelling_of_a_preset_imports_as_the_preset_and_extends(tmp_path, name):
    pre_tokenizer, preset = SPELLINGS[name]
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(file_with(pre_tokenizer)))
    assert load_any(path).pattern == preset
    base, config = load_base(Config(vocab_size=300, extend=str(path)))
    assert base is not None and config.pattern == preset


# A text each splits otherwise than the preset, as NOT_PRESETS says.
WITNESSES = {"cl100k's as tiktoken": "abc 123456", "older spelling": "a  \n  "}


@pytest.mark.parametrize("spelling", regex.NOT_PRESETS)
def test_a_spelling_that_splits_otherwise_is_refused_by_extend_with_the_reason(tmp_path, spelling):
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(file_with(split_then_byte_level(spelling))))
    pre = tokenizers.Tokenizer.from_file(str(path)).pre_tokenizer
    why = regex.NOT_PRESETS[spelling]
    text = next(t for key, t in WITNESSES.items() if key in why)
    theirs = [text[s:e] for _, (s, e) in pre.pre_tokenize_str(text)]
    assert theirs != _native.pretokenize(text, "cl100k")
    assert theirs == _native.pretokenize(text, load_any(path).pattern)  # as imported
    with pytest.raises(TokenmillError) as e:
        load_base(Config(vocab_size=300, extend=str(path)))
    message = str(e.value)
    assert "\n" not in message and str(path) in message and why in message, message
