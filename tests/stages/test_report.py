"""`tokenmill report`: a self-contained report.html for sample_data/, rendered in
headless Chromium."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess

import pyarrow.parquet as pq
import pytest
from realtext import SAMPLE_DIR

from tokenmill.stages.report import length_distribution, pieces, token_lengths
from tokenmill.stages.stats import corpus_stats
from tokenmill.tokenizer import Tokenizer

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def sample_out(tmp_path_factory):
    from click.testing import CliRunner

    from tokenmill.cli import main

    out = tmp_path_factory.mktemp("report") / "out"
    args = ["run", str(SAMPLE_DIR), str(out), "--vocab-size", "2000", "--special-token", "<|x|>"]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(main, ["report", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "report.html" in result.output
    return out


def test_report_is_self_contained_and_has_every_part(sample_out):
    html = (sample_out / "report.html").read_text(encoding="utf-8")
    # Opens offline: nothing fetched, no script.
    assert not re.search(r"https?:|<script|<link|<img|src=|@import|url\(", html)
    for section in ("shards", "sources", "lengths", "merges", "samples", "top", "never"):
        assert f"<h2 id={section}>" in html
    assert html.count("<svg") == 4  # bytes/token per shard and per source, lengths, merges
    # One sample per shard, token by token, ending in <|endoftext|> when shown whole.
    assert html.count('<div class="doc">') == 5
    assert '<span class="sp" title="id 1998: ' in html  # <|endoftext|>
    assert "lines.txt, row " in html and "prose-en.parquet, row " in html


def test_a_held_out_sweep_is_plotted_as_held_out_text(sample_out, tmp_path):
    """It was drawn as "all documents", as if the corpus the page is about."""
    from click.testing import CliRunner

    from tokenmill.cli import main

    out = tmp_path / "out"
    shutil.copytree(sample_out, out)
    held_out = SAMPLE_DIR / "lines.txt"
    for args in (["sweep", str(out), "--held-out", str(held_out)], ["report", str(out)]):
        result = CliRunner().invoke(main, args, catch_exceptions=False)
        assert result.exit_code == 0, result.output
    html = (out / "report.html").read_text(encoding="utf-8")
    section = html[html.index("<h2 id=sweep>") :]
    assert f"on held-out text, <code>{held_out}</code>" in section
    assert "<title>all held-out documents</title>" in section
    assert "all documents" not in section


def test_sample_pieces_join_to_the_decoded_text(sample_out):
    """The colour-coded pieces are the tokens: joined, they give the document back."""
    tok = Tokenizer.load(sample_out / "tokenizer.json")
    for path in sorted((sample_out / "tokens").glob("*.parquet")):
        for ids in pq.read_table(path)["ids"].to_pylist():
            parts = pieces(tok, ids)
            assert "".join(text for text, _, _ in parts) == tok.decode(ids)
            assert [i for _, group, _ in parts for i in group] == ids


def test_length_distribution_and_merge_counts(sample_out):
    st = corpus_stats(sample_out)
    tok = st.tokenizer
    lengths = token_lengths(tok)
    assert lengths[:256].tolist() == [1] * 256
    assert all(lengths[i] == -1 for i in tok.special_map.values())
    labels, vocab, corpus = length_distribution(lengths, st.counts)
    assert labels[0] == "1" and labels[-1] == "16+"
    assert sum(vocab) == pytest.approx(100) and sum(corpus) == pytest.approx(100)
    assert vocab[0] == pytest.approx(100 * 256 / (2000 - 2))


@pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (apt-get install chromium)")
def test_report_renders_in_headless_chromium(sample_out, tmp_path):
    png = tmp_path / "report.png"
    subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--screenshot={png}",
            "--window-size=1200,2000",
            (sample_out / "report.html").resolve().as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=180,
    )
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1200, 2000)
    assert len(data) > 50_000  # charts and text, not a blank page
    shutil.copy(png, sample_out / "report.png")
