"""A data recipe: how many tokens of each source a run's mixture takes.

The `[mix]` table of a job file (or of the file `--mix FILE` names):

    [mix]
    total = "50M"                    # optional: what the weights are shares of
    web = 0.6                        # a weight: a share of total (a float, 0 to 1)
    code = "12M"                     # a token budget ("12M", "1.5B", 20_000_000)
    books = { epochs = 2.0 }         # epochs: every document twice
    wiki = { tokens = "3M", files = "extra/wiki-*.jsonl" }
    column = "source"                # optional: sources are the values of this column

The three forms cannot be mistaken for one another: an integer or a string
is a number of tokens, a bare float a weight (so it needs `total`), and
epochs are written as such. The long form `{ tokens = ..., weight = ...,
epochs = ... }` takes one of them, and `files`, a glob of input names
(relative to DATA, as --glob), says which inputs the source is; by default
a source is the inputs under the folder of its name (`code/...`, or a
folder path: `"web/sub"`) or the input whose path before its name's first
dot is it (`web.jsonl`).
With `column`, a document's source is its value in that column or field
of its input (a name, or a dotted path as --text-column takes), unless a
`files` glob takes its input; one without a value keeps its input's.

Tokens are counted as the token shards hold them, each document's
<|endoftext|> included. What the budgets mean (whole epochs, then a
deterministic subset) is stages/mix.py's.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tokenmill.errors import TokenmillError
from tokenmill.io.storage import regular_file

FORMS = ("tokens", "weight", "epochs")
# Epochs of a source are fewer than this: each is a pass over its documents in
# the mix, so a budget a thousandfold off (a "1T" meant as "1M") would run for
# days. stages/budgets.py holds a budget in tokens or a weight to it too.
MAX_EPOCHS = 10_000
RESERVED = ("total", "column")
# Powers of 1000, as token counts are quoted ("20B" tokens): G is B.
SCALE = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "G": 10**9, "T": 10**12}
TOKENS = re.compile(r"(\d[\d_]*(?:\.\d+)?)\s*([KMBGT]?)", re.IGNORECASE)
MAX_TOKENS = 2**63 - 1


@dataclass(frozen=True)
class Share:
    """One source of the recipe and what of it the mixture takes: one of
    `tokens` (a budget), `weight` (a share of the recipe's total) or
    `epochs`."""

    name: str
    tokens: int | None = None
    weight: float | None = None
    epochs: float | None = None
    files: str | None = None  # a glob of input names; None: the folder or file `name`

    def asked(self) -> dict:
        """The form as given, for the manifest and stats."""
        form = next(k for k in FORMS if getattr(self, k) is not None)
        return {form: getattr(self, form)}

    def asks_nothing(self) -> bool:
        """Whether it asks for none of the source (0 tokens, weight or epochs)."""
        return not next(iter(self.asked().values()))

    def budget(self, total: int | None, available: int) -> int:
        """The tokens asked for, given the recipe's total and the source's tokens."""
        if self.tokens is not None:
            return self.tokens
        if self.weight is not None:
            assert total is not None  # parse_recipe: a weight needs a total
            return round(self.weight * total)
        assert self.epochs is not None
        return round(self.epochs * available)


@dataclass(frozen=True)
class Recipe:
    """The sources a mixture takes, in the recipe's order; none: every source
    of the corpus once (--shuffle without a recipe)."""

    sources: tuple[Share, ...] = ()
    total: int | None = None
    column: str | None = None  # the per-document source column; None: by input
    # --shuffle without a recipe: a source held out whole is no budget unmet
    implied: bool = False
    # Where it was given (`job.toml: mix`), to name in errors found once encoded.
    where: str = field(default="mix", compare=False)

    def to_dict(self) -> dict:
        d: dict = {"total": self.total} if self.total is not None else {}
        if self.column is not None:
            d["column"] = self.column
        for s in self.sources:
            d[s.name] = {**s.asked(), **({"files": s.files} if s.files else {})}
        return d


def parse_tokens(value: object, where: str) -> int:
    """A number of tokens: an integer, or a string such as "20M", "1.5B", "20_000"."""
    if isinstance(value, int) and not isinstance(value, bool):
        n = value
    elif isinstance(value, str) and (m := TOKENS.fullmatch(value.strip())):
        number, unit = m.groups()
        if "." in number and not unit:  # "1.5": epochs or a weight, as likely as tokens
            raise TokenmillError(
                f"{where}: {value!r} is not a whole number of tokens "
                "(for epochs: { epochs = 1.5 }; for a weight of total: 0.3, unquoted)"
            )
        n = round(float(number.replace("_", "")) * SCALE[unit.upper()])
    else:
        raise TokenmillError(
            f'{where}: {value!r} is not a number of tokens (an integer, or "20M", "1.5B")'
        )
    if not 0 <= n <= MAX_TOKENS:
        raise TokenmillError(f"{where}: {value!r} tokens is out of range: 0 to {MAX_TOKENS}")
    return n


def parse_share(name: str, value: object, where: str) -> Share:
    at = f"{where}.{name}"
    if not name.strip("/. ") and not (isinstance(value, dict) and "files" in value):
        # Without files, a name is a folder or a file's stem under DATA: "" or
        # "." would be DATA itself, which no name but the folder's can say.
        raise TokenmillError(
            f"{where}: a source named {name!r} names no folder or file under DATA: name it "
            'after one (code = "20M"), or give it files = "GLOB"'
        )
    if isinstance(value, float):
        return Share(name, weight=weight(value, at))
    if isinstance(value, int | str) and not isinstance(value, bool):
        return Share(name, tokens=parse_tokens(value, at))
    if not isinstance(value, dict):
        raise TokenmillError(
            f'{at}: give a token budget ("20M"), a weight of total (0.3) '
            "or { epochs = 2.0 }, not " + type(value).__name__
        )
    unknown = sorted(set(value) - {*FORMS, "files"})
    if unknown:
        known = ", ".join(sorted([*FORMS, "files"]))
        raise TokenmillError(f"{at}: unknown key {unknown[0]!r} (known: {known})")
    forms = [k for k in FORMS if k in value]
    if len(forms) != 1:
        raise TokenmillError(f"{at}: give exactly one of tokens, weight, epochs")
    files = value.get("files")
    if files is not None and (not isinstance(files, str) or not files):
        raise TokenmillError(f"{at}.files: a glob of input names (a string), such as 'code/**'")
    form, given = forms[0], value[forms[0]]
    if form == "tokens":
        return Share(name, tokens=parse_tokens(given, f"{at}.tokens"), files=files)
    if form == "weight":
        if not isinstance(given, float | int) or isinstance(given, bool):
            raise TokenmillError(f"{at}.weight: a share of total (0 to 1), not {given!r}")
        return Share(name, weight=weight(float(given), f"{at}.weight"), files=files)
    is_number = isinstance(given, float | int) and not isinstance(given, bool)
    # At most MAX_EPOCHS - 1: round(epochs * available) tokens of 9999.9 epochs
    # may come to MAX_EPOCHS whole ones, which the mix would refuse after encode.
    if not is_number or not 0 <= given <= MAX_EPOCHS - 1:
        raise TokenmillError(
            f"{at}.epochs: a number of epochs (2.0, 0.5; at most {MAX_EPOCHS - 1:,}), not {given!r}"
        )
    return Share(name, epochs=float(given), files=files)


def weight(value: float, at: str) -> float:
    if not 0 <= value <= 1:
        raise TokenmillError(
            f"{at}: {value!r} is a weight, a share of total (0 to 1); for epochs write "
            f'{{ epochs = {value!r} }}, for a token budget an integer or a string ("20M")'
        )
    return value


def parse_recipe(table: object, where: str = "mix") -> Recipe:
    """The Recipe of a `[mix]` table; errors are one line naming `where` and the key."""
    if isinstance(table, Recipe):
        return table
    if not isinstance(table, dict):
        raise TokenmillError(f"{where}: a table of sources ([mix]), not {type(table).__name__}")
    total = parse_tokens(table["total"], f"{where}.total") if "total" in table else None
    column = table.get("column")
    if column is not None and (not isinstance(column, str) or not column.strip(".")):
        raise TokenmillError(
            f'{where}.column: the name of a column or field (a string), such as "source"'
        )
    sources = tuple(parse_share(k, v, where) for k, v in table.items() if k not in RESERVED)
    if not sources:
        raise TokenmillError(f'{where}: no source (give e.g. code = "20M")')
    weights = [s for s in sources if s.weight is not None]
    if weights and total is None:
        raise TokenmillError(
            f"{where}.{weights[0].name}: {weights[0].weight!r} is a weight of total: give "
            f'total = "50B" in the table, or a token budget ("20M")'
        )
    if total is not None and not weights:
        raise TokenmillError(f"{where}.total: no source is a weight of it (such as code = 0.3)")
    if sum(s.weight for s in weights if s.weight is not None) > 1 + 1e-9:
        raise TokenmillError(f"{where}: the weights add up to more than 1 (all of total)")
    return Recipe(sources, total, column, where=where)


def read_recipe(
    path: Path,
    note: Callable[[str], None] | None = None,
    instead: str = "give them as options, such as --shuffle, or run the file with --job",
) -> Recipe:
    """The `[mix]` table of a TOML file (a job file, or one holding the recipe
    only); `note` is told, in one line, of the file's other keys, which a job
    file's run would use and this reader does not (`shuffle = 7`), and what to
    do `instead`."""
    regular_file(path)
    try:
        raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise TokenmillError(f"{path}: cannot read recipe ({e.strerror})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise TokenmillError(f"{path}: not valid TOML ({e})") from None
    if "mix" not in raw:
        raise TokenmillError(f"{path}: no [mix] table (the recipe)")
    recipe = parse_recipe(raw["mix"], f"{path}: mix")
    unused = [key for key in raw if key != "mix"]
    if note is not None and unused:
        note(f"note: {path}: only its [mix] is read, not {', '.join(unused)} ({instead})")
    return recipe
