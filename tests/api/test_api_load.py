"""`tokenmill.load` reads every tokenizer file the CLI reads; tiktoken's own
files need no pattern (as `tiktoken.get_encoding` needs none); `Tokenizer.load`
of another tool's file says in one line to use `tokenmill.load`; library
errors name Python arguments, the CLI its options."""

from __future__ import annotations

import dataclasses
import hashlib
import shutil
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from realtext import CL100K_FILE, GPT2_FILE, O200K_FILE

import tokenmill
from tokenmill import StoreError, Tokenizer, TokenmillError
from tokenmill.formats import export, load_any

TEXT = "hello world, the cat sat on the mat"


@pytest.fixture(scope="module")
def trained() -> Tokenizer:
    return Tokenizer.train([TEXT] * 20, vocab_size=300)


@pytest.mark.parametrize(
    "path, eos, hello",
    [
        (GPT2_FILE, 50256, [31373, 995]),  # tiktoken's test_simple
        (CL100K_FILE, 100257, [15339, 1917]),
        (O200K_FILE, 199999, None),
    ],
)
def test_tiktoken_files_load_by_name_without_a_pattern(path, eos, hello):
    enc = tokenmill.load(path)
    assert enc.eos_id == eos
    assert enc.decode(enc.encode("hello world")) == "hello world"
    if hello is not None:
        assert enc.encode("hello world") == hello
    # The same as naming the pattern: the stem only stands in for it.
    pattern = {GPT2_FILE: "gpt2", CL100K_FILE: "cl100k", O200K_FILE: "o200k"}[path]
    assert enc.sha256 == load_any(path, pattern=pattern).sha256


def test_r50k_base_is_gpt2s_pattern(tmp_path):
    path = tmp_path / "r50k_base.tiktoken"
    shutil.copy(GPT2_FILE, path)
    assert tokenmill.load(path).encode("hello world") == [31373, 995]


def test_a_ranks_file_of_another_name_needs_a_pattern(tmp_path):
    path = tmp_path / "mine.tiktoken"
    shutil.copy(GPT2_FILE, path)
    with pytest.raises(TokenmillError, match="give pattern=") as e:
        tokenmill.load(path)
    assert "--" not in str(e.value) and "\n" not in str(e.value)
    assert tokenmill.load(path, pattern="gpt2").encode("hello world") == [31373, 995]
    assert tokenmill.load(str(path), pattern="gpt2").eos_id == 50256  # a str path too


def test_every_format_the_cli_reads(tmp_path, trained):
    trained.save(tmp_path / "tok.json")
    export(trained, tmp_path / "hf.json", "hf")
    export(trained, tmp_path / "t.tiktoken", "tiktoken")  # with its JSON beside it
    for name in ("tok.json", "hf.json", "t.tiktoken", "t.tiktoken.json"):
        tok = tokenmill.load(tmp_path / name)
        assert tok.encode(TEXT) == trained.encode(TEXT), name
        assert tok.eos_id == trained.eos_id


def test_tokenizer_load_of_another_format_says_to_use_tokenmill_load(tmp_path, trained):
    export(trained, tmp_path / "hf.json", "hf")
    for path in (GPT2_FILE, tmp_path / "hf.json"):
        with pytest.raises(TokenmillError) as e:
            Tokenizer.load(path)
        message = str(e.value)
        assert "\n" not in message and str(path) in message
        assert "tokenmill.load(path)" in message and "JSON" not in message
    trained.save(tmp_path / "tok.json")
    assert Tokenizer.load(tmp_path / "tok.json") == trained


def test_library_errors_name_arguments_and_the_cli_its_options(tmp_path, trained, cli):
    with pytest.raises(TokenmillError, match=r"^vocab_size=10 is below"):
        Tokenizer.train([TEXT], vocab_size=10)
    trained.save(tmp_path / "tok.json")
    with pytest.raises(TokenmillError, match="pattern= applies to .tiktoken files only"):
        tokenmill.load(tmp_path / "tok.json", pattern="gpt2")
    result = cli(
        "tokenize", "--tokenizer", tmp_path / "tok.json", "--pattern", "gpt2", "hi", ok=False
    )
    assert "--pattern applies" in result.output and result.exit_code == 2, result.output
    ranks = tmp_path / "mine.tiktoken"
    shutil.copy(GPT2_FILE, ranks)
    result = cli("tokenize", "--tokenizer", ranks, "hi", ok=False)
    assert "give --pattern (gpt2" in result.output, result.output
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text(TEXT + "\n", encoding="utf-8")
    result = cli("run", data, tmp_path / "out", "--mode", "char", "--vocab-size", "2", ok=False)
    assert "--vocab-size 2 is below" in result.output and "vocab_size" not in result.output


def test_numpy_integers_are_special_token_ids_and_bools_are_not():
    import numpy as np

    enc = tokenmill.load(GPT2_FILE, special_tokens={"<|endoftext|>": np.int64(50256)})
    assert enc.special_map == {"<|endoftext|>": 50256}
    assert type(enc.special_map["<|endoftext|>"]) is int
    with pytest.raises(TokenmillError, match="has id True"):
        tokenmill.load(GPT2_FILE, special_tokens={"<|endoftext|>": True})
    with pytest.raises(TokenmillError, match="has id 50256.0"):
        tokenmill.load(GPT2_FILE, special_tokens={"<|endoftext|>": 50256.0})


@pytest.mark.parametrize("field, value", [("pattern", r"\S+|\s+"), ("merges", []), ("vocab", None)])
def test_a_tokenizers_fields_are_fixed_and_replace_makes_another(trained, field, value):
    """A field set after encoding was read by save, to_dict and sha256 but not by
    the encoder, built once: two tokenizers of one hash gave different ids."""
    import dataclasses

    for tok in (trained, tokenmill.load(GPT2_FILE)):  # tokenmill's numbering, a native table
        before = tok.encode(TEXT), tok.sha256
        with pytest.raises(AttributeError, match=r"dataclasses.replace\(tok, pattern="):
            setattr(tok, field, value)
        with pytest.raises(AttributeError, match="fixed"):
            delattr(tok, field)
        assert (tok.encode(TEXT), tok.sha256) == before
    other = dataclasses.replace(trained, pattern=r"\S+|\s+")
    assert other.sha256 != trained.sha256
    assert other.encode(" cat") == Tokenizer.from_dict(other.to_dict()).encode(" cat")
    assert " " in other.tokens("the cat") and " " not in trained.tokens("the cat")


# A name ending in / or /. is the file before it, as the readers take it.
@pytest.mark.parametrize(
    "name", ["tok.tiktoken", "o200k_base.tiktoken", "t.tiktoken/", "t.tiktoken/."]
)
def test_save_refuses_a_tiktoken_name_that_load_would_read_as_ranks(tmp_path, trained, name):
    """save wrote its JSON there, which load then could not read."""
    with pytest.raises(
        TokenmillError, match=r"^save: .*\.tiktoken[/.]*: .*tokenmill export .*--format tiktoken"
    ):
        trained.save(f"{tmp_path}/{name}")
    assert not (tmp_path / name).exists()
    trained.save(tmp_path / "tok.tiktoken.json")  # read by its content
    assert tokenmill.load(tmp_path / "tok.tiktoken.json") == trained


class _Refusing(BaseHTTPRequestHandler):
    """404 for /missing.json, 403 for anything else."""

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.send_error(404 if self.path == "/missing.json" else 403)

    do_HEAD = do_GET  # noqa: N815

    def log_message(self, *args) -> None:
        pass


def test_load_of_a_url_names_why_it_could_not_be_read():
    """fsspec's HTTP store raises FileNotFoundError for every failure: load said
    "cannot read tokenizer (No such file or directory)" for a connection refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]  # no one listens there once it is closed
    with pytest.raises(StoreError, match=r"tok.json: cannot read tokenizer \(Cannot connect"):
        tokenmill.load(f"http://127.0.0.1:{closed}/tok.json")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        with pytest.raises(StoreError, match=r"cannot read tokenizer \(403, message='Forbidden"):
            tokenmill.load(f"{url}/tok.json")
        with pytest.raises(TokenmillError, match=r"cannot read tokenizer \(No such file") as e:
            tokenmill.load(f"{url}/missing.json")
        assert not isinstance(e.value, StoreError)
    finally:
        server.shutdown()
        server.server_close()


def test_an_input_url_names_why_it_could_not_be_read(tmp_path):
    """DATA as a URL: "no such file or directory" for a connection refused or a 403."""
    from click.testing import CliRunner

    from tokenmill.cli import main

    def count(url: str) -> str:
        result = CliRunner().invoke(main, ["count", url, str(tmp_path / "c")])
        assert result.exit_code == 1, result.output
        return result.output.strip().splitlines()[-1]

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    assert "in.txt: cannot read (Cannot connect" in count(f"http://127.0.0.1:{closed}/in.txt")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        assert "in.txt: cannot read (403, message='Forbidden" in count(f"{url}/in.txt")
        assert (
            count(f"{url}/missing.json") == f"Error: {url}/missing.json: no such file or directory"
        )
    finally:
        server.shutdown()
        server.server_close()


def test_a_copy_sent_to_a_worker_keeps_the_hash_of_the_file_loaded(tmp_path):
    """A tokenizer file laid out otherwise than save() writes (indented by
    hand): a worker process's copy named another tokenizer in its shards."""
    import json
    import pickle

    path = tmp_path / "pretty.json"
    path.write_text(json.dumps(json.loads(Tokenizer.train(["ab ab"] * 5, num_merges=3).to_json()),
                               indent=2))  # fmt: skip
    tok = tokenmill.load(path)
    copy = pickle.loads(pickle.dumps(tok))
    assert copy.sha256 == tok.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert copy.encode("ab ab") == tok.encode("ab ab")


def test_a_replaced_tokenizers_bad_special_token_is_one_line_at_save(tmp_path, trained):
    """replace checks nothing: the name failed save with a UnicodeEncodeError."""
    bad = dataclasses.replace(trained, special_tokens=[*trained.special_tokens, "\ud800"])
    with pytest.raises(TokenmillError, match=r"^special_tokens: '\\ud800' is not UTF-8"):
        bad.save(tmp_path / "x.json")
