"""A tokenizer file given by URL (any fsspec filesystem; here memory://) loads
as the same file does locally, in every format load_any reads."""

from __future__ import annotations

import uuid

import fsspec
import pytest

from tokenmill.formats import export, load_any
from tokenmill.tokenizer import Tokenizer


@pytest.mark.parametrize(
    "fmt, name", [("tiktoken", "tok.tiktoken"), ("hf", "tokenizer.json"), (None, "tok.json")]
)
def test_a_tokenizer_file_by_url_loads_as_locally(tmp_path, fmt, name):
    tok = Tokenizer.train(["hello hello world, hello there"], pattern="gpt2", vocab_size=270)
    local = tmp_path / name
    if fmt is None:
        tok.save(local)
        written = [local]
    else:
        written = export(tok, local, fmt)
    url = f"memory://remote-tokenizer-{uuid.uuid4().hex[:8]}"
    memory = fsspec.filesystem("memory")
    for path in written:  # a ranks file's settings JSON goes beside it
        memory.pipe(f"{url}/{path.name}", path.read_bytes())
    remote, here = load_any(f"{url}/{name}"), load_any(local)
    assert (remote.merges, remote.vocab, remote.special_map) == (
        here.merges,
        here.vocab,
        here.special_map,
    )
    assert remote.encode("hello there") == here.encode("hello there") == tok.encode("hello there")
