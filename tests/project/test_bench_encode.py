"""The benchmark's whole-process encode rows, without running a contender: the
summary rows over several worker counts, the many-core table, the exactness
tallies that fail a run, gigatoken's same-job writer, and the options that
choose worker counts and phases."""

from __future__ import annotations

import importlib
import json
import re
import sys
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from realtext import REPO

MB = 1_000_000


@pytest.fixture(scope="module")
def bench():
    """bench/'s modules, imported as bench/run.py imports them (by their bare
    names, which leave sys.modules afterwards)."""
    before = set(sys.modules)
    sys.path.insert(0, str(REPO / "bench"))
    try:
        names = ("report", "encoderows", "floorrows", "run", "exactness", "gigatoken_process")
        names += ("corpora", "manycorerows")
        yield {name: importlib.import_module(name) for name in names}
    finally:
        sys.path.remove(str(REPO / "bench"))
        for name in set(sys.modules) - before:
            if (getattr(sys.modules[name], "__file__", None) or "").startswith(str(REPO / "bench")):
                del sys.modules[name]


def rows_of(bench, corpus: str, walls: dict[int, dict[str, float]], cpu: float = 1.0):
    """The encode rows of one corpus and o200k_base: {workers: {label: wall}}."""
    report = bench["report"]
    rows = []
    for workers, walls_at in walls.items():
        phase = f"encode {corpus} o200k_base w{workers}"
        base = None
        for label, wall in walls_at.items():
            row = report.Row(phase, label, wall, MB, MB, 100 * MB, base, cpu_seconds=cpu * wall)
            base = base or row
            rows.append(row)
    return rows


def walls(bench, tokenmill: float, job: float, bare: float) -> dict[str, float]:
    enc = bench["encoderows"]
    return {enc.TOKENMILL: tokenmill, enc.GIGA_JOB: job, enc.GIGA_BARE: bare}


def test_the_summary_shows_each_worker_count_of_a_corpus_in_one_row(bench):
    rows = rows_of(bench, "C", {1: walls(bench, 4.0, 6.0, 5.0), 2: walls(bench, 2.0, 4.0, 3.0)})
    lines = bench["report"].summary_table(rows).splitlines()[2:]
    assert lines == [
        "| encode ~500 MB of C, 1 / 2 workers, whole process | gigatoken, the same job "
        "| 1.50 / 2.00 | 1.00 / 1.00 |",
        "| encode ~500 MB of C, 1 / 2 workers, whole process | gigatoken, writing nothing "
        "| 1.25 / 1.50 | 1.00 / 1.00 |",
    ]


def test_the_summary_ends_with_the_lines_it_is_given(bench):
    machine = {"cpu": "x", "cores": 2, "ram_gib": 1.0, "os": "y", "versions": {"python": "3"}}
    corpus = {"documents": 1, "bytes": MB}
    text = bench["report"].summary(machine, corpus, [], "2026-11-27", "", ["Per core: 1."])
    assert text.endswith("| ---: | ---: |\n\nPer core: 1.")


def test_the_workers_table_has_a_line_per_corpus_vocabulary_and_worker_count(bench):
    enc = bench["encoderows"]
    rows = rows_of(bench, "bench", {1: walls(bench, 2.0, 3.0, 2.5)}, cpu=1.0)
    rows += rows_of(bench, "bench", {2: walls(bench, 1.0, 2.0, 1.5)}, cpu=2.0)
    table = enc.workers_table(rows).splitlines()
    assert table[0].startswith("| corpus | vocabulary | workers | tokenmill | gigatoken, the same")
    assert len(table[0].split("|")) == len(table[1].split("|")) == len(table[2].split("|"))
    assert table[2:] == [
        "| bench | o200k_base | 1 | 2.00 | 3.00 (1.50) | 2.50 (1.25) |  |  "
        "| 1.0 / 1.0 / 1.0 /  /  |",
        "| bench | o200k_base | 2 | 1.00 | 2.00 (2.00) | 1.50 (1.50) |  |  "
        "| 2.0 / 2.0 / 2.0 /  /  |",
    ]
    assert enc.workers_table([]) == ""


def test_a_row_kept_as_json_comes_back_the_same_row(bench):
    rows = rows_of(bench, "C", {16: walls(bench, 1.25, 2.5, 2.0)}, cpu=4.0)
    back = [bench["report"].Row.from_dict(r.to_dict()) for r in rows]
    table = bench["encoderows"].workers_table
    assert table(back) == table(rows)
    assert [(r.seconds, r.speedup, r.n_bytes) for r in back] == [
        (r.seconds, r.speedup, r.n_bytes) for r in rows
    ]


def test_the_kept_many_core_rows_give_every_corpus_vocabulary_and_worker_count(bench):
    """bench/many-cores/ as committed: RESULTS.md's table at 1 to 16 workers."""
    title, text = bench["manycorerows"].section()
    lines = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    keys = [tuple(cell.strip() for cell in line.split("|")[1:4]) for line in lines[1:]]
    corpora, vocabs = ("bench", "C", "multilingual"), ("o200k_base", "cl100k_base")
    assert keys == [(c, v, w) for c in corpora for v in vocabs for w in ("1", "2", "4", "8", "16")]
    assert "16 cores" in title and "16 cores" in text
    assert text.count("0 of 3890 documents differ from gigatoken") == 10  # each vocabulary, w1..16


def test_a_kept_run_whose_token_totals_differ_says_why_beside_its_rows(bench):
    """A kept run cannot be run again here: where its contenders' token totals
    differ, its errata must say why, in the section RESULTS.md shows."""
    mc = bench["manycorerows"]
    for name, run in mc.runs().items():
        totals = [
            set(re.findall(r" (\d+)(?=,|\.?$)", n.split("Tokens: ", 1)[1]))
            for n in run["notes"]
            if n.startswith("Exactness, encode") and "Tokens: " in n
        ]
        assert totals, name
        if any(len(t) > 1 for t in totals):
            assert run.get("errata"), f"{name}: token totals differ, and no erratum says why"
            assert all(e in mc.section()[1] for e in run["errata"])


def test_no_kept_many_core_rows_is_no_section(bench, tmp_path):
    assert bench["manycorerows"].section(tmp_path)[1] == ""
    assert bench["manycorerows"].superword_section(tmp_path)[1] == ""


def test_the_kept_superword_run_gives_each_worker_count_and_its_ratio(bench):
    """bench/many-cores/superword.json as committed: one row a worker count,
    the ratio of the fastest rounds."""
    kept = json.loads((REPO / "bench/many-cores/superword.json").read_text())
    title, text = bench["manycorerows"].superword_section()
    lines = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    cells = [[c.strip() for c in line.split("|")[1:-1]] for line in lines[1:]]
    assert [c[0] for c in cells] == ["2", "4", "8", "16"]
    for row, c in zip(kept["rows"], cells, strict=True):
        best = min(row["superword"]) / min(row["ordinary"])
        assert float(c[3]) == round(best, 2) == round(row["ratio"], 2)
    assert "16 cores" in title


def test_any_differing_document_counts_as_a_mismatch(bench):
    def check(n):
        return {"documents": 10, "gigatoken": {"mismatched_documents": n, "first_mismatch": None}}

    peers = {
        "documents": 10,
        "fastokens": {"mismatched_documents": 0, "first_mismatch": None},
        "tiktoken": {"mismatched_documents": 2, "first_mismatch": None},
    }
    extra = {
        "C_whole_process": {"C o200k_base": {"checks": {"w1": check(0), "w2": check(1)}}},
        "bench_whole_process": {"bench cl100k_base": {"checks": {"w1": check(0), "peers": peers}}},
        "floor": {"bench": {"floor_encode": 10.0}},
    }
    assert bench["encoderows"].mismatches(extra) == 3


def test_a_mismatch_is_the_first_thing_its_note_says(bench):
    enc = bench["encoderows"]
    same = {"documents": 4, "gigatoken": {"mismatched_documents": 0, "first_mismatch": None}}
    peers = {
        "documents": 4,
        "fastokens": {"mismatched_documents": 0, "first_mismatch": None},
        "tiktoken": {"mismatched_documents": 1, "first_mismatch": {"row": 3}},
    }
    tokens = {"tokenmill": [10], "tiktoken": [11]}
    note = enc.exactness_note("C o200k_base", {"w1": same, "peers": peers}, tokens)
    assert note.startswith("MISMATCH, THE RUN FAILS: Exactness, encode C o200k_base:")
    assert '1 of 4 documents differ from tiktoken (first: {"row": 3})' in note
    peers["tiktoken"]["mismatched_documents"] = 0
    assert enc.exactness_note("C o200k_base", {"w1": same, "peers": peers}, tokens).startswith(
        "Exactness"
    )


def test_per_core_the_summary_puts_encode_beside_its_floors(bench):
    floor, report = bench["floorrows"], bench["report"]
    rates = {"floor_encode": 50, "floor_io": 200, "floor_counter": 100, "floor_gigatoken": 80}
    rates |= {"floor_pretokenize": 30, "floor_fastokens": 60}
    rows = [
        report.Row(f"floor {corpus} o200k_base", floor.FLOOR[name], 1.0, 0, 0, rate * MB)
        for corpus in ("bench", "slice")
        for name, rate in rates.items()
    ]
    # Per MB: 20 ms of encode, less 5 of I/O and 10 of pre-tokenizing.
    assert floor.per_core_line(rows) == [
        "Per core (o200k_base, one worker), MB/s of tokenmill's encode, of I/O alone (PyArrow "
        "reading the text and writing as many ids), of the pre-tokenizer alone and of gigatoken "
        "writing nothing: the bench corpus 50, 200, 100, 80. The rest of encode's time, looking "
        "words up, merging and building the id arrays: 5.0 ms per MB."
    ]
    assert floor.per_core_line(rows[6:]) == []  # the slice alone: nothing to say


def token_shard(path, source: str, ids: list[list[int]]) -> None:
    """A token shard as tokenmill writes one: rows (out of order), ids, its input's name."""
    order = list(reversed(range(len(ids))))
    table = pa.table({"row": order, "ids": [ids[i] for i in order]})
    table = table.replace_schema_metadata({b"tokenmill.source": source.encode()})
    pq.write_table(table, path)


def test_gigatoken_writes_a_shard_of_ids_per_input_shard_and_each_document_is_compared(
    bench, tmp_path
):
    corpus, out, tokens = tmp_path / "corpus", tmp_path / "giga", tmp_path / "tokens"
    (corpus / "sub").mkdir(parents=True)
    tokens.mkdir()
    texts = {"a.parquet": ["x", "y", "z"], "sub/b.parquet": ["w", "v"]}
    for name, docs in texts.items():
        pq.write_table(pa.table({"text": docs}), corpus / name)
    ids = [[1, 2], [], [3], [4, 5, 6], [7]]
    paths = [corpus / name for name in texts]
    array = pa.array(ids, pa.large_list(pa.uint32()))
    bench["gigatoken_process"].write(array, corpus, paths, out, threads=2)
    written = pq.read_table(out / "sub" / "b.parquet")
    assert written.schema.field("ids").type == pa.list_(pa.uint32())
    assert written["ids"].to_pylist() == [[4, 5, 6], [7]]
    token_shard(tokens / "0.parquet", "a.parquet", ids[:3])
    token_shard(tokens / "1.parquet", "sub/b.parquet", [[4, 5, 6], [8]])
    check = bench["exactness"].compare_written(corpus, tokens, out)
    assert check["documents"] == 5
    assert check["gigatoken"]["mismatched_documents"] == 1
    first = check["gigatoken"]["first_mismatch"]
    assert (first["shard"], first["row"], first["position"], first["text_start"]) == (
        "sub/b.parquet",
        1,
        0,
        "v",
    )
    with pytest.raises(SystemExit, match="gigatoken gave 5 rows for 3 documents"):
        bench["gigatoken_process"].write(array, corpus, paths[:1], out, threads=1)


def test_worker_counts_beyond_the_machine_are_left_out_and_said(bench):
    run = bench["run"]
    assert run.parse_args(["--workers-list", "8,2,1,2"]).workers_list == [1, 2, 8]
    assert run.machine_workers([1, 2, 4, 8, 16], 4) == (
        [1, 2, 4],
        "--workers-list: 8, 16 left out, more than this machine's 4 cores.",
    )
    assert run.machine_workers([1, 2], 2) == ([1, 2], "")
    assert run.machine_workers([4], 2)[0] == [4]  # nothing else to run: the one asked


@pytest.mark.parametrize("bad", ["1,two", "0,1", ""])
def test_a_bad_workers_list_is_refused_naming_the_option(bench, bad, capsys):
    with pytest.raises(SystemExit):
        bench["run"].parse_args(["--workers-list", bad])
    assert "--workers-list" in capsys.readouterr().err


def test_only_keeps_the_named_phases_and_training_is_needed_by_its_users(bench, capsys):
    run = bench["run"]
    args = run.parse_args(["--only", "real,code"])
    assert set(run.PHASES) - set(args.skip) == {"real", "code"}
    with pytest.raises(SystemExit):
        run.parse_args(["--only", "real,scaling"])
    assert "scaling need the train phase's vocabulary" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run.parse_args(["--only", "real,nope"])
    assert "--only: unknown phase 'nope'" in capsys.readouterr().err


def test_the_c_corpus_takes_at_most_its_rounds(bench):
    c = bench["corpora"].Corpus("C", REPO, 1, 1, "C", most_rounds=2)
    assert [c.rounds(SimpleNamespace(repeat=n)) for n in (1, 2, 5)] == [1, 2, 2]
    other = bench["corpora"].Corpus("bench", REPO, 1, 1, "bench")
    assert other.rounds(SimpleNamespace(repeat=5)) == 5


def test_the_multilingual_corpus_is_read_as_its_parquet_shards_only(bench, tmp_path):
    """tokenmill reads every known format of a folder, the peers only its
    Parquet: the multilingual rows get the shards alone, not the README.txt
    that bench/build_multilingual.py writes beside them."""
    source = tmp_path / "multilingual"
    (source / "more").mkdir(parents=True)
    for name in ("shard-00000.parquet", "more/shard-00001.parquet"):
        pq.write_table(pa.table({"text": ["ein Satz", "一つの文"]}), source / name)
    (source / "README.txt").write_text("built by bench/build_multilingual.py\n")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    ctx = SimpleNamespace(multilingual=source, tmp=scratch)
    corpus = bench["corpora"].multilingual(ctx)
    files = sorted(p.relative_to(corpus.path).as_posix() for p in corpus.path.rglob("*"))
    assert files == ["more", "more/shard-00001.parquet", "shard-00000.parquet"]
    assert (corpus.documents, corpus.name) == (4, "multilingual")
    assert bench["corpora"].multilingual(ctx).path == corpus.path  # linked once
