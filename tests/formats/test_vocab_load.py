"""Loading real vocabularies through the native core gives exactly what the
Python reference gives: the ranks file's table (`read_table` and
`reference_ranks`), the merges derived from the ranks (`derive_merges` and
`reference_merges`, the ecosystem converters' rule in plain Python), and the
ids of each byte and merge (`table_ids` and the Python methods). Checked on
the shipped gpt2, cl100k and o200k files and on generated ranks; and the
imported cl100k and o200k give tiktoken's ids on every document of the sample.

How fast they load is the benchmark's to show, not a test's.
"""

from __future__ import annotations

import base64
import json
import random
import string
from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from realtext import CL100K_FILE, GPT2_FILE, O200K_FILE, iter_sample_documents

from tokenmill import _native
from tokenmill.errors import TokenmillError
from tokenmill.formats import export, load_any, prefetch
from tokenmill.formats import tiktoken as tiktoken_format
from tokenmill.tokenizer import Tokenizer, vocab

# file, pattern preset, number of ranks (all dense: 0 to n-1)
REAL = {
    "gpt2": (GPT2_FILE, "gpt2", 50256),
    "cl100k_base": (CL100K_FILE, "cl100k", 100256),
    "o200k_base": (O200K_FILE, "o200k", 199998),
}


@cache
def ranks_of(name: str) -> dict[bytes, int]:
    path = REAL[name][0]
    return tiktoken_format.reference_ranks(path, path.read_bytes())


@cache
def loaded(name: str) -> Tokenizer:
    path, pattern, _ = REAL[name]
    return load_any(path, pattern=pattern)


@cache
def tiktoken_encoding(name: str):
    """tiktoken's Encoding of the same file, pattern and special tokens."""
    tiktoken = pytest.importorskip("tiktoken")
    path, pattern, n = REAL[name]
    return tiktoken.Encoding(
        name=name,
        pat_str=_native.preset_regex(pattern),
        mergeable_ranks=tiktoken_format.read_ranks(path),
        special_tokens=tiktoken_format.KNOWN_SPECIALS[(pattern, n)],
    )


@cache
def texts() -> list[str]:
    return [text for _, text in iter_sample_documents()]


@pytest.mark.parametrize("name", REAL)
def test_native_reader_gives_the_reference_ranks(name):
    path, _, n = REAL[name]
    ranks = ranks_of(name)
    assert len(ranks) == n and sorted(ranks.values()) == list(range(n))
    table = _native.parse_tiktoken(path.read_bytes())
    assert table == tiktoken_format.read_table(path)
    assert {v: i for i, v in enumerate(table)} == ranks == tiktoken_format.read_ranks(path)


@pytest.mark.parametrize("name", REAL)
def test_native_derivation_gives_the_reference_merges(name):
    ranks = ranks_of(name)
    want = tiktoken_format.reference_merges(ranks)
    table = [bytes(v) for v in sorted(ranks, key=ranks.get)]
    merges, merge_ids, byte_ids = _native.derive_merges(table)
    assert merges == want == tiktoken_format.derive_merges(ranks)
    # Every multi-byte token of a real file is made by one merge, which yields it.
    assert len(merges) == sum(len(v) > 1 for v in ranks)
    assert [table[a] + table[b] for a, b in merges] == [table[i] for i in merge_ids]
    assert byte_ids == [ranks[bytes([b])] for b in range(256)]


@pytest.mark.parametrize("name", REAL)
def test_loaded_tables_are_the_python_methods_tables(name):
    tok = loaded(name)
    _, pattern, n = REAL[name]
    assert tok.merges == tiktoken_format.reference_merges(ranks_of(name))
    listed = tok._numbering.listed  # the core's table as Python lists, read by Python
    assert tok._merge_ids == listed.merge_ids(listed.index)
    assert tok._custom_byte_ids == listed.byte_ids(listed.index)
    assert listed.native_tables() == (tok._custom_byte_ids, tok._merge_ids)
    assert tok.special_map == tiktoken_format.KNOWN_SPECIALS[(pattern, n)]


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_imported_real_vocabularies_give_tiktokens_ids(name):
    tok = loaded(name)
    enc = tiktoken_encoding(name)
    assert tok.vocab_size == enc.n_vocab and tok.eos_id == enc.eot_token
    docs = texts()
    want = enc.encode_ordinary_batch(docs)
    got = tok.encode_batch(docs)
    bad = [i for i, (w, g) in enumerate(zip(want, got, strict=True)) if w != g]
    assert not bad, f"{name}: {len(bad)} of {len(docs)} documents differ, first {bad[0]}"
    for text in docs[::50]:
        assert tok.decode(tok.encode(text)) == text


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_long_words_give_tiktokens_ids(name):
    """Words of more than 48 base symbols take the encoder's other merge loop
    (a linked list and a queue per rank): runs of one letter, of random
    letters, of four letters, of CJK characters, of an accented letter."""
    enc = tiktoken_encoding(name)
    rng = random.Random(7)
    docs = [
        "a" * 4001,
        "".join(rng.choice(string.ascii_lowercase) for _ in range(3000)),
        "".join(rng.choice("ACGT") for _ in range(3000)),
        "".join(chr(rng.randrange(0x4E00, 0x9FA0)) for _ in range(1200)),
        "é" * 1500 + " " + "ж" * 49,
    ]
    assert loaded(name).encode_batch(docs) == enc.encode_ordinary_batch(docs)


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_real_vocabularies_round_trip_through_their_other_forms(name, tmp_path):
    tok = loaded(name)
    tok.save(tmp_path / "own.json")
    export(tok, tmp_path / "tokenizer.json", "hf")
    export(tok, tmp_path / "again.tiktoken", "tiktoken")
    assert (tmp_path / "again.tiktoken").read_bytes() == REAL[name][0].read_bytes()
    # The tokenizer.json's tables are the native core's (not the reference's, slower).
    from tokenmill.formats import hf

    d = json.loads((tmp_path / "tokenizer.json").read_text(encoding="utf-8"))
    specials = {a["content"]: a["id"] for a in d["added_tokens"]}
    assert hf._native_tables(d["model"], specials) == hf._reference_tables(
        d["model"], specials, "x", TokenmillError
    )
    assert hf._native_tables(d["model"], specials) is not None
    sample = texts()[::25]
    for path in (tmp_path / "own.json", tmp_path / "tokenizer.json", tmp_path / "again.tiktoken"):
        again = load_any(path)
        assert again.vocab == tok.vocab and again.merges == tok.merges
        assert again._merge_ids == tok._merge_ids and again.special_map == tok.special_map
        assert again.encode_batch(sample) == tok.encode_batch(sample)


# ---- generated ranks ------------------------------------------------------

# Few letters, so that tokens overlap and BPE's choices interact.
tokens = st.binary(min_size=1, max_size=7).map(lambda b: bytes(97 + x % 3 for x in b))


@st.composite
def ranks_dicts(draw) -> dict[bytes, int]:
    """Distinct tokens (some bytes possibly missing) with distinct ranks in
    any order, gaps allowed."""
    values = draw(st.lists(tokens, min_size=1, max_size=60, unique=True))
    if draw(st.booleans()):
        values = [bytes([b]) for b in range(256)] + [v for v in values if len(v) > 1]
    ranks = draw(st.permutations(range(len(values) + draw(st.integers(0, 5)))))
    return dict(zip(values, ranks, strict=False))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ranks_dicts())
def test_native_derivation_matches_the_reference_on_generated_ranks(ranks):
    want = tiktoken_format.reference_merges(ranks)
    table = tiktoken_format._table(ranks)
    merges, merge_ids, byte_ids = _native.derive_merges(table)
    assert merges == want == tiktoken_format.derive_merges(ranks)
    made = [v for v, _ in sorted(ranks.items(), key=lambda item: item[1]) if len(v) > 1]
    assert [table[i] for i in merge_ids] == [table[a] + table[b] for a, b in merges]
    assert set(merge_ids) <= {ranks[v] for v in made}
    if all(bytes([b]) in ranks for b in range(256)):
        assert byte_ids == [ranks[bytes([b])] for b in range(256)]
    else:
        assert byte_ids is None


@st.composite
def long_token_ranks(draw):
    """Every byte, then tokens over a few letters, some longer than the 64
    bytes past which the core merges a token on its heap-driven path; each
    long one built from two earlier tokens, as BPE's are, or drawn at random."""
    values = [bytes([b]) for b in range(256)]
    letters = draw(st.sampled_from([b"ab", b"abc", b"a b"]))
    short = st.binary(min_size=2, max_size=6).map(
        lambda b: bytes(letters[c % len(letters)] for c in b)
    )
    for _ in range(draw(st.integers(5, 40))):
        if len(values) > 256 and draw(st.booleans()):
            value = draw(st.sampled_from(values[256:])) + draw(st.sampled_from(values[97:]))
            value = value if len(value) <= 300 else value[:300]
        else:
            value = draw(short) * draw(st.integers(1, 40))
        if value not in values:
            values.append(value)
    return {v: i for i, v in enumerate(values)}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(long_token_ranks())
def test_native_derivation_of_long_tokens_matches_the_reference(ranks):
    assert _native.derive_merges(tiktoken_format._table(ranks))[0] == (
        tiktoken_format.reference_merges(ranks)
    )


def test_a_64_kb_token_exports_and_loads_back(tmp_path):
    # A run of one pattern is one word, and training on it learns tokens
    # doubling up to its length: 64 kB is 32k merges of the last token's
    # BPE, which the scan of every pair per merge made take half a minute.
    run = b"ab" * (1 << 15)
    # 16 merges and <|endoftext|>.
    tok = Tokenizer.train([run.decode()], pattern="gpt2", vocab_size=256 + 17)
    assert max(len(v) for v in tok._byte_vocab if v is not None) == len(run)
    [path, _] = export(tok, tmp_path / "run.tiktoken", "tiktoken")
    back = load_any(path)
    assert back.merges == tok.merges
    ids = tok.encode(run.decode())
    assert back.encode(run.decode()) == ids and len(ids) == 1


lines = st.tuples(
    st.binary(min_size=0, max_size=4),
    st.sampled_from([b" ", b"  ", b"\t", b" \x0b"]),
    st.one_of(st.integers(0, 1100).map(lambda r: str(r).encode()), st.sampled_from([b"x", b"-1"])),
    st.sampled_from([b"\n", b"\r\n", b"\r", b"\n\n"]),
    st.sampled_from(["b64", "raw", "unpadded"]),
)


def _line(token: bytes, sep: bytes, rank: bytes, end: bytes, how: str) -> bytes:
    text = base64.b64encode(token)
    if how == "raw":
        text = token
    elif how == "unpadded":
        text = text.rstrip(b"=")
    return text + sep + rank + end


@settings(max_examples=400, deadline=None)
@given(st.lists(lines, min_size=0, max_size=12), st.booleans())
def test_ranks_files_read_as_the_reference_reads_them(tmp_path_factory, parts, last_newline):
    """A file of any form: the native reader takes it only if the reference
    does, with the same table; otherwise the reference's message is the one
    raised."""
    data = b"".join(_line(*p) for p in parts)
    if not last_newline:
        data = data.rstrip(b"\r\n")
    path = tmp_path_factory.mktemp("ranks") / "x.tiktoken"
    path.write_bytes(data)
    try:
        want = tiktoken_format.reference_ranks(path, data)
    except TokenmillError as e:
        with pytest.raises(TokenmillError) as got:
            tiktoken_format.read_ranks(path)
        assert str(got.value) == str(e)
        with pytest.raises(_native.NativeError):
            _native.parse_tiktoken(data)
        return
    assert tiktoken_format.read_ranks(path) == want
    try:
        table = _native.parse_tiktoken(data)
    except _native.NativeError:
        return  # not canonical: read by the reference
    assert {v: i for i, v in enumerate(table) if v is not None} == want


@settings(max_examples=200, deadline=None)
@given(
    ranks_dicts(),
    st.lists(st.tuples(st.integers(0, 300), st.integers(0, 300)), max_size=20),
)
def test_table_ids_match_the_python_methods(ranks, pairs):
    """Any table and merges (most of them at fault): the native ids when the
    Python methods give ids, and None (the methods then name the fault) when
    they raise."""
    from tokenmill.tokenizer.vocab import ImportedNumbering

    table = tiktoken_format._table(ranks)
    numbering = ImportedNumbering(table, pairs, [], [])
    try:
        want = (numbering.byte_ids(numbering.index), numbering.merge_ids(numbering.index))
    except TokenmillError:
        want = None
    assert numbering.native_tables() == want


def test_table_ids_refuse_what_the_python_methods_refuse():
    from tokenmill.tokenizer.vocab import ImportedNumbering

    table: list[bytes | None] = [bytes([b]) for b in range(256)] + [b"ab", b""]
    for merges in ([(True, 98)], [(97.0, 98)], [(97, 98, 1)], [(257, 97)], [(97, 257)]):
        assert ImportedNumbering(table, merges, [], []).native_tables() is None
    assert ImportedNumbering(table, [(97, 98)], [], []).native_tables()[1] == [256]
    assert ImportedNumbering([*table, b"ab"], [], [], []).native_tables() is None


# ---- tokenizer.json tables -------------------------------------------------

# Byte-level characters (Ġ is the space byte), and two that are not: space,
# and U+0144, just past the alphabet's end.
names = st.text(alphabet="abĠ \u0144", min_size=0, max_size=3)


@st.composite
def hf_models(draw) -> tuple[dict, dict[str, int]]:
    """A tokenizer.json model's vocab and merges (of any form, often at
    fault) and the added tokens' ids."""
    vocab = draw(st.dictionaries(names, st.integers(0, 12), max_size=10))
    name = st.sampled_from([*vocab, "zz"])
    merge = st.one_of(
        st.tuples(name, name).map(lambda p: f"{p[0]} {p[1]}"),
        st.tuples(name, name).map(list),
        st.sampled_from(["", "a", "a b c", "a\nb", "a  b"]),
    )
    merges = draw(st.lists(merge, max_size=8))
    specials = draw(st.dictionaries(st.sampled_from(["<s>", "</s>"]), st.integers(0, 14)))
    return {"vocab": vocab, "merges": merges}, specials


@settings(max_examples=400, deadline=None)
@given(hf_models())
def test_tokenizer_json_tables_match_the_reference(model_and_specials):
    """The native tables of a tokenizer.json model are the reference's when
    it gives them, and None (the reference then names the fault) when it
    raises."""
    from tokenmill.formats import hf

    model, specials = model_and_specials
    try:
        want = hf._reference_tables(model, specials, "x", TokenmillError)
    except (TokenmillError, KeyError, TypeError, ValueError, AttributeError):
        want = None
    assert hf._native_tables(model, specials) == want


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), names, st.integers(0, 3)), max_size=8))
def test_tokenmill_json_vocab_decodes_as_the_reference(raw):
    from tokenmill.tokenizer import core
    from tokenmill.tokenizer.bytelevel import from_byte_level

    try:
        want = [None if v is None else from_byte_level(v) for v in raw]
    except (ValueError, TypeError, AttributeError):
        with pytest.raises((ValueError, TypeError, AttributeError)):
            core._byte_level_vocab(raw)
        return
    assert core._byte_level_vocab(raw) == want


# ---- the native table gives what the Python lists give ----------------------


def _file_json(tok: Tokenizer) -> bytes:
    """The tokenizer file as json.dumps writes it from the Python lists."""
    text = json.dumps(tok.to_dict(), ensure_ascii=False, separators=(",", ":"))
    return (text + "\n").encode()


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_native_tables_write_the_file_json_dumps_writes(name):
    tok = loaded(name)
    assert "_table" in vars(tok)  # held by the native core
    assert tok._file_bytes == _file_json(tok)


@pytest.mark.parametrize("mode", ["byte", "char"])
def test_trained_tokenizers_write_the_file_json_dumps_writes(mode):
    """A trained tokenizer's merges are written by the native core."""
    text = ["the quick brown fox jumps over the lazy dog, naïve café"] * 20
    tok = Tokenizer.train(text, vocab_size=400, mode=mode, special_tokens=["<pad>"])
    assert len(tok.merges) > 20
    assert tok._file_bytes == _file_json(tok)
    assert Tokenizer.from_dict(json.loads(tok._file_bytes)).merges == tok.merges


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1)), max_size=40))
def test_merges_json_is_json_dumps(merges):
    assert _native.merges_json(merges) == json.dumps(merges, separators=(",", ":")).encode()


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 12), st.sets(st.integers(0, 20), max_size=4), st.booleans(), st.data())
def test_merges_check_keeps_the_reference_rule(base, specials, laid_out, data):
    """The native check passes merges exactly when the reference
    (`vocab.merge_fault`) finds no fault: ids below the merge's own, none
    special, none repeated; with given ids for the merges too."""
    n = data.draw(st.integers(0, 20))
    # Mostly below the merge's own id, sometimes at or past it.
    merges = [
        data.draw(st.tuples(st.integers(0, base + k + 3), st.integers(0, base + k + 3)))
        for k in range(n)
    ]
    # The first n ids from the base that are not special: merge k makes made[k].
    made = sorted(set(range(base, base + n + len(specials))) - specials)[:n]
    assert len(made) == n
    made_ids = made if laid_out else None
    fine = vocab.merge_fault(merges, base, made_ids, specials) is None
    assert _native.merges_valid(merges, base, made_ids, sorted(specials)) == fine


def test_merges_check_takes_the_given_ids():
    """With special ids among the merges' (an extended tokenizer), merge k's
    own id is the one given, not base + k: merge 1 may join id 2 here."""
    merges = [(0, 0), (0, 2)]
    assert vocab.merge_fault(merges, 1, [2, 3], {1}) is None
    assert _native.merges_valid(merges, 1, [2, 3], [1])
    assert vocab.merge_fault(merges, 1, None, {1}) is not None
    assert not _native.merges_valid(merges, 1, None, [1])


@pytest.mark.parametrize(
    "merges", [[(1, True)], [(1.0, 2)], [[0, 1]], ((0, 1),), [(0, 2**40)], [(0, -1)], [(0,)]]
)
def test_merges_the_core_does_not_take_go_to_the_reference(merges):
    """Bools, floats, lists, a tuple of merges, ids beyond 32 bits: the core
    says no, and the reference then names the fault (or finds none)."""
    assert not _native.merges_valid(merges, 256, None, [])


any_tokens = st.binary(min_size=2, max_size=5)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(any_tokens, max_size=30, unique=True),
    st.booleans(),
    st.dictionaries(st.sampled_from(["<s>", "</s>"]), st.integers(200, 400), max_size=2),
    st.data(),
)
def test_a_ranks_file_loads_as_the_reference_loads_it(
    tmp_path_factory, extra, every_byte, specials, data
):
    """Loading a canonical ranks file (the native table) gives the tokenizer
    of the reference's ranks and merges as Python lists, or the same error:
    bytes without a token, special tokens at taken ids."""
    values = [bytes([b]) for b in range(0, 256, 1 if every_byte else 3)]
    values += [v for v in extra if v not in values]
    ranks = dict(zip(values, data.draw(st.permutations(range(len(values)))), strict=True))
    path = tmp_path_factory.mktemp("ranks") / "x.tiktoken"
    path.write_bytes(b"".join(base64.b64encode(v) + b" %d\n" % r for v, r in ranks.items()))
    table = tiktoken_format._table(ranks)
    merges = tiktoken_format.reference_merges(ranks)
    try:
        want = tiktoken_format.ranks_tokenizer(table, merges, "gpt2", specials, str(path))
    except TokenmillError as e:
        with pytest.raises(TokenmillError) as got:
            tiktoken_format.load(path, "gpt2", specials)
        assert str(got.value) == str(e)
        return
    tok = tiktoken_format.load(path, "gpt2", specials)
    assert "_table" in vars(tok) and "vocab" not in vars(tok)
    text = b"".join(reversed(values)).decode("latin-1")
    assert tok.encode(text) == want.encode(text)
    assert tok._file_bytes == _file_json(want) and tok.sha256 == want.sha256
    assert (tok.vocab, tok.merges, tok._merge_ids, tok._byte_ids) == (
        want.vocab,
        want.merges,
        want._merge_ids,
        want._byte_ids,
    )
    assert tok.special_map == want.special_map and tok.vocab_size == want.vocab_size
    assert tok == want and tok.decode(tok.encode(text)) == want.decode(want.encode(text))


def _tokenizer_json(model: dict, specials: dict[str, int]) -> dict:
    """A byte-level tokenizer.json around `model`'s vocab and merges."""
    from tokenmill.formats import hf

    d = hf.to_dict(Tokenizer.train(["hello world"], vocab_size=258))
    d["model"]["vocab"], d["model"]["merges"] = model["vocab"], model["merges"]
    d["added_tokens"] = [{"id": i, "content": t, "special": True} for t, i in specials.items()]
    return d


def _loads_alike(path) -> None:
    """load_any (the model's vocab and merges read by the native core) gives
    the tokenizer, or the error, of the file read whole by Python."""
    from tokenmill.formats import hf

    try:
        want = hf.from_dict(json.loads(path.read_bytes()), str(path))
    except TokenmillError as e:
        with pytest.raises(TokenmillError) as got:
            load_any(path)
        assert str(got.value) == str(e)
        return
    tok = load_any(path)
    assert tok.sha256 == want.sha256
    assert tok == want and tok._merge_ids == want._merge_ids and tok._byte_ids == want._byte_ids


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hf_models(), st.sampled_from(["as drawn", "every byte", "and merges"]), st.booleans())
def test_a_tokenizer_json_loads_as_python_reads_it_whole(
    tmp_path_factory, model_and_specials, how, ascii_only
):
    from tokenmill.tokenizer.bytelevel import byte_to_char

    model, specials = model_and_specials
    if how != "as drawn":  # a model that may load: the bytes first, the drawn tokens after
        base = {c: b for b, c in enumerate(byte_to_char())}
        drawn = model["vocab"].items()
        merges = model["merges"]
        if how == "and merges":  # byte-level tokens, and merges of tokens that are in it
            drawn = [(t, i) for t, i in drawn if set(t) <= set(base)]
            merges = [f"{t[0]} {t[1]}" for t, _ in drawn if len(t) == 2]
        base.update({t: 256 + i for t, i in drawn if t not in base})
        model = {"vocab": base, "merges": merges}
        specials = {t: 256 + i for t, i in specials.items()}
    path = tmp_path_factory.mktemp("hf") / "tokenizer.json"
    text = json.dumps(_tokenizer_json(model, specials), ensure_ascii=ascii_only)
    path.write_text(text, encoding="utf-8")
    _loads_alike(path)


@pytest.mark.parametrize(
    "model",
    [
        '"vocab": {"a": 0, "a": 1}, "merges": []',
        '"vocab": {"a": 0}, "vocab": {"b": 0}, "merges": []',
        '"vocab": {"a": 0}, "merges": null',
        '"vocab": {"a": 0}',
        '"vocab": ["a"], "merges": []',
        '"vocab": {"a": 1.0}, "merges": []',
        '"vocab": {"a": true}, "merges": []',
        '"vocab": {"a": -0}, "merges": []',
        '"vocab": {"a": 0}, "merges": ["a a", "a a"], "merges": []',
        '"merges": []',
    ],
)
def test_tokenizer_json_edge_cases_load_as_python_reads_them(tmp_path, model):
    """Files that Python reads otherwise than the core would (a key twice:
    Python keeps the last), or refuses: read whole by Python."""
    whole = json.dumps(_tokenizer_json({"vocab": {}, "merges": []}, {}))
    start = whole.index('"vocab"')  # the model's vocab and merges come last in it
    text = whole[:start] + model + whole[whole.index("}", whole.index('"merges"')) :]
    path = tmp_path / "tokenizer.json"
    path.write_text(text, encoding="utf-8")
    _loads_alike(path)


def _prefetched(path):
    """`path` loaded after `encode`'s early start on it (formats/prefetch.py)."""
    prefetch.start(path)
    try:
        return load_any(path)
    finally:
        prefetch.discard()


def _grown_tokenizer() -> Tokenizer:
    """An extended tokenizer: its special token keeps its base id among the merges."""
    import pyarrow as pa

    from tokenmill.tokenizer.core import word_table
    from tokenmill.tokenizer.extend import extend

    base = Tokenizer.train(["the cat sat on the mat"] * 10, vocab_size=270)
    table = word_table(
        [pa.array(["der Hund und die Katze"] * 10, pa.large_string())], "byte", base.pattern, False
    )
    return extend(base, table["word"], table["count"], vocab_size=280).tokenizer


def test_a_prefetched_tokenmill_file_loads_as_the_file_does(tmp_path):
    """`encode` reads a tokenmill file's merges in the core while its modules
    import, and builds the encoder of a plain byte-mode file from them: the
    tokenizer is the one the file loads as, and the encoder is taken only by
    a tokenizer numbered and split as it was built for."""
    docs = texts()[:40] + ["naïve café 日本語 " * 30, "x" * 400]
    sample = [t[:2000] for t in texts()[:300]]
    byte = Tokenizer.train(sample, vocab_size=600, special_tokens=["<|endoftext|>"])
    regex = r"\w+|\s+|[^\w\s]+"
    cases = {
        "byte": (byte, True),
        "whole_words": (Tokenizer.from_dict(byte.to_dict() | {"whole_words": True}), False),
        "char": (Tokenizer.train(sample, vocab_size=500, mode="char"), False),
        "grown": (_grown_tokenizer(), False),
        "o200k": (Tokenizer.train(sample, vocab_size=400, pattern="o200k"), True),
        "regex": (
            Tokenizer.from_dict(byte.to_dict() | {"pattern": regex, "pattern_regex": regex}),
            True,
        ),
    }
    for name, (tok, plain) in cases.items():
        path = tmp_path / f"{name}.json"
        tok.save(path)
        direct, early = load_any(path), _prefetched(path)
        assert "_encoder" not in vars(direct)  # built on first use
        assert ("_encoder" in vars(early)) == plain, name
        assert early.to_dict() == direct.to_dict() == tok.to_dict(), name
        assert early.sha256 == direct.sha256 == tok.sha256, name
        assert early.encode_batch(docs) == direct.encode_batch(docs), name

    # The file changed after the early read: it loads as it now is.
    path = tmp_path / "byte.json"
    prefetch.start(path)
    cases["char"][0].save(path)
    assert load_any(path).to_dict() == cases["char"][0].to_dict()
    prefetch.discard()

    # Files the core does not take load through Python, faults named as before.
    d = byte.to_dict()
    for merges in ([[256.0, 97]] + d["merges"][1:], [[-1, 97]], [[97, 98, 99]], [[2**32, 97]]):
        path.write_text(json.dumps(d | {"merges": merges}))
        with pytest.raises(TokenmillError) as direct_error:
            load_any(path)
        with pytest.raises(TokenmillError) as early_error:
            _prefetched(path)
        assert str(early_error.value) == str(direct_error.value)
    # A file that does not name its format first is not read early.
    path.write_text(json.dumps({"note": "x" * 100} | d))
    late = _prefetched(path)
    assert "_encoder" not in vars(late) and late.to_dict() == byte.to_dict()
    # A key twice (json.loads keeps the last; the core refuses the file).
    path.write_text(
        json.dumps(d | {"merges": [[97, 98]]})[:-1] + ', "merges": ' + json.dumps(d["merges"]) + "}"
    )
    assert _prefetched(path).to_dict() == load_any(path).to_dict() == byte.to_dict()


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1)), max_size=30),
    st.dictionaries(st.text(max_size=5), st.integers() | st.text() | st.none(), max_size=4),
)
def test_file_merges_read_what_json_reads(merges, others):
    """The core's reading of a file's merges: json's, as tuples, and the rest
    of the file parses to the file with its merges empty."""
    d = {k: v for k, v in others.items() if k != "merges"} | {"merges": [list(m) for m in merges]}
    data = json.dumps(d, ensure_ascii=False).encode()
    read, rest = _native.FileMerges.split(data)
    assert read.pairs() == merges
    assert json.loads(rest) == d | {"merges": []}


def test_a_prefetched_table_is_used_only_for_the_bytes_it_was_built_from(tmp_path):
    """`encode` starts building a .tiktoken file's table and encoder while its
    modules import (formats/prefetch.py): the loader takes the table only when
    the bytes it reads are the bytes the table was built from, so a file changed
    in between loads as it now is, and the encoder only for the same pattern."""
    data = GPT2_FILE.read_bytes()
    path = tmp_path / "ranks.tiktoken"
    path.write_bytes(data)
    prefetch.start(path, "gpt2")
    table, encoder = prefetch.take(data, "gpt2")
    direct = _native.Vocabulary.from_tiktoken(data)
    assert table is not None and encoder is not None
    assert (table.tokens(), table.merges(), table.merge_ids(), table.byte_ids()) == (
        direct.tokens(),
        direct.merges(),
        direct.merge_ids(),
        direct.byte_ids(),
    )
    # The file's tables, written on the prefetch thread and kept: the same text.
    assert table.file_tables() == table.file_tables() == direct.file_tables()
    assert prefetch.take(data, "gpt2") == (None, None)  # taken once
    prefetch.start(path, "gpt2")
    assert prefetch.take(data, "cl100k")[1] is None  # another pattern: no encoder

    # Through the loader: the same ids with and without the prefetched encoder.
    plain = load_any(path, pattern="gpt2")
    prefetch.start(path, "gpt2")
    fetched = load_any(path, pattern="gpt2")
    assert prefetch.take(data, "gpt2") == (None, None)  # the loader took it
    docs = texts()[:50]
    assert fetched.encode_batch(docs) == plain.encode_batch(docs)
    assert fetched._file_bytes == plain._file_bytes  # so the same sha256

    prefetch.start(path, "gpt2")
    shorter = b"".join(data.splitlines(keepends=True)[:300])
    path.write_bytes(shorter)
    tok = load_any(path, pattern="gpt2")
    assert tok.vocab_size == 300  # the stale table was refused
    assert tok.encode_batch(docs) == load_any(path, pattern="gpt2").encode_batch(docs)

    prefetch.start(tmp_path / "tokenizer.json")  # not a ranks file: nothing started
    assert prefetch.take(data, "gpt2") == (None, None)
    prefetch.start(path, "gpt2")
    prefetch.discard()  # a command that failed before loading: the build is waited for, dropped
    assert prefetch.take(shorter, "gpt2") == (None, None)
