"""Tokenizer files are validated whatever their kind (issue 14): tokenmill's own
JSON, Hugging Face tokenizer.json and .tiktoken ranks (with their settings
JSON). Ids are integers (not bools, floats or strings) that uint32 holds,
unique, in proportion to the tokens the file holds; a merge joins tokens made
before it; special-token ids are where the numbering puts them; only the NFC
normalizer is accepted, and it is visible on the Tokenizer. Anything else is
refused with one line naming the file (and line, token or id), never a
traceback, a crash at decode time, or an allocation the file's size does not
justify. Training refuses vocabulary sizes that 32-bit ids cannot hold, and
decode refuses ids outside the vocabulary."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from realtext import GPT2_FILE

from tokenmill import _native
from tokenmill.errors import TokenmillError
from tokenmill.formats import hf, load_any
from tokenmill.formats import tiktoken as tiktoken_format
from tokenmill.io.arrow import arrow_buffers
from tokenmill.jobs import load_job
from tokenmill.tokenizer import ENDOFTEXT, UNK, Tokenizer, id_limit

# Rank counts of tiktoken's published .tiktoken files, each dense (ranks 0..n-1);
# all three ship in vocabularies/ (its README gives every file's sha256).
REAL_FILES = {
    "gpt2": ("gpt2", 50256),
    "cl100k_base": ("cl100k", 100256),
    "o200k_base": ("o200k", 199998),
}
TEXT = "hello hello world, hello there; the cat sat on the mat"


def refused(path: Path, *needles: str, **options) -> str:
    """load_any(path) raises a one-line TokenmillError naming the file and each needle."""
    with pytest.raises(TokenmillError) as e:
        load_any(path, **options)
    message = str(e.value)
    assert "\n" not in message, message
    assert str(path) in message, message
    for needle in needles:
        assert needle in message, message
    return message


def write(path: Path, d) -> Path:
    path.write_text(d if isinstance(d, str) else json.dumps(d), encoding="utf-8")
    return path


def trained(**options) -> Tokenizer:
    return Tokenizer.train([TEXT], pattern="gpt2", vocab_size=280, **options)


def own_dict(**changes) -> dict:
    """A valid tokenmill tokenizer file without a vocab, changed."""
    d = trained().to_dict()
    d.update(changes)
    return d


def vocab_dict(**changes) -> dict:
    """A valid tokenmill tokenizer file with an explicit vocab (an import), changed."""
    tok = trained()
    explicit = Tokenizer(
        mode="byte",
        pattern="gpt2",
        merges=list(tok.merges),
        special_tokens=[ENDOFTEXT],
        vocab=list(tok._byte_vocab),
        special_ids=[len(tok._byte_vocab)],
    )._validate()
    d = explicit.to_dict()
    d.update(changes)
    return d


def assert_usable(tok: Tokenizer) -> None:
    """A tokenizer that loaded works: every id decodes, text round-trips."""
    for i in range(tok.vocab_size):
        if tok.token_values[i] is not None:
            tok.decode([i])
    assert tok.decode(tok.encode(TEXT)) == TEXT


# ---- the valid files load ------------------------------------------------


def test_valid_files_of_every_kind_load(tmp_path):
    tok = trained()
    for name, d in (("own.json", own_dict()), ("vocab.json", vocab_dict())):
        loaded = load_any(write(tmp_path / name, d))
        assert loaded.encode(TEXT) == tok.encode(TEXT)
        assert_usable(loaded)
    hf.save(tok, tmp_path / "hf.json")
    assert load_any(tmp_path / "hf.json").encode(TEXT) == tok.encode(TEXT)
    char = Tokenizer.train([TEXT], mode="char", vocab_size=40)
    char.save(tmp_path / "char.json")
    assert_usable(load_any(tmp_path / "char.json"))


@pytest.mark.parametrize("name", REAL_FILES)
def test_real_tiktoken_files_satisfy_the_id_rule(name):
    pattern, n_ranks = REAL_FILES[name]
    specials = tiktoken_format.KNOWN_SPECIALS[(pattern, n_ranks)]
    assert max(specials.values()) < id_limit(n_ranks + len(specials))


def test_the_shipped_gpt2_file_has_the_known_dense_ranks():
    ranks = tiktoken_format.read_ranks(GPT2_FILE)
    assert sorted(ranks.values()) == list(range(REAL_FILES["gpt2"][1]))


def test_real_gpt2_vocabulary_loads_and_validates(tmp_path):
    tok = load_any(GPT2_FILE, pattern="gpt2")
    assert tok.vocab_size == 50257 and tok._normalizer is None
    assert tok.decode(tok.encode(TEXT)) == TEXT
    # Its tokenmill and Hugging Face forms load too, with the same tables.
    tok.save(tmp_path / "gpt2.json")
    hf.save(tok, tmp_path / "tokenizer.json")
    for path in (tmp_path / "gpt2.json", tmp_path / "tokenizer.json"):
        again = load_any(path)
        assert again.vocab == tok.vocab and again.merges == tok.merges
        assert again.special_map == tok.special_map


# ---- tokenmill files: merges ---------------------------------------------


@pytest.mark.parametrize(
    "merge, needle",
    [
        ([5000, 97], "(5000, 97)"),  # no such id
        ([97, 10**12], "(97, 1000000000000)"),
        ([-1, 97], "(-1, 97)"),
        ([256, 97], "(256, 97)"),  # the id merge 0 itself makes
        ([True, 97], "ids are integers"),
        ([97.0, 98], "ids are integers"),
        (["97", 98], "ids are integers"),
        ([None, 98], "ids are integers"),
    ],
)
def test_tokenmill_merge_naming_a_bad_id_is_refused(tmp_path, merge, needle):
    d = own_dict()
    d["merges"][0] = merge
    refused(write(tmp_path / "t.json", d), "merge 0", needle)


def test_tokenmill_merge_naming_a_later_token_is_refused(tmp_path):
    # Merge 0 joins the token merge 1 makes: it loaded, then decode crashed.
    d = own_dict()
    d["merges"][0] = [97, 257]
    refused(write(tmp_path / "t.json", d), "merge 0 (97, 257)", "not yet made")


def test_tokenmill_repeated_merge_is_refused(tmp_path):
    d = own_dict()
    d["merges"][5] = d["merges"][2]
    refused(write(tmp_path / "t.json", d), "merge 5", "repeats merge 2")


@pytest.mark.parametrize("literal", ["1e400", "1" + "0" * 30, "-1", "NaN", "Infinity"])
def test_tokenmill_numbers_json_cannot_hold_as_ids(tmp_path, literal):
    text = json.dumps(own_dict(merges=[["LEFT", 98]]), separators=(",", ":"))
    path = write(tmp_path / "t.json", text.replace('"LEFT"', literal))
    refused(path, "merge 0")


@pytest.mark.parametrize(
    "merges, needle",
    [
        ("abc", "merges must be a list"),
        ([[97, 98, 99]], "merge 0"),
        ([97], "merge 0"),
        ([{"a": 1}], "merge 0"),
    ],
)
def test_tokenmill_merges_of_the_wrong_shape(tmp_path, merges, needle):
    refused(write(tmp_path / "t.json", own_dict(merges=merges)), "malformed", needle)


def test_tokenmill_file_with_vocab_checks_merges(tmp_path):
    d = vocab_dict()
    d["merges"][0] = [97, 10**9]
    refused(write(tmp_path / "t.json", d), "merge 0", "does not join")
    d["merges"][0] = [False, 98]
    refused(write(tmp_path / "t.json", d), "merge 0", "ids are integers")


# ---- tokenmill files: special tokens -------------------------------------


@pytest.mark.parametrize(
    "value, needle",
    [
        (-1, "has id -1"),
        ("280", "has id '280'"),
        (10**12, "has id 1000000000000"),
        (279.0, "has id 279.0"),
        (True, "has id True"),
        (None, "has id None"),
        (5000, "has id 5000, not 279"),  # not where the numbering puts it, nor past it
    ],
)
def test_tokenmill_special_token_ids_are_checked(tmp_path, value, needle):
    d = own_dict()
    assert d["special_tokens"] == {ENDOFTEXT: 279}
    d["special_tokens"][ENDOFTEXT] = value
    refused(write(tmp_path / "t.json", d), f"special token {ENDOFTEXT!r}", needle)


def test_tokenmill_duplicate_special_ids_are_refused(tmp_path):
    for d in (own_dict(), vocab_dict()):
        d["special_tokens"]["<|pad|>"] = d["special_tokens"][ENDOFTEXT]
        refused(write(tmp_path / "t.json", d), "'<|pad|>'", "same id")


@pytest.mark.parametrize(
    "value, needle",
    [
        (-5, "has id -5"),
        (10**12, "has id 1000000000000"),
        (2**32 - 1, "has id 4294967295"),  # an id, but far beyond the tokens
        (97, "has id 97, taken"),
        ("x", "has id 'x'"),
    ],
)
def test_tokenmill_file_with_vocab_checks_special_ids(tmp_path, value, needle):
    d = vocab_dict()
    d["special_tokens"][ENDOFTEXT] = value
    refused(write(tmp_path / "t.json", d), f"special token {ENDOFTEXT!r}", needle)


def test_tokenmill_special_tokens_must_be_a_map(tmp_path):
    refused(write(tmp_path / "t.json", own_dict(special_tokens=[ENDOFTEXT])), "special_tokens")


# ---- tokenmill files: other fields ---------------------------------------


@pytest.mark.parametrize(
    "key, value, needle",
    [
        ("vocab_size", 1000, "vocab_size is 1000"),
        ("vocab_size", 280.0, "vocab_size is 280.0"),
        ("version", 2, "version 2"),
        ("mode", "word", "unknown mode 'word'"),
        ("pattern", 5, "pattern is 5"),
        ("pattern", "(unclosed", "pattern"),
        ("whole_words", "false", "whole_words is 'false'"),
        ("normalization", "NFKC", "normalizer 'NFKC'"),
        ("normalization", "NFD", "normalizer 'NFD'"),
        ("vocab", "abc", "vocab is 'abc'"),
    ],
)
def test_tokenmill_fields_are_checked(tmp_path, key, value, needle):
    refused(write(tmp_path / "t.json", own_dict(**{key: value})), needle)


@pytest.mark.parametrize(
    "alphabet, needle",
    [
        (["a", "b", "a", "</w>"], "'a' twice"),
        (["a", "bc", "</w>"], "'bc'"),
        (["a", "b"], "lacks </w>"),
        ([1, "</w>"], "holds 1"),
    ],
)
def test_char_mode_alphabet_is_checked(tmp_path, alphabet, needle):
    d = Tokenizer.train(["ab ba"], mode="char", vocab_size=7).to_dict()
    d.update(alphabet=alphabet, merges=[])
    d["special_tokens"] = {UNK: len(alphabet), ENDOFTEXT: len(alphabet) + 1}
    d["vocab_size"] = len(alphabet) + 2
    refused(write(tmp_path / "t.json", d), needle)


def test_char_mode_needs_unk(tmp_path):
    d = Tokenizer.train(["ab ba"], mode="char", vocab_size=7).to_dict()
    n = d["vocab_size"]
    d["special_tokens"] = {ENDOFTEXT: n - 2}
    d["vocab_size"] = n - 1
    refused(write(tmp_path / "t.json", d), UNK)


def test_tokenizer_load_checks_too(tmp_path):
    """Tokenizer.load (a rerun's reuse of the tokenizer it trained) validates as load_any does."""
    d = own_dict()
    d["merges"][3] = [97, 5000]
    with pytest.raises(TokenmillError, match="merge 3"):
        Tokenizer.load(write(tmp_path / "t.json", d))


# ---- normalizers ---------------------------------------------------------


def test_normalizer_is_visible_on_the_tokenizer(tmp_path):
    assert load_any(write(tmp_path / "a.json", own_dict()))._normalizer is None
    nfc = load_any(write(tmp_path / "b.json", own_dict(normalization="NFC")))
    assert nfc._normalizer == "NFC"
    assert nfc.encode("cafe\u0301") == nfc.encode("caf\u00e9")  # NFC is applied


@pytest.mark.parametrize(
    "normalizer, want",
    [
        (None, None),
        ({"type": "NFC"}, "NFC"),
        ({"type": "Sequence", "normalizers": []}, None),
        ({"type": "Sequence", "normalizers": [{"type": "NFC"}]}, "NFC"),
    ],
)
def test_hf_normalizers_accepted(tmp_path, normalizer, want):
    d = hf.to_dict(trained())
    d["normalizer"] = normalizer
    assert load_any(write(tmp_path / "tokenizer.json", d))._normalizer == want


@pytest.mark.parametrize(
    "normalizer, needle",
    [
        ({"type": "NFKC"}, "NFKC"),
        ({"type": "NFD"}, "NFD"),
        ({"type": "NFKD"}, "NFKD"),
        ({"type": "Sequence", "normalizers": [{"type": "NFKC"}]}, "NFKC"),
        ({"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "NFC"}]}, "NFC + NFC"),
        ({"type": "Sequence", "normalizers": [{"type": "Sequence", "normalizers": []}]}, "Seq"),
        ({"type": "Sequence", "normalizers": "NFC"}, "Sequence"),
    ],
)
def test_hf_other_normalizers_refused(tmp_path, normalizer, needle):
    d = hf.to_dict(trained())
    d["normalizer"] = normalizer
    refused(write(tmp_path / "tokenizer.json", d), "normalizer", needle)


# ---- Hugging Face tokenizer.json ids --------------------------------------


@pytest.mark.parametrize("literal", ["1e400", "1" + "0" * 30, "-1", "true", '"5"', "5.0"])
def test_hf_vocabulary_ids_that_are_not_ids(tmp_path, literal):
    d = hf.to_dict(trained())
    d["model"]["vocab"]["ĠTHE_TOKEN"] = "LITERAL"
    path = write(tmp_path / "tokenizer.json", json.dumps(d).replace('"LITERAL"', literal))
    refused(path, "'ĠTHE_TOKEN'")


def test_hf_vocabulary_id_far_beyond_the_tokens(tmp_path):
    d = hf.to_dict(trained())
    d["model"]["vocab"]["ĠTHE_TOKEN"] = 60_000_000
    start = time.perf_counter()
    refused(write(tmp_path / "tokenizer.json", d), "'ĠTHE_TOKEN'", "60000000")
    assert time.perf_counter() - start < 1  # refused before allocating 60M slots


@pytest.mark.parametrize("value", [-1, 10**12, "279", 279.0, True, 60_000_000])
def test_hf_added_token_ids_are_checked(tmp_path, value):
    d = hf.to_dict(trained())
    d["added_tokens"][0]["id"] = value
    refused(write(tmp_path / "tokenizer.json", d), f"{ENDOFTEXT!r}")


def test_hf_added_tokens_twice(tmp_path):
    d = hf.to_dict(trained())
    d["added_tokens"].append({**d["added_tokens"][0], "content": "<|pad|>"})
    refused(write(tmp_path / "tokenizer.json", d), "'<|pad|>'", "same id")
    d = hf.to_dict(trained())
    d["added_tokens"].append({**d["added_tokens"][0], "id": 280})
    refused(write(tmp_path / "tokenizer.json", d), f"{ENDOFTEXT!r}", "twice")


def test_hf_two_tokens_with_one_id(tmp_path):
    d = hf.to_dict(trained())
    d["model"]["vocab"]["ĠTHE_TOKEN"] = d["model"]["vocab"]["a"]
    refused(write(tmp_path / "tokenizer.json", d), "'ĠTHE_TOKEN'", "same id")


# ---- .tiktoken files -----------------------------------------------------


def byte_lines() -> list[bytes]:
    return [base64.b64encode(bytes([b])) + b" " + str(b).encode() for b in range(256)]


def ranks_file(tmp_path: Path, extra: list[bytes], name: str = "v.tiktoken") -> Path:
    path = tmp_path / name
    path.write_bytes(b"\n".join([*byte_lines(), *extra]) + b"\n")
    return path


AB = base64.b64encode(b"ab")


@pytest.mark.parametrize("rank", [b"60000000", b"1000000000000", b"1" + b"0" * 30])
def test_tiktoken_rank_far_beyond_the_tokens(tmp_path, rank):
    path = ranks_file(tmp_path, [AB + b" " + rank])
    start = time.perf_counter()
    message = refused(path, "rank", pattern="gpt2")
    assert f"{path}:257:" in message
    assert time.perf_counter() - start < 1  # no 2.4 GB vocabulary first


@pytest.mark.parametrize("rank", [b"-1", b"1e400", b"+300", b"3_00", b"300.0", b"0x12c"])
def test_tiktoken_rank_that_is_no_decimal_integer(tmp_path, rank):
    path = ranks_file(tmp_path, [AB + b" " + rank])
    message = refused(path, "malformed .tiktoken line", pattern="gpt2")
    assert f"{path}:257:" in message


def test_tiktoken_small_gaps_are_allowed(tmp_path):
    # Like cl100k's specials: ids may leave some unused.
    tok = load_any(ranks_file(tmp_path, [AB + b" 300"]), pattern="gpt2")
    assert tok.encode("abab") == [300, 300] and tok.vocab_size == 301
    assert_usable(tok)


@pytest.mark.parametrize("value", [-1, 10**12, "300", True, 300.0, 2**32 - 1])
def test_tiktoken_settings_special_ids_are_checked(tmp_path, value):
    path = ranks_file(tmp_path, [AB + b" 256"])
    side = tiktoken_format.sidecar_path(path)
    write(side, {"name": "v", "pat_str": "gpt2", "special_tokens": {ENDOFTEXT: value}})
    with pytest.raises(TokenmillError) as e:
        load_any(path)
    message = str(e.value)
    assert "\n" not in message and str(path) in message and ENDOFTEXT in message, message


@pytest.mark.parametrize("ids", [[-1], [10**12], [256, 256]])
def test_tiktoken_special_token_option_ids_are_checked(tmp_path, ids):
    path = ranks_file(tmp_path, [AB + b" 256"])
    specials = {f"<s{k}>": i for k, i in enumerate(ids)}
    with pytest.raises(TokenmillError) as e:
        load_any(path, pattern="gpt2", special_tokens=specials)
    assert str(path) in str(e.value) and "<s" in str(e.value)


# ---- nesting -------------------------------------------------------------

DEEP = 100_000


@pytest.mark.parametrize(
    "text",
    [
        '{"format": "tokenmill", "merges": ' + "[" * DEEP + "]" * DEEP + "}",
        '{"model": {"type": "BPE", "vocab": ' + '{"a":' * DEEP + "1" + "}" * DEEP + "}}",
        '{"pat_str": "x", "special_tokens": ' + "[" * DEEP + "]" * DEEP + "}",
    ],
)
def test_deeply_nested_tokenizer_json(tmp_path, text):
    path = write(tmp_path / "tokenizer.json", text)
    refused(path, "nested too deeply")
    with pytest.raises(TokenmillError, match="nested too deeply"):
        Tokenizer.load(path)  # a rerun's reuse of its trained tokenizer


def test_deeply_nested_tiktoken_settings(tmp_path):
    path = ranks_file(tmp_path, [])
    side = tiktoken_format.sidecar_path(path)
    write(side, '{"pat_str": ' + "[" * DEEP + "]" * DEEP + "}")
    with pytest.raises(TokenmillError, match="nested too deeply") as e:
        load_any(path)
    assert str(side) in str(e.value)


@pytest.mark.parametrize(
    "text", ["x = " + "[" * DEEP + "]" * DEEP + "\n", "x = " + "{a = " * DEEP + "1" + "}" * DEEP]
)
def test_deeply_nested_job_file(tmp_path, text):
    path = tmp_path / "job.toml"
    path.write_text(text)
    with pytest.raises(TokenmillError) as e:
        load_job(path)
    assert str(path) in str(e.value) and "\n" not in str(e.value)


# ---- decode --------------------------------------------------------------


@pytest.mark.parametrize("bad", [-1, -280, 280, 10**12, 2**64])
def test_decode_refuses_ids_outside_the_vocabulary(bad):
    tok = trained()
    assert tok.vocab_size == 280
    with pytest.raises(TokenmillError) as e:
        tok.decode([104, bad, 105])
    message = str(e.value)
    assert f"id {bad} " in message and "280" in message and "\n" not in message


def test_decode_refuses_what_is_no_id():
    with pytest.raises(TokenmillError, match="not an integer"):
        trained().decode([104, 1.5])


def test_decode_of_a_gap(tmp_path):
    tok = load_any(ranks_file(tmp_path, [AB + b" 300"]), pattern="gpt2")
    with pytest.raises(TokenmillError, match="id 299 is no token"):
        tok.decode([299])


def test_decode_on_the_real_gpt2_vocabulary():
    tok = load_any(GPT2_FILE, pattern="gpt2")
    for bad in (-1, 50257):  # -1 was the last id, <|endoftext|>
        with pytest.raises(TokenmillError, match=f"id {bad} .*50257"):
            tok.decode([bad])


def test_cli_errors_are_one_line(cli, tmp_path):
    d = own_dict()
    d["special_tokens"][ENDOFTEXT] = -1
    bad = write(tmp_path / "bad.json", d)
    deep = write(tmp_path / "deep.json", "[" * DEEP + "]" * DEEP)
    good = write(tmp_path / "good.json", own_dict())
    for args, needle in (
        (("decode", "--tokenizer", bad, "1"), "bad.json"),
        (("decode", "--tokenizer", deep, "1"), "deep.json"),
        (("decode", "--tokenizer", good, "--", "-1"), "id -1"),
        (("decode", "--tokenizer", good, "100000"), "id 100000"),
    ):
        result = cli(*args, ok=False)
        assert result.exit_code == 1, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0], result.output


# ---- training: vocabulary sizes ids cannot hold --------------------------


@pytest.mark.parametrize("size", [2**32, 2**32 + 1, 2**63 - 1, 2**64, -1, True, 300.0])
def test_vocab_size_beyond_32_bit_ids_is_refused(size):
    with pytest.raises(TokenmillError, match="vocab_size"):
        Tokenizer.train([TEXT], vocab_size=size)


def test_num_merges_beyond_32_bit_ids_is_refused():
    with pytest.raises(TokenmillError, match="32"):
        Tokenizer.train([TEXT], num_merges=2**32)
    with pytest.raises(TokenmillError, match="num_merges"):
        Tokenizer.train([TEXT], num_merges=-1)


def test_native_training_refuses_ids_beyond_32_bits():
    """The Rust boundary itself: a ValueError, not a panic or an abort."""
    table = pa.array(["ab", "cd"], pa.large_string())
    counts = memoryview(bytes(16))
    for n in (2**32, 2**63 - 1):
        with pytest.raises(ValueError, match="32 bits"):
            _native.train_merges(*arrow_buffers(table), counts, None, n, None)
    with pytest.raises(ValueError, match="alphabet"):
        _native.train_merges(*arrow_buffers(table), counts, ["a", "</w>"], 5, None)
    with pytest.raises(ValueError, match="</w>"):
        _native.train_merges(*arrow_buffers(table), counts, ["a", "b", "c", "d"], 5, None)


# Peak memory from /proc (VmHWM, in KiB): this process's own, where getrusage's
# ru_maxrss would also count the parent's (pytest's) memory inherited at fork.
HUGE_TRAIN = """
import re, sys
from pathlib import Path
from tokenmill.tokenizer import Tokenizer
text = open(sys.argv[1], encoding="utf-8").read()
for mode in ("byte", "char"):
    tok = Tokenizer.train([text], mode=mode, vocab_size=2**32 - 1)
    assert 0 < len(tok.merges) < 10**6, len(tok.merges)
    assert tok.decode(tok.encode(text)) == (text if mode == "byte" else " ".join(text.split()))
status = Path("/proc/self/status")
peak = re.search(r"VmHWM:\\s*(\\d+)", status.read_text()) if status.exists() else None
print(peak.group(1) if peak else 0)
"""


def test_huge_legal_vocab_size_trains_without_allocating_for_it(tmp_path):
    """2**32 - 1 is a vocabulary size ids can hold: training stops when no pair
    is left, having allocated for the corpus, not for four billion merges (it
    aborted, trying to reserve them up front)."""
    sample = Path(__file__).resolve().parents[2] / "sample_data" / "lines.txt"
    text = sample.read_text(encoding="utf-8")[:50_000]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(text, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-c", HUGE_TRAIN, str(corpus)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert int(result.stdout.split()[-1]) < 1 << 20  # peak RSS under 1 GiB (KiB)


# ---- properties ----------------------------------------------------------


def _corrupt(merges: list, data: st.DataObject) -> list:
    merges = [list(m) for m in merges]
    k = data.draw(st.integers(0, len(merges) - 1))
    kind = data.draw(st.sampled_from(["swap", "id", "value", "shuffle"]))
    if kind == "swap":
        j = data.draw(st.integers(0, len(merges) - 1))
        merges[k], merges[j] = merges[j], merges[k]
    elif kind == "id":
        merges[k][data.draw(st.integers(0, 1))] = data.draw(st.integers(-(2**40), 2**40))
    elif kind == "value":
        merges[k][data.draw(st.integers(0, 1))] = data.draw(
            st.one_of(st.booleans(), st.floats(), st.text(max_size=3), st.none())
        )
    else:
        merges = data.draw(st.permutations(merges))
    return merges


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_corrupted_merges_are_refused_or_load_consistently(tmp_path, data):
    """A merges list changed at random either loads into a tokenizer whose
    every id decodes and whose text round-trips, or is refused with one line
    naming the file: never loads and then fails."""
    for base in (own_dict(), vocab_dict()):
        base["merges"] = _corrupt(base["merges"], data)
        path = write(tmp_path / "t.json", base)
        try:
            tok = load_any(path)
        except TokenmillError as e:
            assert str(path) in str(e) and "\n" not in str(e)
            continue
        assert_usable(tok)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_permuted_tiktoken_ranks_are_refused_or_load_consistently(tmp_path, data):
    """Ranks permuted at random, one of them perhaps moved anywhere up to 10**7:
    refused with one line naming the file, or loaded into a tokenizer whose ids
    stay in proportion to its tokens and whose text round-trips."""
    tokens = [bytes([b]) for b in range(256)] + [b"ab", b"abab", b"he", b"hel", b"hello", b" t"]
    ranks = data.draw(st.permutations(range(len(tokens))))
    if data.draw(st.booleans()):
        k = data.draw(st.integers(0, len(tokens) - 1))
        ranks[k] = data.draw(st.integers(0, 10**7))
    path = tmp_path / "p.tiktoken"
    path.write_bytes(
        b"".join(base64.b64encode(t) + b" %d\n" % r for t, r in zip(tokens, ranks, strict=True))
    )
    try:
        tok = load_any(path, pattern="gpt2")
    except TokenmillError as e:
        assert str(path) in str(e) and "\n" not in str(e)
        return
    assert tok.vocab_size <= id_limit(len(tokens))
    assert_usable(tok)
