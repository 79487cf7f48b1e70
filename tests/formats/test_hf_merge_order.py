"""A Hugging Face tokenizer.json gives Hugging Face's ids or is refused in one
line. Its BPE ranks a merge listed twice by its last place and merges a pair
as soon as both its tokens exist; tokenmill's encoder takes each merge once,
after the merges that make its tokens, as trained merge lists always are."""

from __future__ import annotations

import json
import random

import pytest
from realtext import load_sample_texts

from tokenmill.errors import TokenmillError
from tokenmill.formats import hf, load_any
from tokenmill.tokenizer import Tokenizer

tokenizers = pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def exported() -> dict:
    texts = [t[:2000] for t in load_sample_texts()[:200:2]]
    return hf.to_dict(Tokenizer.train(texts, vocab_size=700))


@pytest.fixture(scope="module")
def docs() -> list[str]:
    return [t[:1500] for t in load_sample_texts()[1:120:2]]


def with_merges(d: dict, merges: list[str]) -> dict:
    return {**d, "model": {**d["model"], "merges": merges}}


def loaded_both_ways(d: dict, tmp_path) -> list[Tokenizer]:
    """As a file (the core reads its model) and as a parsed dict."""
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(d), encoding="utf-8")
    return [load_any(path), hf.from_dict(json.loads(path.read_text(encoding="utf-8")))]


def assert_refused(d: dict, tmp_path, needle: str) -> None:
    for load in (lambda: loaded_both_ways(d, tmp_path)[0], lambda: hf.from_dict(d, "t.json")):
        with pytest.raises(TokenmillError, match=needle) as e:
            load()
        assert "\n" not in str(e.value) and "tokenizer.json" in str(e.value)


def shuffled_keeping_makers_first(merges: list[str], seed: int) -> list[str]:
    """A random order of `merges` in which each merge still follows the merges
    that make its two tokens."""
    maker = {}
    for k, m in enumerate(merges):
        maker.setdefault(m.replace(" ", ""), k)
    needs = [
        {maker[t] for t in m.split(" ") if t in maker and maker[t] != k}
        for k, m in enumerate(merges)
    ]
    rng, placed, order = random.Random(seed), set(), []
    ready = [k for k, n in enumerate(needs) if not n]
    while ready:
        k = ready.pop(rng.randrange(len(ready)))
        order.append(k)
        placed.add(k)
        ready += [
            j for j, n in enumerate(needs) if j not in placed and j not in ready and n <= placed
        ]
    assert len(order) == len(merges)
    return [merges[k] for k in order]


def test_merges_out_of_order_are_refused(exported, tmp_path):
    merges = list(exported["model"]["merges"])
    random.Random(0).shuffle(merges)
    assert_refused(with_merges(exported, merges), tmp_path, r"merge \d+ .* after it, makes")


@pytest.mark.parametrize("where", ["first", "last"])
def test_a_merge_listed_twice_is_refused(exported, tmp_path, where):
    merges = list(exported["model"]["merges"])
    # Of two bytes: its copy is in order wherever it goes.
    k = next(k for k, m in enumerate(merges) if k > 50 and m.count(" ") == 1 and len(m) == 3)
    twice = [merges[k], *merges] if where == "first" else [*merges, merges[k]]
    assert_refused(with_merges(exported, twice), tmp_path, r"merge \d+ .* repeats merge \d+")


def test_merges_reordered_with_makers_first_give_hugging_faces_ids(exported, docs, tmp_path):
    merges = shuffled_keeping_makers_first(exported["model"]["merges"], seed=1)
    assert merges != exported["model"]["merges"]
    d = with_merges(exported, merges)
    reference = tokenizers.Tokenizer.from_str(json.dumps(d))
    want = [e.ids for e in reference.encode_batch(docs, add_special_tokens=False)]
    for tok in loaded_both_ways(d, tmp_path):
        assert tok.encode_batch(docs) == want
