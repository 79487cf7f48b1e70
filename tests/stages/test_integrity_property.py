"""The integrity property over random folder trees: names built to collide
when flattened (`a/b.txt` beside `a__b.txt`), nested folders, unknown and
upper-case suffixes, hidden files and folders, symlinks (to files, dangling,
looping) and OUT placed inside DATA. Whatever the tree, every document in is
a document out, every file under DATA is read or listed with its reason, and
`verify` passes."""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenmill.config import Config
from tokenmill.io.inputs import output_name
from tokenmill.stages.manifest import verify
from tokenmill.stages.run import run_all

FOLDERS = ["a", "b", "a__b", ".hid"]
STEMS = ["b", "a__b", "c", "a", ".h"]
SUFFIXES = [".txt", ".jsonl", ".jsonl.gz", ".parquet", ".TXT", ".Jsonl", ".md", ".json"]
KNOWN = (".txt", ".jsonl", ".jsonl.gz", ".parquet", ".json")

entry = st.tuples(
    st.lists(st.sampled_from(FOLDERS), max_size=2),
    st.sampled_from(STEMS),
    st.sampled_from(SUFFIXES),
    st.lists(st.text(alphabet="xyz é東\t", min_size=1, max_size=12), min_size=1, max_size=4),
)
trees = st.fixed_dictionaries(
    {
        "files": st.lists(entry, min_size=1, max_size=10),
        "links": st.lists(st.tuples(st.sampled_from(["", "sub/"]), st.integers(0, 9)), max_size=2),
        "clash": st.booleans(),  # a/b.txt beside a__b.txt, which flatten to one name
        "dangling": st.booleans(),
        "loop": st.booleans(),
        "out": st.sampled_from(["", "out", "a/out", ".out"]),
    }
)


def write(path: Path, docs: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    name = path.name.lower()
    if name.endswith(".parquet"):
        pq.write_table(pa.table({"text": docs}), path)
    elif name.endswith((".jsonl", ".jsonl.gz", ".json")):
        data = "".join(json.dumps({"text": d}) + "\n" for d in docs).encode()
        path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    else:
        path.write_text("".join(" ".join(d.split()) + "\n" for d in docs), encoding="utf-8")


def is_input(rel: str) -> bool:
    return not any(p.startswith(".") for p in rel.split("/")) and rel.lower().endswith(KNOWN)


def documents_of(rel: str, docs: list[str]) -> int:
    if rel.lower().endswith((".txt",)):
        return sum(1 for d in docs if d.split())  # blank lines are not documents
    return len(docs)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=trees)
def test_every_document_and_every_file_is_accounted_for(tree):
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        data.mkdir()
        written: dict[str, list[str]] = {}
        suffixes: dict[str, str] = {}
        files = list(tree["files"])
        if tree["clash"]:
            files += [(["a"], "b", ".txt", ["one"]), ([], "a__b", ".txt", ["two", "three"])]
        for folders, stem, suffix, docs in files:
            rel = "/".join([*folders, stem + suffix])
            if rel in written or any(
                rel.startswith(k + "/") or k.startswith(rel + "/") for k in written
            ):
                continue
            write(data / rel, docs)
            written[rel] = docs
            suffixes[rel] = suffix
        names = sorted(written)
        for i, (folder, k) in enumerate(tree["links"]):
            target = names[k % len(names)]
            # A link is read under its own name, by its own suffix: the target's.
            link = f"{folder}link{i}{suffixes[target]}"
            (data / link).parent.mkdir(parents=True, exist_ok=True)
            (data / link).symlink_to(data / target)
            written[link] = written[target]
        if tree["dangling"]:
            (data / "gone.txt").symlink_to(data / "nowhere.txt")
        if tree["loop"]:
            (data / "a").mkdir(exist_ok=True)
            (data / "a" / "up").symlink_to(data)
        out = data / tree["out"] if tree["out"] else Path(tmp) / "out"

        expected = {rel: docs for rel, docs in written.items() if is_input(rel)}
        if not sum(documents_of(r, d) for r, d in expected.items()):
            return  # a corpus of nothing to read: refused, tested elsewhere
        config = Config(vocab_size=300, workers=1, on_error="skip")
        for _ in range(2):  # a rerun (OUT inside DATA now holds outputs) changes nothing
            summary = run_all(data, out, config)
            manifest = json.loads((out / "manifest.json").read_text())
            read = {i["path"] for i in manifest["inputs"]}
            assert read == set(expected)
            assert manifest["skipped"] == []
            assert summary.documents == manifest["documents_in"]
            assert manifest["documents"] == sum(documents_of(r, d) for r, d in expected.items())
            for rel, docs in expected.items():
                shard = out / "tokens" / output_name(rel)
                assert pq.read_metadata(shard).num_rows == documents_of(rel, docs), rel
            # Every path under DATA is an input, or listed, or under a listed folder.
            listed = {e["path"].rstrip("/"): e["reason"] for e in manifest["not_read"]}
            for root, dirs, files in os.walk(data):
                rel_root = Path(root).relative_to(data).as_posix()
                for name in [*files, *dirs]:
                    rel = name if rel_root == "." else f"{rel_root}/{name}"
                    under = [p for p in listed if rel == p or rel.startswith(p + "/")]
                    assert rel in read or under or (data / rel).is_dir(), rel
            if tree["dangling"]:
                assert listed["gone.txt"] == "dangling link"
            if tree["loop"]:
                assert listed["a/up"] == "symlink loop"
            checked, differences = verify(out)
            assert differences == [] and checked > 0
