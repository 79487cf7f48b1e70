"""The in-process rows on the bench corpus: training (cl100k pattern) against
rustbpe and tokenizers (`train`), and encoding with the vocabulary tokenmill
learned against tiktoken, tokenizers and gigatoken, with an exactness check
of tokenmill's ids read back from its token shards (`encode`). Each
contender is a function of contenders.py run in a child process of its own;
the wall time is its measured work, start-up and imports excluded.

Each phase takes a Context (context.py) and returns (rows, notes, extra).
"""

from __future__ import annotations

import realrows
from exactness import differences
from report import Row


def training(ctx) -> tuple[list[Row], list[str], dict]:
    ours, rust, hf = ctx.rounds(
        [
            ("train_tokenmill", {"workers": ctx.workers, "vocab_size": ctx.vocab_size}),
            ("train_rustbpe", {"vocab_size": ctx.vocab_size}),
            ("train_tokenizers", {"vocab_size": ctx.vocab_size}),
        ],
        ctx.env,
    )
    base = ctx.row("train", "tokenmill count+merge+train", ours)
    rows = [base, ctx.row("train", "rustbpe", rust, base), ctx.row("train", "tokenizers", hf, base)]
    stages = ours.result["stages"]
    notes = [
        f"Merges learned: tokenmill {ours.result['merges']}, rustbpe {rust.result['merges']}, "
        f"tokenizers {hf.result['merges']}. rustbpe's vocab_size ({ctx.vocab_size}) is 256 bytes "
        "+ merges, no special tokens; tokenizers' is its 256-byte initial alphabet + merges "
        "(no special tokens asked for); tokenmill's --vocab-size also counts <|endoftext|>, so "
        f"it ran with --vocab-size {ctx.vocab_size + 1}.",
        "tokenmill training by stage: "
        + ", ".join(f"{k} {v:.2f} s" for k, v in stages.items())
        + f" ({ours.result['words']} distinct pre-tokens in the merged word table).",
    ]
    return rows, notes, {"train_tokenmill": ours.result}


def encoding(ctx) -> tuple[list[Row], list[str], dict]:
    tokens = str(ctx.tmp / "tokens")
    own = realrows.own_vocab(ctx)
    ours, tik, hf, giga = ctx.rounds(
        [
            ("encode_tokenmill", {"workers": ctx.workers, "tokens": tokens}),
            ("encode_tiktoken", {}),
            ("encode_tokenizers", {}),
            ("encode_gigatoken", own.gigatoken()),
        ],
        ctx.env,
    )
    check = ctx.run("verify", ctx.env, repeat=1, tokens=tokens)
    base = ctx.row("encode", "tokenmill encode (Parquet → Parquet)", ours)
    rows = [
        base,
        ctx.row("encode", "tiktoken encode_ordinary_batch", tik, base),
        ctx.row("encode", "tokenizers encode_batch", hf, base),
        ctx.row("encode", "gigatoken encode_files (reads the Parquet itself)", giga, base),
    ]
    pairs = (("tokenmill", ours), ("tiktoken", tik), ("tokenizers", hf), ("gigatoken", giga))
    counts = {n: m.result["tokens"] for n, m in pairs}
    notes = [
        exactness_note(check.result),
        "Tokens produced: " + ", ".join(f"{k} {v}" for k, v in counts.items()) + ".",
    ]
    return rows, notes, {"exactness": check.result, "tokens": counts}


def exactness_note(check: dict) -> str:
    parts = differences(check, ("tiktoken", "tokenizers"))
    dup = check["duplicate_token_bytes"]
    return (
        "Exactness (tokenmill's ids read back from its token shards): "
        + "; ".join(parts)
        + f". Ids whose bytes repeat another id's: {dup}."
    )


def mismatches(extra: dict) -> int:
    """Documents whose ids differ from tiktoken's or tokenizers' in the encode phase."""
    check = extra.get("exactness", {})  # none when the encode phase was skipped
    return sum(check[peer]["mismatched_documents"] for peer in ("tiktoken", "tokenizers") if check)
