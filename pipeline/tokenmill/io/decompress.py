"""The decompressed bytes of a line-format input, streaming: gzip, zstd, bzip2
or xz, as its suffix says, each in one compressed stream or in several one
after another (pigz, pbzip2, `xz -T`, `cat a.bz2 b.bz2`), all of them read.

Python's bz2 and lzma readers take the bytes after a stream's end for
trailing garbage unless they begin a valid stream, and stop there without a
word: one damaged byte at the start of the second stream of three cut a file
to its first third, silently (and lzma stops at the .xz format's own stream
padding too). Here what follows a stream must be another valid stream (for
xz, after zero bytes of padding, a multiple of four), or reading raises.
Python's gzip and Arrow's zstd reader already raise so.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
from pathlib import Path

import pyarrow as pa

# Compressed bytes asked of the source at a time.
SOURCE_BYTES = 1 << 16


def decompressed(name: str, source):
    """A binary stream of the decompressed bytes of `source`, a local Path or an
    open binary file object (which a file of no compression suffix is returned
    as), decompressed as the suffix of `name` (in lower case) says."""
    if name.endswith(".gz"):
        # Python's gzip, not Arrow's: Arrow reads a truncated gzip stream without a word.
        return Pieces(gzip.open(source, "rb"))
    if name.endswith(".bz2"):
        return Streams(source, bz2.BZ2Decompressor, "bzip2")
    if name.endswith(".xz"):
        return Streams(source, lzma.LZMADecompressor, "xz", padding=True)
    if name.endswith(".zst"):
        local = isinstance(source, Path)
        return pa.input_stream(str(source) if local else source, compression="zstd")
    return open(source, "rb") if isinstance(source, Path) else source


class Pieces(io.RawIOBase):
    """A gzip file's bytes, what one step of its reader decompressed a read:
    GzipFile.read(n) gathers n bytes and drops them all when the file ends
    short of n, so the documents of up to a whole read before a truncation
    went uncounted. read1 raises only in a step that gave nothing."""

    def __init__(self, stream):
        self._stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self._stream.read1(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed:
            self._stream.close()
        super().close()


class Streams(io.RawIOBase):
    """The decompressed bytes of every compressed stream of `source`, in order.
    A read may return fewer bytes than asked (b"" only at the end): a read
    never holds back what it decompressed when the next part of the file
    turns out bad, so the documents before a damaged stream are known."""

    def __init__(self, source, new_decompressor, what: str, padding: bool = False):
        self._owned = isinstance(source, Path)
        self._source = open(source, "rb") if self._owned else source
        self._new = new_decompressor
        self._what = what
        self._padding = padding
        self._decompressor = new_decompressor()
        self._input = b""  # read from the source, not yet given to the decompressor
        self._stream = 1
        self._empty = True  # nothing read from the source yet

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if not len(buffer):
            return 0  # max_length 0 would decompress nothing, forever
        while True:
            if self._decompressor.eof and not self._next_stream():
                return 0
            data = b""
            if self._decompressor.needs_input:
                data, self._input = self._input or self._source.read(SOURCE_BYTES), b""
                if not data and self._empty:
                    return 0  # a file of no bytes holds no documents, as a .gz or .zst of none
                self._empty = False
                if not data:
                    raise EOFError(
                        f"{self._what} stream {self._stream} ends before its end-of-stream marker"
                    )
            try:
                out = self._decompressor.decompress(data, len(buffer))
            except (OSError, lzma.LZMAError) as e:
                if self._stream == 1:
                    raise
                raise type(e)(f"{self._what} stream {self._stream} is damaged ({e})") from e
            if out:
                buffer[: len(out)] = out
                return len(out)

    def _next_stream(self) -> bool:
        """Start a decompressor on what follows the stream that ended; False
        when nothing does (but padding, where the format has it)."""
        rest = self._decompressor.unused_data
        zeros = 0
        while True:
            if not rest and not (rest := self._source.read(SOURCE_BYTES)):
                break
            if self._padding:
                kept = rest.lstrip(b"\0")
                zeros, rest = zeros + len(rest) - len(kept), kept
            if rest:
                break
        if zeros % 4:
            raise lzma.LZMAError(
                f"{zeros} bytes of stream padding after {self._what} stream {self._stream}, "
                "not a multiple of four"
            )
        if not rest:
            return False
        self._decompressor = self._new()
        self._input = rest
        self._stream += 1
        return True

    def close(self) -> None:
        if self._owned and not self.closed:
            self._source.close()
        super().close()
