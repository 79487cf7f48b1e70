"""train: a BPE tokenizer from the merged word table."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import pyarrow as pa
from tqdm import tqdm

from tokenmill.config import Config
from tokenmill.errors import OptionError, TokenmillError
from tokenmill.faults import checkpoint
from tokenmill.io.files import known_sha256
from tokenmill.io.metadata import SPLIT_OPTIONS
from tokenmill.io.storage import AnyPath, location, parquet_file
from tokenmill.stages.results import TrainResult
from tokenmill.stages.state import record_file, recorded_state, reusable_file
from tokenmill.tokenizer import PATTERNS, Tokenizer


def load_base(config: Config, pattern: str | None = None) -> tuple[Tokenizer | None, Config]:
    """--extend: the base tokenizer (`pattern` reads a .tiktoken file) and the
    config with the base's mode, pattern and lowercase, which counting words
    must use; (None, config) without --extend."""
    if not config.extend:
        return None, config
    from tokenmill.formats import load_any
    from tokenmill.formats.regex import why_not_preset
    from tokenmill.tokenizer.extend import check_base
    from tokenmill.tokenizer.superword import PATTERN as SUPERWORD_PATTERN

    base = load_any(location(config.extend), pattern=pattern)
    check_base(base)
    if base.pattern == SUPERWORD_PATTERN:
        raise TokenmillError(
            f"--extend {config.extend}: a superword tokenizer cannot be extended: merges "
            "grown on its pieces would skip stage 2's limits (words a token, the colon), "
            "which only superword training keeps"
        )
    if base.mode == "byte" and base.pattern not in PATTERNS:
        raise TokenmillError(
            f"--extend {config.extend}: its pattern is no preset ({', '.join(PATTERNS)}), "
            "which counting words needs"
            + (f" ({why})" if (why := why_not_preset(base.pattern)) else "")
        )
    # An extended tokenizer keeps its base's mode and lowercasing: asked for
    # others (byte mode and no lowercasing are the defaults), they would be
    # dropped without a word. Options that do not go with the base: usage
    # errors, known now, not after counting and merging the whole corpus.
    if config.mode != base.mode and config.mode != "byte":
        raise OptionError(
            f"--mode {config.mode} does not go with --extend {config.extend}: it is a "
            f"{base.mode}-mode tokenizer, and an extended one keeps its base's mode"
        )
    if config.vocab_size is not None and config.vocab_size < base.vocab_size:
        raise OptionError(
            f"--vocab-size {config.vocab_size} is below the base's {base.vocab_size} ids "
            f"(--extend {config.extend})"
        )
    if config.lowercase and not base.lowercase:
        raise OptionError(
            f"--lowercase does not go with --extend {config.extend}: it does not lowercase, "
            "and an extended tokenizer keeps its base's way of splitting"
        )
    if config.extend_alphabet and base.mode != "char":
        raise OptionError(
            f"--extend-alphabet does not go with --extend {config.extend}: it is a "
            f"{base.mode}-mode tokenizer, which has every byte (the alphabet grows in char mode)"
        )
    return base, dataclasses.replace(
        config, mode=base.mode, pattern=base.pattern or config.pattern, lowercase=base.lowercase
    )


def check_superword_counts(
    config: Config, superword_counts: AnyPath | None, made: bool = True
) -> None:
    """Refuse train's --superword-at without the stage-2 word table
    --superword-counts, or the table without it (usage errors), or a table
    that is not there (`made`: one run merges while stage 1 trains is not yet)."""
    if config.superword_at is not None and superword_counts is None:
        raise OptionError(
            f"--superword-at {config.superword_at} needs --superword-counts FILE: stage 2's "
            "word table, the one `count --superword` counts (then `merge`)"
        )
    if superword_counts is not None and config.superword_at is None:
        raise OptionError(
            "--superword-counts goes with --superword-at: the stage-2 word table "
            "(`tokenmill count --superword`, then `merge`)"
        )
    if made and superword_counts is not None and not location(superword_counts).is_file():
        what = "not a file" if location(superword_counts).exists() else "no such file"
        raise TokenmillError(
            f"--superword-counts {superword_counts}: {what} (stage 2's word table: "
            "`tokenmill count --superword`, then `merge`)"
        )


def check_split(counts_file: AnyPath, config: Config) -> None:
    """Refuse to train on words split otherwise than the tokenizer will split
    text (merge records how its tables were counted): the merges would be
    learned on words encoding never sees."""
    given = {k: getattr(config, k) for k in SPLIT_OPTIONS}
    if config.mode != "byte":
        given["pattern"] = None  # char mode has none to give: any recorded is its
    if differs := split_difference(counts_file, given):
        k, recorded = differs
        from tokenmill.tokenizer.superword import PATTERN as SUPERWORD_PATTERN

        if k == "pattern" and recorded == SUPERWORD_PATTERN:
            # Else the advice would be to train with stage 2's whole regex as
            # --pattern, which training refuses (it takes a preset).
            at = "" if config.superword_at is not None else " with --superword-at T"
            raise TokenmillError(
                f"{counts_file} is a stage-2 table (`count --superword`): give it as "
                f"--superword-counts{at}, and as COUNTS_FILE the table `count` counts"
            )
        shown = f"--{k}" if k == "lowercase" else f"--{k} {recorded}"
        if k == "lowercase" and not recorded:
            shown = "no --lowercase"
        raise TokenmillError(
            f"{counts_file}: its words were counted with {shown}: train with it too "
            f"(or count again), not with {k} {given.get(k)!r}"
        )


def check_superword_split(superword_counts: AnyPath) -> None:
    """Refuse a stage-2 table whose words were not split by stage 2's pattern
    (`count --superword`): stage 2 would learn no token across a space."""
    from tokenmill.tokenizer.superword import PATTERN

    given = {"mode": "byte", "pattern": PATTERN, "lowercase": False}
    if differs := split_difference(superword_counts, given):
        k, recorded = differs
        shown = f"--{k} {recorded}" if k != "lowercase" else "--lowercase"
        raise TokenmillError(
            f"--superword-counts {superword_counts}: its words were counted with {shown}, "
            "not by stage 2's pattern: count them with `tokenmill count --superword`, "
            "then merge"
        )


def split_difference(counts_file: AnyPath, given: dict) -> tuple[str, object] | None:
    """The first split option (and its recorded value) the word table
    `counts_file` was counted with otherwise than `given`, where a given None
    matches anything; None when all match, or merge recorded none (a table
    it did not write, or wrote before it recorded this)."""
    split = recorded_state(counts_file).get("key", {}).get("split")
    if not isinstance(split, dict):
        return None
    for k, recorded in split.items():
        if given.get(k) is not None and given[k] != recorded:
            return k, recorded
    return None


def run_train(
    counts_file: AnyPath,
    tokenizer_file: AnyPath,
    config: Config,
    base: Tokenizer | None = None,
    superword_counts: AnyPath | None = None,
    merge_superwords: Callable[[], pa.Table | None] | None = None,
) -> TrainResult:
    """Train on the word table, or with --extend grow `base` (from `load_base`)
    on it; with --superword-at, stage 2 on the word table `superword_counts`
    (split by its pattern), which `merge_superwords`, where given, makes
    (run's stage-2 merge, returning the table when it merged it now): while
    stage 1 trains, unless the tokenizer may be kept. The result holds the
    tokenizer saved at `tokenizer_file`."""
    start = time.monotonic()
    if config.extend and base is None:
        raise TypeError("run_train: config.extend needs its base tokenizer (load_base)")
    check_superword_counts(config, superword_counts, made=merge_superwords is None)
    counts_file = location(counts_file)
    check_split(counts_file, config)
    if superword_counts is not None and merge_superwords is None:  # else run merges it now
        check_superword_split(location(superword_counts))
    table = read_word_table(counts_file)
    if table.num_rows == 0:
        raise TokenmillError(f"{counts_file}: the word table is empty (empty corpus?)")
    key = {
        "stage": "train",
        "counts_sha256": known_sha256(counts_file)[1],
        "mode": config.mode,
        "pattern": config.pattern,
        "lowercase": config.lowercase,
        "vocab_size": config.vocab_size,
        "special_tokens": config.train_special_tokens,
    }
    if base is not None:
        key["extend_sha256"] = base.sha256  # another base: train again
        if config.extend_alphabet:
            key["extend_alphabet"] = True
    if superword_counts is not None:
        superword_counts = location(superword_counts)
        key["superword_at"] = config.superword_at
        key["superword_max_words"] = config.superword_max_words
        if merge_superwords is not None and may_keep(tokenizer_file, key, config.force):
            merge_superwords()  # first: the table's sha256 says whether to keep it
            merge_superwords = None
        if merge_superwords is None:
            key["superword_counts_sha256"] = known_sha256(superword_counts)[1]
    if reusable_file(tokenizer_file, key, config.force):
        tok = Tokenizer.load(tokenizer_file)
        grown = extension_summary(base, tok, table) if base is not None else None
        reached = None
        if superword_counts is not None:
            stage1 = recorded_state(tokenizer_file).get("stage1_vocab_size")
            reached = stage1 if isinstance(stage1, int) else None
        superword = (config.superword_at, reached)
        return summary(table.num_rows, tok, start, True, config, extend=grown, superword=superword)
    with tqdm(desc="train", unit="merge", disable=None, leave=False) as bar:

        def progress(k: int) -> None:
            bar.update(k - bar.n)
            checkpoint("train", k)

        if base is not None:
            tok, grown = grow(base, table, config, progress)
            tok.save(tokenizer_file)
            record_file(tokenizer_file, key)
            return summary(table.num_rows, tok, start, False, config, extend=grown)
        if superword_counts is not None:
            table2 = stage2_table(superword_counts, merge_superwords)
            tok, stage1 = train_superwords(table, table2, config, progress)
            key["superword_counts_sha256"] = known_sha256(superword_counts)[1]
            tok.save(tokenizer_file)
            record_file(tokenizer_file, key, stage1_vocab_size=stage1)
            superword = (config.superword_at, stage1)
            return summary(table.num_rows, tok, start, False, config, superword=superword)
        tok = Tokenizer._train_from_word_arrays(
            table["word"],
            table["count"],
            mode=config.mode,
            pattern=config.pattern,
            lowercase=config.lowercase,
            vocab_size=config.vocab_size,
            special_tokens=config.train_special_tokens,
            progress=progress,
        )
    tok.save(tokenizer_file)
    record_file(tokenizer_file, key)
    return summary(table.num_rows, tok, start, False, config)


def read_word_table(counts_file: AnyPath) -> pa.Table:
    """The word and count columns of the word table `tokenmill merge` wrote;
    TokenmillError naming the file when it is not one."""
    expected = "want the Parquet word table `tokenmill merge` writes (word, count)"
    try:
        # ParquetFile, not read_table: read_table would import pyarrow.dataset.
        with parquet_file(counts_file) as pf:
            schema = pf.schema_arrow
            types = {name: schema.field(name).type for name in schema.names}
            if not (
                types.get("word") in (pa.string(), pa.large_string())
                and pa.types.is_integer(types.get("count", pa.null()))
            ):
                columns = ", ".join(schema.names) or "none"
                raise TokenmillError(
                    f"{counts_file}: not a word table (columns {columns}): {expected}"
                )
            return pf.read(columns=["word", "count"], use_threads=False)
    except TokenmillError:  # a store's failure (a ValueError too): said already
        raise
    except (OSError, ValueError) as e:
        raise TokenmillError(
            f"{counts_file}: cannot read it as a word table ({e}): {expected}"
        ) from None


def may_keep(tokenizer_file: AnyPath, key: dict, force: bool) -> bool:
    """Whether `tokenizer_file` was trained from `key`, whatever the stage-2
    table it recorded."""
    recorded = recorded_state(tokenizer_file).get("key")
    if force or not isinstance(recorded, dict):
        return False
    return {k: v for k, v in recorded.items() if k != "superword_counts_sha256"} == key


def stage2_table(
    superword_counts: AnyPath, merge: Callable[[], pa.Table | None] | None
) -> Callable[[], pa.Table]:
    """Stage 2's word table, made by `merge` first where given: the table it
    returns, else the file it wrote (or kept)."""

    def read() -> pa.Table:
        made = merge() if merge is not None else None
        return made if made is not None else read_word_table(superword_counts)

    return read


def train_superwords(
    table: pa.Table, table2: Callable[[], pa.Table], config: Config, progress
) -> tuple[Tokenizer, int]:
    """Stage 1 on the word table, stage 2 on `table2` (tokenizer/superword.py:
    made and read while stage 1 trains); the tokenizer, and the vocabulary size
    stage 1 reached (--superword-at, or less where its pairs ran out)."""
    from tokenmill.tokenizer.superword import BASE, train_superword

    assert config.superword_at is not None
    trained = train_superword(
        table["word"],
        table["count"],
        table2,
        pattern=config.pattern,
        superword_at=config.superword_at,
        vocab_size=config.vocab_size,
        special_tokens=config.train_special_tokens,
        max_words=config.max_words,
        progress=progress,
    )
    fixed = BASE + len(config.train_special_tokens)
    return trained.tokenizer, fixed + trained.stage1_merges


def grow(base: Tokenizer, table, config: Config, progress) -> tuple[Tokenizer, dict]:
    from tokenmill.tokenizer.extend import extend

    grown = extend(
        base,
        table["word"],
        table["count"],
        vocab_size=config.vocab_size,
        special_tokens=config.train_special_tokens,
        extend_alphabet=config.extend_alphabet,
        progress=progress,
    )
    return grown.tokenizer, {
        "base_sha256": base.sha256,
        "base_merges": len(base.merges),
        "base_vocab_size": base.vocab_size,
        "new_merges": grown.new_merges,
        "base_bytes_per_token": grown.base_bytes_per_token,
        "bytes_per_token": grown.bytes_per_token,
    }


def extension_summary(base: Tokenizer, tok: Tokenizer, table) -> dict:
    """`grow`'s numbers for an extended tokenizer kept from an earlier run."""
    from tokenmill.tokenizer.extend import table_bytes_per_token

    return {
        "base_sha256": base.sha256,
        "base_merges": len(base.merges),
        "base_vocab_size": base.vocab_size,
        "new_merges": len(tok.merges) - len(base.merges),
        "base_bytes_per_token": table_bytes_per_token(base, table["word"], table["count"]),
        "bytes_per_token": table_bytes_per_token(tok, table["word"], table["count"]),
    }


def summary(
    words: int,
    tok: Tokenizer,
    start: float,
    reused: bool,
    config: Config,
    extend: dict | None = None,
    superword: tuple[int | None, int | None] = (None, None),
) -> TrainResult:
    """`superword`: --superword-at and the vocabulary size stage 1 reached."""
    return TrainResult(
        superword_at=superword[0],
        stage1_vocab_size=superword[1],
        vocab_size_asked=config.vocab_size,
        tokenizer=tok,
        words=words,
        merges=len(tok.merges),
        vocab_size=tok.vocab_size,
        sha256=tok.sha256,
        reused=int(reused),
        redone=int(not reused),
        seconds=time.monotonic() - start,
        extend=extend,
    )
