"""The limits (`limits`): training a vocabulary of 131072, encoding three
10 MB documents, and encoding with the GPT-2 vocabulary imported, its ids
against tiktoken's with the same file.

The phase takes a Context (context.py) and returns (rows, notes, extra).
"""

from __future__ import annotations

from report import Row


def limits(ctx) -> tuple[list[Row], list[str], dict]:
    """A large vocabulary, pathological documents, and the real GPT-2 vocabulary."""
    big = ctx.run(
        "train_tokenmill",
        ctx.env,
        repeat=1,
        workers=ctx.workers,
        vocab_size=131072,
        tokenizer=str(ctx.tmp / "tokenizer-131072.json"),
    )
    long = ctx.run("long_words", ctx.env, repeat=1)
    gpt2 = ctx.run("gpt2_match", ctx.env, repeat=1)
    rows = [
        ctx.row("limits", "tokenmill count+merge+train --vocab-size 131072", big),
        ctx.row("limits", "tokenmill encode of three 10 MB documents", long),
        ctx.row("limits", "tokenmill encode, GPT-2 vocabulary imported", gpt2),
    ]
    cases = ", ".join(f"{k}: {v:.2f} s" for k, v in long.result["cases"].items())
    g = gpt2.result
    notes = [
        f"Vocabulary 131072: {big.result['merges']} merges learned.",
        f"Long documents (encode of one document each, no quadratic merge loop): {cases}.",
        f"GPT-2 vocabulary (vocabularies/gpt2.tiktoken imported with --pattern gpt2): "
        f"{g['identical']} of {g['documents']} documents get ids identical to tiktoken's "
        f"with the same file.",
    ]
    return rows, notes, {"gpt2_match": g}
