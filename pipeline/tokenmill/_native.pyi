# The Rust core's Python surface (native/src/bindings/); keep in step with its
# #[pyfunction]s and #[pyclass]es. Buffers are read as C-contiguous bytes:
# `offsets`/`data` are a large_string array's buffers, `start` its offset.

from collections.abc import Callable, Sequence
from typing import final

from typing_extensions import Buffer

__all__ = [
    "NativeError",
    "pretokenize",
    "char_words",
    "preset_regex",
    "valid_utf8",
    "nfc",
    "set_threads",
    "release_memory",
    "bound_retained_memory",
    "char_alphabet",
    "train_merges",
    "train_segmented",
    "superword_stage1",
    "superword_split",
    "superword_stage2",
    "parse_tiktoken",
    "derive_merges",
    "every_split",
    "table_ids",
    "merges_valid",
    "merges_json",
    "merge_fault",
    "byte_level_tables",
    "Counter",
    "Encoder",
    "OwnedBytes",
    "Vocabulary",
    "ModelJson",
    "FileMerges",
    "SuperwordStage1",
    "SuperwordSplit",
]

class NativeError(ValueError):
    """Any error of the native core: bad input, never a bug."""

def pretokenize(text: str, pattern: str = "cl100k") -> list[str]: ...
def merge_fault(
    merges: list[tuple[int, int]], merge_ids: list[int]
) -> tuple[str, int, int] | None: ...
def char_words(text: str, lowercase: bool = False) -> list[str]: ...
def valid_utf8(offsets: Buffer, data: Buffer, start: int, n: int) -> bool: ...
def nfc(offsets: Buffer, data: Buffer, start: int, n: int) -> tuple[OwnedBytes, OwnedBytes]: ...
def preset_regex(name: str) -> str | None: ...
def set_threads(threads: int) -> None: ...
def bound_retained_memory() -> None: ...
def release_memory() -> None: ...
def char_alphabet(offsets: Buffer, data: Buffer, start: int, n: int) -> list[str]: ...
def train_merges(
    offsets: Buffer,
    data: Buffer,
    start: int,
    n: int,
    counts: Buffer,
    alphabet: Sequence[str] | None,
    num_merges: int,
    progress: Callable[[int], object] | None = None,
) -> list[tuple[int, int]]: ...
def train_segmented(
    symbols: Buffer,
    lens: Buffer,
    counts: Buffer,
    texts: Sequence[bytes | None],
    num_merges: int,
    progress: Callable[[int], object] | None = None,
) -> list[tuple[int, int]]: ...
def superword_stage1(
    offsets: Buffer,
    data: Buffer,
    start: int,
    n: int,
    counts: Buffer,
    stage1: int,
    progress: Callable[[int], object] | None = None,
) -> SuperwordStage1: ...
def superword_split(
    offsets: Buffer,
    data: Buffer,
    start: int,
    n: int,
    pattern: str | None,
    offsets2: Buffer,
    data2: Buffer,
    start2: int,
    n2: int,
) -> SuperwordSplit: ...
def superword_stage2(
    stage1: SuperwordStage1,
    split: SuperwordSplit,
    offsets: Buffer,
    data: Buffer,
    start: int,
    n: int,
    offsets2: Buffer,
    data2: Buffer,
    start2: int,
    n2: int,
    counts2: Buffer,
    total: int,
    max_words: int | None = None,
    progress: Callable[[int], object] | None = None,
) -> tuple[list[tuple[int, int]], int]: ...
def merges_valid(
    merges: Sequence[tuple[int, int]],
    base: int,
    made: Sequence[int] | None,
    specials: Sequence[int],
) -> bool: ...
def merges_json(merges: list[tuple[int, int]]) -> bytes: ...
def parse_tiktoken(data: Buffer) -> list[bytes | None]: ...
def derive_merges(
    vocab: list[bytes | None],
) -> tuple[list[tuple[int, int]], list[int], list[int] | None]:
    """(merges, the id each yields, each byte's id or None)."""

def every_split(vocab: list[bytes | None]) -> list[tuple[int, int]]:
    """Every split of each token into two tokens: a conversion's merges."""

def table_ids(
    vocab: list[bytes | None], merges: list[tuple[int, int]]
) -> tuple[list[int], list[int]]:
    """(each byte's id, the id each merge yields)."""

def byte_level_tables(
    texts: list[str],
    ids: Sequence[int],
    special_ids: Sequence[int],
    merges: str | list[str] | list[list[str]] | list[tuple[str, str]],
) -> tuple[list[bytes | None], list[tuple[int, int]]]: ...

@final
class Counter:
    @staticmethod
    def byte(pattern: str = "cl100k") -> Counter: ...
    @staticmethod
    def char(lowercase: bool = False) -> Counter: ...
    def add(
        self,
        offsets: Buffer,
        data: Buffer,
        start: int,
        n: int,
        first_row: int,
        parallel: bool = True,
    ) -> None: ...
    def finish(self) -> tuple[OwnedBytes, OwnedBytes, OwnedBytes, OwnedBytes, int]:
        """(word offsets i64, word data, counts u64, first keys u64, number of words),
        read-only little-endian buffers."""

@final
class Vocabulary:
    @staticmethod
    def from_tiktoken(data: Buffer) -> Vocabulary: ...
    @property
    def size(self) -> int: ...
    @property
    def n_tokens(self) -> int: ...
    @property
    def n_merges(self) -> int: ...
    def token(self, i: int) -> bytes | None: ...
    def tokens(self) -> list[bytes | None]: ...
    def merges(self) -> list[tuple[int, int]]: ...
    def merge_ids(self) -> list[int]: ...
    def merge_fault(self) -> tuple[str, int, int] | None: ...
    def as_ranks(self) -> Vocabulary | None: ...
    def byte_ids(self) -> list[int] | None: ...
    def file_tables(self) -> bytes: ...

@final
class SuperwordStage1:
    """Stage 1 trained (superword_stage1), spent by superword_stage2."""

@final
class SuperwordSplit:
    """Stage 2's words split into stage 1's (superword_split), spent by superword_stage2."""

@final
class FileMerges:
    @staticmethod
    def split(data: Buffer) -> tuple[FileMerges, bytes]: ...
    def pairs(self) -> list[tuple[int, int]]: ...

@final
class ModelJson:
    @staticmethod
    def split(data: Buffer) -> tuple[ModelJson, bytes]: ...
    def lookup(self, texts: Sequence[str]) -> tuple[int, list[int | None]]: ...
    def vocabulary(self, special_ids: Sequence[int]) -> Vocabulary: ...

@final
class OwnedBytes:
    """Token ids (or a count table's column) as a read-only buffer of
    little-endian bytes (no copy)."""

    def __len__(self) -> int: ...

@final
class Encoder:
    @staticmethod
    def byte(
        pattern: str,
        merges: list[tuple[int, int]],
        merge_ids: Sequence[int],
        *,
        byte_ids: Sequence[int] | None = None,
        whole_words: Sequence[tuple[bytes, int]] | None = None,
    ) -> Encoder: ...
    @staticmethod
    def file_merges(pattern: str, merges: FileMerges, first_id: int) -> Encoder: ...
    @staticmethod
    def byte_table(
        pattern: str,
        vocab: list[bytes | None],
        merges: list[tuple[int, int]],
        merge_ids: Sequence[int],
        byte_ids: Sequence[int],
        *,
        whole_words: bool,
    ) -> Encoder: ...
    @staticmethod
    def from_vocabulary(pattern: str, vocabulary: Vocabulary, *, whole_words: bool) -> Encoder: ...
    @staticmethod
    def char(
        merges: list[tuple[int, int]],
        merge_ids: Sequence[int],
        alphabet: Sequence[str],
        *,
        end_of_word: int,
        unk: int,
        lowercase: bool = False,
    ) -> Encoder: ...
    def encode(self, text: str, eos: int | None = None) -> list[int]: ...
    def encode_batch(
        self,
        offsets: Buffer,
        data: Buffer,
        start: int,
        n: int,
        eos: int | None = None,
        wide: bool = True,
        parallel: bool = True,
    ) -> tuple[OwnedBytes, bytes]:
        """(ids as little-endian u16 or u32 bytes, per-document token counts as u32 bytes)."""
