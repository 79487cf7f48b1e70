"""The data recipe against encode: `tokenmill run DATA OUT --tokenizer
cl100k_base.tiktoken --pattern cl100k --mix RECIPE --shuffle 7`, encode-only,
with --workers 1 and 2 in turn, ROUNDS times, each its own process; the stage
seconds from its manifest. DATA is the corpus's shards dealt into three
folders, the recipe's sources: one taken 1.5 times, one half, one to a token
budget. The bar: choosing and writing the shuffled mixture (the `mix` stage:
both passes of its external sort) takes no longer than the encode stage of
the same run, on 1 and on 2 workers (`tokenmill speed ×`, encode's seconds
over the mix's, at least 1).

run.py runs it as the `recipes` phase; alone:

    python bench/reciperows.py [CORPUS] [--rounds 3] [--tmp DIR]
"""

from __future__ import annotations

import shutil
from pathlib import Path

from cliruns import against_encode, staged_run, standalone
from contenders import fresh
from corpus import parquet_shards
from realvocab import tokenmill_command
from report import Row
from vocab import CL100K_RANKS

ROUNDS = 3  # times --repeat
WORKERS = (1, 2)
SEED = 7
SOURCES = ("web", "code", "books")
# web and code by epochs; books to a token budget: about half of it, at ~4 bytes a token.
RECIPE = 'web = {{ epochs = 1.5 }}\ncode = {{ epochs = 0.5 }}\nbooks = "{books}"\n'


def recipe_corpus(ctx) -> tuple[Path, Path]:
    """(DATA, the recipe): the corpus's shards linked into one folder per source."""
    data, recipe = ctx.tmp / "recipe-data", ctx.tmp / "recipe.toml"
    fresh(data)
    shards = parquet_shards(Path(ctx.corpus))
    books = 0
    for i, shard in enumerate(shards):
        source = SOURCES[i * len(SOURCES) // len(shards)]
        (data / source).mkdir(parents=True, exist_ok=True)
        (data / source / shard.name).symlink_to(shard.resolve())
        if source == "books":
            books += shard.stat().st_size
    recipe.write_text("[mix]\n" + RECIPE.format(books=max(1, books // 8)))
    return data, recipe


def one_run(ctx, workers: int, data: Path, recipe: Path) -> dict:
    """One encode-only `tokenmill run` with the recipe; its measures and stage seconds."""
    out = ctx.tmp / f"recipes-{workers}"
    fresh(out)
    ranks = Path(getattr(ctx, "vocabularies", CL100K_RANKS.parent)) / CL100K_RANKS.name
    cmd = [tokenmill_command(), "run", str(data), str(out), "--tokenizer", str(ranks)]
    cmd += ["--pattern", "cl100k", "--mix", str(recipe), "--shuffle", str(SEED)]
    cmd += ["--workers", str(workers)]
    result = staged_run(cmd, out, ctx.quiet_wait)
    mix = result.pop("manifest")["mix"]
    result["mix"] = {k: mix[k] for k in ("documents", "tokens", "budget", "parts")}
    shutil.rmtree(out)
    return result


def recipes(ctx, rounds: int = ROUNDS) -> tuple[list[Row], list[str], dict]:
    """The `recipes` phase: encode, then the mix and shuffle, on 1 and 2 workers."""
    data, recipe = recipe_corpus(ctx)
    runs: dict[int, list[dict]] = {w: [] for w in WORKERS}
    for _ in range(ctx.repeat * rounds):
        for w in WORKERS:
            runs[w].append(one_run(ctx, w, data, recipe))
    rows, spans, extra = against_encode(ctx, "recipes", runs, {"mix": "mix"})
    for w, done in runs.items():  # what the fastest mix wrote
        extra[f"mix_{w}"]["mixture"] = min(done, key=lambda r: r["stages"]["mix"])["mix"]
    mixture = runs[1][0]["mix"]
    notes = [
        "Recipes rows: encode-only `tokenmill run --tokenizer cl100k_base.tiktoken --pattern "
        f"cl100k --mix RECIPE --shuffle {SEED}` on the corpus's shards dealt into three "
        f"sources ({RECIPE.format(books='N').strip().replace(chr(10), '; ')}, N about half "
        f"of books), {mixture['documents']} documents and {mixture['tokens']} tokens "
        f"written in {mixture['parts']} part{'s' if mixture['parts'] != 1 else ''}; "
        f"{len(runs[1])} rounds of --workers 1 then 2, "
        "each its own process. wall s: the stage's own seconds in the run's manifest (its "
        "fastest round; mix: choosing, and both passes of the external shuffle), RSS the "
        "whole run's. `tokenmill speed ×`: the median over the rounds of encode's seconds ÷ "
        "the mix's in the same run (at least 1: the mix takes no longer than encoding). "
        "Per-round ratios: " + "; ".join(spans) + ".",
    ]
    return rows, notes, {"recipes": extra}


def main() -> None:
    standalone(
        __doc__,
        lambda ctx, args: recipes(ctx, args.rounds),
        rounds=ROUNDS,
        context=lambda args, tmp: {"vocabularies": CL100K_RANKS.parent},
        line=lambda r: (
            f"{r.contender}: {r.seconds:.2f} s"
            + ("" if r.speedup is None else f", encode ÷ mix {r.speedup:.2f}")
        ),
    )


if __name__ == "__main__":
    main()
