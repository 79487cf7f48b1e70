"""report: OUT/report.html, the stats of a `run` output folder as plots and
colour-coded sample documents (rendered by `tokenmill.report`)."""

from __future__ import annotations

import time

import numpy as np

from tokenmill.io.storage import AnyPath, is_remote, location
from tokenmill.io.writers import atomic_path
from tokenmill.report import SampleDocument, page
from tokenmill.stages.layout import REPORT
from tokenmill.stages.results import ReportResult
from tokenmill.stages.stats import corpus_stats
from tokenmill.stages.tokens import TokenShard
from tokenmill.stages.views import record_view
from tokenmill.tokenizer import Tokenizer

LONGEST = 16  # token lengths from here on share one bucket
MIN_SAMPLE_TOKENS = 40  # a sample document is the first of its shard with this many tokens


def token_lengths(tok: Tokenizer) -> np.ndarray:
    """Each id's length in bytes (char mode: characters, `</w>` not counted); -1 for
    special tokens and ids that are no token."""
    lengths = np.full(tok.vocab_size, -1, np.int64)
    special = set(tok.special_map.values())
    for i, value in enumerate(tok.text_values):
        if value is None or i in special:
            continue
        # A char-mode token's space is its end-of-word symbol (words hold no spaces).
        lengths[i] = len(value) - (isinstance(value, str) and value.endswith(" "))
    return lengths


def length_distribution(lengths: np.ndarray, counts: np.ndarray) -> tuple[list, list, list]:
    """(bucket labels, % of ids, % of token occurrences) per token length 1..LONGEST+."""
    ok = lengths > 0
    buckets = np.minimum(lengths[ok], LONGEST)
    ids = np.bincount(buckets, minlength=LONGEST + 1)[1:]
    uses = np.bincount(buckets, weights=counts[ok], minlength=LONGEST + 1)[1:]
    labels = [str(n) for n in range(1, LONGEST)] + [f"{LONGEST}+"]
    return (
        labels,
        (100 * ids / max(1, ids.sum())).tolist(),
        (100 * uses / max(1, uses.sum())).tolist(),
    )


def pieces(tok: Tokenizer, ids: list[int]) -> list[tuple[str, list[int], str]]:
    """Tokens as (text, ids, kind); byte tokens that split a UTF-8 character are joined
    with the tokens that follow until their bytes end on a character boundary (kind
    "partial"); a run cut short by the end of `ids` is shown with U+FFFD."""
    values = tok.text_values
    special = {i: name for name, i in tok.special_map.items()}
    out: list[tuple[str, list[int], str]] = []
    buf = b""
    held: list[int] = []

    def flush():
        nonlocal buf, held
        if held:
            out.append((buf.decode("utf-8", errors="replace"), held, "partial"))
        buf, held = b"", []

    for i in ids:
        value = values[i]
        if i in special or value is None:
            flush()
            out.append((special.get(i, "?"), [i], "special"))
            continue
        if isinstance(value, str):
            out.append((value, [i], ""))
            continue
        buf, held = buf + value, [*held, i]
        try:
            text = buf.decode("utf-8")
        except UnicodeDecodeError:
            continue  # the smallest run of tokens that ends on a character boundary
        out.append((text, held, "partial" if len(held) > 1 else ""))
        buf, held = b"", []
    flush()
    return out


def sample_document(tok: Tokenizer, shard: TokenShard, max_tokens: int) -> SampleDocument | None:
    chosen = None
    for batch in shard.batches():
        for row, ids in zip(batch.column("row").to_pylist(), batch.column("ids").to_pylist(),
                            strict=True):  # fmt: skip
            if chosen is None or len(ids) >= MIN_SAMPLE_TOKENS:
                chosen = (row, ids)
            if len(ids) >= MIN_SAMPLE_TOKENS:
                break
        if chosen and len(chosen[1]) >= MIN_SAMPLE_TOKENS:
            break
    if chosen is None:
        return None
    row, ids = chosen
    text = tok.decode(ids)
    return SampleDocument(
        title=f"{shard.source}, row {row}",
        pieces=pieces(tok, ids[:max_tokens]),
        total_tokens=len(ids),
        n_bytes=len(text.encode()),
    )


def current_sweep(out: AnyPath, tok: Tokenizer) -> dict | None:
    """OUT/sweep.json when it was made with this tokenizer."""
    from tokenmill.stages.sweep import read_sweep

    sweep = read_sweep(out)
    return sweep if sweep and sweep.get("tokenizer_sha256") == tok.sha256 else None


def run_report(
    out: AnyPath,
    *,
    data: AnyPath | None = None,
    tokenizer: AnyPath | None = None,
    source_column: str | None = "source",
    samples: int = 5,
    sample_tokens: int = 300,
) -> ReportResult:
    """Write OUT/report.html; `samples` documents (the first long enough one of each of
    the first shards) are shown token by token, up to `sample_tokens` tokens each."""
    start = time.monotonic()
    out = location(out)
    st = corpus_stats(out, data=data, tokenizer=tokenizer, source_column=source_column)
    tok, s = st.tokenizer, st.summary
    labels, vocab_share, corpus_share = length_distribution(token_lengths(tok), st.counts)
    docs = [sample_document(tok, shard, sample_tokens) for shard in st.shards[:samples]]
    info = {
        "folder": str(out),
        "mode": tok.mode,
        **({"pattern": tok.pattern} if tok.mode == "byte" else {"lowercase": tok.lowercase}),
        "vocabulary": tok.vocab_size,
        "merges": len(tok.merges),
        "special tokens": " ".join(tok.special_tokens),
        "tokenizer sha256": tok.sha256[:16] + "\u2026",
    }
    html = page(
        title=f"tokenmill report: {(out if is_remote(out) else out.resolve()).name}",
        summary=s,
        tokenizer_info=info,
        length_buckets=labels,
        vocab_lengths=vocab_share,
        corpus_lengths=corpus_share,
        merge_counts=st.counts[tok._merge_ids].tolist() if tok.merges else [],
        samples=[d for d in docs if d is not None],
        sweep=current_sweep(out, tok),
    )
    path = out / REPORT
    with atomic_path(path) as tmp:
        tmp.write_text(html, encoding="utf-8")
    record_view(path)
    return ReportResult(
        report=str(path),
        documents=s["documents"],
        tokens=s["tokens"],
        bytes=s["bytes"],
        seconds=time.monotonic() - start,
    )
