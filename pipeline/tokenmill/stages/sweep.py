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

A run with --extend is swept from its base's size up (the base with no new
merge): `run --extend` trains no smaller vocabulary, so no smaller size is
taken. A run with superword tokens (`--superword-at T`) is swept from T up, and
each size is set against ordinary BPE of the same size: trained once, to the
run's size, on the run's word table (OUT/counts.parquet, which is stage 1's),
and cut as the superword tokenizer is. `held_out` (`--held-out DIR`) encodes
the documents of other inputs instead of the run's: text neither saw.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from tokenmill.errors import OptionError, TokenmillError, one_line
from tokenmill.io.columns import has_column, read_column
from tokenmill.io.inputs import find_inputs as find_files
from tokenmill.io.readers import read_batches
from tokenmill.io.storage import AnyPath, location
from tokenmill.io.writers import atomic_path
from tokenmill.stages.layout import MANIFEST, SWEEP, TOKENIZER
from tokenmill.stages.manifest import changed_from, read_manifest
from tokenmill.stages.results import SweepResult, bpe_stops
from tokenmill.stages.split import document_hashes
from tokenmill.stages.state import recorded_state
from tokenmill.stages.stats import (
    MAX_SOURCES,
    OTHER,
    find_inputs,
    input_path,
    output_token_shards,
    recorded_config,
    run_base,
)
from tokenmill.stages.tokens import TokenShard, shard_tokenizer
from tokenmill.stages.views import record_view
from tokenmill.tokenizer import Tokenizer

COUNTS = "counts.parquet"  # the run's word table (stages/layout.py)


def fixed_ids(tok: Tokenizer) -> int:
    """The ids that are no merge: the smallest vocabulary a prefix can have."""
    return tok.vocab_size - len(tok.merges)


def default_sizes(tok: Tokenizer, start: int | None = None) -> list[int]:
    """Powers of two between the smallest prefix and the trained size, then
    the trained size; from `start` (the transition point of superword
    tokens, an extended tokenizer's base), `start` and the powers of two
    above it."""
    low, high = fixed_ids(tok), tok.vocab_size
    if start is not None:
        low = start
    sizes = [1 << k for k in range(1, high.bit_length() + 1) if low < 1 << k < high]
    return ([low] if start is not None and low < high else []) + [*sizes, high]


def base_size(tok: Tokenizer, config: dict) -> int | None:
    """An extended tokenizer's smallest training: its base with no new merge
    (`run --extend` refuses a smaller --vocab-size), read from the base the
    run recorded in `config`; None for a run that extended nothing."""
    try:
        base = run_base(config)
    except (TokenmillError, OSError) as e:
        raise TokenmillError(
            f"--extend {config['extend']}: the run's base, where its training starts, "
            f"cannot be read ({one_line(e)})"
        ) from None
    if base is None:
        return None
    if tok.merges[: len(base.merges)] != base.merges:
        raise TokenmillError(
            f"--extend {config['extend']}: not the base OUT's tokenizer was grown from "
            "(changed since the run?)"
        )
    return fixed_ids(tok) + len(base.merges)


def check_sizes(sizes: list[int], tok: Tokenizer, base: int | None, config: dict) -> None:
    """Refuse a size no training gives: outside the prefixes of `tok`, or
    below an extended tokenizer's `base` size."""
    for size in sizes:
        if base is not None and size < base:
            raise OptionError(
                f"--vocab-sizes {size} is below the base's {base} ids: no training with "
                f"--extend {config['extend']} gives it"
            )
        if (wrong := out_of_range(tok, size)) is not None:
            raise OptionError(f"--vocab-sizes {wrong}")


def out_of_range(tok: Tokenizer, size: int) -> str | None:
    """What is wrong with `size` as a vocabulary size cut from `tok`, if anything."""
    if fixed_ids(tok) <= size <= tok.vocab_size:
        return None
    return (
        f"{size} is out of range: {fixed_ids(tok)} (no merges) to "
        f"{tok.vocab_size} (the trained size)"
    )


def ordinary_bpe(out: AnyPath, tok: Tokenizer, config: dict) -> Tokenizer:
    """Ordinary BPE of the superword tokenizer `tok`'s size and special tokens,
    trained on the run's word table."""
    from tokenmill.stages.train import read_word_table

    counts = location(out) / COUNTS
    if not counts.is_file():
        raise TokenmillError(
            f"{counts}: not there, and ordinary BPE to compare superword tokens with is "
            "trained on it (rerun the run)"
        )
    table = read_word_table(counts)
    return Tokenizer._train_from_word_arrays(
        table["word"],
        table["count"],
        pattern=config.get("pattern", "cl100k"),
        vocab_size=tok.vocab_size,
        special_tokens=tok.special_tokens,
    )


def prefix(tok: Tokenizer, size: int) -> Tokenizer:
    """`tok` with the merges a training to `size` ids would have made: the
    first `size - fixed_ids(tok)` of them (ids of the dropped merges unused)."""
    if (wrong := out_of_range(tok, size)) is not None:
        raise TokenmillError(f"vocabulary size {wrong}")
    k = size - fixed_ids(tok)
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


def refuse_changed_inputs(out: AnyPath, inputs: Sequence[tuple[AnyPath, str, object]]) -> None:
    """The run's documents are measured again from DATA: an input that
    changed since would be measured as if the run had read it."""
    if not (out / MANIFEST).is_file():
        return
    recorded = {e["path"]: e for e in read_manifest(out).get("inputs", [])}
    for path, name, _ in inputs:
        entry = recorded.get(name)
        if entry is not None and changed_from(entry, path):
            raise TokenmillError(
                f"{path}: changed since the run (not the sha256 its manifest records); "
                "sweep measures the run's documents: run again, or give --held-out"
            )


def run_sweep(
    out: AnyPath,
    *,
    sizes: list[int] | None = None,
    sample: int | None = None,
    data: AnyPath | None = None,
    text_column: str | None = None,
    txt_unit: str | None = None,
    source_column: str | None = "source",
    held_out: AnyPath | None = None,
    write: bool = True,
) -> SweepResult:
    from tokenmill.tokenizer.superword import PATTERN as SUPERWORD_PATTERN

    # Before any work: usage errors of the command line's options.
    if sample is not None and sample < 1:
        raise OptionError(f"--sample {sample}: want at least one document")
    if held_out is not None and sample is not None:
        raise OptionError("--sample is for the run's documents: not with --held-out")
    if held_out is not None and data is not None:
        raise OptionError(
            "--data is where the run's documents are: not with --held-out, whose documents "
            "are encoded instead"
        )
    start = time.monotonic()
    out = location(out)
    shards = output_token_shards(out)
    # OUT/tokenizer.json only if the shards were encoded with it, as stats
    # and report take it: another's numbers would be printed as OUT's.
    tok = shard_tokenizer(shards[0])
    given = data is not None
    run_data = None
    if held_out is None:
        run_data, config = find_inputs(out, data)
    else:  # the run's inputs are not read: only how it read them (text column, glob)
        config = recorded_config(out)
    text_column = text_column or config.get("text_column", "text")
    txt_unit = txt_unit or config.get("txt_unit", "line")
    superword_at = config.get("superword_at") if tok.pattern == SUPERWORD_PATTERN else None
    if superword_at is not None:
        # Stage 1 may have run out of pairs short of T: stage 2's tokens start there.
        reached = recorded_state(out / TOKENIZER).get("stage1_vocab_size")
        if isinstance(reached, int) and reached < superword_at:
            superword_at = reached
    base = base_size(tok, config)
    if sizes:
        sizes = sorted(set(sizes))
        check_sizes(sizes, tok, base, config)
    else:
        sizes = default_sizes(tok, superword_at if superword_at is not None else base)
    cut: list[Tokenizer | None] = [prefix(tok, v) for v in sizes]
    plain = None
    if superword_at is not None:
        # None past the size ordinary BPE reached (its pairs ran out): no number.
        plain = ordinary_bpe(out, tok, config)
        cut += [prefix(plain, v) if v <= plain.vocab_size else None for v in sizes]
    if held_out is not None:
        files = find_files(location(held_out), config.get("glob", "**/*"), exclude=(out,))
        inputs: list[tuple[AnyPath, str, np.ndarray | None]] = [
            (s.path, s.name, None) for s in files.shards
        ]
    elif run_data is not None:
        inputs = [
            (input_path(run_data, shard, given), shard.source, wanted)
            for shard, wanted in zip(shards, sampled_rows(shards, sample), strict=True)
        ]
        refuse_changed_inputs(out, inputs)
    # Per source: documents, bytes, then the tokens at each size (and ordinary BPE's).
    sources: dict[str, np.ndarray] = {}
    for path, name, wanted in inputs:
        labels = None
        if source_column and has_column(path, source_column):
            labels = pa.chunked_array(
                list(read_column(path, source_column)), pa.large_string()
            ).combine_chunks()
            labels = pc.fill_null(labels, name)
        # The run's own skips are its manifest's; a held-out document that does
        # not read would leave the numbers short without a word.
        skip = None if held_out is not None else (lambda _: None)
        for rows, docs in read_batches(path, text_column, on_skip=skip, txt_unit=txt_unit):
            if wanted is not None:
                keep = np.isin(rows.to_numpy(), wanted)
                if not keep.any():
                    continue
                mask = pa.array(keep)
                rows, docs = rows.filter(mask), docs.filter(mask)
            columns = {
                "source": pl.from_arrow(labels.take(rows))
                if labels is not None
                else pl.Series([name] * len(rows), dtype=pl.String),
                "documents": np.ones(len(rows), np.int64),
                "bytes": pc.binary_length(docs).cast(pa.int64()).to_numpy(),
            }
            for j, small in enumerate(cut):
                if small is None:
                    columns[f"t{j}"] = np.zeros(len(docs), np.int64)
                    continue
                lens = small.encode_arrow(docs, eos=False)[1]
                columns[f"t{j}"] = lens.cast(pa.int64()).to_numpy()
            grouped = (
                pl.DataFrame(columns).group_by("source", maintain_order=True).agg(pl.all().sum())
            )
            for source, *numbers in grouped.iter_rows():
                if source not in sources and len(sources) >= MAX_SOURCES:
                    source = OTHER
                sources[source] = sources.get(source, 0) + np.array(numbers, np.int64)

    def per_size(
        n_bytes: int, tokens: np.ndarray, cuts: list[Tokenizer | None]
    ) -> tuple[list[int | None], list[float | None]]:
        # None where no tokenizer of the size is (ordinary BPE's pairs ran out).
        counted = [None if c is None else int(t) for t, c in zip(tokens, cuts, strict=True)]
        return counted, [round(n_bytes / t, 4) if t else None for t in counted]

    def line(name: str, n: np.ndarray) -> dict:
        k = len(sizes)
        tokens, per_token = per_size(int(n[1]), n[2 : 2 + k], cut[:k])
        d = {
            "name": name,
            "documents": int(n[0]),
            "bytes": int(n[1]),
            "text_tokens": tokens,
            "bytes_per_token": per_token,
        }
        if superword_at is not None:
            bpe = per_size(int(n[1]), n[2 + k :], cut[k:])
            d["bpe_text_tokens"], d["bpe_bytes_per_token"] = bpe
        return d

    total = sum(sources.values(), np.zeros(2 + len(cut), np.int64))
    if not total[1]:  # every size's bytes per token would be None: an empty plot
        where = out if held_out is None else held_out
        what = f"its {total[0]} documents are empty" if total[0] else "it holds no documents"
        raise TokenmillError(f"{where}: {what}: nothing to measure bytes per token on")
    result = SweepResult(
        vocab_sizes=sizes,
        sample=sample,
        all=line("all", total),
        sources=[line(name, n) for name, n in sources.items()],
        tokenizer_sha256=tok.sha256,
        seconds=time.monotonic() - start,
        superword_at=superword_at,
        bpe_vocab_size=None if plain is None else plain.vocab_size,
        held_out=None if held_out is None else str(held_out),
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
    title = "bytes per token by vocabulary size" + (
        f" ({d['sample']} sampled documents)" if d.get("sample") else ""
    )
    if d.get("held_out"):
        title += f" on {d['held_out']}"

    def row(x: dict, key: str = "bytes_per_token") -> str:
        cells = "  ".join("       -" if b is None else f"{b:>8.3f}" for b in x[key])
        return f"  {x['name']:<{width}}  {x['documents']:>9}  {cells}"

    def table(key: str) -> list[str]:
        rows = [row(x, key) for x in shown]
        if len(shown) < len(lines):
            rows.append(
                f"  ... and {len(lines) - len(shown)} more sources (--max-sources 0 shows all)"
            )
        return [*rows, row(d["all"], key)]

    if d.get("superword_at") is None:
        return "\n".join([title, head, *table("bytes_per_token")])
    stops = d.get("bpe_vocab_size")
    whole = "all held-out documents" if d.get("held_out") else "all documents"
    fewer = [
        f"{v}: {1 - s / b:.1%}" if s and b else f"{v}: -"
        for v, s, b in zip(sizes, d["all"]["text_tokens"], d["all"]["bpe_text_tokens"], strict=True)
    ]
    return "\n".join(
        [
            f"{title}, superword tokens from {d['superword_at']}",
            head,
            *table("bytes_per_token"),
            "ordinary BPE of the same sizes",
            head,
            *table("bpe_bytes_per_token"),
            *([bpe_stops(stops)] if stops is not None and stops < sizes[-1] else []),
            f"fewer tokens than ordinary BPE, {whole}: " + ", ".join(fewer),
        ]
    )
