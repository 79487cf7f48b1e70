"""sweep: bytes per token against vocabulary size, from one training.

The training rule is deterministic and greedy, so training to a smaller
vocabulary learns exactly the first merges of a larger one: the tokenizer of
a `run` holds every smaller vocabulary as a prefix of its merges. For each
size, the documents of the run (or a deterministic sample of them) are
encoded with the tokenizer cut to that size (the native encoder on the
merge prefix; nothing is trained again), and bytes per token is counted per
source and overall exactly as `stats` counts it: UTF-8 bytes of the text
over the tokens that are not special (no `<|endoftext|>`).

Sizes are vocabulary sizes as `--vocab-size` gives them: the ids that are no
merge (base tokens, special tokens; an extended tokenizer's base) plus the
merges kept. The result is printed and written to OUT/sweep.json, which
`report` plots (a view of OUT: see stages/layout.py).
"""

from __future__ import annotations

import json
import time

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from tokenmill.errors import TokenmillError
from tokenmill.io.columns import has_column, read_column
from tokenmill.io.readers import read_batches
from tokenmill.io.storage import AnyPath, location
from tokenmill.io.writers import atomic_path
from tokenmill.stages.layout import MANIFEST, SWEEP, TOKENIZER
from tokenmill.stages.results import SweepResult
from tokenmill.stages.split import document_hashes
from tokenmill.stages.stats import MAX_SOURCES, OTHER, find_inputs, input_path
from tokenmill.stages.tokens import TokenShard, manifest_token_shards, token_shards
from tokenmill.stages.views import record_view
from tokenmill.tokenizer import Tokenizer


def fixed_ids(tok: Tokenizer) -> int:
    """The ids that are no merge: the smallest vocabulary a prefix can have."""
    return tok.vocab_size - len(tok.merges)


def default_sizes(tok: Tokenizer) -> list[int]:
    """Powers of two between the smallest prefix and the trained size, then
    the trained size."""
    low, high = fixed_ids(tok), tok.vocab_size
    sizes = [1 << k for k in range(1, high.bit_length() + 1) if low < 1 << k < high]
    return [*sizes, high]


def prefix(tok: Tokenizer, size: int) -> Tokenizer:
    """`tok` with the merges a training to `size` ids would have made: the
    first `size - fixed_ids(tok)` of them (ids of the dropped merges unused)."""
    k = size - fixed_ids(tok)
    if not 0 <= k <= len(tok.merges):
        raise TokenmillError(
            f"vocabulary size {size} is out of range: {fixed_ids(tok)} (no merges) to "
            f"{tok.vocab_size} (the trained size)"
        )
    if tok.vocab is None:
        # Numbered afresh, base tokens then merges then specials (an extended
        # tokenizer's special ids among its merges would fall out of range):
        # the ids change, the tokens do not.
        base = tok.vocab_size - len(tok.merges) - len(tok.special_tokens)
        renumber = {old: base + j for j, old in enumerate(tok._merge_ids[:k])}
        renumber.update({old: j for j, old in enumerate(tok.alphabet_ids or ())})
        return Tokenizer(
            mode=tok.mode,
            pattern=tok.pattern,
            lowercase=tok.lowercase,
            alphabet=tok.alphabet,
            merges=[(renumber.get(a, a), renumber.get(b, b)) for a, b in tok.merges[:k]],
            special_tokens=tok.special_tokens,
            whole_words=tok.whole_words,
            normalization=tok.normalization,
        )
    vocab = list(tok.vocab)
    for i in tok._merge_ids[k:]:
        vocab[i] = None
    return Tokenizer(
        mode=tok.mode,
        pattern=tok.pattern,
        merges=tok.merges[:k],
        special_tokens=tok.special_tokens,
        vocab=vocab,
        special_ids=tok.special_ids,
        whole_words=tok.whole_words,
        normalization=tok.normalization,
    )


def sampled_rows(shards: list[TokenShard], sample: int | None) -> list[np.ndarray | None]:
    """Per shard, the rows to encode (None: all): the `sample` documents of
    smallest hash of (shard name, row), the validation split's hash, so the
    sample is fixed by the data alone."""
    if sample is None:
        return [None] * len(shards)
    rows = [
        np.concatenate(
            [b.column("row").to_numpy().astype(np.uint64) for b in s.batches(columns=("row",))]
            or [np.zeros(0, np.uint64)]
        )
        for s in shards
    ]
    keys = np.concatenate([document_hashes(s.source, r) for s, r in zip(shards, rows, strict=True)])
    owner = np.concatenate([np.full(len(r), i) for i, r in enumerate(rows)])
    chosen = np.argsort(keys, kind="stable")[:sample]
    flat = np.concatenate(rows)
    return [np.sort(flat[chosen[owner[chosen] == i]]) for i in range(len(shards))]


def run_sweep(
    out: AnyPath,
    *,
    sizes: list[int] | None = None,
    sample: int | None = None,
    data: AnyPath | None = None,
    text_column: str | None = None,
    txt_unit: str | None = None,
    source_column: str | None = "source",
    write: bool = True,
) -> SweepResult:
    start = time.monotonic()
    out = location(out)
    tok = Tokenizer.load(out / TOKENIZER)
    shards = (
        manifest_token_shards(out) if (out / MANIFEST).is_file() else token_shards(out / "tokens")
    )
    data, config = find_inputs(out, data)
    text_column = text_column or config.get("text_column", "text")
    txt_unit = txt_unit or config.get("txt_unit", "line")
    sizes = sorted(set(sizes)) if sizes else default_sizes(tok)
    cut = [prefix(tok, v) for v in sizes]
    if sample is not None and sample < 1:
        raise TokenmillError(f"--sample {sample}: want at least one document")
    # Per source: documents, bytes, then the tokens at each size.
    sources: dict[str, np.ndarray] = {}
    for shard, wanted in zip(shards, sampled_rows(shards, sample), strict=True):
        path = input_path(data, shard)
        labels = None
        if source_column and has_column(path, source_column):
            labels = pa.chunked_array(
                list(read_column(path, source_column)), pa.large_string()
            ).combine_chunks()
            labels = pc.fill_null(labels, shard.source)
        for rows, docs in read_batches(
            path, text_column, on_skip=lambda _: None, txt_unit=txt_unit
        ):
            if wanted is not None:
                keep = np.isin(rows.to_numpy(), wanted)
                if not keep.any():
                    continue
                mask = pa.array(keep)
                rows, docs = rows.filter(mask), docs.filter(mask)
            columns = {
                "source": pl.from_arrow(labels.take(rows))
                if labels is not None
                else pl.Series([shard.source] * len(rows), dtype=pl.String),
                "documents": np.ones(len(rows), np.int64),
                "bytes": pc.binary_length(docs).cast(pa.int64()).to_numpy(),
            }
            for j, small in enumerate(cut):
                lens = small.encode_arrow(docs, eos=False)[1]
                columns[f"t{j}"] = lens.cast(pa.int64()).to_numpy()
            grouped = (
                pl.DataFrame(columns).group_by("source", maintain_order=True).agg(pl.all().sum())
            )
            for name, *numbers in grouped.iter_rows():
                if name not in sources and len(sources) >= MAX_SOURCES:
                    name = OTHER
                sources[name] = sources.get(name, 0) + np.array(numbers, np.int64)

    def line(name: str, n: np.ndarray) -> dict:
        return {
            "name": name,
            "documents": int(n[0]),
            "bytes": int(n[1]),
            "text_tokens": [int(t) for t in n[2:]],
            "bytes_per_token": [round(int(n[1]) / int(t), 4) if t else None for t in n[2:]],
        }

    total = sum(sources.values(), np.zeros(2 + len(sizes), np.int64))
    result = SweepResult(
        vocab_sizes=sizes,
        sample=sample,
        all=line("all", total),
        sources=[line(name, n) for name, n in sources.items()],
        tokenizer_sha256=tok.sha256,
        seconds=time.monotonic() - start,
    )
    if write:
        with atomic_path(out / SWEEP) as tmp:
            tmp.write_text(json.dumps(result.to_json(), indent=1) + "\n", encoding="utf-8")
        record_view(out / SWEEP)
    return result


def read_sweep(out: AnyPath) -> dict | None:
    """OUT/sweep.json, if a sweep wrote one for the current tokenizer."""
    out = location(out)
    path = out / SWEEP
    if not path.is_file():
        return None
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return d if isinstance(d, dict) and "vocab_sizes" in d else None


def format_sweep(d: dict, max_sources: int = 20) -> str:
    """The sweep as a table: one row per source (largest first), one column per size."""
    sizes = d["vocab_sizes"]
    lines = sorted(d["sources"], key=lambda x: -x["bytes"])
    shown = lines[:max_sources] if max_sources else lines
    width = max([6, *(len(x["name"]) for x in shown)])
    head = f"  {'source':<{width}}  {'documents':>9}  " + "  ".join(f"{v:>8}" for v in sizes)
    rows = [
        "bytes per token by vocabulary size"
        + (f" ({d['sample']} sampled documents)" if d.get("sample") else ""),
        head,
    ]

    def row(x: dict) -> str:
        cells = "  ".join("       -" if b is None else f"{b:>8.3f}" for b in x["bytes_per_token"])
        return f"  {x['name']:<{width}}  {x['documents']:>9}  {cells}"

    rows += [row(x) for x in shown]
    if len(shown) < len(lines):
        rows.append(f"  ... and {len(lines) - len(shown)} more sources (--max-sources 0 shows all)")
    rows.append(row(d["all"]))
    return "\n".join(rows)
