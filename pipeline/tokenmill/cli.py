"""The `tokenmill` command: one subcommand per stage, plus `run` for all."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import click
from click.core import ParameterSource

from tokenmill import memory
from tokenmill.cli_group import Commands, Failure, TextCommand, UsageLine, not_utf8
from tokenmill.cli_options import (
    BIN_BOS_HELP,
    BIN_VAL_FRACTION_HELP,
    DATA_HELP,
    EXISTING,
    FILE_FORCE_HELP,
    LAYOUT_FORCE_HELP,
    LOCAL_FILE,
    OFF_SWITCHES,
    PACK_BOS_HELP,
    PACK_SHUFFLE_HELP,
    PACK_VAL_FRACTION_HELP,
    RUN_FORCE_HELP,
    SWEEP_DATA_HELP,
    bos_option,
    data_option,
    eos_option,
    extend_option,
    force_option,
    input_options,
    json_option,
    load_options,
    max_sources_option,
    min_count_option,
    mix_options,
    mode_options,
    number_option,
    off_switches,
    output_folder_options,
    output_format_options,
    parse_special_tokens,
    regular_file,
    shuffle_option,
    special_token_option,
    superword_options,
    tiktoken_options,
    tokenizer_option,
    tokenizer_options,
    val_fraction_option,
    vocab_option,
    workers_option,
)
from tokenmill.config import Config
from tokenmill.errors import (
    OptionError,
    TokenmillError,
    WorkerLost,
    cli_message,
    escaped,
    exit_pipe_closed,
    one_line,
    silence,
)
from tokenmill.formats import FORMATS
from tokenmill.stages.results import (
    NothingRead,
    RunResult,
    ShardStageResult,
    StageResult,
    check_read,
    plural,
)

VERIFY_FAILED = 3  # exit status of `verify` when something differs


class Killed(Failure):
    """A worker process was killed: the status of a run killed whole (the README's table)."""

    exit_code = 137


def user_errors(f):
    """Print a user-caused error, or one the system gave (disk full, read-only
    folder, name too long), on one line and exit non-zero."""

    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        try:
            return f(*args, **kwargs)
        except WorkerLost as e:
            raise Killed(str(e)) from None
        except OptionError as e:  # exit 2, naming where help is, as click's own
            ctx = click.get_current_context(silent=True)
            raise UsageLine(escaped(cli_message(str(e))), ctx) from None
        except TokenmillError as e:
            raise click.ClickException(escaped(cli_message(str(e)))) from None
        except OSError as e:
            raise click.ClickException(escaped(os_error_line(e))) from None
        except RecursionError:
            raise click.ClickException("input nested too deeply to read") from None
        except UnicodeEncodeError as e:
            # Text that is not UTF-8 where it must be, said as of an argument (cli_group.py).
            shown = e.object if isinstance(e.object, str) else repr(e.object)
            raise click.ClickException(not_utf8(shown)) from None
        except MemoryError:
            raise click.ClickException("out of memory") from None
        except KeyboardInterrupt:
            from tokenmill.interrupt import exit_interrupted

            exit_interrupted()
        except Exception as e:
            # An object store's refusal that no stage put in words (io/storage.py).
            from tokenmill.io.storage import is_store_error

            if not is_store_error(e):
                raise
            raise click.ClickException(one_line(e)) from None

    return wrapper


def options_config(options: dict) -> Config:
    """The command's Config: a value it refuses, or an option given that
    nothing else given acts on, is a usage error."""
    try:
        config = Config(**options)
        config.check_given(given_options(click.get_current_context(), options))
    except TokenmillError as e:
        raise OptionError(str(e)) from None
    return config


def given_options(ctx: click.Context, options: dict) -> set[str]:
    """The names of `options` given on the command line (not left to their defaults)."""
    return {k for k in options if ctx.get_parameter_source(k) is ParameterSource.COMMANDLINE}


def os_error_line(e: OSError) -> str:
    """An OSError as one line naming the file: `OUT/tokens/a.parquet: No space left on device`."""
    what = e.strerror or one_line(e)
    if e.filename is not None:
        return f"{e.filename}: {what}"
    return what


@contextlib.contextmanager
def output_folder(
    data: Path | None, folder: Path, option: str, force: bool = False, data_option: str = "DATA"
):
    """A stage's own output folder, locked for the command (one run per folder),
    never holding `data` (the command's input, its argument `data_option`), nor
    in or around another output folder, nor someone else's folder unless
    `force`, and rid of the temporaries of killed runs."""
    from tokenmill.io.inputs import check_overlap, require_input
    from tokenmill.io.lock import output_lock
    from tokenmill.io.storage import location
    from tokenmill.io.writers import remove_temporaries
    from tokenmill.stages.layout import (
        check_not_an_out,
        check_out_folder,
        check_writer,
        temporaries_line,
    )

    if data is not None:
        require_input(location(data))
        if data_option == "DATA":
            check_not_an_out(data)
        check_overlap(location(data), location(folder), option, data_option)
    check_out_folder(folder, force, whole=True)
    writes = click.get_current_context().info_name or "?"  # the command: count, encode, ...
    with output_lock(folder) as lock:
        check_writer(folder, lock.previous, writes, force)
        lock.record(data, writes)
        if lock.note:
            tell(lock.note)
        if removed := remove_temporaries(folder):
            tell(escaped(temporaries_line(removed, folder)))
        yield


def output_file(
    target: Path,
    reads: list,
    option: str,
    force: bool = False,
    ours: Callable[[Path], bool] | None = None,
) -> None:
    """A single-file output (merge's table, train's tokenizer, an export):
    never a file or in a folder the command reads, and never an existing
    file tokenmill cannot tell it wrote (`ours`; by default, one with its
    state file beside it) unless `force`. Local paths only: an object
    store's outputs are a run's, under its lock."""
    from tokenmill.io.storage import is_inside, is_remote, location
    from tokenmill.io.writers import remove_leftovers
    from tokenmill.stages.layout import temporaries_line
    from tokenmill.stages.state import state_file

    if is_remote(location(target)):
        return
    for read in reads:
        if read is not None and is_inside(target, location(read)):
            where = "is" if is_inside(location(read), target) else "is inside"
            raise TokenmillError(f"{target}: {option} {where} {read}, which this command reads")
    if removed := remove_leftovers(Path(target)):
        tell(escaped(temporaries_line(removed, Path(target).parent)))
    at = Path(target).resolve()
    if Path(target).is_symlink() and not at.exists():
        # Writing would replace the link, or write where it points: neither is asked.
        raise TokenmillError(f"{target}: {option} is a link to nothing ({at}); remove it first")
    if not at.exists() or force:
        return
    if ours is None and not state_file(at).exists():
        raise TokenmillError(
            f"{target}: {option} exists and tokenmill did not write it; give --force to replace it"
        )
    if ours is not None and not ours(at):
        raise TokenmillError(
            f"{target}: {option} exists and is not what this command writes; remove it first"
        )


def standard_output() -> None:
    """For a command whose output is what it prints: a closed standard output
    (no file descriptor 1) would print nothing and exit 0."""
    if sys.stdout is None:
        raise TokenmillError("standard output is closed: nowhere to print to")


def echo(message=None, nl: bool = True) -> None:
    """What a command prints as its output. A write that fails (a full disk)
    raises an OSError naming no file: said here as standard output's, which
    is the file the user can fix. A reader that closed the
    pipe (`| head -1`) took all it wanted: no error."""
    try:
        click.echo(message, nl=nl)
    except BrokenPipeError:
        exit_pipe_closed()
    except OSError as e:
        silence(1)  # Python flushes stdout at exit, and would fail again
        raise TokenmillError(f"cannot write to standard output: {e.strerror or e}") from None


def tell(line: str) -> None:
    """A status line on stderr. A log that goes away mid-run (`tokenmill run
    ... 2>&1 | head -1`, a full disk under `2> LOG`) does not stop the work,
    which the exit status still reports: the lines after it go nowhere."""
    try:
        click.echo(line, err=True)
    except OSError:
        silence(2)


def echo_summary(result: StageResult) -> None:
    """One line per finished stage: what it did, how much, how fast (a path
    with a line break in it escaped, as errors have it)."""
    tell(escaped(result.describe()))


def echo_not_read(result: ShardStageResult) -> None:
    """One line on the files under DATA that are not inputs, and why."""
    from tokenmill.io.inputs import not_read_line

    if line := not_read_line(len(result.shards), result.not_read):
        tell(escaped(line))


def echo_skips(result: ShardStageResult | RunResult | NothingRead) -> None:
    """Every skipped document or file, one line each, after the summary."""
    for skip in result.skipped:
        n = skip.get("documents", 0)
        at_least = "at least " if skip.get("lower_bound") else ""
        count = f" ({at_least}{plural(n, 'document')})" if n else ""
        tell(escaped(f"skipped: {skip['shard']}: {skip['reason']}{count}"))


@click.group(cls=Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="tokenmill")
def main():
    """tokenmill: turn text corpora into token-ID Parquet shards with BPE.

    Inputs are a file or a folder of shards (*.parquet, *.arrow, *.feather; *.jsonl,
    *.json, *.txt, each optionally .gz, .zst, .bz2 or .xz), or a folder saved by
    Hugging Face datasets, read in sorted path order. DATA and OUT may be URLs
    (s3://bucket/prefix with 'tokenmill[cloud]', or any fsspec filesystem).
    `tokenmill run DATA OUT` does everything.
    """
    memory.bound_retained_memory()


@main.command()
@click.argument("data", type=EXISTING)
@click.argument("counts_dir", type=EXISTING)
@mode_options
@input_options
@force_option()
@click.option(
    "--superword",
    is_flag=True,
    help="Split by the pattern of superword tokens' stage 2 instead of --pattern, in "
    "byte mode (train's --superword-counts, merged first).",
)
@click.pass_context
@user_errors
def count(ctx, data, counts_dir, superword, **options):
    """Pre-tokenize every shard of DATA and write one word-frequency table per
    shard into COUNTS_DIR (columns word, count, first)."""
    from tokenmill.stages.count import run_count

    pattern = None
    if superword:
        # Stage 2's table is byte mode's, split by stage 2's own pattern:
        # another mode or pattern would be dropped without a word.
        if options["mode"] != "byte":
            raise OptionError(
                f"--mode {options['mode']} does not go with --superword: "
                "superword tokens are byte mode's"
            )
        if ctx.get_parameter_source("pattern") is not ParameterSource.DEFAULT:
            raise OptionError(
                f"--pattern {options['pattern']} does not go with --superword: stage 2's words "
                "are split by its own pattern (--pattern splits stage 1's, counted without it)"
            )
    config = options_config(options)
    if superword:
        from tokenmill.tokenizer.superword import PATTERN as pattern
    with output_folder(data, counts_dir, "COUNTS_DIR", config.force):
        summary = run_count(data, counts_dir, config, pattern)
    echo_not_read(summary)
    echo_summary(summary)
    echo_skips(summary)
    check_read(summary)


@main.command()
@click.argument("counts_dir", type=EXISTING)
@click.argument("counts_file", type=EXISTING)
@min_count_option
@force_option(FILE_FORCE_HELP)
@user_errors
def merge(counts_dir, counts_file, min_count, force):
    """Sum the per-shard tables of COUNTS_DIR into COUNTS_FILE, in first-occurrence
    order (lazy and streaming: the tables need not fit in memory)."""
    from tokenmill.stages.merge import run_merge

    output_file(counts_file, [counts_dir], "COUNTS_FILE", force)
    echo_summary(run_merge(counts_dir, counts_file, min_count, force=force))


def extend_pattern(ctx, options: dict) -> str | None:
    """--pattern given with --extend: how to read a .tiktoken base (None: from
    the JSON beside it; other formats carry their own)."""
    if ctx.get_parameter_source("pattern") is ParameterSource.COMMANDLINE:
        return options["pattern"]
    return None


@main.command()
@click.argument("counts_file", type=EXISTING)
@click.argument("tokenizer_file", type=EXISTING)
@mode_options
@vocab_option
@special_token_option()
@force_option(FILE_FORCE_HELP)
@extend_option
@superword_options
@click.option(
    "--superword-counts",
    type=EXISTING,
    default=None,
    metavar="FILE",
    help="With --superword-at: stage 2's word table (`count --superword`, then `merge`).",
)
@click.pass_context
@user_errors
def train(ctx, counts_file, tokenizer_file, superword_counts, **options):
    """Train a BPE tokenizer on the merged word table COUNTS_FILE and save it
    as TOKENIZER_FILE. Use the same --mode/--pattern/--lowercase as for count
    (with --extend: the base's)."""
    from tokenmill.stages.train import check_superword_counts, load_base, run_train
    from tokenmill.tokenizer.options import refuse_numbered, refuse_ranks_name

    refuse_ranks_name(tokenizer_file, "TOKENIZER_FILE")
    if options["extend"] is not None:
        options["extend"] = str(options["extend"])
    config = options_config(options)
    try:
        refuse_numbered(config.special_tokens)
    except TokenmillError as e:
        raise OptionError(str(e)) from None
    check_superword_counts(config, superword_counts)
    extend = options["extend"]  # a file, or a preset's name
    reads = [counts_file, superword_counts, extend if extend and Path(extend).exists() else None]
    output_file(tokenizer_file, reads, "TOKENIZER_FILE", options["force"])
    base, config = load_base(config, extend_pattern(ctx, options))
    echo_summary(run_train(counts_file, tokenizer_file, config, base, superword_counts))


@main.command()
@click.argument("data", type=EXISTING)
@click.argument("tokens_dir", type=EXISTING)
@tokenizer_options(
    "Tokenizer file: tokenmill's (from `tokenmill train`), a Hugging Face tokenizer.json "
    "(byte-level BPE) or a .tiktoken ranks file."
)
@input_options
@force_option()
@eos_option
@user_errors
def encode(data, tokens_dir, tokenizer_file, pattern, special_tokens, **options):
    """Encode every shard of DATA into a token-ID Parquet shard in TOKENS_DIR
    (columns row, ids, n_tokens)."""
    from tokenmill.formats import load_any, prefetch

    prefetch.start(tokenizer_file, pattern)  # while the stage's modules import
    try:
        with memory.start_up():
            from tokenmill.stages.encode import run_encode

            config = options_config(options)
            tok = load_any(tokenizer_file, **load_options(pattern, special_tokens))
    finally:
        prefetch.discard()
    with output_folder(data, tokens_dir, "TOKENS_DIR", config.force):
        summary = run_encode(data, tokens_dir, tok, config)
    echo_not_read(summary)
    echo_summary(summary)
    echo_skips(summary)
    check_read(summary)


@main.command()
@click.argument("data", type=EXISTING, required=False)
@click.argument("out", type=EXISTING, required=False)
@click.option(
    "--job",
    "job_file",
    type=LOCAL_FILE,
    callback=lambda ctx, param, value: regular_file(value, "--job"),
    help="A job file (TOML: inputs, output and any of these options, with _ for -); "
    "options given here override it.",
)
@tokenizer_option(
    "Encode only, with this existing tokenizer (any format `encode` reads); OUT/tokenizer.json "
    "is a copy of it in tokenmill's format, which the commands reading OUT take."
)
@click.option(
    "--count-only",
    is_flag=True,
    help="Count and merge only (new shards counted, old counts kept, merged again).",
)
@mode_options
@input_options
@force_option(RUN_FORCE_HELP)
@vocab_option
@min_count_option
@eos_option
@special_token_option()
@output_format_options
@mix_options
@extend_option
@superword_options
@off_switches
@click.pass_context
@user_errors
def run(ctx, data, out, job_file, tokenizer_file, count_only, **options):
    """Count, merge, train and encode DATA into OUT: counts/, counts.parquet,
    tokenizer.json, tokens/ and manifest.json; then each training layout of
    --pack and --format, in a folder of its own.

    Rerunning keeps every finished output whose input and options are
    unchanged and redoes the rest, so an interrupted run resumes."""
    with memory.start_up():  # the stages' modules, as the CLI's own (entry.py)
        from tokenmill.jobs import job_error, resolve_job
        from tokenmill.plan import make_plan
        from tokenmill.stages.run import run_plan

    if options.get("extend") is not None:
        options["extend"] = str(options["extend"])
    off = {name for name in OFF_SWITCHES if options.pop(f"no_{name}")}
    given = given_options(ctx, options)
    for name in sorted(off & given):  # before --mix's recipe is read: the pair is the error
        raise OptionError(f"--{name} and --no-{name}: give one")
    if options.get("mix") is not None:
        from tokenmill.recipe import read_recipe

        options["mix"] = read_recipe(options["mix"], note=lambda line: tell(escaped(line)))
    job = resolve_job(
        job_file,
        data,
        out,
        options,
        given,
        tokenizer_file,
        count_only,
        note=lambda line: tell(escaped(line)),
        off=off,
    )
    load_options = {}
    if job.tokenizer is not None:
        # An existing tokenizer: --pattern and --special-token NAME=ID tell how
        # to read a .tiktoken file, as for `encode`.
        if job.load_pattern is not None:
            load_options["pattern"] = job.load_pattern
        if job.config.special_tokens:
            load_options["special_tokens"] = job_special_tokens(ctx, job)
    try:
        plan = make_plan(
            job.data,
            job.out,
            job.config,
            steps=job.steps,
            tokenizer=job.tokenizer,
            load_options=load_options,
            extend_pattern=extend_pattern(ctx, options) if job.config.extend else None,
        )
    except OptionError as e:
        raise job_error(job, e) from None
    try:
        summary = run_plan(plan, echo_summary, tell)
    except NothingRead as e:
        echo_skips(e)  # every reason, before the one line that ends the run
        raise
    echo_summary(summary)
    echo_skips(summary)


def job_special_tokens(ctx, job) -> dict[str, int] | None:
    """The special tokens NAME=ID a run that encodes only reads a .tiktoken
    tokenizer with: refused as --special-token's value, or as the job file's
    key that set them."""
    param = next(p for p in ctx.command.params if p.name == "special_tokens")
    try:
        return parse_special_tokens(ctx, param, job.config.special_tokens)
    except click.BadParameter as e:
        if "special_tokens" not in job.from_job:
            raise
        raise TokenmillError(f"{job.job_file}: special_tokens: {e.message}") from None


@main.command()
@click.argument("out", type=EXISTING)
@user_errors
def verify(out):
    """Re-hash the inputs and outputs of OUT against OUT/manifest.json and say
    what differs. Exit status 0 if nothing does, 3 if something does."""
    from tokenmill.stages.manifest import verify as verify_folder

    checked, differences = verify_folder(out)
    for line in differences:
        tell(escaped(f"verify: {line}"))
    if differences:
        # Not "N of M files": an extra file, or the numbers, are none of the files checked.
        differ = plural(len(differences), "difference")
        tell(f"verify: {differ} from the manifest ({plural(checked, 'file')} checked)")
        sys.exit(VERIFY_FAILED)
    tell(f"verify: {plural(checked, 'file')} match{'es' if checked == 1 else ''} the manifest")


@main.command()
@click.argument("out", type=EXISTING)
@data_option(DATA_HELP)
@number_option(
    "--decode",
    100,
    "Decode N documents, spread evenly over the token shards (the same ones every "
    "time), and compare each with its text in DATA (0: none).",
    metavar="N",
)
@json_option
@user_errors
def check(out, data, decode, as_json):
    """Lint OUT before training on it: read every layout back (with its trainer's own
    reader when installed) and compare all its documents with the token shards; check
    the ids' dtype holds the vocabulary, <|bos|> and <|endoftext|> are where the run put
    them, the tokenizer sha256 and pattern OUT records are OUT/tokenizer.json's, and a
    sample of documents decodes to its text in DATA. Prints a line per layout, then one
    per problem; exit status 0 if there is none, 1 if there are."""
    from tokenmill.stages.check import run_check

    result = run_check(out, data=data, decode=decode)
    if as_json:
        echo(json.dumps(result.to_json(), indent=2, ensure_ascii=False))
    else:
        for line in [*result.lines(), *(f"problem: {p}" for p in result.problems)]:
            echo(line)
    echo_summary(result)
    if result.problems:
        sys.exit(1)


@main.command()
@tokenizer_options(
    "Tokenizer file (any format `encode` reads; a .tiktoken file needs no --pattern to "
    "decode). With --shard, default: the tokenizer.json of the `run` output folder holding "
    "the shard; either way it must be the one the shard was encoded with (its sha256 is in "
    "the shard's metadata).",
    required=False,
)
@click.option("--shard", type=EXISTING, help="A token shard written by encode.")
@click.option("--row", type=int, help="With --shard: the row (document) to decode.")
@click.argument("ids", nargs=-1, type=int)
@user_errors
def decode(tokenizer_file, pattern, special_tokens, shard, row, ids):
    """Print the text of token IDS, or of the document at row ROW of its input
    shard (the token --shard's `row` column: a skipped document leaves a gap).
    Without IDS, the ids are read from standard input, separated by spaces,
    commas or newlines, as `tokenize` prints them: `tokenmill tokenize TEXT
    --tokenizer T | tokenmill decode --tokenizer T` prints TEXT. The text is
    written as UTF-8, with no newline added; for --shard, without the
    <|endoftext|> encode appended, so that it equals the document. Ids whose
    bytes are not whole UTF-8 characters (a character split between ids given
    apart) are written as U+FFFD, the replacement character."""
    standard_output()
    from tokenmill.io.files import parquet_json_metadata
    from tokenmill.io.metadata import STATE
    from tokenmill.stages.tokens import open_token_shard, read_row, read_tokenizer, shard_tokenizer
    from tokenmill.tokenizer import ENDOFTEXT

    options = load_options(pattern, special_tokens)
    if row is not None and shard is None:  # else ignored, and IDS decoded
        raise OptionError("--row needs --shard")
    if shard is not None:
        if row is None:
            raise OptionError("--shard needs --row")
        if ids:  # the row's ids are decoded; these would be dropped
            raise OptionError(
                f"give IDS or --shard and --row, not both (--row {row} takes one row; "
                f"{' '.join(map(str, ids))} given too)"
            )
        token_shard = open_token_shard(shard)
        tok = shard_tokenizer(token_shard, tokenizer_file, **options)
        ids = read_row(token_shard, row)
        # Encode appends <|endoftext|> unless the shard records --no-eos; ordinary
        # encoding of the text never yields a special token's id.
        state = parquet_json_metadata(token_shard.path, STATE)
        key = state.get("key") if isinstance(state, dict) else None
        eos = key.get("eos", True) if isinstance(key, dict) else True
        if eos and ids and ENDOFTEXT in tok.special_tokens and ids[-1] == tok.eos_id:
            ids = ids[:-1]
    elif tokenizer_file is None:
        raise OptionError("give --tokenizer (or --shard and --row)")
    else:
        tok = read_tokenizer(tokenizer_file, **options)
        if not ids:
            ids = stdin_ids()
    echo(tok.decode(ids).encode("utf-8"), nl=False)  # bytes: written as they are


def stdin_ids() -> list[int]:
    """decode's IDS from standard input, as tokenize prints them. Empty input
    is refused, as no input: decode would print nothing and succeed; only
    whitespace (tokenize's line for an empty TEXT) is no ids."""
    stdin = stdin_stream("IDS")
    if stdin.isatty():  # else decode would wait for ids typed in
        raise OptionError(
            "give IDS, or pipe them in: tokenmill tokenize TEXT --tokenizer T | "
            "tokenmill decode --tokenizer T"
        )
    data = stdin.read()
    if not data:
        raise TokenmillError("standard input is empty: give IDS, or the ids tokenize prints")
    ids = []
    for word in utf8_text(data, "standard input").replace(",", " ").split():
        try:
            ids.append(int(word))
        except ValueError:
            raise TokenmillError(f"standard input: {word!r} is not a token id") from None
    return ids


def stdin_stream(argument: str) -> BinaryIO:
    if sys.stdin is None:  # no file descriptor 0
        raise TokenmillError(f"standard input is closed; give {argument}")
    return sys.stdin.buffer


@main.command(cls=TextCommand)
@tokenizer_options("Tokenizer file (any format `encode` reads).")
@click.option(
    "--pieces",
    is_flag=True,
    help="Show each token's text instead of the ids: on a terminal the text with each "
    "token on a background of its own colour, control characters escaped (\\x1b), else "
    "(or with NO_COLOR set, or TERM=dumb) one token a line (id, then its text as a JSON "
    "string). Bytes of a split character "
    "show as <0xe6>, char mode's end of word as </w>, a token's own < before /w> or 0x "
    "as <0x3c>.",
)
@click.argument("text", required=False)
@user_errors
def tokenize(tokenizer_file, pattern, special_tokens, pieces, text):
    """Print the token ids of TEXT (or of standard input when TEXT is - or
    missing), for quick checks of a tokenizer. TEXT and standard input must be
    UTF-8 text, as the documents `encode` reads: other bytes are an error."""
    from tokenmill.formats import load_any

    standard_output()
    tok = load_any(tokenizer_file, **load_options(pattern, special_tokens))
    if text is None or text == "-":
        text = utf8_text(stdin_stream("TEXT").read(), "standard input")
    else:
        # Python hands a non-UTF-8 argument over with its bytes as surrogate
        # escapes, which the encoder would silently turn into U+FFFD.
        try:
            text = utf8_text(text.encode("utf-8", "surrogateescape"), "TEXT")
        except UnicodeEncodeError:
            raise TokenmillError("TEXT is not UTF-8 text") from None
    ids = tok.encode_ordinary(text)
    if not pieces:
        echo(" ".join(map(str, ids)))
        return
    from tokenmill.pieces import token_pieces

    texts = token_pieces(tok, ids)
    if coloured():
        for k, piece in enumerate(texts):
            # Escaped: a token's own ESC or CR would recolour or rewrite the terminal.
            shown = escaped(piece)
            echo(click.style(shown, bg=PIECE_COLOURS[k % len(PIECE_COLOURS)]), nl=False)
        echo()
        click.echo(f"{plural(len(ids), 'token')}", err=True)
    else:
        for i, piece in zip(ids, texts, strict=True):
            # JSON escapes the C0 controls but leaves DEL as it is.
            shown = json.dumps(piece, ensure_ascii=False).replace("\x7f", "\\u007f")
            echo(f"{i}\t{shown}")


def coloured() -> bool:
    """Whether `tokenize --pieces` colours its tokens: on a terminal, unless
    NO_COLOR is set, to anything but "" (https://no-color.org), or TERM is dumb (one
    that shows escape codes as they are)."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return sys.stdout.isatty()


def utf8_text(data: bytes, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TokenmillError(
            f"{what} is not UTF-8 text: byte 0x{data[e.start]:02x} at offset {e.start}"
        ) from None


PIECE_COLOURS = ("bright_blue", "bright_green", "bright_magenta", "bright_yellow", "bright_cyan")


@main.command()
@click.argument("tokens_dir", type=EXISTING)
@click.argument("packed_dir", type=EXISTING)
@click.option(
    "--seq-len",
    type=click.IntRange(min=1, max=2**32 - 1),
    required=True,
    help="Ids per row; only the very last row of the last shard may be shorter.",
)
@bos_option(PACK_BOS_HELP)
@tokenizer_option(
    "The tokenizer the shards were encoded with. Default: tokenizer.json beside TOKENS_DIR."
)
@val_fraction_option(PACK_VAL_FRACTION_HELP)
@shuffle_option(PACK_SHUFFLE_HELP)
@workers_option
@force_option(LAYOUT_FORCE_HELP)
@user_errors
def pack(
    tokens_dir, packed_dir, seq_len, bos, tokenizer_file, val_fraction, shuffle, workers, force
):
    """Cut the token shards of TOKENS_DIR into fixed-length training sequences in
    PACKED_DIR (one packed shard per token shard; columns sequence, ids, n_tokens,
    documents). Documents are concatenated in input order, each ending with
    <|endoftext|>; what is left after a shard's last full row starts the next
    shard's first row. With --val-fraction (the one encode or the mix split
    TOKENS_DIR by, when either did), train and validation documents are packed
    apart, into PACKED_DIR/train and PACKED_DIR/val."""
    from tokenmill.config import check_workers, default_workers
    from tokenmill.layouts import layout
    from tokenmill.stages.layout import check_layout_folder
    from tokenmill.stages.pack import run_pack
    from tokenmill.stages.split import split_token_shards
    from tokenmill.stages.tokens import shard_tokenizer

    workers = check_workers(workers or default_workers(), "threads")
    # Refused before any write: another split than encode's, no tokenizer.
    shards = split_token_shards(tokens_dir, val_fraction)
    tok = shard_tokenizer(shards[0], tokenizer_file)
    check_layout_folder(layout("packed"), packed_dir)
    with output_folder(tokens_dir, packed_dir, "PACKED_DIR", force, "TOKENS_DIR"):
        summary = run_pack(
            tokens_dir,
            packed_dir,
            seq_len,
            bos=bos,
            tokenizer=tok,
            val_fraction=val_fraction,
            shuffle=shuffle,
            workers=workers,
            shards=shards,
        )
    echo_summary(summary)


@main.command("bin")
@click.argument("tokens_dir", type=EXISTING)
@click.argument("bin_dir", type=EXISTING)
@bos_option(BIN_BOS_HELP)
@tokenizer_option(
    "With --bos: the tokenizer the shards were encoded with. Default: tokenizer.json "
    "beside TOKENS_DIR."
)
@workers_option
@val_fraction_option(BIN_VAL_FRACTION_HELP)
@force_option(LAYOUT_FORCE_HELP)
@user_errors
def bin_command(tokens_dir, bin_dir, bos, tokenizer_file, workers, val_fraction, force):
    """Write every token shard of TOKENS_DIR as a flat array of ids in BIN_DIR,
    nanoGPT style: <shard>.bin (uint16, or uint32 above 65536 ids, little-endian),
    <shard>.idx.npy (document offsets) and index.json; with --val-fraction (the
    one encode or the mix split TOKENS_DIR by, when either did), all shards as
    train.bin and val.bin (with train.idx.npy, val.idx.npy)."""
    from tokenmill.config import check_workers, default_workers
    from tokenmill.layouts import layout
    from tokenmill.layouts.bin import bin_tokenizer, run_bin
    from tokenmill.stages.layout import check_layout_folder
    from tokenmill.stages.split import split_token_shards

    workers = check_workers(workers or default_workers(), "threads")
    # Refused before any write: another split than encode's, another tokenizer.
    shards = split_token_shards(tokens_dir, val_fraction)
    tok = bin_tokenizer(shards, tokenizer_file) if bos or tokenizer_file else None
    check_layout_folder(layout("bin"), bin_dir)
    with output_folder(tokens_dir, bin_dir, "BIN_DIR", force, "TOKENS_DIR"):
        summary = run_bin(
            tokens_dir,
            bin_dir,
            workers=workers,
            val_fraction=val_fraction,
            bos=bos,
            tokenizer=tok,
            shards=shards,
        )
    echo_summary(summary)


@main.command()
@click.argument("tokenizer_file", type=EXISTING)
@click.argument("out", type=EXISTING)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    required=True,
    help="hf: a Hugging Face tokenizer.json (tokenizers, transformers); tiktoken: a "
    ".tiktoken ranks file OUT plus OUT.json with the pattern and special tokens "
    "(byte mode only); transformers: a folder OUT that AutoTokenizer.from_pretrained "
    "loads (tokenizer.json, tokenizer_config.json, special_tokens_map.json; eos_token "
    "<|endoftext|>, bos_token <|bos|> when the tokenizer has it); OUT must be new, "
    "empty or an earlier such export, which is replaced.",
)
@tiktoken_options
@user_errors
def export(tokenizer_file, out, fmt, pattern, special_tokens):
    """Write TOKENIZER_FILE (any format `encode` reads) as OUT in another tool's
    format, giving exactly the same ids."""
    from tokenmill.formats import export as export_tokenizer
    from tokenmill.formats import export_targets, is_export, load_any
    from tokenmill.formats.tiktoken import sidecar_path

    if fmt != "transformers" and Path(out).is_dir():  # `.` too, which names no file
        raise TokenmillError(f"{out}: a folder, where export --format {fmt} writes a file")
    # A ranks file is read with the settings beside it.
    reads = [tokenizer_file, sidecar_path(tokenizer_file)]
    for target in export_targets(out, fmt):
        output_file(target, reads, "OUT", ours=lambda p, fmt=fmt: is_export(p, fmt))
    tok = load_any(tokenizer_file, **load_options(pattern, special_tokens))
    for path in export_tokenizer(tok, out, fmt):
        tell(f"export: {fmt}, vocabulary {tok.vocab_size} -> {path}")


@main.command()
@click.argument("out", type=EXISTING)
@output_folder_options
@max_sources_option
@json_option
@user_errors
def stats(out, data, tokenizer_file, source_column, max_sources, as_json):
    """Print what the tokenizer did to the corpus of a `run` output folder OUT: per
    source and per shard documents, bytes, tokens and bytes per token (bytes / tokens
    that are not special); vocabulary utilization; the most frequent tokens as text;
    the ids never used."""
    import json

    from tokenmill.stages.stats import format_stats, run_stats

    standard_output()

    result = run_stats(
        out, data=data, tokenizer=tokenizer_file, source_column=source_column or None
    )
    s = result.stats
    echo(json.dumps(s, indent=2, ensure_ascii=False) if as_json else format_stats(s, max_sources))
    echo_summary(result)


@main.command()
@click.argument("out", type=EXISTING)
@output_folder_options
@number_option(
    "--samples", 5, "Sample documents shown token by token (the first long one of each shard)."
)
@user_errors
def report(out, data, tokenizer_file, source_column, samples):
    """Write OUT/report.html: a self-contained page (no network needed) with bytes per
    token per shard and per source, the token length distribution, merge frequency
    against merge rank, and sample documents colour-coded token by token."""
    from tokenmill.stages.report import run_report

    echo_summary(
        run_report(
            out,
            data=data,
            tokenizer=tokenizer_file,
            source_column=source_column or None,
            samples=samples,
        )
    )


def parse_sizes(ctx, param, value: str | None) -> list[int] | None:
    if value is None:
        return None
    try:
        sizes = [int(v) for v in value.replace(" ", "").split(",") if v]
    except ValueError:
        raise click.BadParameter(f"{value!r}: want sizes separated by commas") from None
    if not sizes or min(sizes) < 1:
        raise click.BadParameter(f"{value!r}: want positive sizes separated by commas")
    return sizes


@main.command()
@click.argument("out", type=EXISTING)
@click.option(
    "--vocab-sizes",
    callback=parse_sizes,
    metavar="N,N,...",
    help="Vocabulary sizes up to the trained one; of a run with --extend, from its base's "
    "size (no training gives less). Default: the powers of two below the trained size, and "
    "the trained size; from the base's size, or superword tokens' transition point.",
)
@click.option(
    "--sample",
    type=click.IntRange(min=1),
    default=None,
    help="Encode this many documents (the same ones every time: fixed by a hash of shard "
    "and row), not all.",
)
@data_option(SWEEP_DATA_HELP)
@click.option(
    "--source-column",
    default="source",
    show_default=True,
    help="Column or JSON field naming each document's source; documents without one "
    "count under their shard. '' counts per shard only.",
)
@click.option(
    "--held-out",
    type=EXISTING,
    default=None,
    metavar="DIR",
    help="Encode the documents of these inputs (any DATA tokenmill reads) instead of the "
    "run's: text the tokenizer was not trained on. A document that does not read fails "
    "the sweep.",
)
@max_sources_option
@json_option
@user_errors
def sweep(out, vocab_sizes, sample, data, source_column, held_out, max_sources, as_json):
    """Bytes per token per source and overall for smaller vocabularies of OUT's
    tokenizer: training to a smaller size learns exactly the first merges, so each
    size is OUT's merges cut to it, nothing trained again. With superword tokens
    (run --superword-at), from the transition point up, beside ordinary BPE of the
    same sizes. Writes OUT/sweep.json, which `report` plots."""
    import json

    from tokenmill.stages.sweep import format_sweep, run_sweep

    result = run_sweep(
        out,
        sizes=vocab_sizes,
        sample=sample,
        data=data,
        source_column=source_column or None,
        held_out=held_out,
    )
    d = result.to_json()
    echo(json.dumps(d, indent=2, ensure_ascii=False) if as_json else format_sweep(d, max_sources))
    echo_summary(result)
