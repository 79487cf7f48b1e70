"""Hugging Face tokenizer.json <-> Tokenizer.

Export writes a file that `tokenizers.Tokenizer.from_file` and
`transformers.PreTrainedTokenizerFast(tokenizer_file=...)` load and that
encodes to exactly tokenmill's ids (with special tokens off:
`add_special_tokens=False`, and text holding no special token's text):

* byte mode: a BPE model whose vocab and merges are written in GPT-2's
  byte-to-unicode alphabet; a Split pre-tokenizer with the pattern (rewritten
  for Oniguruma, see `regex.py`; behavior "isolated") followed by ByteLevel
  without its own regex; a ByteLevel decoder; special tokens as added tokens.
* char mode: a BPE model with unk token `<unk>` and a WhitespaceSplit
  pre-tokenizer, behind normalizers that make Hugging Face split and
  lowercase exactly as tokenmill does (see `char_normalizers`). tokenmill's
  end-of-word `</w>` is a symbol of its own, which BPE may or may not merge
  with the word's last character; Hugging Face's `end_of_word_suffix` instead
  glues the suffix to the last character before any merge, so it cannot give
  the same ids. The export therefore marks each word's end with one character,
  U+001F, that a normalizer appends to every word: it plays the part of
  `</w>` (token strings show it where tokenmill shows `</w>`), and a
  BPEDecoder with that suffix turns it back into spaces.

Import reads byte-level BPE files (GPT-2, Llama 3, Qwen 2 style): a ByteLevel
pre-tokenizer with its regex, or a Split with any regex followed by ByteLevel
without one; optional `ignore_merges`; an optional NFC normalizer. Anything
tokenmill cannot reproduce exactly (WordPiece, Unigram, other normalizers or
pre-tokenizers, dropout, byte fallback, added tokens that are not special,
a merge listed twice or before a merge that makes one of its tokens) raises
TokenmillError naming the file and the unsupported part. The one merge list
of that kind it reads is transformers' conversion of a .tiktoken file
(TikTokenConverter; Llama 3's tokenizer.json): every split of each token
into two tokens, with `ignore_merges` on. It is read as the ranks it came
from (`_native.every_split` checks the list is exactly that), which gives
tokenizers' ids (tests/formats/test_converted_tiktoken.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from tokenmill import _native
from tokenmill.errors import TokenmillError, one_line
from tokenmill.formats import regex
from tokenmill.formats.bytelevel import from_byte_level, to_byte_level
from tokenmill.formats.tiktoken import check_table_derived, ranks_tokenizer
from tokenmill.io.files import parse_json, read_json
from tokenmill.io.storage import AnyPath
from tokenmill.io.writers import atomic_path
from tokenmill.tokenizer import (
    END_OF_WORD,
    FORMAT,
    UNK,
    Tokenizer,
    check_id,
    check_special_names,
    id_limit,
    show,
)
from tokenmill.tokenizer.pattern_errors import quoted

# Stands for `</w>` in char-mode exports (see the module docstring). Python's
# str.split() splits at it but Hugging Face's WhitespaceSplit does not, and a
# normalizer turns every U+001C..U+001F of the text into a space first, so in
# the text that BPE sees it only ever marks a word's end.
WORD_END = "\x1f"

# Unicode White_Space: what Rust's char::is_whitespace (Hugging Face's
# WhitespaceSplit) splits at. Python's str.split() also splits at U+001C..U+001F.
WHITE_SPACE = (
    r"\t\n\x{0B}\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}"
    r"\x{205F}\x{3000}"
)

# Greek capital sigma lowercases to final sigma at a word's end (Unicode's
# Final_Sigma rule, which tokenmill's lowercasing and Python's str.lower()
# follow); Hugging Face's Lowercase maps characters one by one. This rewrite,
# put before Lowercase, applies the rule: the first character before that is
# not case-ignorable is cased, and the first one after that is not
# case-ignorable is not cased.
FINAL_SIGMA = (
    r"[\p{Cased}&&\P{Case_Ignorable}]\p{Case_Ignorable}*\KΣ"
    r"(?!\p{Case_Ignorable}*+[\p{Cased}&&\P{Case_Ignorable}])"
)


FILE_FORMAT_NOTE = "Hugging Face tokenizer.json"


# ---- export -------------------------------------------------------------


def to_dict(tok: Tokenizer) -> dict:
    """The tokenizer.json of `tok`."""
    if tok.mode == "byte":
        return _byte_level_dict(tok)
    return _char_dict(tok)


def to_json(tok: Tokenizer) -> str:
    return json.dumps(to_dict(tok), ensure_ascii=False, indent=1) + "\n"


def save(tok: Tokenizer, path: Path) -> None:
    text = to_json(tok)
    with atomic_path(Path(path)) as tmp:
        tmp.write_text(text, encoding="utf-8")


def _added_tokens(tok: Tokenizer) -> list[dict]:
    return [
        {
            "id": i,
            "content": t,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for t, i in sorted(tok.special_map.items(), key=lambda item: item[1])
    ]


def _with_specials(vocab: dict[str, int], tok: Tokenizer) -> dict[str, int]:
    """`vocab` with each special token at its id: tokenizers takes an added
    token's id from the model's vocabulary when it is there, and otherwise
    numbers it after the vocabulary's size, whatever id the file gives it;
    special tokens past unused ids (chosen ids, an extended tokenizer's base
    tokens) would get other ids. An added token is split out of the text
    before the model sees it, so the model never makes it from text."""
    vocab = dict(vocab)
    for name, i in tok.special_map.items():
        if vocab.setdefault(name, i) != i:
            raise TokenmillError(
                f"special token {name!r} is also the text of token {vocab[name]}: a "
                "tokenizer.json vocabulary cannot hold both"
            )
    return vocab


def _bpe_model(vocab: dict[str, int], merges: list[str], **options) -> dict:
    return {
        "type": "BPE",
        "dropout": None,
        "unk_token": None,
        "continuing_subword_prefix": None,
        "end_of_word_suffix": None,
        "fuse_unk": False,
        "byte_fallback": False,
        "ignore_merges": False,
        **options,
        "vocab": vocab,
        "merges": merges,
    }


def _unique(strings: list[str | None], what: str) -> dict[str, int]:
    vocab: dict[str, int] = {}
    for i, s in enumerate(strings):
        if s is None:
            continue
        if s in vocab:
            raise TokenmillError(
                f"ids {vocab[s]} and {i} are the same {what} {s!r}: a tokenizer.json "
                "vocabulary cannot hold both"
            )
        vocab[s] = i
    return vocab


def _byte_level_dict(tok: Tokenizer) -> dict:
    strings = [None if v is None else to_byte_level(v) for v in tok._byte_vocab]
    vocab = _unique(strings, "token")
    merges = [f"{strings[a]} {strings[b]}" for a, b in tok.merges]
    pattern = regex.fancy_to_onig(_pattern_regex(tok))
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": _added_tokens(tok),
        "normalizer": {"type": "NFC"} if tok.normalization == "NFC" else None,
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {
                    "type": "Split",
                    "pattern": {"Regex": pattern},
                    "behavior": "Isolated",
                    "invert": False,
                },
                {
                    "type": "ByteLevel",
                    "add_prefix_space": False,
                    "trim_offsets": False,
                    "use_regex": False,
                },
            ],
        },
        "post_processor": None,
        "decoder": {
            "type": "ByteLevel",
            "add_prefix_space": False,
            "trim_offsets": False,
            "use_regex": False,
        },
        "model": _bpe_model(_with_specials(vocab, tok), merges, ignore_merges=tok.whole_words),
    }


def char_normalizers(lowercase: bool) -> list[dict]:
    """Normalizers that make Hugging Face see words as tokenmill's char mode does:
    U+001C..U+001F become spaces (str.split() splits there, WhitespaceSplit
    does not); lowercasing with the final-sigma rule; then WORD_END after
    every word."""

    def replace(pattern: str, content: str) -> dict:
        return {"type": "Replace", "pattern": {"Regex": pattern}, "content": content}

    steps = [replace(r"[\x{1C}-\x{1F}]", " ")]
    if lowercase:
        steps += [replace(FINAL_SIGMA, "ς"), {"type": "Lowercase"}]
    steps.append(replace(rf"(?<=[^{WHITE_SPACE}])(?![^{WHITE_SPACE}])", WORD_END))
    return steps


def _char_strings(tok: Tokenizer) -> list[str | None]:
    """Each non-special id's string, `</w>` written as WORD_END: built from the
    ids of the alphabet and of each merge, so an extended tokenizer's numbering
    (its alphabet grown after the base's merges) is kept as it is."""
    strings: list[str | None] = [None] * tok.vocab_size
    base_ids = tok.alphabet_ids if tok.alphabet_ids is not None else range(len(tok.alphabet))
    for c, i in zip(tok.alphabet, base_ids, strict=True):
        strings[i] = WORD_END if c == END_OF_WORD else c
    for (a, b), i in zip(tok.merges, tok._merge_ids, strict=True):
        # Not None: a merge joins ids made before it (checked when loaded).
        strings[i] = strings[a] + strings[b]  # type: ignore[operator]
    return strings


def _char_dict(tok: Tokenizer) -> dict:
    if tok.vocab is not None:
        raise TokenmillError("char mode tokenizers number their ids themselves")
    strings = _char_strings(tok)
    vocab = _with_specials(_unique(strings, "token"), tok)  # <unk> among them
    merges = [f"{strings[a]} {strings[b]}" for a, b in tok.merges]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": _added_tokens(tok),
        "normalizer": {"type": "Sequence", "normalizers": char_normalizers(tok.lowercase)},
        "pre_tokenizer": {"type": "WhitespaceSplit"},
        "post_processor": None,
        "decoder": {"type": "BPEDecoder", "suffix": WORD_END},
        "model": _bpe_model(vocab, merges, unk_token=UNK),
    }


def _pattern_regex(tok: Tokenizer) -> str:
    return _native.preset_regex(tok.pattern) or tok.pattern


# ---- import -------------------------------------------------------------


def load(path: Path) -> Tokenizer:
    return from_dict(read_json(path, "tokenizer"), str(path))


@dataclass(frozen=True)
class Parsed:
    """A tokenizer.json read in two parts: its model's vocab and merges by the
    native core (`model`: a 200k-token vocabulary is 400k strings, most of
    the time json.loads takes), the rest by Python (`rest`, where they are
    left empty); `data` is the file, to read whole if the core's part is at
    fault."""

    rest: dict
    model: _native.ModelJson
    data: bytes


def parse(data: bytes, path: AnyPath) -> Parsed | None:
    """The file read in two parts, when it is a tokenizer.json whose model
    the native core reads; else None (it is then read whole)."""
    try:
        model, rest = _native.ModelJson.split(data)
        d = parse_json(rest, path)
    except (_native.NativeError, TokenmillError):
        return None
    m = d.get("model") if isinstance(d, dict) else None
    # A tokenmill file is read whole; and the core's vocab and merges must be
    # those Python would see (left empty in `rest`).
    if d.get("format") == FORMAT or not isinstance(m, dict):
        return None
    if m.get("vocab") != {} or m.get("merges", []) != []:
        return None
    return Parsed(d, model, data)


def from_dict(d: dict, source: str = "tokenizer.json", parsed: Parsed | None = None) -> Tokenizer:
    """A Tokenizer from a parsed tokenizer.json (or from `parsed.rest`, its
    vocab and merges in `parsed.model`); TokenmillError if tokenmill cannot
    reproduce its ids exactly."""

    def unsupported(what: str) -> TokenmillError:
        return TokenmillError(f"{source}: unsupported {FILE_FORMAT_NOTE}: {what}")

    try:
        if not isinstance(d, dict) or not isinstance(d.get("model"), dict):
            raise TokenmillError(f"{source}: malformed tokenizer file (no model object)")
        model = d["model"]
        kind = model.get("type", "BPE" if "merges" in model else None)
        if kind != "BPE":
            return _raise(unsupported(f"model type {kind} (only byte-level BPE is supported)"))
        if "merges" not in model:  # tokenizers refuses it ('Missing vocab/merges')
            raise TokenmillError(
                f'{source}: malformed tokenizer file (its BPE model has no "merges"; '
                "Hugging Face tokenizers refuses it too)"
            )
        _check_model(model, unsupported)
        try:
            pattern = _pre_tokenizer_pattern(d.get("pre_tokenizer"), unsupported)
        except TokenmillError as e:
            if str(e).startswith(source):
                raise
            raise unsupported(str(e)) from None
        normalization = _normalization(d.get("normalizer"), unsupported)
        specials = _added_specials(d.get("added_tokens"), source, unsupported)
        if parsed is not None:
            size, found = parsed.model.lookup(list(specials))
            in_model = {t: i for t, i in zip(specials, found, strict=True) if i is not None}
            _check_tokenizers_ids(specials, size, in_model, source)
        elif isinstance(model.get("vocab"), dict):  # else malformed: said where it is read
            vocab = model["vocab"]
            in_model = {t: vocab[t] for t in specials if t in vocab}
            _check_tokenizers_ids(specials, len(vocab), in_model, source)
        if parsed is None:
            _refuse_merged_specials(model, specials, unsupported)
            tables = _native_tables(model, specials)
            if tables is not None:
                vocab, merges = tables
            else:
                vocab, merges = _reference_tables(model, specials, source, unsupported)
    except TokenmillError:  # a ValueError too: said already
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        what = f"no {e.args[0]!r}" if isinstance(e, KeyError) and e.args else one_line(e)
        raise TokenmillError(f"{source}: malformed tokenizer file ({what})") from None
    whole_words = bool(model.get("ignore_merges", False))
    if parsed is not None:
        try:
            table = parsed.model.vocabulary(sorted(set(specials.values())))
        except _native.NativeError:  # a fault in them: the file read whole names it
            return from_dict(parse_json(parsed.data, source), source)
        fault = table.merge_fault()
        if fault is not None:
            ranks = table.as_ranks() if whole_words else None
            if ranks is None:
                _refuse_merge_order(fault, table.merges(), table.token, source)
            check_table_derived(ranks, source)
            table = ranks
        tok = Tokenizer._imported(
            table,
            pattern=pattern,
            special_tokens=specials,
            whole_words=whole_words,
            normalization=normalization,
        )
        return tok._checked(source)
    order = sorted(specials, key=specials.__getitem__)
    tok = Tokenizer(
        mode="byte",
        pattern=pattern,
        merges=merges,
        special_tokens=order,
        vocab=vocab,
        special_ids=[specials[t] for t in order],
        whole_words=whole_words,
        normalization=normalization,
    )
    tok = tok._checked(source)
    fault = _native.merge_fault(tok.merges, tok._merge_ids)
    if fault is not None:
        if not (whole_words and tok.merges == _native.every_split(vocab)):
            _refuse_merge_order(fault, tok.merges, tok._byte_vocab.__getitem__, source)
        merges, merge_ids, byte_ids = _native.derive_merges(vocab)
        tables = (byte_ids, merge_ids)
        return ranks_tokenizer(vocab, merges, pattern, specials, source, tables, normalization)
    return tok


def _refuse_merge_order(
    fault: tuple[str, int, int], merges: list, token: Callable[[int], bytes | None], source: str
) -> NoReturn:
    """Refuse merges that Hugging Face's BPE reads otherwise than tokenmill's
    merging by rank (`_native.merge_fault`): it ranks a merge listed twice by
    its last place, and merges a pair whose token a later merge makes as
    soon as that token appears. Trained merge lists have neither."""
    kind, k, j = fault
    left, right = (to_byte_level(token(i) or b"") for i in merges[k])
    hint = ""
    if kind == "repeats":
        what = f"merge {k} {left + ' ' + right!r} repeats merge {j}"
    else:
        what = f"merge {k} {left + ' ' + right!r} joins a token that merge {j}, after it, makes"
        made = {(token(a) or b"") + (token(b) or b"") for a, b in merges}
        if len(made) < len(merges):
            # Every split of each token, ranked by the token made: how
            # transformers' TikTokenConverter writes a tiktoken vocabulary.
            hint = (
                "; it lists several merges that make one token, as a conversion of a "
                ".tiktoken file does: give tokenmill that .tiktoken file"
            )
    raise TokenmillError(
        f"{source}: unsupported {FILE_FORMAT_NOTE}: {what} (tokenmill takes each merge "
        f"once, after the merges that make its two tokens){hint}"
    )


def _native_tables(model: dict, specials: dict[str, int]) -> tuple | None:
    """(vocab, merges) as `_reference_tables` gives them, built by the native
    core (a 200k-token model in tens of milliseconds, where Python takes
    hundreds); None where the model is one the core does not take, or has a
    fault, which `_reference_tables` then names."""
    model_vocab, raw_merges = model.get("vocab"), model.get("merges", [])
    if not isinstance(model_vocab, dict) or not isinstance(raw_merges, list):
        return None
    ids = list(model_vocab.values())
    # The ids' types and range in C; `_vocab` names a bad one.
    if ids and not (set(map(type, ids)) <= {int} and min(ids) >= 0 and max(ids) < 1 << 32):
        return None
    special_ids = set(specials.values())
    every = set(ids) | special_ids
    if every and max(every) >= id_limit(len(every)):
        return None
    if raw_merges and set(map(type, raw_merges)) == {str}:
        # One string for the core to read, not 200k; a merge holding a
        # newline would change the count, and is passed as it is.
        joined = "\n".join(raw_merges)
        if joined.count("\n") == len(raw_merges) - 1:
            raw_merges = joined
    try:
        return _native.byte_level_tables(list(model_vocab), ids, sorted(special_ids), raw_merges)
    except _native.NativeError:
        return None


def _reference_tables(model: dict, specials: dict[str, int], source: str, unsupported) -> tuple:
    """(vocab, merges) of the model in Python: each id's bytes, None for
    special tokens and gaps; merges as id pairs. Names the first fault."""
    vocab = _vocab(model["vocab"], specials, source, unsupported)
    index = model["vocab"]
    merges = []
    for k, merge in enumerate(model.get("merges", [])):
        parts = merge.split(" ") if isinstance(merge, str) else merge
        if not isinstance(parts, list) or len(parts) != 2:
            raise TokenmillError(
                f"{source}: malformed tokenizer file (merge {k} {show(merge)} is not two tokens)"
            )
        left, right = parts
        if left not in index or right not in index:
            raise TokenmillError(
                f"{source}: malformed tokenizer file (merge {k} {show(merge)} names a token "
                "not in the vocabulary)"
            )
        merges.append((index[left], index[right]))
    return vocab, merges


def _refuse_merged_specials(model: dict, specials: dict[str, int], unsupported) -> None:
    """Refuse an added token that a merge also makes: tokenmill gives an id
    to a special token or to a merge's token, not to both (tokenizers cuts
    the token's text out before BPE, and BPE makes it from other text)."""
    vocab, merges = model.get("vocab"), model.get("merges")
    if not isinstance(vocab, dict) or not isinstance(merges, list):
        return  # malformed: said where the tables are read
    made = {t for t in specials if t in vocab}
    for k, merge in enumerate(merges if made else []):
        parts = merge.split(" ") if isinstance(merge, str) else merge
        if isinstance(parts, list) and len(parts) == 2 and all(isinstance(p, str) for p in parts):
            if parts[0] + parts[1] in made:
                token = parts[0] + parts[1]
                raise unsupported(
                    f"added token {token!r} (id {specials[token]}) is also the token merge {k} "
                    f"{show(merge)} makes: tokenmill's ids are special tokens or BPE's, not both"
                )


def _raise(e: Exception):
    raise e


def _added_specials(added_tokens: object, source: str, unsupported) -> dict[str, int]:
    """The added tokens, all special: {content: id}, ids checked."""
    if added_tokens is None:
        return {}
    if not isinstance(added_tokens, list):
        raise TokenmillError(f"{source}: malformed tokenizer file (added_tokens is not a list)")
    specials: dict[str, int] = {}
    owner: dict[int, str] = {}
    for added in added_tokens:
        if not isinstance(added, dict) or not isinstance(added.get("content"), str):
            raise TokenmillError(f"{source}: malformed tokenizer file (added token {show(added)})")
        content, i = added["content"], added.get("id")
        try:
            i = check_id(i, f"added token {content!r}")
        except TokenmillError as e:
            raise TokenmillError(f"{source}: {e}") from None
        if not added.get("special", False):
            raise unsupported(
                f"added token {content!r} (id {i}) is not special: "
                "Hugging Face finds it inside text before BPE, which tokenmill does not do"
            )
        if content in specials:
            raise TokenmillError(f"{source}: added token {content!r} is listed twice")
        if i in owner:
            raise TokenmillError(
                f"{source}: added tokens {owner[i]!r} and {content!r} have the same id {i}"
            )
        specials[content], owner[i] = i, content
    try:
        check_special_names(list(specials), "added_tokens")
    except TokenmillError as e:
        raise TokenmillError(f"{source}: {e}") from None
    return specials


def _check_tokenizers_ids(
    specials: dict[str, int], size: int, in_model: dict[str, int], source: str
) -> None:
    """Refuse added tokens whose ids tokenizers would not give them: it takes
    an added token's id from model.vocab (`size` entries; `in_model`: the
    added tokens there, with their ids) when the token is there, and
    otherwise numbers it after the vocabulary's size (or after the highest
    added id, once that is past it), whatever the file says; tokenmill would
    encode with the ids the file gives."""
    top: int | None = None
    for content, declared in specials.items():  # the file's order
        if content in in_model:
            given = in_model[content]
        else:
            given = top + 1 if top is not None and top >= size else size
        if given != declared and content in in_model:
            raise TokenmillError(
                f"{source}: added token {content!r} has id {declared}, but model.vocab has it "
                f"at {given}, the id tokenizers gives it"
            )
        if given != declared:
            raise TokenmillError(
                f"{source}: added token {content!r} has id {declared}, but tokenizers gives it "
                f"{given} (an added token missing from model.vocab is numbered after it): "
                f"list it in model.vocab at {declared}"
            )
        top = given if top is None else max(top, given)


def _vocab(model_vocab: object, specials: dict[str, int], source: str, unsupported) -> list:
    """The model's vocabulary as a list: the bytes of each id, None for ids that
    are special tokens or unused. Ids are checked before the list is made: an
    id far beyond the file's tokens would otherwise allocate that many."""
    if not isinstance(model_vocab, dict):
        raise TokenmillError(
            f"{source}: malformed tokenizer file (model.vocab must map tokens to ids)"
        )
    try:
        for text, i in model_vocab.items():
            check_id(i, f"vocabulary token {text!r}")
    except TokenmillError as e:
        raise TokenmillError(f"{source}: {e}") from None
    special_ids = set(specials.values())
    ids = set(model_vocab.values())
    n_tokens = len(ids | special_ids)
    top = max(ids | special_ids, default=-1)
    if top >= id_limit(n_tokens):
        name = next((t for t, i in [*model_vocab.items(), *specials.items()] if i == top), "?")
        raise TokenmillError(
            f"{source}: token {name!r} has id {top}: a vocabulary of {n_tokens} tokens "
            f"numbers them below {id_limit(n_tokens)} (gaps are allowed, but not more "
            "unused ids than tokens)"
        )
    # A special token's entry in model.vocab (as export writes it, and as
    # tokenizers wants it to keep its id) is no model token: the table ends
    # at the last of those, as for a file that lists specials apart.
    vocab: list[bytes | None] = [None] * (max(ids - special_ids, default=-1) + 1)
    texts: list[str | None] = [None] * len(vocab)
    for text, i in model_vocab.items():
        if i in special_ids:
            continue
        if texts[i] is not None:
            raise TokenmillError(
                f"{source}: vocabulary tokens {texts[i]!r} and {text!r} have the same id {i}"
            )
        texts[i] = text
        try:
            vocab[i] = from_byte_level(text)
        except ValueError:
            raise unsupported(
                f"vocabulary token {text!r} is not written in the byte-level alphabet"
            ) from None
    return vocab


def _check_model(model: dict, unsupported) -> None:
    if model.get("dropout") not in (None, 0, 0.0):
        raise unsupported(f"BPE dropout {model['dropout']} (not deterministic)")
    if model.get("byte_fallback"):
        raise unsupported("BPE byte_fallback (SentencePiece-style BPE)")
    for key in ("continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(key):
            raise unsupported(f"BPE {key} {model[key]!r} (not byte-level BPE)")


def _normalization(normalizer: dict | None, unsupported) -> str:
    """ "NFC" or "" (none): the only normalizers byte-level BPE files use (none
    at all, NFC, or a Sequence of no more than one NFC). Any other changes the
    text before BPE in ways tokenmill does not reproduce, and is refused."""
    if normalizer is None:
        return ""
    steps = [normalizer]
    if normalizer.get("type") == "Sequence":
        steps = normalizer.get("normalizers", [])
        if not isinstance(steps, list):
            raise unsupported(f"normalizer Sequence of {show(steps)}")
    kinds = [step.get("type") for step in steps]
    other = [k for k in kinds if k != "NFC"]
    if other:
        raise unsupported(f"normalizer {show(other[0])} (only NFC is supported)")
    if len(kinds) > 1:
        raise unsupported(f"normalizers {' + '.join(map(str, kinds))}")
    return "NFC" if kinds else ""


def _pre_tokenizer_pattern(pre: dict | None, unsupported) -> str:
    """The fancy-regex pattern whose matches are the pre-tokenizer's pieces."""
    if pre is None:
        raise unsupported("no pre-tokenizer (byte-level BPE needs ByteLevel)")
    steps = pre.get("pretokenizers", []) if pre.get("type") == "Sequence" else [pre]
    kinds = [s.get("type") for s in steps]
    if not steps or kinds[-1] != "ByteLevel":
        raise unsupported(f"pre-tokenizer {' + '.join(map(str, kinds))} (not byte-level)")
    byte_level = steps[-1]
    if byte_level.get("add_prefix_space", False):
        raise unsupported("ByteLevel add_prefix_space=true")
    use_regex = byte_level.get("use_regex", True)
    if len(steps) == 1:
        if not use_regex:
            raise unsupported("ByteLevel without a regex and no Split (no pre-tokenization)")
        return regex.ONIG_SPELLINGS[regex.BYTE_LEVEL_REGEX]
    if len(steps) > 2 or kinds[0] != "Split" or use_regex:
        raise unsupported(f"pre-tokenizer {' + '.join(map(str, kinds))}")
    split = steps[0]
    if split.get("behavior", "").lower() != "isolated" or split.get("invert", False):
        raise unsupported(
            f"Split behavior {split.get('behavior')!r} invert={split.get('invert')} "
            "(only Isolated, not inverted)"
        )
    pattern = split["pattern"]
    written = pattern["Regex"] if "Regex" in pattern else pattern["String"]
    if pattern.get("Regex") in regex.ONIG_SPELLINGS:
        return regex.ONIG_SPELLINGS[pattern["Regex"]]
    if "Regex" in pattern:
        source = regex.onig_to_fancy(written)
    else:
        source = regex.literal(written)
    preset = regex.preset_name(source)
    if preset:  # the presets match every character: no unmatched text to keep
        return preset
    if regex.matches_empty(source, written):
        raise unsupported(f"Split pattern {quoted(written)} matches the empty string")
    return regex.covering(source)
