"""tiktoken's .tiktoken ranks files <-> Tokenizer.

A .tiktoken file lists every token's bytes (base64) and rank, one a line; the
rank is the token's id. It holds neither the pre-tokenization pattern nor the
special tokens: they are given on import (`--pattern`, `--special-token`),
or read from the small JSON that export writes beside the ranks file
(`OUT.json`: tiktoken.Encoding's own arguments `name`, `pat_str`,
`special_tokens`), so that

    tiktoken.Encoding(**json.load(open("tok.tiktoken.json")), mergeable_ranks=...)

rebuilds the encoding.

tiktoken merges, in each pre-token, the adjacent pair whose *concatenation*
has the lowest rank, and maps a pre-token that is itself a token straight to
it. tokenmill (like Hugging Face) merges the adjacent pair of lowest *merge*
rank. Import derives one merge per token as the ecosystem's converters do:
the two parts that BPE over the lower ranks splits the token into
(`bpe(token, max_rank=rank)`), with the token's rank as the merge's priority,
and turns on whole-word lookup; for such merges the two rules give the same
ids (tests/test_interop.py checks it on real text). Export writes the ranks of
a tokenizer for which this holds, and refuses one for which it does not.

Reading the file and deriving the merges run in the native core
(`native/src/vocab.rs`): a 200k-token file loads in a fraction of a second,
where Python took seconds. `reference_ranks` and `reference_merges` are the
same in Python: the definitions the core is tested against
(tests/test_vocab_load.py), and what reads a file the core does not take, to
read it or name the line at fault.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import json
import operator
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, overload

from tokenmill import _native
from tokenmill.errors import OptionError, TokenmillError
from tokenmill.formats import prefetch, regex
from tokenmill.io.files import parse_json, read_bytes
from tokenmill.io.storage import AnyPath, location
from tokenmill.io.writers import atomic_path
from tokenmill.tokenizer import Tokenizer, id_limit
from tokenmill.tokenizer.ids import check_special_ids, show
from tokenmill.tokenizer.options import check_utf8, refuse_bare_name
from tokenmill.tokenizer.pattern_errors import refuse_pattern

if TYPE_CHECKING:
    from upath import UPath

SUFFIX = ".tiktoken"

# The special tokens of tiktoken's public encodings, by pattern preset and
# number of ranks: used when importing such a file without --special-token.
KNOWN_SPECIALS: dict[tuple[str, int], dict[str, int]] = {
    ("gpt2", 50256): {"<|endoftext|>": 50256},
    ("cl100k", 100256): {
        "<|endoftext|>": 100257,
        "<|fim_prefix|>": 100258,
        "<|fim_middle|>": 100259,
        "<|fim_suffix|>": 100260,
        "<|endofprompt|>": 100276,
    },
    ("o200k", 199998): {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
}

# The pattern preset of tiktoken's public encodings, by name: a ranks file so
# named (its stem) needs no pattern, as tiktoken.get_encoding(name) needs none.
KNOWN_PATTERNS = {
    "gpt2": "gpt2",
    "r50k_base": "gpt2",
    "cl100k_base": "cl100k",
    "o200k_base": "o200k",
}


@overload
def sidecar_path(path: Path) -> Path: ...
@overload
def sidecar_path(path: UPath) -> UPath: ...
def sidecar_path(path: AnyPath) -> AnyPath:
    """The JSON beside a ranks file: pattern and special tokens."""
    return path.with_name(path.name + ".json")


# ---- import -------------------------------------------------------------


def read_ranks(path: Path) -> dict[bytes, int]:
    """A .tiktoken file as {token bytes: rank}. Ranks are ids: decimal integers,
    each below `id_limit` of the number of tokens, so that the vocabulary built
    from them stays in proportion to the file (the public gpt2, cl100k and
    o200k files number their tokens 0 to n-1)."""
    return {v: i for i, v in enumerate(read_table(path)) if v is not None}


def read_table(path: Path) -> list[bytes | None]:
    """A .tiktoken file as the bytes of each rank (None where no line has the
    rank): what `read_ranks` checks, read by the native core. A file it does
    not take (not in the canonical form, or at fault) is read by
    `reference_ranks`, which reads it the same way or names the line at fault."""
    path = Path(path)
    data = _read(path)
    try:
        return _native.parse_tiktoken(data)
    except _native.NativeError:
        return _reference_table(path, data)


def _read(path: AnyPath) -> bytes:
    try:
        return path.read_bytes().removeprefix(codecs.BOM_UTF8)
    except OSError as e:
        raise TokenmillError(f"{path}: cannot read ranks file ({e.strerror})") from None


def _reference_table(path: AnyPath, data: bytes) -> list[bytes | None]:
    ranks = reference_ranks(path, data)
    vocab: list[bytes | None] = [None] * (max(ranks.values()) + 1)
    for value, rank in ranks.items():
        vocab[rank] = value
    return vocab


def reference_ranks(path: AnyPath, data: bytes) -> dict[bytes, int]:
    """`read_ranks` in Python, on the file's bytes: the reference the native
    reader agrees with, and what names the line at fault."""
    # tiktoken's base64 decoding skips a byte order mark (not base64): it
    # reads the file as if it had none, and so does this.
    lines = data.removeprefix(codecs.BOM_UTF8).splitlines()
    ranks: dict[bytes, int] = {}
    seen: set[int] = set()
    limit = id_limit(len(lines))  # no more tokens than lines
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            token, digits = line.split()
            if not digits.isdigit():
                raise ValueError(digits)
            value, rank = base64.b64decode(token, validate=True), int(digits)
        except (ValueError, binascii.Error):
            raise TokenmillError(
                f"{path}:{n}: malformed .tiktoken line (want base64 token, space, rank): "
                f"{line[:60]!r}"
            ) from None
        if rank >= limit:
            raise _rank_too_big(path, n, rank, len(lines))
        if not value or value in ranks or rank in seen:
            raise TokenmillError(f"{path}:{n}: empty or repeated token or rank")
        ranks[value] = rank
        seen.add(rank)
    if not ranks:
        raise TokenmillError(f"{path}: no tokens in ranks file")
    top = max(seen)
    if top >= id_limit(len(ranks)):  # blank lines made the first check too lenient
        n = next(n for n, line in enumerate(lines, 1) if line.split()[1:] == [str(top).encode()])
        raise _rank_too_big(path, n, top, len(ranks))
    return ranks


def _rank_too_big(path: AnyPath, n: int, rank: int, tokens: int) -> TokenmillError:
    return TokenmillError(
        f"{path}:{n}: rank {rank} is beyond what a file of {tokens} tokens numbers "
        f"(ranks are ids, below {id_limit(tokens)}: gaps are allowed, but not more unused "
        "ids than tokens)"
    )


def bpe(ranks: dict[bytes, int], token: bytes, max_rank: int | None = None) -> list[bytes]:
    """tiktoken's merging of `token`'s bytes, using only ranks below `max_rank`."""
    parts = [token[i : i + 1] for i in range(len(token))]
    while len(parts) > 1:
        best, at = None, -1
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1])
            if rank is not None and (best is None or rank < best):
                best, at = rank, i
        if best is None or (max_rank is not None and best >= max_rank):
            break
        parts[at : at + 2] = [parts[at] + parts[at + 1]]
    return parts


def reference_merges(ranks: dict[bytes, int]) -> list[tuple[int, int]]:
    """`derive_merges` in Python: the definition the native derivation is
    tested against (tests/test_vocab_load.py), and what derives the merges of
    a dict the native core does not take (ranks repeated or out of proportion)."""
    merges = []
    for token, rank in sorted(ranks.items(), key=lambda item: item[1]):
        if len(token) > 1:
            parts = bpe(ranks, token, max_rank=rank)
            # A part of one byte may be no token (a table that lacks the byte).
            if len(parts) == 2 and parts[0] in ranks and parts[1] in ranks:
                merges.append((ranks[parts[0]], ranks[parts[1]]))
    return merges


def derive_merges(ranks: dict[bytes, int]) -> list[tuple[int, int]]:
    """One merge per multi-byte token, in rank order: the pair of tokens that BPE
    over lower ranks splits it into. Tokens that split otherwise get no merge
    (whole-word lookup still reaches them)."""
    values = ranks.values()
    if values and len(set(values)) == len(ranks) and max(values) < id_limit(len(ranks)):
        try:
            return _native.derive_merges(_table(ranks))[0]
        except (_native.NativeError, TypeError):  # keys that are not bytes
            pass
    return reference_merges(ranks)


def _table(ranks: dict[bytes, int]) -> list[bytes | None]:
    """The bytes of each rank (None where no token has it); ranks unique and
    in proportion to the tokens (the caller checks)."""
    vocab: list[bytes | None] = [None] * (max(ranks.values()) + 1)
    for value, rank in ranks.items():
        vocab[rank] = value
    return vocab


def from_ranks(
    ranks: dict[bytes, int],
    pattern: str,
    special_tokens: dict[str, int] | None = None,
    source: str = "ranks",
) -> Tokenizer:
    top = max(ranks.values())
    if top >= id_limit(len(ranks)):  # read_ranks checks its own; this is for callers' dicts
        raise TokenmillError(f"{source}: rank {top} is beyond what {len(ranks)} tokens number")
    return ranks_tokenizer(_table(ranks), derive_merges(ranks), pattern, special_tokens, source)


def ranks_tokenizer(
    vocab: list[bytes | None],
    merges: list[tuple[int, int]],
    pattern: str,
    special_tokens: dict[str, int] | None,
    source: str,
    tables: tuple[list[int] | None, list[int]] | None = None,
    normalization: str = "",
) -> Tokenizer:
    """The Tokenizer of a ranks table and its derived merges, checked;
    `tables`: (byte ids, merge ids) as the derivation gave them, if it did."""
    singles = sum(1 for v in vocab if v is not None and len(v) == 1)
    check_derived(len(vocab) - vocab.count(None), len(merges), singles == 256, source)
    specials = dict(special_tokens or {})
    check_special_ids(specials, source)
    order = sorted(specials, key=specials.__getitem__)
    tok = Tokenizer(
        mode="byte",
        pattern=pattern,
        merges=merges,
        special_tokens=order,
        vocab=vocab,
        special_ids=[specials[t] for t in order],
        whole_words=True,
        normalization=normalization,
    )
    if tables is not None and tables[0] is not None:
        tok._given_tables(tables[0], tables[1])
    return tok._checked(source)


def check_pattern(pattern: str) -> None:
    """A pattern to read a .tiktoken file with: a preset, or a regex that
    splits byte-mode text (refused in one line: empty, a bare word that is
    no preset, no regex, one that leaves text unmatched)."""
    if not pattern:
        raise TokenmillError("pattern='' is empty: give a preset (gpt2, cl100k, o200k) or a regex")
    check_utf8(pattern, "pattern")  # before the core, which would raise UnicodeEncodeError
    refuse_bare_name(pattern)
    if regex.preset_name(pattern) is None:
        refuse_pattern(pattern)


def load(
    path: AnyPath,
    pattern: str | None = None,
    special_tokens: dict[str, int] | None = None,
) -> Tokenizer:
    """Import a .tiktoken ranks file. `pattern` (a preset name or a regex) and
    `special_tokens` default to the JSON beside the file, if any; without
    either, `pattern` defaults to that of tiktoken's public encoding the file
    is named after (`KNOWN_PATTERNS`), else is required, and special tokens
    default to those of tiktoken's public encoding of that preset and size,
    else none."""
    path = location(path)
    if special_tokens is not None and not isinstance(special_tokens, Mapping):
        # A list's names would need ids, which a ranks file does not hold.
        raise TokenmillError(
            f"{path}: special_tokens= wants a dict of each token's id, "
            f"not a {type(special_tokens).__name__}"
        )
    if pattern is not None and not isinstance(pattern, str):
        # Else read as no pattern at all: "pattern 5: byte mode needs a pattern".
        raise TokenmillError(
            f"{path}: pattern={show(pattern)}: want a str, a preset (gpt2, cl100k, o200k) "
            "or a regex"
        )
    if pattern is not None:
        try:
            check_pattern(pattern)
        except TokenmillError as e:
            # The caller's mistake, not the file's (the JSON beside it is not
            # checked here): the CLI's usage error, before the table is read.
            raise OptionError(f"{path}: {e}") from None
    if special_tokens is not None:
        # A NumPy integer is an id as an int is (as counts are to train_from_word_counts).
        special_tokens = {
            name: i if isinstance(i, bool) or not hasattr(i, "__index__") else operator.index(i)
            for name, i in special_tokens.items()
        }
    side = sidecar_path(path)
    if side.is_file() and (pattern is None or special_tokens is None):
        meta = read_sidecar(side)
        pattern = pattern if pattern is not None else meta["pat_str"]
        if special_tokens is None:
            special_tokens = meta.get("special_tokens", {})
    if pattern is None:
        pattern = KNOWN_PATTERNS.get(path.name.removesuffix(SUFFIX))
    if pattern is None:
        raise TokenmillError(
            f"{path}: a .tiktoken file holds no pre-tokenization pattern: give pattern= "
            "(gpt2, cl100k, o200k or a regex)"
        )
    pattern = regex.preset_name(pattern) or pattern
    data = _read(path)
    try:
        # The table and merges stay in the native core, where the encoder is built.
        table, encoder = prefetch.take(data, pattern)
        if table is None:
            table = _native.Vocabulary.from_tiktoken(data)
    except _native.NativeError:  # not canonical, or at fault: the reference reads it
        vocab = _reference_table(path, data)
        if special_tokens is None:
            n_ranks = len(vocab) - vocab.count(None)
            special_tokens = KNOWN_SPECIALS.get((pattern, n_ranks), {})
        # The reference's ranks are unique and in proportion to the file.
        merges, merge_ids, byte_ids = _native.derive_merges(vocab)
        tables = (byte_ids, merge_ids)
        return ranks_tokenizer(vocab, merges, pattern, special_tokens, str(path), tables)
    check_table_derived(table, path)
    if special_tokens is None:
        special_tokens = KNOWN_SPECIALS.get((pattern, table.n_tokens), {})
    specials = dict(special_tokens)
    check_special_ids(specials, str(path))
    tok = Tokenizer._imported(
        table, pattern=pattern, special_tokens=specials, whole_words=True, encoder=encoder
    )
    return tok._checked(str(path))


def check_derived(n_tokens: int, n_merges: int, every_byte: bool, path: AnyPath | str) -> None:
    """Refuse ranks whose tokens are not each two lower-ranked tokens merged
    (a rank missing below them, say): tiktoken still reaches such a token
    from any two adjacent pieces that make it, tokenmill's merges would not,
    and the ids would differ. Every public vocabulary passes (its tokens are
    BPE's merges)."""
    if not every_byte:
        return  # a file without every byte: its tokens are looked up whole
    unmade = n_tokens - 256 - n_merges
    if unmade:
        raise TokenmillError(
            f"{path}: {unmade} token{'s are' if unmade > 1 else ' is'} not two lower-ranked "
            "tokens merged (a rank missing below them?): tiktoken would reach them by other "
            "pairs, tokenmill's merges would not, and the ids would differ"
        )


def check_table_derived(table: _native.Vocabulary, path: AnyPath | str) -> None:
    """`check_derived` of a table the native core holds, its merges derived."""
    check_derived(table.n_tokens, table.n_merges, table.byte_ids() is not None, path)


def read_sidecar(path: AnyPath) -> dict:
    meta = parse_json(read_bytes(path, "tiktoken settings"), path)
    try:
        if not isinstance(meta, dict) or not isinstance(meta.get("pat_str"), str):
            raise ValueError("no pat_str")
        specials = meta.get("special_tokens", {})
        if not isinstance(specials, dict):
            raise ValueError("special_tokens must map strings to ids")
        check_special_ids(specials)
    except (ValueError, TokenmillError) as e:
        raise TokenmillError(f"{path}: malformed tiktoken settings file ({e})") from None
    return meta


# ---- export -------------------------------------------------------------


def ranks_of(tok: Tokenizer) -> dict[bytes, int]:
    """The ranks (= ids) of `tok`, checked to give tok's ids under tiktoken's rule."""
    if tok.mode != "byte":
        raise TokenmillError("tiktoken holds byte-level vocabularies only: this is char mode")
    if tok.normalization:
        raise TokenmillError(f"tiktoken cannot apply the {tok.normalization} normalization")
    ranks: dict[bytes, int] = {}
    for i, value in enumerate(tok._byte_vocab):
        if value is None:
            continue
        if value in ranks:
            raise TokenmillError(
                f"ids {ranks[value]} and {i} have the same bytes {value!r}: "
                "a .tiktoken file cannot hold both"
            )
        ranks[value] = i
    # tiktoken merges by the rank of the result and maps whole pre-tokens to
    # tokens; that is tok's rule when its merges are the derived ones, in the
    # order of the ids they yield, and (without whole-word lookup) every
    # multi-byte token is made by a merge.
    ids = tok._merge_ids
    if any(a >= b for a, b in zip(ids, ids[1:], strict=False)):
        raise TokenmillError(
            "merge priorities do not follow the ids the merges yield: tiktoken, which "
            "merges by rank (= id), would give other ids"
        )
    derived = derive_merges(ranks)
    if list(tok.merges) != derived:
        pairs = zip(tok.merges, derived, strict=False)
        k = next((k for k, (m, d) in enumerate(pairs) if m != d), None)
        k = min(len(derived), len(tok.merges)) if k is None else k
        raise TokenmillError(
            f"merge {k} is not the one tiktoken's rule implies for the ranks: "
            "tiktoken would give other ids"
        )
    multi_byte = sum(1 for v in ranks if len(v) > 1)
    if not tok.whole_words and len(derived) != multi_byte:
        raise TokenmillError(
            "some tokens are made by no merge: tiktoken would reach them as whole pre-tokens"
        )
    return ranks


def settings(tok: Tokenizer, name: str) -> dict:
    """tiktoken.Encoding's arguments besides mergeable_ranks."""
    return {
        "name": name,
        "pat_str": _native.preset_regex(tok.pattern) or tok.pattern,
        "special_tokens": tok.special_map,
    }


def save(tok: Tokenizer, path: Path) -> list[Path]:
    """Write the ranks file and its JSON beside it; returns both paths."""
    path = Path(path)
    ranks = ranks_of(tok)
    lines = b"".join(
        base64.b64encode(v) + b" " + str(r).encode() + b"\n"
        for v, r in sorted(ranks.items(), key=lambda item: item[1])
    )
    side = sidecar_path(path)
    meta = settings(tok, path.name.removesuffix(SUFFIX))
    with atomic_path(path) as tmp:
        tmp.write_bytes(lines)
    with atomic_path(side) as tmp:
        tmp.write_text(json.dumps(meta, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return [path, side]


def encoding(path: Path):
    """The tiktoken.Encoding of an exported ranks file (needs tiktoken)."""
    import tiktoken

    path = Path(path)
    meta = read_sidecar(sidecar_path(path))
    return tiktoken.Encoding(**meta, mergeable_ranks=read_ranks(path))
