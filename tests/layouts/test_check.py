"""`tokenmill check OUT`: a clean run passes, read by the trainers' own readers
when installed (and says so), by tokenmill's otherwise; one planted problem
of each kind fails it with a line naming the file and document."""

from __future__ import annotations

import gzip
import json
import shutil
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from layoutdata import write_nested_corpus
from realtext import GPT2_FILE
from runs import manifest, tokenmill_here
from trainers import megatron_indexed_dataset, olmo_core_data_utils, torch_stand_in

from tokenmill.io.metadata import TOKENIZER_SHA256
from tokenmill.io.storage import open_read
from tokenmill.tokenizer import BOS

LAYOUTS = ("--format", "megatron,datatrove,olmo,bin", "--pack", "64")
TRAINERS = ("megatron", "datatrove", "olmo_core")


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """A run with every layout and --bos: (DATA, OUT)."""
    root = tmp_path_factory.mktemp("clean")
    data, out = write_nested_corpus(root / "data"), root / "out"
    tokenmill_here("run", data, out, "--vocab-size", "300", "--workers", "1", *LAYOUTS, "--bos")
    return data, out


@pytest.fixture
def out(clean, tmp_path):
    """A copy of the clean OUT to plant a problem in (its DATA the clean one's)."""
    return shutil.copytree(clean[1], tmp_path / "out")


def hide_trainers(monkeypatch):
    """The trainers' packages made unimportable (a None in sys.modules)."""
    for name in [*TRAINERS, *sys.modules]:
        if name.split(".")[0] in TRAINERS:
            monkeypatch.setitem(sys.modules, name, None)


def check(cli, out, *args, ok=True):
    result = cli("check", out, *args, ok=False)
    assert result.exit_code == (0 if ok else 1), result.output
    return result


def problems(result) -> list[str]:
    return [line for line in result.output.splitlines() if line.startswith("problem: ")]


def one_problem(result, *needles):
    """The one problem line holding every needle."""
    found = [p for p in problems(result) if all(n in p for n in needles)]
    assert len(found) == 1, result.output
    return found[0]


def test_a_clean_run_passes_read_by_the_trainers_own_readers(cli, clean):
    megatron_indexed_dataset()
    olmo_core_data_utils()
    with torch_stand_in():
        result = check(cli, clean[1], "--decode", "1000")
    n = manifest(clean[1])["documents"]
    for name, reader in [
        ("megatron", "megatron-core"),
        ("datatrove", "datatrove"),
        ("olmo", "ai2-olmo-core"),
        ("bin", "numpy"),
    ]:
        assert f"{name}: {n} documents equal the token shards' (read with {reader})" in (
            result.output
        )
    assert f"packed: {n} documents equal the token shards'" in result.output
    assert not problems(result)
    assert f"{n} decoded: 0 problems" in result.output


def test_without_the_trainers_it_reads_with_its_own_reader_and_says_so(cli, clean, monkeypatch):
    hide_trainers(monkeypatch)
    result = check(cli, clean[1])
    n = manifest(clean[1])["documents"]
    for name, package in [
        ("megatron", "megatron-core"),
        ("datatrove", "datatrove"),
        ("olmo", "ai2-olmo-core"),
    ]:
        assert (
            f"{name}: {n} documents equal the token shards' (read with tokenmill's reader: "
            f"{package} does not import: "
        ) in result.output
    assert "90 decoded: 0 problems" in result.output


def test_each_datatrove_index_is_read_once(cli, clean, monkeypatch):
    """Its ends were read once to name its faults, then again for datatrove's reader."""
    from tokenmill.layouts import datatrove

    reads = []

    def counted(path, *args, **kwargs):
        reads.append(str(path))
        return open_read(path, *args, **kwargs)

    monkeypatch.setattr(datatrove, "open_read", counted)
    with torch_stand_in():
        result = check(cli, clean[1])
    assert "(read with datatrove)" in result.output
    indexes = [p for p in reads if p.endswith(".ds.index")]
    assert indexes and len(indexes) == len(set(indexes)), indexes


def test_char_mode_compares_the_text_as_it_reads_it(cli, tmp_path):
    data, out = write_nested_corpus(tmp_path / "data"), tmp_path / "out"
    tokenmill_here("run", data, out, "--mode", "char", "--lowercase", "--vocab-size", "150",
              "--format", "bin", "--no-eos")  # fmt: skip
    result = check(cli, out, "--decode", "1000")
    assert not problems(result) and "bin: " in result.output


def test_a_changed_id_in_a_layout_names_the_document(cli, out, monkeypatch):
    hide_trainers(monkeypatch)
    ids = np.memmap(out / "megatron" / "corpus_text_document.bin", np.uint16, mode="r+")
    at = len(ids) // 2
    ids[at] = 7 if ids[at] != 7 else 8
    ids.flush()
    result = check(cli, out, ok=False)
    line = one_problem(result, "megatron/: 1 of ", "documents differ from the token shards'")
    assert "row" in line and f"is {ids[at]}, the token shard's row has" in line
    assert "megatron: " in result.output and "not all equal" in result.output
    assert len(problems(result)) == 1


def test_a_dtype_too_narrow_for_the_vocabulary(cli, tmp_path, monkeypatch):
    hide_trainers(monkeypatch)
    data, out = write_nested_corpus(tmp_path / "data"), tmp_path / "out"
    tokenmill_here(
        "run", data, out, "--tokenizer", GPT2_FILE, "--pattern", "gpt2",
        "--special-token", "<|endoftext|>=50256", "--special-token", f"{BOS}=70000",
        "--format", "datatrove",
    )  # fmt: skip
    check(cli, out)
    # The .ds rewritten as a writer ignoring the vocabulary's size would: uint16.
    ds = out / "datatrove" / "000_corpus.ds"
    ds.write_bytes(np.fromfile(ds, "<u4").astype("<u2").tobytes())
    metadata = ds.with_name(ds.name + ".metadata")
    metadata.write_text(metadata.read_text().replace("|4\n", "|2\n"))
    result = check(cli, out, ok=False)
    one_problem(result, "datatrove/: ids of uint16 (at most 65535)", "ids up to 70000")


def test_a_document_without_its_bos(cli, out, monkeypatch):
    hide_trainers(monkeypatch)
    ds = out / "datatrove" / "000_corpus.ds"
    ids = np.fromfile(ds, "<u2")
    ids[0] = 5
    ds.write_bytes(ids.tobytes())
    result = check(cli, out, ok=False)
    line = one_problem(result, "datatrove/: 1 of ")
    assert f"document 0 (tokens/a.jsonl.parquet row 0): does not start with {BOS}" in line


def rewrite_shard(path, change_ids=None, metadata=None):
    """A token shard written again: `change_ids(rows of ids)`, its metadata updated."""
    table = pq.read_table(path)
    if change_ids is not None:
        ids = table["ids"].to_pylist()
        change_ids(ids)
        column = table.schema.get_field_index("ids")
        table = table.set_column(
            column, table.schema.field("ids"), pa.array(ids, table["ids"].type)
        )
    if metadata is not None:
        table = table.replace_schema_metadata({**table.schema.metadata, **metadata})
    pq.write_table(table, path)


def test_a_row_without_its_eos(cli, out, monkeypatch):
    hide_trainers(monkeypatch)
    rewrite_shard(out / "tokens" / "code" / "b.jsonl.parquet", lambda ids: ids[3].pop())
    result = check(cli, out, ok=False)
    one_problem(
        result,
        "tokens/code/b.jsonl.parquet: 1 of 30 rows do not end in <|endoftext|>",
        "the first: row 3",
    )


def test_a_token_shard_recording_another_tokenizer(cli, out, monkeypatch):
    hide_trainers(monkeypatch)
    rewrite_shard(out / "tokens" / "c.txt.parquet", metadata={TOKENIZER_SHA256: b"0" * 64})
    result = check(cli, out, ok=False)
    one_problem(result, "tokens/c.txt.parquet: records tokenizer sha256 000000000000...")


def test_a_token_shard_copied_over_another(cli, out, monkeypatch):
    """c.txt's shard over a.jsonl's: its sample decodes to its own input's text,
    which c.txt still holds, so only the name it records tells."""
    hide_trainers(monkeypatch)
    shutil.copy(out / "tokens" / "c.txt.parquet", out / "tokens" / "a.jsonl.parquet")
    result = check(cli, out, ok=False)
    one_problem(result, "tokens/a.jsonl.parquet: holds the tokens of input c.txt, the manifest")


def test_a_packed_row_whose_sequence_number_is_out_of_place(cli, out, monkeypatch):
    """A loader indexing rows by `sequence` would read one row twice, or never;
    the documents read back in file order are still all there."""
    hide_trainers(monkeypatch)
    path = sorted((out / "packed").rglob("*.parquet"))[0]
    table = pq.read_table(path)
    numbers = table["sequence"].to_pylist()
    numbers[0] = 999999
    at = table.schema.get_field_index("sequence")
    table = table.set_column(at, table.schema.field(at), pa.array(numbers, pa.uint64()))
    pq.write_table(table, path)
    result = check(cli, out, ok=False)
    one_problem(result, "packed/: the rows' sequence numbers are not 0 to ", "each once")


def test_a_sample_document_whose_text_changed(cli, clean, tmp_path, monkeypatch):
    hide_trainers(monkeypatch)
    data = shutil.copytree(clean[0], tmp_path / "data")
    lines = (data / "a.jsonl").read_text().splitlines(keepends=True)
    lines[2] = json.dumps({"text": "not what was encoded"}) + "\n"
    (data / "a.jsonl").write_text("".join(lines))
    (data / "c.txt").unlink()
    result = check(cli, clean[1], "--data", data, "--decode", "1000", ok=False)
    one_problem(result, "tokens/a.jsonl.parquet row 2: decodes to other text than a.jsonl row 2")
    one_problem(result, "input a.jsonl: changed since the run")
    one_problem(result, f"input c.txt: not in DATA ({data / 'c.txt'})")
    assert len(problems(result)) == 3


def test_json_lists_the_layouts_and_the_problems(cli, out, monkeypatch):
    hide_trainers(monkeypatch)
    recorded = json.loads((out / "manifest.json").read_text())
    recorded["config"]["pattern"] = "gpt2"
    (out / "manifest.json").write_text(json.dumps(recorded))
    index = json.loads((out / "olmo" / "index.json").read_text())
    index["eos_token_id"] = 7
    (out / "olmo" / "index.json").write_text(json.dumps(index))
    result = check(cli, out, "--json", ok=False)
    report = json.loads(result.stdout)
    assert [s["name"] for s in report["layouts"]] == [
        "packed",
        "bin",
        "megatron",
        "datatrove",
        "olmo",
    ]
    assert all(s["equal"] for s in report["layouts"])
    assert report["problems"] == [
        "manifest.json: records pattern 'gpt2', tokenizer.json's is 'cl100k'",
        f"olmo/: records eos_id 7, tokenizer.json's is {index['vocab_size'] - 2}",
    ]


def flip_last_document_index(out):
    path = out / "megatron" / "corpus_text_document.idx"
    data = bytearray(path.read_bytes())
    data[-8] ^= 1  # the last of the document indices 0..N: GPTDataset's documents
    path.write_bytes(bytes(data))
    return "megatron/", "not one sequence each"


def cut_document_indices(out):
    path = out / "megatron" / "corpus_text_document.idx"
    path.write_bytes(path.read_bytes()[:-8])
    return "megatron/", "document indices"


def append_an_id(folder, suffix):
    def plant(out):
        path = next((out / folder).rglob(f"*{suffix}"))
        path.write_bytes(path.read_bytes() + b"\x07\x00")
        return f"{folder}/", "ids"

    return plant


def append_bytes(folder, suffix, said):
    def plant(out):
        path = next((out / folder).rglob(f"*{suffix}"))
        path.write_bytes(path.read_bytes() + b"\x01\x02\x03\x04")
        return f"{folder}/", said

    return plant


def flip_a_document_end(out):
    """A byte of a middle end's upper half: ends that no longer rise, which
    datatrove's reader met as a negative read length, naming no file."""
    path = next((out / "datatrove").rglob("*.ds.index"))
    data = bytearray(path.read_bytes())
    data[8 * (len(data) // 16) + 4] ^= 0xFF
    path.write_bytes(bytes(data))
    return "datatrove/", ".ds.index: its document ends do not rise"


# megatron-core's IndexedDataset.__del__ fails on an instance whose index
# could not be read (the cut index): its warning, not ours.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("trainers", [True, False], ids=["trainers", "own-readers"])
@pytest.mark.parametrize(
    "plant",
    [
        flip_last_document_index,
        cut_document_indices,
        # The trainers read these files whole, as one stream: an id after the
        # last document is trained on though no document holds it.
        append_an_id("datatrove", ".ds"),
        append_an_id("olmo", ".npy"),
        append_an_id("bin", ".bin"),
        # Megatron reads each document by its pointer: bytes after the last are
        # no document's, the mark of a file appended to or of another run's.
        append_an_id("megatron", ".bin"),
        # np.load ignores bytes after the array; no run writes them.
        append_bytes("bin", ".idx.npy", ".idx.npy: 4 bytes after its array"),
        append_bytes("datatrove", ".ds.index", "not a whole number of 8-byte ends"),
        flip_a_document_end,
    ],
    ids=[
        "megatron-document-index",
        "megatron-cut-index",
        "datatrove",
        "olmo",
        "bin",
        "megatron",
        "bin-index",
        "datatrove-index",
        "datatrove-ends",
    ],
)
def test_ids_outside_the_documents_the_trainer_reads(cli, out, monkeypatch, plant, trainers):
    where, said = plant(out)
    if trainers:
        megatron_indexed_dataset()
        olmo_core_data_utils()
        with torch_stand_in():
            result = check(cli, out, ok=False)
        if where == "megatron/":
            said = "cannot be read"  # megatron-core's own assertion, or the .bin's size
    else:
        hide_trainers(monkeypatch)
        result = check(cli, out, ok=False)
    one_problem(result, where, said)
    assert len(problems(result)) == 1


def test_a_megatron_bin_without_its_idx_is_named(cli, out, monkeypatch):
    """It was left out, and the problem said only that documents were missing."""
    hide_trainers(monkeypatch)
    (out / "megatron" / "corpus_text_document.idx").unlink()
    result = check(cli, out, ok=False)
    assert problems(result) == [
        "problem: megatron/corpus_text_document.idx: missing, though manifest.json lists it"
    ]
    # Unlisted too, it is the reader that names it.
    recorded = json.loads((out / "manifest.json").read_text())
    recorded["files"] = [e for e in recorded["files"] if not e["path"].endswith(".idx")]
    (out / "manifest.json").write_text(json.dumps(recorded))
    result = check(cli, out, ok=False)
    one_problem(
        result, "megatron/: cannot be read (", "corpus_text_document.bin: no .idx beside it"
    )
    assert "megatron: cannot be read (its problem below)" in result.output


def test_a_token_shard_the_manifest_lists_missing_is_one_line(cli, out):
    """It was Arrow's own error, the path quoted inside it, and with --json
    nothing on stdout said why."""
    shard = next((out / "tokens").rglob("*.parquet"))
    shard.unlink()
    for args in ((), ("--json",)):
        result = check(cli, out, *args, ok=False)
        assert result.output.strip().splitlines()[-1] == (
            f"Error: {shard}: missing, though manifest.json lists it; `tokenmill verify` "
            "says what else differs, a rerun of `tokenmill run` makes it again"
        ), result.output


def copy_a_set(folder, suffixes):
    """A copy of a layout file (and the files beside it) under a name no run wrote."""

    def plant(out):
        first = sorted((out / folder).glob(f"*{suffixes[0]}"))[0]
        stem = first.name.removesuffix(suffixes[0])
        for suffix in suffixes:
            shutil.copy(out / folder / f"{stem}{suffix}", out / folder / f"zz{suffix}")
        return [
            f"{folder}/zz{s}: not listed in manifest.json (not written by this run)"
            for s in sorted(suffixes)
        ]

    return plant


def remove_one(folder, suffix):
    def plant(out):
        path = sorted((out / folder).glob(f"*{suffix}"))[0]
        path.unlink()
        return [f"{folder}/{path.name}: missing, though manifest.json lists it"]

    return plant


@pytest.mark.parametrize(
    "plant",
    [
        remove_one("packed", ".parquet"),
        remove_one("datatrove", ".ds"),
        copy_a_set("packed", (".parquet",)),
        copy_a_set("datatrove", (".ds", ".ds.index", ".ds.metadata")),
    ],
    ids=["packed-missing", "datatrove-missing", "packed-extra", "datatrove-extra"],
)
def test_a_layout_file_missing_or_not_listed_is_named(cli, out, monkeypatch, plant):
    """Either was told only by its consequences: documents too few or too
    many, differing, packed sequence numbers out of place; no line named the file."""
    hide_trainers(monkeypatch)
    said = plant(out)
    result = check(cli, out, ok=False)
    assert problems(result) == [f"problem: {line}" for line in said], result.output
    name = "packed" if said[0].startswith("packed/") else "datatrove"
    assert f"{name}: not read, its files are not those the manifest lists" in result.output


def test_a_damaged_packed_file_is_a_problem_naming_it(cli, out):
    """Its sequence numbers were read regardless: PyArrow's error, a traceback."""
    path = sorted((out / "packed").glob("*.parquet"))[0]
    path.write_bytes(path.read_bytes()[:100])
    result = check(cli, out, ok=False)
    lines = problems(result)
    assert lines and all(f"{path}: cannot be read (" in line for line in lines), result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("trainers", [True, False], ids=["trainers", "own-readers"])
def test_a_metadata_row_over_two_lines_is_named_as_olmo_core_reads_it(cli, out, monkeypatch,
                                                                     trainers):  # fmt: skip
    """What an older version wrote for an input named with a line break: a
    quoted field over two lines, which pyarrow's CSV reader (check's) read as
    one row and OLMo-core's line-by-line reader fails on."""
    csv = out / "olmo" / "part-0-00000.csv.gz"
    text = gzip.decompress(csv.read_bytes())
    assert b'"c.txt' in text
    csv.write_bytes(gzip.compress(text.replace(b'"c.txt', b'"c\nd.txt'), mtime=0))
    utils = olmo_core_data_utils()
    npy = str(csv.with_name("part-0-00000.npy"))
    with pytest.raises(ValueError):  # OLMo-core's own reading of it
        list(utils.iter_document_indices(npy, use_array_if_local=False, dtype=np.uint16))
    if trainers:
        with torch_stand_in():
            result = check(cli, out, ok=False)
    else:
        hide_trainers(monkeypatch)
        result = check(cli, out, ok=False)
    line = one_problem(result, "olmo/part-0-00000.csv.gz: line ")
    assert "as OLMo-core reads them, line by line" in line
    assert len(problems(result)) == 1


def cut(folder, name, n=1):
    def plant(out):
        path = out / folder / name
        path.write_bytes(path.read_bytes()[:-n])

    return plant


def append_junk(folder, name):
    def plant(out):
        path = out / folder / name
        path.write_bytes(path.read_bytes() + b"junkjunk")

    return plant


@pytest.mark.parametrize("trainers", [True, False], ids=["trainers", "own-readers"])
@pytest.mark.parametrize(
    ("plant", "said"),
    [
        (cut("olmo", "part-0-00000.csv.gz", 5), "olmo/part-0-00000.csv.gz: not gzip end to end"),
        (append_junk("olmo", "part-0-00000.csv.gz"), "part-0-00000.csv.gz: not gzip end to end"),
        (cut("olmo", "part-0-00000.npy"), "olmo/part-0-00000.npy: "),
        (cut("olmo", "index.json", 40), "olmo/index.json: not valid JSON"),
        (cut("bin", "index.json", 40), "bin/index.json: not valid JSON"),
    ],
    ids=["olmo-csv-cut", "olmo-csv-junk", "olmo-npy-cut", "olmo-index", "bin-index"],
)
def test_a_damaged_file_is_named_in_its_problem(cli, out, monkeypatch, plant, said, trainers):
    """These said only "olmo/: cannot be read (buffer size must be a multiple
    of element size)", or gzip's or json's words, naming no file."""
    plant(out)
    if trainers:
        olmo_core_data_utils()
        with torch_stand_in():
            result = check(cli, out, ok=False)
    else:
        hide_trainers(monkeypatch)
        result = check(cli, out, ok=False)
    one_problem(result, said)
    assert len(problems(result)) == 1, result.output


@pytest.mark.parametrize(
    ("metadata", "said"),
    [
        ("tokenizer.json|2\n999\n{short}", "records '999' tokens, 000_corpus.ds holds {n}"),
        ("other.json|2\n{n}\n{short}", "names the tokenizer 'other.json', the run's is"),
        ("tokenizer.json|2\n{n}\n1 T", "says '1 T' for {n} tokens, datatrove's '{short}'"),
        ("tokenizer.json|2", "1 line, where datatrove writes three"),
    ],
    ids=["count", "tokenizer", "short", "first-line-only"],
)
def test_a_datatrove_metadata_file_other_than_its_data_is_named(cli, out, monkeypatch,
                                                                metadata, said):  # fmt: skip
    """check read the token size from its first line and nothing else: a wrong
    count, another tokenizer's name or a file of one line passed."""
    from tokenmill.layouts.datatrove import short_count

    hide_trainers(monkeypatch)
    path = out / "datatrove" / "000_corpus.ds.metadata"
    n = (out / "datatrove" / "000_corpus.ds").stat().st_size // 2
    assert path.read_text() == f"tokenizer.json|2\n{n}\n{short_count(n)}"
    path.write_text(metadata.format(n=n, short=short_count(n)))
    result = check(cli, out, ok=False)
    line = one_problem(result, "datatrove/000_corpus.ds.metadata: ")
    assert said.format(n=n, short=short_count(n)) in line
    assert len(problems(result)) == 1, result.output
