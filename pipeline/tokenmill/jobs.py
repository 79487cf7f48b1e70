"""Job files: a run described in TOML (jobs/NAME.toml), for scheduled runs.

    inputs = "../sample_data"        # DATA: a folder or a file of shards
    output = "../out-sample-job"     # OUT
    mode = "byte"                    # any `tokenmill run` option, with _ for -
    vocab_size = 4096
    special_tokens = ["<|pad|>"]
    tokenizer = "../tok.json"        # encode only, with this tokenizer
    extend = "../base.json"          # grow this tokenizer (--extend)
    format = ["megatron", "bin"]     # or "megatron,bin", as --format takes it
    shuffle = 7                      # --shuffle 7
    steps = "count"                  # or: count and merge only

    [mix]                            # the data recipe (tokenmill/recipe.py)
    code = "20M"                     # or, before any table: mix = "recipe.toml"

Relative paths are relative to the job file's folder, so a job runs the same
from cron, systemd or a shell anywhere. Options given on the command line
override the job's.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Collection
from dataclasses import dataclass, fields
from pathlib import Path

from tokenmill.config import Config, option_name
from tokenmill.errors import OptionError, TokenmillError
from tokenmill.io.storage import AnyPath, is_remote, location
from tokenmill.plan import BOS_UNREAD, STEPS
from tokenmill.recipe import parse_recipe, read_recipe
from tokenmill.tokenizer.options import refuse_numbered

PATH_KEYS = ("inputs", "output", "tokenizer")
# Paths that the run's Config holds as strings (its manifest records them).
STRING_PATH_KEYS = ("extend",)
CONFIG_KEYS = tuple(f.name for f in fields(Config))
# Read by training only: given with a tokenizer, the run would drop them without a word.
TRAINING_KEYS = (
    "vocab_size",
    "min_count",
    "mode",
    "lowercase",
    "superword_at",
    "superword_max_words",
    "extend_alphabet",
)
# Of those, the ones counting and merging do not read either (mode, lowercase,
# min_count and superword_at do): given to count only, nothing acts on them.
TRAINED_KEYS = ("vocab_size", "special_tokens", "superword_max_words", "extend_alphabet")
# Lists of strings in TOML; `format` may also be one string ("megatron,bin").
LIST_KEYS = ("special_tokens", "format")
# A job's setting that only another of its settings makes read (superword_max_words
# is superword_at's), and which values of that one read it: where the command line
# sets the other to a value that does not, the job's goes with the job's other one,
# rather than fail a run that asked for nothing of it.
GOES_WITH: dict[str, tuple[str, Callable[[object], bool]]] = {
    "superword_max_words": ("superword_at", lambda at: bool(at)),
    "ray_address": ("executor", lambda executor: executor == "ray"),
    "lowercase": ("mode", lambda mode: mode == "char"),
    "pattern": ("mode", lambda mode: mode == "byte"),
    "extend_alphabet": ("extend", lambda base: base is not None),
}


@dataclass(frozen=True)
class Job:
    data: AnyPath
    out: AnyPath
    config: Config
    steps: str = "all"
    tokenizer: AnyPath | None = None
    # Encoding only: the --pattern given, for reading a .tiktoken tokenizer (a
    # preset or a regex); None: the tokenizer's own (the JSON beside the file).
    load_pattern: str | None = None
    job_file: Path | None = None
    # The Config fields whose value is the job file's (none given on the command line).
    from_job: frozenset[str] = frozenset()


def under_job(job_file: Path, value: str) -> Path:
    """A local path of a job file, which is relative to the file's folder."""
    return (job_file.parent / Path(value).expanduser()).resolve()


def load_job(
    path: Path, overridden: Collection[str] = (), note: Callable[[str], None] | None = None
) -> dict:
    """The job file's settings, checked, with paths resolved; the recipe
    (`mix`) only when the command line does not give its own in `overridden`:
    a job's recipe that is not used cannot fail the run. `note` is told of the
    keys of a recipe file (`mix = "FILE"`) that are not read."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise TokenmillError(f"{path}: cannot read job ({e.strerror})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise TokenmillError(f"{path}: not valid TOML ({e})") from None
    except RecursionError:
        raise TokenmillError(f"{path}: not valid TOML (nested too deeply)") from None
    known = set(PATH_KEYS) | set(CONFIG_KEYS) | {"steps"}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise TokenmillError(
            f"{path}: unknown key {unknown[0]!r} (known: {', '.join(sorted(known))})"
        )
    for key in PATH_KEYS:
        if key in raw:
            if not isinstance(raw[key], str):
                raise TokenmillError(f"{path}: {key} must be a path (a string)")
            if not raw[key].strip():  # else the job file's own folder
                raise TokenmillError(f"{path}: {key} is empty (give a path)")
            if is_remote(location(raw[key])):
                raw[key] = location(raw[key])  # a URL is where it says, not under the job
            else:
                raw[key] = under_job(path, raw[key])
    for key in (*STRING_PATH_KEYS, "mix"):
        if isinstance(raw.get(key), str) and not raw[key].strip():
            raise TokenmillError(f"{path}: {key} is empty (give a path)")
    for key in STRING_PATH_KEYS:
        if isinstance(raw.get(key), str) and not is_remote(location(raw[key])):
            raw[key] = str(under_job(path, raw[key]))
    if "mix" in overridden:
        raw.pop("mix", None)
    elif isinstance(raw.get("mix"), str):  # a recipe file, as --mix FILE names one
        instead = f"set them in {path} itself"
        raw["mix"] = read_recipe(under_job(path, raw["mix"]), note, instead)
    elif "mix" in raw:
        raw["mix"] = parse_recipe(raw["mix"], f"{path}: mix")
    defaults = Config()
    for key, value in raw.items():
        if key in CONFIG_KEYS and key not in (*LIST_KEYS, "mix"):
            expected = type(getattr(defaults, key))
            expected = str if key in ("ray_address", "extend") else expected
            expected = int if key in ("shuffle", "superword_at") else expected
            if expected is float and type(value) is int:  # val_fraction = 0, as TOML writes it
                raw[key] = value = float(value)
            if type(value) is not expected:
                raise TokenmillError(
                    f"{path}: {key} must be {expected.__name__}, not {type(value).__name__}"
                )
    for key in LIST_KEYS:
        if key == "format" and isinstance(raw.get(key), str):
            continue  # Config reads "megatron,bin" as --format does
        if key in raw:
            values = raw[key]
            if not isinstance(values, list) or not all(isinstance(t, str) for t in values):
                raise TokenmillError(f"{path}: {key} must be a list of strings")
            raw[key] = tuple(values)
    return raw


def in_job(error: TokenmillError, job_file: Path, keys: list[str]) -> TokenmillError:
    """Config's error about an option the job file set (`keys`), naming the
    file and its key (`j.toml: vocab_size 5 is below ...`): the option it
    names is nowhere on the command line."""
    message = str(error)
    for key in keys:
        option = option_name(key)
        if message.startswith((f"{option} ", f"{option}:")):  # the CLI's spelling
            return TokenmillError(f"{job_file}: {key}{message[len(option) :]}")
        if message.startswith(f"{key}="):  # the library's
            return TokenmillError(f"{job_file}: {key} {message[len(key) + 1 :]}")
    return error


def job_error(job: Job, error: TokenmillError) -> TokenmillError:
    """An error about the run's options found once its Config is made (its
    tokenizers loaded): one about a setting of the job file names the file and
    its key, as a bad job file (exit 1); others stay as they are."""
    if job.job_file is None:
        return error
    return in_job(error, job.job_file, sorted(job.from_job))


def check_job_pattern(job_file: Path | None, pattern: str) -> None:
    """A job's `pattern` for reading its .tiktoken `tokenizer`, refused as
    the job's key (`--pattern` on the command line is a usage error)."""
    from tokenmill.formats.tiktoken import check_pattern

    try:
        check_pattern(pattern)
    except TokenmillError as e:
        message = str(e).removeprefix("pattern=")
        said = f"{job_file}: pattern{'' if message != str(e) else ':'} {message}"
        raise TokenmillError(said) from None


def refuse_unread(
    keys: tuple[str, ...], given: set[str], settings: dict, where: str, why: str, job_why: str
) -> None:
    """Refuse an option of `keys` that the run's steps never read: one given
    on the command line as a usage error naming the option (`why` ends the
    line), one the job file set naming its key (`job_why`)."""
    for key in keys:
        if key in given:
            raise OptionError(f"{option_name(key)} trains: {why}")
        if key in settings:
            raise TokenmillError(f"{where}{key} trains: {job_why}")


def resolve_job(
    job_file: Path | None,
    data: Path | None,
    out: Path | None,
    options: dict,
    given: set[str],
    tokenizer: Path | None = None,
    count_only: bool = False,
    note: Callable[[str], None] | None = None,
    off: Collection[str] = (),
) -> Job:
    """A run from a job file (if any) and command-line values; `options` are the
    command's option values, `given` the names set on the command line, which
    override the job's, `off` the job's settings switched off (--no-mix);
    `note` is told of what the job's files hold and the run does not read."""
    settings = load_job(job_file, {*given, *off}, note) if job_file else {}
    for key in off:
        settings.pop(key, None)
        for follower, (leader, _) in GOES_WITH.items():
            if leader == key:  # --no-extend: the job's extend_alphabet goes with it
                settings.pop(follower, None)
    where = f"{job_file}: " if job_file else ""
    data = data if data is not None else settings.pop("inputs", None)
    out = out if out is not None else settings.pop("output", None)
    if data is None or out is None:
        error = TokenmillError if job_file else OptionError  # a bad job, or a usage error
        raise error(f"{where}give DATA and OUT (or inputs and output in a --job file)")
    if tokenizer is not None and count_only:  # both on the command line: a usage error
        raise OptionError("--tokenizer encodes: not with --count-only")
    tokenizer = tokenizer if tokenizer is not None else settings.pop("tokenizer", None)
    steps = "count" if count_only else settings.pop("steps", None)
    if steps is None:
        steps = "encode" if tokenizer is not None else "all"
    if steps not in STEPS:
        raise TokenmillError(f"{where}steps must be one of {', '.join(STEPS)}, not {steps!r}")
    if steps == "encode" and tokenizer is None:
        raise TokenmillError(f"{where}steps = 'encode' needs a tokenizer (tokenizer = \"FILE\")")
    if steps != "encode" and tokenizer is not None:
        if count_only:  # the job's tokenizer
            raise TokenmillError(f"{where}tokenizer encodes: not with --count-only")
        raise TokenmillError(
            f"{where}a tokenizer goes with encoding only (steps = 'encode'), not steps = '{steps}'"
        )
    if steps == "encode":
        refuse_unread(
            TRAINING_KEYS,
            given,
            settings,
            where,
            "give it without --tokenizer",
            "give it without tokenizer",
        )
    if steps == "count":
        # Whichever says to count only, the command line or the job, a
        # training option from either would be dropped without a word.
        counting = "--count-only" if count_only else "steps = 'count'"
        why = f"not with {counting}" + ("" if count_only else f" of {job_file}")
        refuse_unread(TRAINED_KEYS, given, settings, where, why, f"not with {counting}")
    values = {k: v for k, v in options.items() if k in CONFIG_KEYS}
    overridden = set(given)
    for key, (other, reads) in GOES_WITH.items():
        # Switched off or changed, a job's setting takes what goes with it along
        # (--superword-at 0 its word limit, --executor threads its ray_address).
        if other in given and key not in given and not reads(options.get(other)):
            overridden.add(key)
    from_job = frozenset(k for k in settings if k in CONFIG_KEYS and k not in overridden)
    for key in from_job:
        values[key] = settings[key]
    used = {*given, *from_job}
    load_pattern = None
    if steps == "encode" and "pattern" in used:
        # Not a training option here: how to read the tokenizer (as for `encode`).
        load_pattern = values.pop("pattern")
        used.discard("pattern")
        if "pattern" not in given:  # the job's, named as its key, not as a usage error
            check_job_pattern(job_file, load_pattern)
    try:
        config = Config(**values)
        config.check_given(used)
        if steps == "all":
            refuse_numbered(config.special_tokens)
    except TypeError as e:
        raise TokenmillError(f"{where}{e}") from None
    except TokenmillError as e:
        named = in_job(e, job_file, sorted(from_job)) if job_file else e
        raise OptionError(str(e)) if named is e else named from None
    if steps == "count" and job_file is not None:  # the job's own keys, named as such
        for key in config.token_shard_options():
            if key in from_job:
                raise TokenmillError(f"{where}{key} acts on token shards: not with steps = 'count'")
    if steps == "encode" and "bos" in from_job and config.bos and not config.layouts:
        raise TokenmillError(f"{where}bos {BOS_UNREAD}")
    return Job(
        location(data),
        location(out),
        config,
        steps,
        location(tokenizer) if tokenizer else None,
        load_pattern,
        job_file,
        from_job,
    )
