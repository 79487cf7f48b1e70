"""`--text-column meta.content` (issue 16): a dotted name is a path into a Parquet
struct column or a nested JSON object; a column or key literally named so wins.
The documents come back exactly; a missing path is the usual one-line error (per
file for Parquet, per line for JSON Lines); a null on the way is a bad row.
`--source-column` of stats takes the same paths."""

from __future__ import annotations

import gzip
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from runs import manifest
from test_txt_units import decoded

from tokenmill.errors import TokenmillError
from tokenmill.io.columns import has_column, read_column
from tokenmill.io.readers import field_path, pick_column, read_batches, read_documents

RUN = ("--vocab-size", "300", "--workers", "1")
DOCS = [
    "plain words",
    "Windows\r\nline ends\r\n",
    "Καλημέρα κόσμε — 東京, naïve café 😀",
    "  \t",
    "def f(x):\n    return x\n",
]


def texts(batches) -> list[str]:
    return [d for b in batches for d in b.to_pylist()]


def write_parquet(path, docs, sources=None, **extra):
    meta = [
        {"lang": "en", "content": d, "source": s}
        for d, s in zip(docs, sources or docs, strict=True)
    ]
    table = pa.table({"id": list(range(len(docs))), "meta": meta, **extra})
    pq.write_table(table, path, row_group_size=2)
    return path


def test_a_parquet_struct_field_decodes_back_exactly(tmp_path, cli):
    data = tmp_path / "d"
    data.mkdir()
    write_parquet(data / "nested.parquet", DOCS)
    out = tmp_path / "o"
    cli("run", data, out, *RUN, "--text-column", "meta.content")
    assert decoded(out)["nested.parquet"] == [(i, d.encode()) for i, d in enumerate(DOCS)]
    assert manifest(out)["config"]["text_column"] == "meta.content"


def test_a_nested_json_field_decodes_back_exactly(tmp_path, cli):
    data = tmp_path / "d"
    data.mkdir()
    lines = [
        json.dumps({"id": i, "meta": {"lang": "en", "content": d}}) for i, d in enumerate(DOCS)
    ]
    (data / "nested.jsonl").write_text("\n".join(lines) + "\n")
    (data / "nested.json.gz").write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    out = tmp_path / "o"
    cli("run", data, out, *RUN, "--text-column", "meta.content")
    expected = [(i, d.encode()) for i, d in enumerate(DOCS)]
    docs = decoded(out)
    assert docs["nested.jsonl"] == docs["nested.json.gz"] == expected


def test_deeper_paths_and_struct_nulls(tmp_path):
    inner = pa.struct([("body", pa.string())])
    outer = pa.array(
        [{"a": {"body": "one"}}, {"a": None}, None, {"a": {"body": None}}, {"a": {"body": "five"}}],
        pa.struct([("a", inner)]),
    )
    path = tmp_path / "deep.parquet"
    pq.write_table(pa.table({"doc": outer}), path)
    skips = []
    rows = [
        (r, d)
        for rs, ds in read_batches(path, "doc.a.body", on_skip=skips.append)
        for r, d in zip(rs.to_pylist(), ds.to_pylist(), strict=True)
    ]
    assert rows == [(0, "one"), (4, "five")]
    assert [s["row"] for s in skips] == [1, 2, 3]
    assert all("'doc.a.body' is null" in s["reason"] for s in skips)
    jsonl = tmp_path / "deep.jsonl"
    jsonl.write_text(
        "\n".join(
            json.dumps(x)
            for x in [
                {"doc": {"a": {"body": "one"}}},
                {"doc": {"a": None}},
                {"doc": None},
                {"doc": {"a": {"body": None}}},
                {"doc": {"a": {"body": "five"}}},
            ]
        )
    )
    skips = []
    assert texts(read_documents(jsonl, "doc.a.body", on_skip=skips.append)) == ["one", "five"]
    assert [s["reason"] for s in skips] == [
        "row 1 (line 2): 'doc.a' is null, not an object, so no 'doc.a.body' field",
        "row 2 (line 3): 'doc' is null, not an object, so no 'doc.a.body' field",
        "row 3 (line 4): 'doc.a.body' is null",
    ]


def test_a_missing_parquet_path_is_the_one_line_error(tmp_path, cli):
    data = tmp_path / "d"
    data.mkdir()
    write_parquet(data / "nested.parquet", DOCS)
    for column in ("meta.body", "meta.content.x", "id.x", "meta.", "nope"):
        result = cli("run", data, tmp_path / "o", *RUN, "--text-column", column, ok=False)
        assert result.exit_code == 1
        assert result.output.strip().splitlines()[-1] == (
            f"Error: {data / 'nested.parquet'}: no column {column!r} "
            "(columns: id, meta.lang, meta.content, meta.source); use --text-column"
        )


def test_a_null_leaf_fails_or_is_skipped(tmp_path, cli):
    data = tmp_path / "d"
    data.mkdir()
    meta = pa.array(
        [{"content": "first"}, {"content": None}, None, {"content": "last"}],
        pa.struct([("content", pa.string())]),
    )
    pq.write_table(pa.table({"meta": meta}), data / "n.parquet")
    (data / "n.jsonl").write_text(
        '{"meta": {"content": "first"}}\n{"meta": {"content": null}}\n'
        '{"other": 1}\n{"meta": {"content": "last"}}\n'
    )
    out = tmp_path / "o"
    failed = cli("run", data, out, *RUN, "--text-column", "meta.content", ok=False)
    assert failed.exit_code == 1
    last = failed.output.strip().splitlines()[-1]
    assert last in (
        f"Error: {data / 'n.parquet'}: row 1: 'meta.content' is null",
        f"Error: {data / 'n.jsonl'}: row 1 (line 2): 'meta.content' is null",
    )
    cli("run", data, out, *RUN, "--text-column", "meta.content", "--on-error", "skip")
    m = manifest(out)
    assert sorted((s["shard"], s["row"], s["reason"]) for s in m["skipped"]) == [
        ("n.jsonl", 1, "row 1 (line 2): 'meta.content' is null"),
        ("n.jsonl", 2, "row 2 (line 3): no 'meta.content' field; use --text-column"),
        ("n.parquet", 1, "row 1: 'meta.content' is null"),
        ("n.parquet", 2, "row 2: 'meta.content' is null"),
    ]
    docs = decoded(out)
    assert docs["n.parquet"] == docs["n.jsonl"] == [(0, b"first"), (3, b"last")]


def test_a_column_literally_named_with_a_dot_wins(tmp_path):
    path = tmp_path / "both.parquet"
    write_parquet(path, DOCS, **{"meta.content": [f"literal {i}" for i in range(len(DOCS))]})
    assert texts(read_documents(path, "meta.content")) == [f"literal {i}" for i in range(5)]
    jsonl = tmp_path / "both.jsonl"
    records = [
        {"meta.content": "literal", "meta": {"content": "nested"}},
        {"meta": {"content": "nested only"}},
        {"meta.content": None, "meta": {"content": "nested"}},  # the literal key, null
        {"meta\\u002econtent": "escaped literal"},
    ]
    jsonl.write_text("\n".join(json.dumps(r) for r in records).replace("\\\\u002e", "\\u002e"))
    skips = []
    got = texts(read_documents(jsonl, "meta.content", on_skip=skips.append))
    assert got == ["literal", "nested only", "escaped literal"]
    assert [s["reason"] for s in skips] == ["row 2 (line 3): 'meta.content' is null"]
    # Without a literal key anywhere in the file the fast path reads the nested one.
    plain = tmp_path / "plain.jsonl"
    plain.write_text('{"meta": {"content": "a"}}\n{"meta": {"content": "b"}, "x": 1}\n')
    assert texts(read_documents(plain, "meta.content")) == ["a", "b"]


def test_a_json_path_through_a_non_object_is_a_bad_line(tmp_path, cli):
    path = tmp_path / "mixed.jsonl"
    path.write_text(
        '{"meta": {"content": "good"}}\n{"meta": "a string"}\n{"meta": [1]}\n'
        '{"meta": {"content": 5}}\n{"meta": {"content": "also good"}}\n'
    )
    skips = []
    assert texts(read_documents(path, "meta.content", on_skip=skips.append)) == [
        "good",
        "also good",
    ]
    assert [s["reason"] for s in skips] == [
        "row 1 (line 2): 'meta' is str, not an object, so no 'meta.content' field",
        "row 2 (line 3): 'meta' is list, not an object, so no 'meta.content' field",
        "row 3 (line 4): 'meta.content' is int, not a string",
    ]
    with pytest.raises(TokenmillError, match=r"row 1 \(line 2\): 'meta' is str"):
        list(read_documents(path, "meta.content"))


def test_pick_column_takes_records_batches_and_tables():
    meta = pa.array(
        [{"content": "a"}, None, {"content": "c"}], pa.struct([("content", pa.string())])
    )
    batch = pa.record_batch({"text": ["x", "y", "z"], "meta": meta})
    assert pick_column(batch, "text", "f").to_pylist() == ["x", "y", "z"]
    assert pick_column(batch, "meta.content", "f").to_pylist() == ["a", None, "c"]
    table = pa.Table.from_batches([batch, batch])
    assert pick_column(table, "meta.content", "f").to_pylist() == ["a", None, "c"] * 2
    with pytest.raises(TokenmillError) as e:
        pick_column(batch, "meta.body", "shard.arrow")
    assert str(e.value) == (
        "shard.arrow: no column 'meta.body' (columns: text, meta.content); use --text-column"
    )
    assert field_path(batch.schema, "meta.content") == ["meta", "content"]
    assert field_path(batch.schema, "meta") == ["meta"]
    assert field_path(batch.schema, "text.x") is None


NAME = st.sampled_from(["a", "b", "c.d"])


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(st.text(max_size=3), lambda kids: st.dictionaries(NAME, kids, max_size=3)),
    st.lists(NAME, min_size=1, max_size=3),
)
def test_json_and_arrow_walk_a_path_alike(tmp_path_factory, value, parts):
    """A JSON object read through Arrow's fast path (or, where Arrow refuses the
    block, line by line) gives what a plain walk of the dicts gives."""
    column = ".".join(parts)
    obj = {"x": value}
    column = "x." + column
    path = tmp_path_factory.mktemp("walk") / "w.jsonl"
    path.write_text(json.dumps(obj) + "\n" + json.dumps({"x": {}}) + "\n")

    def walk(o):
        if column in o:
            return o[column]
        for p in column.split("."):
            if not isinstance(o, dict) or p not in o:
                return None
            o = o[p]
        return o

    expected = [t for t in (walk(obj), walk({"x": {}})) if isinstance(t, str)]
    assert texts(read_documents(path, column, on_skip=lambda _: None)) == expected


def test_stats_counts_per_nested_source(tmp_path, cli):
    data = tmp_path / "d"
    data.mkdir()
    sources = ["web", "books", "web", "code", "web"]
    write_parquet(data / "s.parquet", DOCS, sources)
    lines = [
        json.dumps({"meta": {"content": d, "source": s}})
        for d, s in zip(DOCS, sources, strict=True)
    ]
    lines.append(json.dumps({"meta": {"content": "no source"}}))
    (data / "s.jsonl").write_text("\n".join(lines) + "\n")
    out = tmp_path / "o"
    cli("run", data, out, *RUN, "--text-column", "meta.content")
    assert has_column(data / "s.parquet", "meta.source")
    assert not has_column(data / "s.parquet", "meta.nope")
    assert texts(read_column(data / "s.jsonl", "meta.source")) == [*sources, None]
    stats = json.loads(cli("stats", out, "--json", "--source-column", "meta.source").stdout)
    assert stats["source_column"] == "meta.source"
    got = {s["name"]: s["documents"] for s in stats["sources"]}
    assert got == {"web": 6, "books": 2, "code": 2, "s.jsonl": 1}
    assert stats["documents"] == 11


def test_two_columns_of_the_text_columns_name_are_refused(tmp_path):
    """Parquet allows two columns of one name: which holds the text is not known,
    so neither is taken."""
    path = tmp_path / "d.parquet"
    table = pa.Table.from_arrays([pa.array(["A"]), pa.array(["B"])], names=["text", "text"])
    pq.write_table(table, path)
    with pytest.raises(TokenmillError, match=r"d.parquet: 2 columns are named 'text'"):
        list(read_documents(path, "text"))
