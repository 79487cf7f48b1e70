"""The options the `tokenmill` commands share (cli.py), each defined once with
one meaning."""

from __future__ import annotations

from pathlib import Path

import click

from tokenmill.config import (
    EXECUTORS,
    MAX_MIN_COUNT,
    MAX_RAY_WORKERS,
    ON_ERROR,
    OUTPUT_FORMATS,
    TXT_UNITS,
    VAL_FRACTION_RANGE,
    WORKERS_PER_CORE,
)
from tokenmill.errors import NoSuchPath, TokenmillError
from tokenmill.tokenizer import MODES, PATTERNS
from tokenmill.tokenizer.options import numbered


def refuse_empty(value, param, ctx) -> None:
    """An empty path would name the current folder: from a cron line whose
    variable is unset (`tokenmill run "$DATA" OUT`), a run would read or
    write wherever it was started, as a job's `inputs = ""` is refused for."""
    if isinstance(value, str) and not value.strip():
        raise click.BadParameter(
            f"{value!r} is no path: give one ('.' names this folder)", ctx, param
        )


class Location(click.ParamType):
    """A local path, or a URL (s3://bucket/prefix, any fsspec filesystem): io/storage.py."""

    name = "path"

    def convert(self, value, param, ctx):
        from tokenmill.io.storage import location

        refuse_empty(value, param, ctx)
        try:
            return location(value)
        except NoSuchPath as e:  # exit 1, as a local path that does not exist
            raise click.ClickException(str(e)) from None
        except TokenmillError as e:
            self.fail(str(e), param, ctx)


EXISTING = Location()


class LocalFile(click.ParamType):
    """A local file to read (a job file, a recipe): one that does not exist
    is named when it is read, with status 1, as a missing DATA or --tokenizer."""

    name = "file"

    def convert(self, value, param, ctx):
        refuse_empty(value, param, ctx)
        return Path(value)


LOCAL_FILE = LocalFile()


# Options shared by several commands, each defined once with one meaning.


PRESET_OR_REGEX = f"a preset ({', '.join(PATTERNS)}, tiktoken's, per encoding) or a regex"
TIKTOKEN_PATTERN = "tiktoken's for its own files (gpt2, r50k_base, cl100k_base, o200k_base)"
# KNOWN_SPECIALS (formats/tiktoken.py): a public encoding is its number of ranks
# read with its own pattern; read with another, the file is no encoding tiktoken has.
TIKTOKEN_SPECIALS = (
    "default: the JSON beside the file, else tiktoken's for a public vocabulary read with "
    "its own pattern (50256 ranks with gpt2, 100256 with cl100k, 199998 with o200k), "
    "else none"
)
PATTERN_HELP = (
    f"Byte mode's pre-tokenization pattern: {PRESET_OR_REGEX}. Training takes a preset; for "
    f"a .tiktoken file it defaults to the JSON beside the file, else to {TIKTOKEN_PATTERN}."
)
SPECIAL_TOKEN_HELP = (
    "A special token (repeatable). Training: NAME, e.g. '<|pad|>'; ids follow the merges: "
    "<|endoftext|> (char mode: <unk>, <|endoftext|>) first unless listed, then these in the "
    f"order given. Reading a .tiktoken file: NAME=ID; {TIKTOKEN_SPECIALS}."
)
# The commands that only read a tokenizer: other formats hold their own pattern
# and special tokens, so both options are about .tiktoken files alone there.
READ_PATTERN_HELP = (
    f"For a .tiktoken file, which holds no pattern: {PRESET_OR_REGEX}; default: the JSON "
    f"beside the file, else {TIKTOKEN_PATTERN}. Other tokenizer files have their own."
)
READ_SPECIAL_TOKEN_HELP = (
    "For a .tiktoken file, which holds none: a special token as NAME=ID (repeatable); "
    f"{TIKTOKEN_SPECIALS}. Other tokenizer files have their own."
)


def pattern_option(default: str | None, help_text: str = PATTERN_HELP):
    """--pattern: the pre-tokenization pattern, a preset or a regex, wherever it
    appears. Training (count, train, run) takes a preset; reading a .tiktoken file
    (encode, decode, export, run --tokenizer) takes either."""
    return click.option(
        "--pattern",
        default=default,
        show_default=default is not None,
        metavar="PRESET|REGEX",
        help=help_text,
    )


def special_token_option(help_text: str = SPECIAL_TOKEN_HELP, metavar: str = "NAME[=ID]"):
    """--special-token, repeatable: NAME to reserve in training, NAME=ID to read a
    .tiktoken file. `run` takes NAME, or NAME=ID with --tokenizer."""
    return click.option(
        "--special-token",
        "special_tokens",
        multiple=True,
        metavar=metavar,
        help=help_text,
    )


def tiktoken_options(f):
    """--pattern and --special-token NAME=ID of the commands that read a tokenizer
    and train none: how to read a .tiktoken file."""
    f = special_token_option(READ_SPECIAL_TOKEN_HELP, "NAME=ID")(f)
    return pattern_option(None, READ_PATTERN_HELP)(f)


FORCE_HELP = (
    "Redo every output, even those a rerun would keep (unchanged input and options); write "
    "into a folder holding files tokenmill did not write (it replaces or removes only files "
    "named as its outputs)."
)
RUN_FORCE_HELP = FORCE_HELP.removesuffix(".") + "; also replace the outputs of another DATA in OUT."
FILE_FORCE_HELP = (
    "Redo the output even when a rerun would keep it (unchanged input and options), and "
    "replace a file there that tokenmill did not write."
)
# pack and bin keep nothing from an earlier write: they write every file each time.
LAYOUT_FORCE_HELP = (
    "Write into a folder holding files tokenmill did not write, or another command's "
    "outputs (it replaces or removes only files named as its outputs)."
)


def force_option(help_text: str = FORCE_HELP):
    return click.option("--force", is_flag=True, help=help_text)


def number_option(name: str, default: int | None, help: str, metavar: str | None = None):
    """An option taking a whole number from 0 (what 0 means, `help` says), its default
    (when there is one) shown."""
    return click.option(
        name,
        type=click.IntRange(min=0),
        default=default,
        show_default=default is not None,
        metavar=metavar,
        help=help,
    )


workers_option = number_option(
    "--workers",
    0,
    f"Parallel shard tasks (0: one per core; at most {WORKERS_PER_CORE} per core, or "
    f"{MAX_RAY_WORKERS} Ray tasks).",
)


def text_column_option(f):
    return click.option(
        "--text-column",
        default="text",
        show_default=True,
        help="Parquet column / JSON field holding the document text; a dotted path "
        "(meta.content) names a field of a struct / nested object.",
    )(f)


def txt_unit_option(f):
    return click.option(
        "--txt-unit",
        type=click.Choice(TXT_UNITS),
        default="line",
        show_default=True,
        help="What one document of a .txt file is: a non-blank line; a paragraph (lines "
        "up to a blank line); or the whole file (books, source code).",
    )(f)


VAL_FRACTION_HELP = (
    "Send this share of the documents to validation, decided by a hash of shard and row (the "
    "same split whatever the workers): a split column in the token shards, and train and val "
    "files apart in --pack's and --format's layouts."
)
# pack and bin split by encode's hash too; a split encode or the mix made is theirs to keep.
VAL_FRACTION_OF_TOKENS = (
    "Send this share of the documents to validation, by the hash of shard and row encode "
    "splits by; when encode or the mix split TOKENS_DIR, the fraction they split by (another "
    "is refused): "
)
PACK_VAL_FRACTION_HELP = (
    VAL_FRACTION_OF_TOKENS + "train and val documents packed apart, into PACKED_DIR/train "
    "and PACKED_DIR/val."
)
BIN_VAL_FRACTION_HELP = (
    VAL_FRACTION_OF_TOKENS + "train.bin and val.bin (with train.idx.npy, val.idx.npy) of "
    "all shards instead of a pair per shard."
)


class Fraction(click.ParamType):
    """--val-fraction's share, from 0 to below 1: click's FloatRange lets nan
    through (no comparison with it is false), which split nothing, or failed
    where a hash bound was made of it."""

    name = "float"

    def convert(self, value, param, ctx):
        try:
            fraction = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not 0 <= fraction < 1:
            self.fail(f"{value} is out of range: {VAL_FRACTION_RANGE}", param, ctx)
        return fraction


FRACTION = Fraction()


def val_fraction_option(help_text: str = VAL_FRACTION_HELP):
    return click.option(
        "--val-fraction",
        type=FRACTION,
        default=0.0,
        show_default=True,
        metavar="F",
        help=help_text,
    )


def min_count_option(f):
    return click.option(
        "--min-count",
        type=click.IntRange(min=1, max=MAX_MIN_COUNT),
        default=1,
        show_default=True,
        help="Drop words seen fewer times than this before training.",
    )(f)


BOS_HELP = (
    "Packed sequences and --format layouts: put <|bos|> before each document (train "
    "reserves it as a special token; the tokenizer must have it)."
)
PACK_BOS_HELP = "Put <|bos|> before each document (the tokenizer must have it)."
BIN_BOS_HELP = "Put <|bos|> before each document in the arrays (the tokenizer must have it)."


def bos_option(help_text: str = BOS_HELP):
    return click.option("--bos/--no-bos", default=False, show_default=True, help=help_text)


def regular_file(value, option: str):
    """`value`, unless a local path to something other than a regular file: a
    FIFO would be read forever, a device or folder is no file to read."""
    if isinstance(value, Path) and value.exists() and not value.is_file():
        raise click.ClickException(f"{value}: {option} is not a regular file")
    return value


def tokenizer_option(help_text: str, required: bool = False):
    """--tokenizer FILE: a tokenizer file of any format `encode` reads."""

    def check(ctx, param, value):
        # Checked here, not by click's `required`, to say which files it takes.
        if value is None and required:
            raise click.UsageError(
                "missing --tokenizer FILE: the tokenizer to use (tokenmill's tokenizer.json, "
                "a Hugging Face tokenizer.json or a .tiktoken file)",
                ctx,
            )
        return regular_file(value, "--tokenizer")

    return click.option(
        "--tokenizer",
        "tokenizer_file",
        type=EXISTING,
        default=None,
        callback=check,
        metavar="FILE",
        help=help_text + (" Required." if required else ""),
    )


def mode_options(f):
    f = click.option(
        "--lowercase", is_flag=True, help="char mode: lowercase text before splitting."
    )(f)
    f = pattern_option("cl100k")(f)
    f = click.option(
        "--mode",
        type=click.Choice(MODES),
        default="byte",
        show_default=True,
        help="byte: byte-level BPE (GPT-2 style, lossless); "
        "char: classic BPE on whitespace-split words with </w>.",
    )(f)
    return f


def input_options(f):
    f = click.option(
        "--on-error",
        type=click.Choice(ON_ERROR),
        default="fail",
        show_default=True,
        help="fail: stop at the first bad input, naming file and row; skip: skip the bad "
        "document (or unreadable file), carry on, and list every skip at the end and in "
        "the manifest.",
    )(f)
    f = click.option(
        "--ray-address",
        default=None,
        help="--executor ray: address of an existing Ray cluster (default: RAY_ADDRESS, "
        "else start a local Ray with --workers CPUs, on 127.0.0.1 only).",
    )(f)
    f = click.option(
        "--executor",
        type=click.Choice(EXECUTORS),
        default="threads",
        show_default=True,
        help="Run shard tasks on threads of this process, in worker processes, or as Ray "
        "tasks (pip install 'tokenmill[ray]').",
    )(f)
    f = click.option(
        "--glob",
        default="**/*",
        show_default=True,
        help="Which files under DATA are inputs, e.g. '*.parquet' (only known formats are read).",
    )(f)
    f = workers_option(f)
    f = txt_unit_option(f)
    f = text_column_option(f)
    return f


def vocab_option(f):
    return click.option(
        "--vocab-size",
        type=click.IntRange(min=1),
        default=32768,
        show_default=True,
        help="Total vocabulary: base tokens + merges + special tokens.",
    )(f)


def eos_option(f):
    return click.option(
        "--eos/--no-eos",
        default=True,
        show_default=True,
        help="Append <|endoftext|> after each document.",
    )(f)


def output_format_options(f):
    """--pack, --bos, --format, --per-shard and --val-fraction: the training
    layouts written from the token shards (tokenmill.layouts)."""
    f = val_fraction_option()(f)
    f = click.option(
        "--per-shard",
        is_flag=True,
        help="Write each --format layout as one set of files per token shard instead of "
        "one merged set (per split): megatron, datatrove and olmo; bin is always per shard, "
        "unless --val-fraction.",
    )(f)
    f = click.option(
        "--format",
        default=("parquet",),
        multiple=True,
        show_default=True,
        metavar="NAME[,NAME...]",
        help=f"Training layouts to write besides the token shards (parquet, always "
        f"written, the source of truth), comma-separated or the option given again, from "
        f"{', '.join(OUTPUT_FORMATS)}. "
        "bin: nanoGPT's flat uint16 (uint32 above 65536 ids) arrays in OUT/bin/; "
        "megatron: Megatron-LM's indexed dataset (.bin + .idx) in OUT/megatron/; "
        "datatrove: datatrove/nanotron's .ds files in OUT/datatrove/; olmo: OLMo-core's "
        ".npy token arrays in OUT/olmo/.",
    )(f)
    f = bos_option()(f)
    return click.option(
        "--pack",
        type=click.IntRange(min=0),
        default=0,
        metavar="SEQ_LEN",
        help="Also write OUT/packed/: the documents, each ending in <|endoftext|>, "
        "concatenated in order and cut into rows of exactly SEQ_LEN ids (the remainder of "
        "a shard starts the next shard's first row; only the very last row may be shorter). "
        "0, the default: none.",
    )(f)


def parse_special_tokens(ctx, param, values) -> dict[str, int] | None:
    """--special-token NAME=ID, repeatable (reading a .tiktoken file)."""
    if not values:
        return None
    specials: dict[str, int] = {}
    for value in values:
        pair = numbered(value)
        if pair is None:
            raise click.BadParameter(f"{value!r} is not NAME=ID", ctx, param)
        name, number = pair
        if name in specials and specials[name] != number:
            # The last would win, and the other id be a gap no text encodes to.
            raise click.BadParameter(
                f"{name!r} is given two ids, {specials[name]} and {number}", ctx, param
            )
        specials[name] = number
    return specials


def load_options(pattern: str | None, special_tokens: tuple[str, ...]) -> dict:
    """--pattern and --special-token NAME=ID as `load_any` takes them."""
    ctx = click.get_current_context()
    param = next(p for p in ctx.command.params if p.name == "special_tokens")
    return {"pattern": pattern, "special_tokens": parse_special_tokens(ctx, param, special_tokens)}


def tokenizer_options(help_text: str, required: bool = True):
    """--tokenizer FILE of any format, with --pattern and --special-token for .tiktoken files."""

    def decorate(f):
        return tokenizer_option(help_text, required)(tiktoken_options(f))

    return decorate


def output_folder_options(f):
    """Options of the commands that look back at a `run` output folder."""
    f = click.option(
        "--source-column",
        default="source",
        show_default=True,
        help="Column or JSON field naming each document's source; documents without one "
        "count under their shard. '' counts per shard only.",
    )(f)
    f = tokenizer_option(
        "The tokenizer of OUT/tokens (default: OUT/tokenizer.json; checked by sha256). A "
        ".tiktoken file needs no pattern: the one the shards were encoded with is found."
    )(f)
    return data_option(DATA_HELP)(f)


DATA_HELP = "The inputs OUT was made from. Default: the folder recorded in OUT/manifest.json."
SWEEP_DATA_HELP = f"{DATA_HELP} Not with --held-out, which reads none of them."


def data_option(help_text: str):
    """--data: the inputs of a run, for the commands that read OUT."""
    return click.option("--data", type=EXISTING, default=None, help=help_text)


def json_option(f):
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        help="Print the result as JSON instead, every number in it.",
    )(f)


max_sources_option = number_option(
    "--max-sources", 20, "Show this many sources and shards, largest first (0: all)."
)


def extend_option(f):
    f = click.option(
        "--extend-alphabet",
        is_flag=True,
        help="With --extend, char mode: characters the base never saw get ids after the "
        "base's (else they are <unk>).",
    )(f)
    return click.option(
        "--extend",
        "extend",
        type=EXISTING,
        default=None,
        help="Grow this tokenizer (tokenmill's, a byte-level tokenizer.json, or a .tiktoken "
        "with --pattern): every id kept, new merges learned on the corpus after its own; "
        "--vocab-size is the total. Mode and pattern are the base's.",
    )(f)


SHUFFLE_HELP = (
    "Write the mixture (or, without --mix, every document once) in a seeded "
    "order over the whole corpus, the same whatever --workers and --executor."
)
PACK_SHUFFLE_HELP = (
    "Write the full rows in this seeded order, whatever --workers. `run --pack N "
    "--shuffle SEED` packs its shuffled documents, OUT/mix/: given that folder, "
    "pack writes what the run wrote in packed/."
)


def shuffle_option(help_text: str):
    """--shuffle SEED: an order of rows or documents any seed of 64 bits gives."""
    return click.option(
        "--shuffle",
        type=click.IntRange(0, 2**64 - 1),
        default=None,
        metavar="SEED",
        help=help_text,
    )


def mix_options(f):
    """--mix and --shuffle: the mixture the layouts get (stages/mix.py)."""
    f = shuffle_option(SHUFFLE_HELP)(f)
    return click.option(
        "--mix",
        type=LOCAL_FILE,
        default=None,
        metavar="FILE",
        help="A data recipe: the [mix] table of FILE (a job file, say) gives each source a "
        "token budget, a weight of its total or epochs; the layouts get that mixture, "
        "written to OUT/mix/ (README, Data recipes).",
    )(f)


# What a --job file may switch on that `run` switches off (--no-mix, ...),
# and what each takes with it.
OFF_SWITCHES = {
    "mix": "its data recipe",
    "shuffle": "its --shuffle order",
    "extend": "its base tokenizer (and extend_alphabet)",
}


def off_switches(f):
    """--no-mix, --no-shuffle, --no-extend: a --job file's setting switched
    off for one run (options of a value have no value that means none)."""
    for name, what in reversed(OFF_SWITCHES.items()):
        f = click.option(
            f"--no-{name}",
            f"no_{name}",
            is_flag=True,
            help=f"Switch off a --job file's {name}: {what}.",
        )(f)
    return f


def superword_options(f):
    """--superword-at and --superword-max-words: superword tokens (tokenizer/superword.py)."""
    f = number_option(
        "--superword-max-words",
        4,
        "With --superword-at: at most N words (runs of bytes other than the space) in "
        "a superword token, as SuperBPE's reference trainer (0: no limit).",
        metavar="N",
    )(f)
    return number_option(
        "--superword-at",
        None,
        "Learn superword tokens (SuperBPE): ordinary BPE up to a vocabulary of T "
        "(counted as --vocab-size is), then merges across whitespace up to --vocab-size, on "
        "the corpus split only at digits, punctuation runs and extra spaces "
        "(docs/superword.md). 0: none (switches off a --job file's).",
        metavar="T",
    )(f)
