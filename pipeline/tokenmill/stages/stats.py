"""stats: what the tokenizer did to the corpus, from a `run` output folder.

Per input source (the value of a ``source`` column or field when a document
has one, else the input shard's name) and per shard: documents, bytes (UTF-8
of the input text), tokens (every id in the token shards, so with each
``<|endoftext|>``), and bytes per token (bytes / text tokens, i.e. tokens
that are not special tokens: the tokenizer's compression). Then, over the
whole corpus: vocabulary utilization (share of the vocabulary's ids used at
least once), the most frequent tokens, and the ids never used.

One pass over the token shards and the input shards, shard by shard; memory
holds one batch of ids, one number per document of the current shard, the
id counts and one line per source (at most MAX_SOURCES; sources met after
that many are counted together as OTHER).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from tokenmill.errors import TokenmillError, escaped
from tokenmill.io.columns import has_column, read_column
from tokenmill.io.readers import read_batches
from tokenmill.io.storage import AnyPath, location
from tokenmill.pieces import token_pieces
from tokenmill.stages.layout import MANIFEST
from tokenmill.stages.manifest import manifest_if_any
from tokenmill.stages.results import StatsResult, plural, skips_line
from tokenmill.stages.tokens import (
    TokenShard,
    list_ids,
    manifest_token_shards,
    shard_tokenizer,
    token_shards,
)
from tokenmill.tokenizer import Tokenizer

TOP = 20
MAX_SOURCES = 100_000
OTHER = "(other sources)"


@dataclass
class CorpusStats:
    summary: dict  # what `tokenmill stats --json` prints
    counts: np.ndarray  # occurrences of every id
    tokenizer: Tokenizer
    shards: list[TokenShard]


def token_text(tok: Tokenizer, i: int) -> str:
    """A token as text (tokenmill.pieces), a special token's name as it is."""
    return token_pieces(tok, [i])[0]


def find_inputs(out: AnyPath, data: AnyPath | str | None) -> tuple[AnyPath, dict]:
    """The input folder (DATA) of a `run` output folder, `data` where given
    (--data), and its recorded config."""
    recorded = manifest_if_any(out)
    given = data is not None
    if data is None:
        if "data" not in recorded:
            raise TokenmillError(
                f"{out}: no {MANIFEST} saying where the inputs are; give --data DATA"
            )
        data = recorded["data"]  # a local path or a URL (storage.resolved)
    data = location(data)
    if not data.exists():
        if given:
            raise TokenmillError(f"--data {data}: no such file or folder")
        raise TokenmillError(f"{data}: the inputs are not there; give --data DATA")
    return data, recorded.get("config", {})


def recorded_config(out: AnyPath) -> dict:
    """The config a `run` output folder's manifest records ({} without one)."""
    return manifest_if_any(out).get("config", {})


def output_token_shards(out: AnyPath) -> list[TokenShard]:
    """The token shards of a `run` output folder: what its manifest lists,
    never a stray file in tokens/ (verify reports those)."""
    out = location(out)
    if (out / MANIFEST).is_file():
        return manifest_token_shards(out)
    if (out / "tokens").is_dir():
        return token_shards(out / "tokens")
    raise TokenmillError(
        f"{out}: not an output folder of `tokenmill run` (it holds neither {MANIFEST} nor tokens/)"
    )


def input_path(data: AnyPath, shard: TokenShard, given: bool = False) -> AnyPath:
    """The input of `shard` in the run's inputs `data` (the folder --data
    names, where `given`)."""
    path = data if data.is_file() else data / shard.source
    if not path.is_file():
        if given:
            raise TokenmillError(
                f"{path}: input shard of {shard.path} not found: --data {data} does not "
                "hold the inputs OUT was made from"
            )
        raise TokenmillError(f"{path}: input shard of {shard.path} not found; give --data DATA")
    return path


def input_bytes(
    path: AnyPath, text_column: str, txt_unit: str = "line"
) -> tuple[np.ndarray, np.ndarray]:
    """(UTF-8 bytes of each row, whether the row is a document) of an input shard
    read as the run read it (`text_column`, `txt_unit`); rows that are not
    documents (bad ones, which a run with --on-error skip left out) have 0 bytes
    and False."""
    rows, sizes, seen = [], [], {"rows": 0}
    for batch_rows, docs in read_batches(
        path, text_column, on_skip=lambda _: None, stats=seen, txt_unit=txt_unit
    ):
        rows.append(batch_rows.to_numpy().astype(np.int64))
        sizes.append(pc.binary_length(docs).to_numpy().astype(np.int64))
    doc_bytes = np.zeros(seen["rows"], np.int64)
    present = np.zeros(seen["rows"], bool)
    if rows:
        doc_bytes[np.concatenate(rows)] = np.concatenate(sizes)
        present[np.concatenate(rows)] = True
    return doc_bytes, present


def corpus_stats(
    out: AnyPath,
    *,
    data: AnyPath | None = None,
    tokenizer: AnyPath | None = None,
    text_column: str | None = None,
    txt_unit: str | None = None,
    source_column: str | None = "source",
) -> CorpusStats:
    start = time.monotonic()
    out = location(out)
    shards = output_token_shards(out)
    tok = shard_tokenizer(shards[0], tokenizer)
    given = data is not None
    data, config = find_inputs(out, data)
    text_column = text_column or config.get("text_column", "text")
    # Manifests from before --txt-unit read every .txt shard a line a document.
    txt_unit = txt_unit or config.get("txt_unit", "line")
    size = tok.vocab_size
    counts = np.zeros(size, np.int64)
    special = np.zeros(size, bool)
    special[list(tok.special_map.values())] = True
    sources: dict[str, np.ndarray] = {}  # name -> documents, bytes, tokens, text tokens
    per_shard = []
    any_source = False
    warnings: list[str] = []
    for shard in shards:
        path = input_path(data, shard, given)
        doc_bytes, present = input_bytes(path, text_column, txt_unit)
        labels = None
        if source_column and has_column(path, source_column):
            try:
                labels = pa.chunked_array(
                    list(read_column(path, source_column)), pa.large_string()
                ).combine_chunks()
            except TokenmillError as e:  # e.g. a line that is not JSON (skipped by the run)
                warnings.append(f"{e}; counted per shard")
            else:
                any_source = any_source or labels.null_count < len(labels)
                labels = pc.fill_null(labels, shard.source)
        totals = np.zeros(4, np.int64)
        for batch in shard.batches():
            rows = batch.column("row").to_numpy().astype(np.int64)
            flat, offsets = list_ids(batch.column("ids"))
            if len(rows) and (rows.max() >= len(doc_bytes) or not present[rows].all()):
                raise TokenmillError(
                    f"{shard.path}: its rows are not the documents of {path} "
                    "(was the input changed?)"
                )
            if flat.size and flat.max() >= size:
                raise TokenmillError(f"{shard.path}: id {flat.max()} is beyond the vocabulary")
            counts += np.bincount(flat, minlength=size)
            n_tokens = np.diff(offsets)
            cum = np.concatenate([[0], np.cumsum(special[flat])])
            n_special = cum[offsets[1:]] - cum[offsets[:-1]]
            frame = pl.DataFrame(
                {
                    "source": pl.from_arrow(labels.take(pa.array(rows)))
                    if labels is not None
                    else pl.Series([shard.source] * len(rows), dtype=pl.String),
                    "bytes": doc_bytes[rows],
                    "tokens": n_tokens,
                    "text_tokens": n_tokens - n_special,
                }
            )
            grouped = frame.group_by("source", maintain_order=True).agg(
                pl.len().alias("documents"), pl.col("bytes", "tokens", "text_tokens").sum()
            )
            for name, *numbers in grouped.select(
                "source", "documents", "bytes", "tokens", "text_tokens"
            ).iter_rows():
                counted = np.array(numbers, np.int64)
                if name not in sources and len(sources) >= MAX_SOURCES:
                    name = OTHER
                sources[name] = sources.get(name, 0) + counted
                totals += counted
        if totals[0] != present.sum():
            raise TokenmillError(
                f"{shard.path}: {totals[0]} rows, but {path} has {present.sum()} documents "
                "(was the input changed?)"
            )
        per_shard.append((shard.source, totals))

    def line(name, numbers) -> dict:
        docs, n_bytes, tokens, text_tokens = (int(x) for x in numbers)
        return {
            "name": name,
            "documents": docs,
            "bytes": n_bytes,
            "tokens": tokens,
            "text_tokens": text_tokens,
            "bytes_per_token": round(n_bytes / text_tokens, 4) if text_tokens else None,
        }

    total = line("all", sum(t for _, t in per_shard))
    is_token = np.array([v is not None for v in tok.token_values], bool)
    used = (counts > 0) & is_token
    order = np.lexsort((np.arange(size), -counts))
    top = [
        {
            "id": int(i),
            "text": token_text(tok, int(i)),
            "count": int(counts[i]),
            "share": round(int(counts[i]) / total["tokens"], 6) if total["tokens"] else 0,
        }
        for i in order[:TOP]
        if counts[i] > 0
    ]
    never = np.flatnonzero(~used & is_token)
    recorded = manifest_if_any(out)
    summary = {
        "stage": "stats",
        **{k: v for k, v in total.items() if k != "name"},
        "source_column": source_column if any_source else None,
        "sources": [line(name, numbers) for name, numbers in sources.items()],
        "shards": [line(name, numbers) for name, numbers in per_shard],
        "vocab_size": int(is_token.sum()),
        "used": int(used.sum()),
        "utilization": round(int(used.sum()) / int(is_token.sum()), 6),
        "top": top,
        "never_used": {
            "count": len(never),
            "ids": [int(i) for i in never[:TOP]],
            "texts": [token_text(tok, int(i)) for i in never[:TOP]],
        },
        "tokenizer_sha256": tok.sha256,
        "extend": extension_stats(out, config, tok, warnings),
        # A run with a recipe or --shuffle: what it asked of each source and wrote (stages/mix.py).
        "mix": recorded.get("mix"),
        # What a run with --on-error skip left out: the counts above are of the rest.
        "skipped": recorded.get("skipped", []),
        "warnings": warnings,
        "seconds": time.monotonic() - start,
    }
    return CorpusStats(summary, counts, tok, shards)


def extension_stats(out: AnyPath, config: dict, tok: Tokenizer, warnings: list[str]) -> dict | None:
    """A run with --extend: its base, how many merges are new, and bytes per
    token with the base and with the extended tokenizer on the word table the
    run counted (counts.parquet, each word weighted by its count: in byte mode
    the corpus's bytes per text token). None for a run that extended nothing."""
    base_path = config.get("extend")
    if not base_path:
        return None
    from tokenmill.io.storage import parquet_file
    from tokenmill.tokenizer.extend import table_bytes_per_token

    try:
        base = run_base(config)
        assert base is not None
        with parquet_file(location(out) / "counts.parquet") as pf:
            table = pf.read(columns=["word", "count"], use_threads=False)
    except (TokenmillError, OSError, ValueError) as e:
        warnings.append(f"--extend {base_path}: {e}; no numbers for the base")
        return None
    return {
        "base": str(base_path),
        "base_sha256": base.sha256,
        "base_vocab_size": base.vocab_size,
        "base_merges": len(base.merges),
        "new_merges": len(tok.merges) - len(base.merges),
        "base_bytes_per_token": table_bytes_per_token(base, table["word"], table["count"]),
        "bytes_per_token": table_bytes_per_token(tok, table["word"], table["count"]),
    }


def run_base(config: dict) -> Tokenizer | None:
    """The base a run grew (--extend in its recorded `config`), read as the
    run read it; None for a run that extended nothing."""
    base_path = config.get("extend")
    if not base_path:
        return None
    from tokenmill.formats import load_any

    pattern = config.get("pattern") if str(base_path).endswith(".tiktoken") else None
    return load_any(location(base_path), pattern=pattern)


def run_stats(out: Path, **options) -> StatsResult:
    summary = corpus_stats(out, **options).summary
    return StatsResult(stats=summary, seconds=summary["seconds"])


def format_stats(s: dict, max_sources: int = 20) -> str:
    """The stats as a text report for the terminal."""

    def table(title: str, lines: list[dict]) -> list[str]:
        shown = sorted(lines, key=lambda x: -x["bytes"])
        if max_sources:
            shown = shown[:max_sources]
        # A name with a line break (a file's, a source column's) stays one row.
        shown = [{**x, "name": escaped(x["name"])} for x in shown]
        width = max([len(title), *(len(x["name"]) for x in shown)])
        head = f"  {title:<{width}}  {'documents':>10}  {'bytes':>13}  {'tokens':>12}  bytes/token"
        rows = [head]
        for x in shown:
            bpt = "-" if x["bytes_per_token"] is None else f"{x['bytes_per_token']:.3f}"
            rows.append(
                f"  {x['name']:<{width}}  {x['documents']:>10}  {x['bytes']:>13}  "
                f"{x['tokens']:>12}  {bpt:>11}"
            )
        if len(shown) < len(lines):
            rows.append(f"  ... and {len(lines) - len(shown)} more (--max-sources 0 shows all)")
        return rows

    bpt = s["bytes_per_token"]
    lines = [
        f"{plural(s['documents'], 'document')}, {s['bytes']} bytes, {plural(s['tokens'], 'token')} "
        f"({s['text_tokens']} not special), "
        + (f"{bpt:.3f} bytes per token" if bpt else "no text tokens"),
        "",
    ]
    if s.get("skipped"):
        lines += [skips_line(s["skipped"]), ""]
    if e := s.get("extend"):
        lines += [
            f"extended {e['base']}: {e['new_merges']} new merges on its {e['base_merges']}, "
            f"ids {e['base_vocab_size']} and up new; bytes per token on the word table "
            f"{e['base_bytes_per_token']} with the base, {e['bytes_per_token']} extended",
            "",
        ]
    if s.get("mix"):
        lines += [*mix_lines(s["mix"]), ""]
    if s["source_column"]:
        lines.append(
            f"per source (column {s['source_column']!r}; documents without one: their shard),"
            " largest first:"
        )
        lines += table("source", s["sources"])
        lines.append("")
    lines.append("per shard:")
    lines += table("shard", s["shards"])
    lines += [
        "",
        f"vocabulary: {s['used']} of {s['vocab_size']} ids used "
        f"({100 * s['utilization']:.1f} %), {s['never_used']['count']} never used",
        "",
        f"{len(s['top'])} most frequent tokens:",
    ]
    for rank, t in enumerate(s["top"], 1):
        lines.append(
            f"  {rank:>3}. id {t['id']:>7}  {t['text']!r:<24} {t['count']:>12}  "
            f"{100 * t['share']:5.2f} %"
        )
    never = s["never_used"]
    if never["count"]:
        shown = ", ".join(f"{i} {t!r}" for i, t in zip(never["ids"], never["texts"], strict=True))
        more = f" (first {len(never['ids'])} of {never['count']})" if never["count"] > TOP else ""
        lines += ["", f"never used{more}: {shown}"]
    if s.get("warnings"):
        lines += ["", *(f"warning: {w}" for w in s["warnings"])]
    return "\n".join(lines)


def asked_text(asked: dict | None) -> str:
    """A recipe source's form as given: "20000000 tokens", "weight 0.3", "2.0 epochs"."""
    if not asked:
        return "left out"
    form, value = next(iter(asked.items()))
    return {"tokens": f"{value} tokens", "weight": f"weight {value}", "epochs": f"{value} epochs"}[
        form
    ]


def taken_documents(source: dict) -> str:
    """Its documents taken; a left-out source's none of those it had ("0 of 40")."""
    taken = source["taken"]["documents"]
    if source["asked"] or "available" not in source:
        return str(taken)
    return f"{taken} of {source['available']['documents']}"


def mix_lines(mix: dict) -> list[str]:
    """The mixture's lines of the stats: per source, asked against written."""
    order = "input order" if mix["shuffle"] is None else f"shuffled with seed {mix['shuffle']}"
    rows = [
        (
            x["name"],
            asked_text(x["asked"]),
            str(x["budget"]),
            str(x["taken"]["tokens"]),
            f"{100 * x['asked_share']:.1f} -> {100 * x['share']:.1f}",
            taken_documents(x),
            str(x["repeated"]["documents"]),
            f"{x['epochs']:.2f}",
        )
        for x in mix["sources"]
    ]
    head = ("source", "asked", "budget", "written", "share % asked -> written", "documents",
            "repeated", "epochs")  # fmt: skip
    widths = [max(len(r[k]) for r in [head, *rows]) for k in range(len(head))]

    def line(r: tuple) -> str:
        return "  " + "  ".join(
            f"{v:<{w}}" if k < 2 else f"{v:>{w}}"
            for k, (v, w) in enumerate(zip(r, widths, strict=True))
        )

    held = []
    if val := mix.get("val"):
        held.append(
            f"  validation (--val-fraction {val['fraction']}, held out before mixing): "
            f"{plural(val['tokens'], 'token')}, {plural(val['documents'], 'document')}, "
            f"{plural(val['parts'], 'part')}"
        )
    return [
        f"mixture ({order}): {plural(mix['tokens'], 'token')} written of {mix['budget']} asked, "
        f"{plural(mix['documents'], 'document')}, {plural(mix['parts'], 'part')} (mix/):",
        line(head),
        *map(line, rows),
        *held,
    ]
