"""`tokenmill tokenize`: the ids of a text from the command line or stdin, and
with --pieces each token's text (coloured on a terminal, one a line in a pipe),
for quick checks of a tokenizer."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys

import pytest
from realtext import GPT2_FILE, load_sample_texts

from tokenmill.errors import escaped
from tokenmill.formats import load_any
from tokenmill.tokenizer import Tokenizer

TEXT = "Hello wörld, 東京 — naïve café\tdef f(x): return x**2\n"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    Tokenizer.train(load_sample_texts()[:200], vocab_size=2000).save(path)
    return path


def test_ids_of_an_argument_and_of_stdin_are_the_encoders(cli, trained):
    want = load_any(trained).encode(TEXT)
    assert cli("tokenize", "--tokenizer", trained, TEXT).output.split() == list(map(str, want))
    result = subprocess.run(
        [sys.executable, "-m", "tokenmill", "tokenize", "--tokenizer", trained, "-"],
        input=TEXT.encode(),
        capture_output=True,
        check=True,
    )
    assert result.stdout.decode().split() == list(map(str, want))


def test_pieces_in_a_pipe_are_one_token_a_line_and_join_to_the_text(cli, trained):
    tok = load_any(trained)
    lines = cli("tokenize", "--tokenizer", trained, "--pieces", TEXT).output.splitlines()
    ids = [int(line.split("\t")[0]) for line in lines]
    assert ids == tok.encode(TEXT)
    assert unescaped(shown_pieces(lines)) == TEXT


def shown_pieces(lines: list[str]) -> list[str]:
    return [json.loads(line.split("\t", 1)[1]) for line in lines]


def unescaped(pieces: list[str]) -> str:
    """The text of the pieces shown: in each, a <0x..> is a byte (of a split
    character, or a `<` of the token's own that would start `<0x` or `</w>`),
    any other character itself."""
    parts = [part for p in pieces for part in re.split(r"(<0x[0-9a-f]{2}>)", p)]
    data = b"".join(
        bytes([int(part[3:5], 16)]) if re.fullmatch(r"<0x..>", part) else part.encode()
        for part in parts
    )
    return data.decode("utf-8")


def test_a_tokens_own_bytes_form_is_told_from_a_split_characters_bytes(cli, tmp_path):
    # Tokens of whole non-space runs, which hold the characters `<0x`.
    text = "<0xe6> 東 <0x3c>"
    tok = Tokenizer.train([text] * 8, vocab_size=300, pattern=r"\S+|\s+")
    tok.save(tmp_path / "tok.json")
    lines = cli("tokenize", "--tokenizer", tmp_path / "tok.json", "--pieces", text).output
    pieces = shown_pieces(lines.splitlines())
    assert "<0x3c>0xe6>" in pieces and "<0x3c>0x3c>" in pieces
    assert unescaped(pieces) == text


CHAR_TEXT = "a </w> low</w> <0x3c> w>"


def test_char_modes_end_of_word_is_told_from_the_characters_of_a_word(cli, tmp_path):
    """Both showed as `</w>`: a token of the characters `</w>` and one of the
    end-of-word symbol (merges spell it out when the documents hold it)."""
    path = tmp_path / "char.json"
    train = [CHAR_TEXT, "</w></w> <</w>> a</w> w> </ < / w > a <0x3c>", "low lower"] * 4
    tok = Tokenizer.train(train, mode="char", vocab_size=120)
    tok.save(path)
    literal = tok.token_values.index("</w></w>")  # the characters, then the symbol
    assert tok.text_values[literal] == "</w> "
    lines = cli("tokenize", "--tokenizer", path, "--pieces", CHAR_TEXT).output.splitlines()
    assert f'{literal}\t"<0x3c>/w></w>"' in lines
    # Every `</w>` shown is the symbol, which decodes as a space.
    pieces = [p.replace("</w>", " ") for p in shown_pieces(lines)]
    assert unescaped(pieces) == CHAR_TEXT + " "


def test_pieces_of_a_real_vocabulary_show_split_characters_as_bytes(cli):
    # GPT-2 splits 東京 into tokens that hold parts of characters.
    out = cli("tokenize", "--tokenizer", GPT2_FILE, "--pattern", "gpt2", "--pieces", "東京").output
    assert "<0x" in out
    assert [int(x.split("\t")[0]) for x in out.splitlines()] == load_any(
        GPT2_FILE, pattern="gpt2"
    ).encode("東京")


def on_terminal(tokenizer, text: str, **env: str) -> tuple[str, str]:
    """(stdout, stderr) of `tokenize --pieces TEXT` with stdout a terminal, one
    that takes colours (an xterm, no NO_COLOR) unless `env` says otherwise."""
    leader, follower = pty.openpty()
    environ = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tokenmill", "tokenize", "--tokenizer", tokenizer, "--pieces", text],
        stdout=follower,
        stderr=subprocess.PIPE,
        env={**environ, "TERM": "xterm-256color", **env},
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    proc.wait()
    os.close(leader)
    return b"".join(chunks).decode(), proc.stderr.read().decode()


def test_pieces_on_a_terminal_are_coloured(trained):
    shown, err = on_terminal(trained, "ab cd")
    assert "\x1b[" in shown  # ANSI colours
    assert re.sub(r"\x1b\[[0-9;]*m", "", shown).strip() == "ab cd"
    assert err.strip() == f"{len(load_any(trained).encode('ab cd'))} tokens"


@pytest.mark.parametrize("env", [{"NO_COLOR": "1"}, {"TERM": "dumb"}], ids=["NO_COLOR", "dumb"])
def test_pieces_on_a_terminal_without_colours_are_one_a_line(cli, trained, env):
    """NO_COLOR (https://no-color.org) and a dumb terminal were coloured all the
    same: shown as a pipe shows them, no escape code written."""
    shown, _ = on_terminal(trained, "ab cd", **env)
    assert "\x1b" not in shown
    piped = cli("tokenize", "--tokenizer", trained, "--pieces", "ab cd").output
    assert shown.splitlines() == piped.splitlines()
    assert "NO_COLOR" in " ".join(cli("tokenize", "--help").output.split())


CONTROLS = "red \x1b[31mRED\x1b[0m\rover\x7f\x07 tab\tend"


def test_pieces_on_a_terminal_show_control_characters_escaped(trained):
    # The text's own escape sequences must not recolour or rewrite the terminal.
    shown, _ = on_terminal(trained, CONTROLS)
    plain = re.sub(r"\x1b\[[0-9;]*m", "", shown).removesuffix("\r\n")  # click's colours
    assert plain == escaped(CONTROLS)
    assert not set(plain) & {"\x1b", "\r", "\x7f", "\x07", "\t"}


def test_pieces_in_a_pipe_show_control_characters_escaped(cli, trained):
    out = cli("tokenize", "--tokenizer", trained, "--pieces", CONTROLS).output
    shown = [line.split("\t", 1)[1] for line in out.splitlines()]
    assert not set("".join(shown)) & {"\x1b", "\r", "\x7f", "\x07", "\t"}
    assert "".join(map(json.loads, shown)) == CONTROLS


def test_a_bad_tokenizer_file_is_one_line(cli, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    result = cli("tokenize", "--tokenizer", bad, "x", ok=False)
    assert result.exit_code == 1 and len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "stdin", "where"),
    [
        (["-"], b"ok \xff\xfe", "standard input is not UTF-8 text: byte 0xff at offset 3"),
        ([], b"\xc3(", "standard input is not UTF-8 text: byte 0xc3 at offset 0"),
        # Python hands this argument over as surrogate escapes, which the encoder
        # would silently have turned into U+FFFD.
        ([b"a\xff"], b"", "TEXT is not UTF-8 text: byte 0xff at offset 1"),
    ],
)
def test_text_that_is_not_utf8_is_one_line(trained, args, stdin, where):
    result = subprocess.run(
        [sys.executable, "-m", "tokenmill", "tokenize", "--tokenizer", str(trained), *args],
        input=stdin,
        capture_output=True,
    )
    assert result.returncode == 1 and result.stdout == b""
    assert result.stderr.decode().strip() == f"Error: {where}"


def test_a_closed_stdin_or_a_pattern_that_is_not_utf8_is_one_line(trained):
    """No file descriptor 0 at all; a .tiktoken file's --pattern given in other bytes."""
    closed = subprocess.run(
        [sys.executable, "-m", "tokenmill", "tokenize", "--tokenizer", str(trained), "-"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        preexec_fn=lambda: os.close(0),
    )
    assert closed.returncode == 1 and closed.stdout == b""
    assert closed.stderr.decode().strip() == "Error: standard input is closed; give TEXT"
    pattern = subprocess.run(
        [sys.executable, "-m", "tokenmill", "tokenize", "--tokenizer", str(GPT2_FILE),
         "--pattern", b"(\xe9", "x"],
        capture_output=True,
    )  # fmt: skip
    assert pattern.returncode == 2 and pattern.stdout == b""
    assert pattern.stderr.decode().strip() == (
        "Error: --pattern (\\xe9: not UTF-8; names, options and patterns must be UTF-8 "
        "(see 'python -m tokenmill tokenize --help')"
    )


def test_a_closed_stdout_is_an_error_not_a_silent_success(trained):
    result = subprocess.run(
        [sys.executable, "-m", "tokenmill", "tokenize", "--tokenizer", str(trained), "hello"],
        capture_output=False,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: os.close(1),
    )
    assert result.returncode == 1
    assert result.stderr.decode().strip() == "Error: standard output is closed: nowhere to print to"


def test_help_written_to_a_full_disk_is_one_line():
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [sys.executable, "-m", "tokenmill", "--help"], stdout=full, stderr=subprocess.PIPE
        )
    assert result.returncode == 1
    assert result.stderr.decode().splitlines() == [
        "Error: cannot write to standard output: No space left on device"
    ]


def test_a_commands_output_on_a_full_disk_names_standard_output(trained):
    """It said only "No space left on device", naming no file."""
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [sys.executable, "-m", "tokenmill", "tokenize", "--tokenizer", str(trained), "hello"],
            stdout=full,
            stderr=subprocess.PIPE,
        )
    assert result.returncode == 1
    assert result.stderr.decode().splitlines() == [
        "Error: cannot write to standard output: No space left on device"
    ]
