"""Each stage's result describes itself in the one line the command prints."""

from __future__ import annotations

import dataclasses

import click

from tokenmill import cli_options
from tokenmill.cli import main
from tokenmill.layouts import LayoutResult
from tokenmill.stages.results import (
    MergeResult,
    PackResult,
    ReportResult,
    RunResult,
    ShardStageResult,
    StatsResult,
    SweepResult,
    TrainResult,
)


def shard(reused: bool, **result) -> dict:
    return {"shard": "a", "reused": reused, "skipped": [], "output": None, **result}


def test_count_and_encode_lines():
    records = [shard(True, documents=3, bytes=2_000_000), shard(False, documents=2, bytes=0)]
    records[1]["skipped"] = [{"shard": "b", "row": 4, "reason": "bad", "documents": 1}]
    count = ShardStageResult.of("count", records, 2.0)
    assert (count.reused, count.redone, count.documents) == (1, 1, 5)
    assert count.describe() == (
        "count: 2 shards (1 kept, 1 done), 5 documents, 1 document skipped, 2.0 MB in 2.00 s, "
        "1.0 MB/s"
    )
    encode = ShardStageResult.of("encode", records, 0.0, tokens=9, normalizer="NFC")
    assert encode.describe() == (
        "encode: 2 shards (1 kept, 1 done), 5 documents, 1 document skipped, 9 tokens, 2.0 MB, "
        "text normalized with NFC in 0.00 s"
    )


def test_skips_are_counted_in_documents_as_the_manifest_counts_them():
    records = [shard(False, documents=2, bytes=0)]
    records[0]["skipped"] = [
        {"shard": "a", "row": 4, "reason": "bad", "documents": 1},
        {"shard": "b", "row": None, "reason": "unreadable", "documents": 7, "lower_bound": True},
    ]
    count = ShardStageResult.of("count", records, 0.0)
    assert ", at least 8 documents skipped (1 whole file, 1 row)," in count.describe()
    skipped = records[0]["skipped"][1:]
    run = RunResult(manifest="m", documents=2, tokens=0, skipped=skipped, tokenizer=None, seconds=0)
    assert "2 documents, at least 7 documents skipped (1 whole file), 0 tokens" in run.describe()


def test_single_output_and_later_stage_lines():
    merge = MergeResult(tables=2, words=5, occurrences=9, reused=1, redone=0, seconds=0.5)
    assert merge.describe() == (
        "merge: 2 tables, 5 distinct words, 9 in all (kept: inputs unchanged) in 0.50 s"
    )
    train = TrainResult(words=5, merges=3, vocab_size=260, sha256="x", redone=1, seconds=1)
    assert train.describe() == "train: 3 merges, vocabulary 260, from 5 words in 1.00 s"
    pack = PackResult(
        shards=[{}],
        token_shards=1,
        seq_len=8,
        sequences=2,
        last_rows={"": 3},
        documents=1,
        tokens=11,
        seconds=0,
    )
    assert pack.describe() == (
        "pack: 1 shard, 1 document, 11 tokens -> 2 sequences of 8 (last: 3) in 0.00 s"
    )
    pack.last_rows = {"train": 2, "val": 8}  # each split is a stream of its own
    assert (
        "3 sequences of 8 (last: train 2, val 8)"
        in dataclasses.replace(pack, sequences=3).describe()
    )
    bins = LayoutResult(stage="bin", dir="d", documents=1, tokens=4, summary="1 shard", seconds=0)
    assert bins.describe() == "bin: 1 document, 4 ids (1 shard) in 0.00 s"
    report = ReportResult(report="r.html", documents=1, tokens=4, bytes=10**6, seconds=1)
    assert report.describe() == "report: 1 document, 4 tokens, 1.0 MB -> r.html in 1.00 s, 1.0 MB/s"
    stats = {"shards": [{}], "documents": 1, "tokens": 4, "bytes": 0, "bytes_per_token": None}
    stats |= {"utilization": 0.5}
    assert StatsResult(stats=stats, seconds=0).describe() == (
        "stats: 1 shard, 1 document, 4 tokens, 0.0 MB, 0.00 bytes per token, "
        "50.0 % of the vocabulary used in 0.00 s"
    )
    run = RunResult(manifest="m.json", documents=1, tokens=4, skipped=[], tokenizer=None, seconds=0)
    assert run.describe() == "run: 1 document, 4 tokens -> m.json in 0.00 s"
    line = {"documents": 1, "bytes_per_token": [4.5]}
    sweep = SweepResult(
        vocab_sizes=[300], sample=None, all=line, sources=[], tokenizer_sha256="x", seconds=0
    )
    assert sweep.describe().startswith("sweep: 1 vocabulary size (300 to 300), 1 document, ")
    assert run["tokens"] == run.tokens == 4  # read as a mapping too


# Where nothing trains, --pattern and --special-token say how a .tiktoken file is read.
# Options whose help each command words for itself, from these texts only.
OWN_HELP = {
    "pattern": (cli_options.PATTERN_HELP, cli_options.READ_PATTERN_HELP),
    "special_tokens": (cli_options.SPECIAL_TOKEN_HELP, cli_options.READ_SPECIAL_TOKEN_HELP),
    "shuffle": (cli_options.SHUFFLE_HELP, cli_options.PACK_SHUFFLE_HELP),
    # pack and bin write no token shards, no OUT and take no --pack or --format;
    # merge and train write one file.
    "force": (
        cli_options.FORCE_HELP,
        cli_options.RUN_FORCE_HELP,
        cli_options.FILE_FORCE_HELP,
        cli_options.LAYOUT_FORCE_HELP,
    ),
    "bos": (cli_options.BOS_HELP, cli_options.PACK_BOS_HELP, cli_options.BIN_BOS_HELP),
    # sweep --held-out reads none of the run's inputs.
    "data": (cli_options.DATA_HELP, cli_options.SWEEP_DATA_HELP),
    "val_fraction": (
        cli_options.VAL_FRACTION_HELP,
        cli_options.PACK_VAL_FRACTION_HELP,
        cli_options.BIN_VAL_FRACTION_HELP,
    ),
}


def test_shared_options_have_one_definition():
    """--pattern, --special-token, --workers, --force, ... read the same wherever they
    appear (only --pattern's default differs: training's preset, or the file's own)."""
    seen: dict[str, tuple] = {}
    for command in main.commands.values():
        for param in command.params:
            if not isinstance(param, click.Option) or param.name in ("tokenizer_file",):
                continue
            shape: tuple = (param.opts[0], repr(param.type))
            if param.name in OWN_HELP:
                assert param.help in OWN_HELP[param.name], (command.name, param.name)
            else:
                shape += (param.help, param.metavar)
            assert seen.setdefault(param.name, shape) == shape, (command.name, param.name)
    assert {"pattern", "special_tokens", "workers", "force", "bos", "min_count"} <= set(seen)
