"""[mix] column = "source": a recipe's sources are the values of a column
(Parquet) or field (JSON Lines) of each document, several sources in one file.
Each document's appearances are counted through the written parts."""

from __future__ import annotations

import json
import random
import shutil
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import assert_one_line_error
from mixdata import appearances, mixture, text, write_tokenizer
from runs import manifest

# Per input, each document's value of `source` (None: none), row by row.
LABELS = {
    "mixed.jsonl": ["web", "code", None, "web", 7, "code", "web", None, "code"] * 5,
    "more.parquet": ["code", "web", None, "web", "code", "web"] * 4,
}
WORDS = {"web": (2, 8), "code": (60, 90), None: (5, 10), 7: (5, 10)}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("column")
    data, rng = folder / "data", random.Random(3)
    data.mkdir()
    lines = []
    for label in LABELS["mixed.jsonl"]:
        record = {"text": text(rng, rng.randint(*WORDS[label]))}
        if label is not None:
            record["source"] = label
        lines.append(json.dumps(record))
    lines.insert(4, "{not json")  # a bad line, skipped: the rows after it keep their values
    (data / "mixed.jsonl").write_text("\n".join(lines) + "\n")
    labels = LABELS["more.parquet"]
    texts = [text(rng, rng.randint(*WORDS[label])) for label in labels]
    pq.write_table(pa.table({"text": texts, "source": labels}), data / "more.parquet")
    return data, write_tokenizer(folder / "tok.json")


def label(shard: str, row: int):
    """The source a document names (the bad JSON line is row 4 of mixed.jsonl)."""
    labels = LABELS[shard]
    if shard == "mixed.jsonl":
        labels = [*labels[:4], "skipped", *labels[4:]]
    value = labels[row]
    return value if isinstance(value, str) else None


def run(cli, corpus, out, recipe: str, *more, ok: bool = True):
    data, tok = corpus
    path = out.parent / f"{out.name}.toml"
    path.write_text('[mix]\ncolumn = "source"\n' + recipe)
    return cli("run", data, out, "--tokenizer", tok, "--mix", path, "--on-error", "skip",
               "--workers", "2", *more, ok=ok)  # fmt: skip


def lengths(out) -> dict[tuple[str, int], int]:
    """Every document's tokens, by (input, row), from the token shards."""
    found = {}
    for shard, name in (("mixed.jsonl", "mixed.jsonl.parquet"), ("more.parquet", "more.parquet")):
        table = pq.read_table(out / "tokens" / name, columns=["row", "n_tokens"])
        for row, n in zip(table["row"].to_pylist(), table["n_tokens"].to_pylist(), strict=True):
            found[shard, row] = n
    return found


def test_a_source_column_mixes_sources_within_one_file(cli, corpus, tmp_path):
    out = tmp_path / "out"
    first = run(cli, corpus, out, "web = 150\ncode = { epochs = 2.0 }\n", "--shuffle", "5")
    docs = lengths(out)
    assert len(docs) == len(LABELS["mixed.jsonl"]) + len(LABELS["more.parquet"])
    by_label: dict = {}
    for doc in docs:
        by_label.setdefault(label(*doc), set()).add(doc)
    seen = appearances(out)
    # Every code document twice, from both files; web a subset, once; the rest none.
    assert {doc: n for doc, n in seen.items() if label(*doc) == "code"} == dict.fromkeys(
        by_label["code"], 2
    )
    assert {shard for shard, _ in by_label["code"]} == {"mixed.jsonl", "more.parquet"}
    web = {doc for doc in seen if label(*doc) == "web"}
    assert web < by_label["web"] and {seen[doc] for doc in web} == {1}
    assert set(seen) == by_label["code"] | web
    web_tokens = sum(docs[doc] for doc in web)
    assert 150 <= web_tokens < 150 + max(docs[doc] for doc in by_label["web"])
    # Each row of the parts names its document's source.
    assert all(r["source"] == label(r["shard"], r["input_row"]) for r in mixture(out))
    lines = {line["name"]: line for line in manifest(out)["mix"]["sources"]}
    assert lines["web"]["taken"]["tokens"] == web_tokens
    assert lines["code"]["repeated"]["documents"] == len(by_label["code"])
    # Documents without a string value are their input's (left out here).
    assert lines["mixed"]["asked"] is None and lines["mixed"]["taken"]["documents"] == 0
    unlabelled = Counter(shard for shard, row in docs if label(shard, row) is None)
    assert lines["mixed"]["available"]["documents"] == unlabelled["mixed.jsonl"] == 15
    assert lines["more"]["available"]["documents"] == unlabelled["more.parquet"] == 4
    assert "encode: 2 shards (0 kept, 2 done)" in first.output
    again = run(cli, corpus, out, "web = 150\ncode = { epochs = 2.0 }\n", "--shuffle", "6")
    assert "encode: 2 shards (2 kept, 0 done)" in again.output  # a new seed: the mix only


def test_a_files_glob_takes_its_inputs_whole(cli, corpus, tmp_path):
    out = tmp_path / "out"
    run(cli, corpus, out, 'picked = { epochs = 1.0, files = "more.parquet" }\nweb = 40\n')
    rows = mixture(out)
    assert {r["shard"] for r in rows if r["source"] == "picked"} == {"more.parquet"}
    assert len([r for r in rows if r["source"] == "picked"]) == len(LABELS["more.parquet"])
    assert {r["shard"] for r in rows if r["source"] == "web"} == {"mixed.jsonl"}


def test_a_value_no_document_has_fails_naming_it(cli, corpus, tmp_path):
    result = run(cli, corpus, tmp_path / "out", "nope = 10\n", ok=False)
    assert_one_line_error(result, "mix.nope: no document has source = 'nope'", "code, ")


def test_a_folder_whose_documents_all_name_other_sources_is_said_so(cli, corpus, tmp_path):
    """code/ holds an input, but each of its documents names web: the line says
    that, not that no input is under code/."""
    data = tmp_path / "data"
    (data / "code").mkdir(parents=True)
    rows = [json.dumps({"text": f"doc {i}", "source": "web"}) for i in range(3)]
    (data / "code" / "a.jsonl").write_text("\n".join(rows) + "\n")
    result = run(cli, (data, corpus[1]), tmp_path / "out", "code = 10\n", ok=False)
    assert_one_line_error(
        result, "mix.code: no document has source = 'code', and every document of its inputs"
    )


def test_an_input_that_does_not_read_is_skipped_as_without_a_column(cli, corpus, tmp_path):
    """--on-error skip: the column is read only once the documents read, so a broken
    Parquet file is skipped whole, as in a run without a column."""
    data, tok = corpus
    copy = tmp_path / "data"
    shutil.copytree(data, copy)
    (copy / "broken.parquet").write_bytes((data / "more.parquet").read_bytes()[:300])
    result = run(cli, (copy, tok), tmp_path / "out", "web = 40\n")
    assert "1 whole file" in result.output and "broken.parquet: cannot read" in result.output
    assert {r["source"] for r in mixture(tmp_path / "out")} == {"web"}
