"""A tokenmill vocabulary as the peers' objects, the cl100k pattern as each
regex engine needs it, and the public vocabularies shipped in vocabularies/."""

from __future__ import annotations

import base64
from functools import cache
from pathlib import Path

from tokenmill import _native
from tokenmill.tokenizer import Tokenizer

VOCABULARIES = Path(__file__).resolve().parents[1] / "vocabularies"
# OpenAI's r50k_base.tiktoken, the GPT-2 ranks (vocabularies/README.md: source, sha256).
GPT2_RANKS = VOCABULARIES / "gpt2.tiktoken"
# OpenAI's cl100k_base and o200k_base ranks (vocabularies/README.md: source, sha256).
CL100K_RANKS = VOCABULARIES / "cl100k_base.tiktoken"
O200K_RANKS = VOCABULARIES / "o200k_base.tiktoken"
# Real model vocabularies, by name: (ranks file in vocabularies/, tokenmill's pattern preset).
REAL = {
    "o200k_base": ("o200k_base.tiktoken", "o200k"),
    "cl100k_base": ("cl100k_base.tiktoken", "cl100k"),
}

CL100K = _native.preset_regex("cl100k")  # tiktoken's cl100k_base pat_str, verbatim

# Oniguruma (tokenizers' regex engine) reads `{1,3}+` as "repeat {1,3} one or
# more times", not as possessive: "1234567" would be one piece instead of
# 123|456|7. Greedy `{1,3}` is equivalent here (nothing follows it in its branch).
CL100K_ONIG = CL100K.replace(r"\p{N}{1,3}+", r"\p{N}{1,3}")


@cache
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte-to-character map, the alphabet of tokenizers' ByteLevel."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars = list(printable)
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(printable, chars, strict=True)}


def merge_values(tok: Tokenizer) -> list[bytes]:
    """The bytes of every non-special id (256 bytes, then one per merge)."""
    return tok.token_values[: tok._base_size + len(tok.merges)]


def duplicate_values(tok: Tokenizer) -> int:
    """Ids whose bytes another id already has (they would collide in a bytes-keyed vocab)."""
    values = merge_values(tok)
    return len(values) - len(set(values))


def tiktoken_encoding(tokenizer_file: Path):
    import tiktoken

    tok = Tokenizer.load(tokenizer_file)
    ranks: dict[bytes, int] = {}
    for i, value in enumerate(merge_values(tok)):
        ranks.setdefault(value, i)
    return tiktoken.Encoding(
        name="tokenmill-bench", pat_str=CL100K, mergeable_ranks=ranks, special_tokens={}
    )


def write_tiktoken(tokenizer_file: Path, path: Path) -> None:
    """tokenmill's vocabulary as a .tiktoken ranks file, for peers that load only those."""
    tok = Tokenizer.load(tokenizer_file)
    ranks: dict[bytes, int] = {}
    for i, value in enumerate(merge_values(tok)):
        ranks.setdefault(value, i)
    lines = (f"{base64.b64encode(v).decode()} {i}\n" for v, i in ranks.items())
    Path(path).write_text("".join(lines))


def byte_level(value: bytes) -> str:
    table = bytes_to_unicode()
    return "".join(table[b] for b in value)


def hf_pre_tokenizer():
    """cl100k pieces, then bytes mapped to GPT-2's alphabet (no second regex)."""
    from tokenizers import Regex, pre_tokenizers

    return pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(CL100K_ONIG), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )


def hf_tokenizer(tokenizer_file: Path):
    """The tokenmill vocabulary as a tokenizers BPE (vocab + merges, byte-level)."""
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import decoders, models

    tok = Tokenizer.load(tokenizer_file)
    values = merge_values(tok)
    vocab: dict[str, int] = {}
    for i, value in enumerate(values):
        vocab.setdefault(byte_level(value), i)
    merges = [(byte_level(values[a]), byte_level(values[b])) for a, b in tok.merges]
    hf = HFTokenizer(models.BPE(vocab=vocab, merges=merges))
    hf.pre_tokenizer = hf_pre_tokenizer()
    hf.decoder = decoders.ByteLevel()
    return hf
