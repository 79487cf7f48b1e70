"""The options of a `run`, parsed once into one `Plan`: which steps, with
which Config, from which DATA into which OUT, and the tokenizers it needs
loaded (the one given to encode with, the base to grow with --extend), each
read once, before any work.

Steps: "all" (count, merge, train, encode), "count" (count and merge: the
daily job that adds new shards' counts to the merged table) or "encode"
(encode with an existing tokenizer).
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenmill.config import Config, option_name
from tokenmill.errors import OptionError, TokenmillError
from tokenmill.io.storage import AnyPath, location
from tokenmill.tokenizer import Tokenizer

STEPS = ("all", "count", "encode")
# --bos of a run that encodes only: the layouts would put <|bos|> in, and there
# is no training to reserve it in.
BOS_UNREAD = (
    "goes with --pack or --format when encoding only (a tokenizer given): <|bos|> goes "
    "into their layouts, and no training reserves it"
)


@dataclass(frozen=True)
class Plan:
    data: AnyPath
    out: AnyPath
    config: Config  # with --extend: the base's mode, pattern and lowercase
    steps: str = "all"
    tokenizer: Tokenizer | None = None  # encode only: the tokenizer given, loaded
    tokenizer_file: AnyPath | None = None  # ... from this file (None: given loaded)
    base: Tokenizer | None = None  # --extend: the tokenizer training grows


def make_plan(
    data: AnyPath | str,
    out: AnyPath | str,
    config: Config,
    *,
    steps: str = "all",
    tokenizer: AnyPath | str | Tokenizer | None = None,
    load_options: dict | None = None,
    extend_pattern: str | None = None,
) -> Plan:
    """Check the options together and load the tokenizers they name:
    `tokenizer` (a file of any format `encode` reads, `load_options` saying
    how to read a .tiktoken one, or a Tokenizer) to encode only with it;
    config.extend, the base to grow (`extend_pattern` reads a .tiktoken file)."""
    from tokenmill.formats import load_any
    from tokenmill.stages.train import load_base

    if steps not in STEPS:
        raise TokenmillError(f"steps must be one of {', '.join(STEPS)}, not {steps!r}")
    if (steps == "encode") != (tokenizer is not None):
        raise TokenmillError("give a tokenizer to encode only, and only then")
    if config.extend and steps == "encode":
        raise OptionError("--extend trains: give it without --tokenizer")
    if steps == "count" and (options := config.token_shard_options()):
        if config.mixes:
            raise OptionError(
                "a mix ([mix], --mix, --shuffle) is made of token shards: not with --count-only"
            )
        shown = "--no-eos" if options[0] == "eos" else option_name(options[0])
        raise OptionError(f"{shown} acts on token shards: not with --count-only")
    if steps == "encode" and config.bos and not config.layouts:
        raise OptionError(f"--bos {BOS_UNREAD}")
    base, config = load_base(config, extend_pattern)
    tokenizer_file = None
    if tokenizer is not None and not isinstance(tokenizer, Tokenizer):
        tokenizer_file = location(tokenizer)
        tokenizer = load_any(tokenizer_file, **(load_options or {}))
    if tokenizer is not None and config.bos and config.layouts:
        from tokenmill.layouts.rows import bos_id

        bos_id(tokenizer)  # refused before any work, not once encode is done
    return Plan(location(data), location(out), config, steps, tokenizer, tokenizer_file, base)
