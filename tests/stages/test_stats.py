"""`tokenmill stats` against numbers worked out by hand on a tiny corpus."""

from __future__ import annotations

import json

import pytest
from conftest import assert_one_line_error
from runs import manifest

from tokenmill.stages.stats import run_stats
from tokenmill.tokenizer import Tokenizer


@pytest.fixture
def tiny(tmp_path, cli):
    """Two shards. a.jsonl: "aaaa" (web), "ab" (code), "aa" (web), "a" (no source);
    b.txt (no source column): "ba", "" (a blank line: no document), "b".

    Byte mode, vocabulary 258: the 256 bytes, one merge and <|endoftext|> (257).
    Pair counts over the words aaaa, ab, aa, a, ba, b: (a, a) 3 + 1 = 4,
    (a, b) 1, (b, a) 1, so the merge is a + a = "aa" (256). Encoded:
    aaaa -> 256 256 eos; ab -> 97 98 eos; aa -> 256 eos; a -> 97 eos;
    ba -> 98 97 eos; b -> 98 eos.
    """
    data = tmp_path / "data"
    data.mkdir()
    records = [
        {"text": "aaaa", "source": "web"},
        {"text": "ab", "source": "code"},
        {"text": "aa", "source": "web"},
        {"text": "a"},
    ]
    (data / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (data / "b.txt").write_text("ba\n\nb\n")
    out = tmp_path / "out"
    cli("run", data, out, "--vocab-size", "258", "--workers", "1")
    tok = Tokenizer.load(out / "tokenizer.json")
    assert tok.merges == [(97, 97)] and tok.eos_id == 257
    return out


def line(name, documents, n_bytes, tokens, text_tokens):
    return {
        "name": name,
        "documents": documents,
        "bytes": n_bytes,
        "tokens": tokens,
        "text_tokens": text_tokens,
        "bytes_per_token": round(n_bytes / text_tokens, 4) if text_tokens else None,
    }


def test_stats_by_hand(tiny):
    s = run_stats(tiny).stats
    assert (s["documents"], s["bytes"], s["tokens"], s["text_tokens"]) == (6, 12, 15, 9)
    assert s["bytes_per_token"] == round(12 / 9, 4)
    assert s["source_column"] == "source"
    assert s["sources"] == [
        line("web", 2, 6, 5, 3),  # aaaa, aa: 256 256 | 256
        line("code", 1, 2, 3, 2),  # ab: 97 98
        line("a.jsonl", 1, 1, 2, 1),  # a: no source, counted under its shard
        line("b.txt", 2, 3, 5, 3),  # ba, b: 98 97 | 98
    ]
    assert s["shards"] == [line("a.jsonl", 4, 9, 10, 6), line("b.txt", 2, 3, 5, 3)]
    # Ids used: 97 (a) 3 times, 98 (b) 3, 256 (aa) 3, 257 (eos) 6; ties by id.
    assert s["vocab_size"] == 258 and s["used"] == 4
    assert s["utilization"] == round(4 / 258, 6)
    assert [(t["id"], t["text"], t["count"]) for t in s["top"]] == [
        (257, "<|endoftext|>", 6),
        (97, "a", 3),
        (98, "b", 3),
        (256, "aa", 3),
    ]
    assert s["top"][0]["share"] == round(6 / 15, 6)
    assert s["never_used"]["count"] == 254
    assert s["never_used"]["ids"] == list(range(20))
    assert s["never_used"]["texts"][:2] == ["\x00", "\x01"]


def test_stats_command(tiny, cli, tmp_path):
    text = cli("stats", tiny).stdout
    assert "6 documents, 12 bytes, 15 tokens (9 not special), 1.333 bytes per token" in text
    assert "4 of 258 ids used (1.6 %), 254 never used" in text
    assert "id     256  'aa'" in text
    as_json = json.loads(cli("stats", tiny, "--json").stdout)
    assert as_json["sources"][0]["name"] == "web"
    # Per shard only; inputs found with --data when the manifest is gone.
    (tiny / "manifest.json").rename(tmp_path / "m.json")
    result = cli("stats", tiny, ok=False)
    assert result.exit_code == 1 and "--data" in result.output
    s = json.loads(
        cli("stats", tiny, "--json", "--source-column", "", "--data", tmp_path / "data").stdout
    )
    assert [x["name"] for x in s["sources"]] == ["a.jsonl", "b.txt"]
    assert s["source_column"] is None


def test_stats_on_sample_data_add_up(tmp_path, cli):
    from realtext import SAMPLE_DIR

    out = tmp_path / "out"
    cli("run", SAMPLE_DIR, out, "--vocab-size", "1000")
    s = run_stats(out).stats
    manifest = json.loads((out / "manifest.json").read_text())
    assert s["documents"] == manifest["documents"] == 2980
    assert s["tokens"] == manifest["tokens"]
    assert (
        s["bytes"] == sum(x["bytes"] for x in s["shards"]) == sum(x["bytes"] for x in s["sources"])
    )
    assert s["tokens"] - s["text_tokens"] == 2980  # one <|endoftext|> per document
    assert len(s["top"]) == 20


def test_stats_after_a_run_that_skipped_bad_documents(tmp_path, cli):
    """Skipped documents leave gaps in the token shards' rows; stats follows the rows."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_bytes(b"aaaa\nb\xffad\nab\n")  # row 1 is not UTF-8
    (data / "b.jsonl").write_text(
        '{"text": "ba", "source": "s"}\nnot json\n\n{"text": "a", "source": 7}\n'
    )  # a bad line, a blank line (no row), a source that is no string
    out = tmp_path / "out"
    cli("run", data, out, "--vocab-size", "258", "--on-error", "skip")
    s = run_stats(out).stats
    # aaaa: 256 256 eos, ab: 97 98 eos | ba: 98 97 eos, a: 97 eos
    assert s["shards"] == [line("a.txt", 2, 6, 6, 4), line("b.jsonl", 2, 3, 5, 3)]
    assert [x["name"] for x in s["sources"]] == ["a.txt", "s", "b.jsonl"]
    assert s["sources"][1:] == [line("s", 1, 2, 3, 2), line("b.jsonl", 1, 1, 2, 1)]
    assert s["warnings"] == []


def test_sources_beyond_the_limit_are_counted_together(tiny, monkeypatch):
    import tokenmill.stages.stats as stats

    monkeypatch.setattr(stats, "MAX_SOURCES", 2)
    s = run_stats(tiny).stats
    assert [x["name"] for x in s["sources"]] == ["web", "code", stats.OTHER]
    assert s["sources"][2] == line(stats.OTHER, 3, 4, 7, 4)  # a.jsonl's "a" and b.txt


def test_a_token_of_part_of_a_character_shows_as_tokenize_shows_it():
    # stats showed a lone byte as the four characters \xf0 ('\\xf0' once quoted),
    # tokenize --pieces as <0xf0>: the same token two ways, and text that holds a
    # backslash could pass for a byte.
    from realtext import GPT2_FILE

    import tokenmill
    from tokenmill.pieces import token_pieces
    from tokenmill.stages.stats import token_text

    tok = tokenmill.load(GPT2_FILE)
    ids = tok.encode("🤖 \\xf0")
    assert [token_text(tok, i) for i in ids] == token_pieces(tok, ids)
    assert "".join(token_pieces(tok, ids)) == "<0xf0><0x9f><0xa4><0x96> \\xf0"


def test_stats_and_the_report_say_what_the_run_skipped_and_left_out(tmp_path, cli):
    """The counts leave out the skipped rows and unreadable inputs: stats and
    the report say so, and a source the recipe left out shows what it had."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.jsonl").write_text('{"text": "good one"}\n{bad\n{"text": "good two"}\n')
    (data / "b.jsonl.gz").write_bytes(b"\x1f\x8bxx")  # not gzip past its magic
    (data / "c.jsonl").write_text('{"text": "kept out"}\n')
    recipe = tmp_path / "recipe.toml"
    recipe.write_text("[mix]\na = { epochs = 1.0 }\n")
    out = tmp_path / "out"
    cli("run", data, out, "--vocab-size", "300", "--on-error", "skip", "--mix", recipe)
    skips = (
        "skips: at least 1 document skipped (1 whole file, 1 row) in a.jsonl, b.jsonl.gz; "
        "not counted here, manifest.json lists each under skipped"
    )
    text = cli("stats", out).stdout.splitlines()
    assert skips in text
    had = next(x for x in manifest(out)["mix"]["sources"] if x["name"] == "c")["available"]
    assert had["documents"] == 1  # what the table shows
    left_out = next(line.split() for line in text if line.startswith("  c "))
    assert left_out[1:3] == ["left", "out"] and left_out[-5:-2] == ["0", "of", "1"]
    assert [x["shard"] for x in run_stats(out).stats["skipped"]] == ["a.jsonl", "b.jsonl.gz"]
    cli("report", out)
    page = (out / "report.html").read_text()
    assert skips in page and "<td>left out</td>" in page and ">0 of 1</td>" in page


def test_data_given_that_is_not_there_or_not_the_inputs_says_so(tiny, cli, tmp_path):
    """Given --data, the line said "the inputs are not there; give --data DATA"."""
    result = cli("stats", tiny, "--data", tmp_path / "nodir", ok=False)
    assert_one_line_error(result, f"Error: --data {tmp_path / 'nodir'}: no such file or folder")
    assert result.exit_code == 1
    other = tmp_path / "other"
    other.mkdir()
    result = cli("stats", tiny, "--data", other, ok=False)
    assert_one_line_error(result, f"--data {other} does not hold the inputs OUT was made from")
    assert "give --data" not in result.output
