"""report.html: a self-contained page (inline CSS and SVG, no script, nothing
fetched) showing what a tokenizer did to a corpus. Pure rendering: numbers
in, HTML out; `tokenmill.stages.report` gathers the numbers."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

from tokenmill.stages.results import skips_line

WIDTH = 960
PALETTE = (
    "#fde68a",
    "#a7f3d0",
    "#bfdbfe",
    "#fbcfe8",
    "#ddd6fe",
    "#fed7aa",
    "#bbf7d0",
    "#e9d5ff",
)
BLUE, ORANGE, GREY = "#2563eb", "#ea580c", "#9ca3af"

CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #111827;
       margin: 24px auto; max-width: 1000px; padding: 0 16px; background: #fff; }
h1 { font-size: 24px; margin-bottom: 4px; } h2 { font-size: 18px; margin-top: 32px;
       border-bottom: 1px solid #e5e7eb; padding-bottom: 4px; }
.muted { color: #6b7280; } .num { text-align: right; font-variant-numeric: tabular-nums; }
table { border-collapse: collapse; margin: 8px 0; } td, th { padding: 2px 10px; }
th { text-align: left; border-bottom: 1px solid #d1d5db; font-weight: 600; }
tr:nth-child(even) td { background: #f9fafb; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin: 16px 0; }
.card { border: 1px solid #e5e7eb; border-radius: 8px; padding: 8px 14px; min-width: 130px; }
.card b { display: block; font-size: 20px; }
svg { display: block; margin: 8px 0; } svg text { font: 11px system-ui, sans-serif; }
.doc { border: 1px solid #e5e7eb; border-radius: 8px; padding: 10px; margin: 10px 0; }
.toks { font: 13px/1.9 ui-monospace, "DejaVu Sans Mono", monospace; white-space: pre-wrap;
        word-break: break-all; margin: 6px 0 0; }
.toks span { border-radius: 3px; padding: 1px 0; }
.toks .sp { background: #374151; color: #fff; padding: 1px 3px; }
.toks .part { outline: 1px dashed #9ca3af; }
.toks .nl { color: #9ca3af; }
code { background: #f3f4f6; padding: 0 4px; border-radius: 3px; }
"""


@dataclass
class SampleDocument:
    title: str  # e.g. "prose-en.parquet, row 3"
    pieces: list[tuple[str, list[int], str]]  # (text, ids, kind: "" | "special" | "partial")
    total_tokens: int  # in the whole document (the sample may be cut)
    n_bytes: int


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def fmt_int(n: int) -> str:
    return f"{n:,}".replace(",", "\u2009")


def _nice_max(value: float) -> float:
    if value <= 0:
        return 1.0
    exp = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * exp:
            return step * exp
    return 10 * exp


def hbar_chart(items: Sequence[tuple[str, float]], unit: str, color: str = BLUE) -> str:
    """Horizontal bars, one per (label, value)."""
    if not items:
        return "<p class=muted>nothing to show</p>"
    label_w, row_h, top = 300, 20, 24
    plot_w = WIDTH - label_w - 70
    top_value = _nice_max(max(v for _, v in items))
    height = top + row_h * len(items) + 10
    parts = [f'<svg width="{WIDTH}" height="{height}" role="img">']
    for k in range(5):
        x = label_w + plot_w * k / 4
        parts.append(
            f'<line x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{height - 8}" stroke="#e5e7eb"/>'
            f'<text x="{x:.1f}" y="{top - 8}" text-anchor="middle" fill="#6b7280">'
            f"{top_value * k / 4:g}</text>"
        )
    for i, (label, value) in enumerate(items):
        y = top + i * row_h
        w = plot_w * value / top_value
        short = label if len(label) <= 48 else label[:22] + "\u2026" + label[-24:]
        parts.append(
            f'<text x="{label_w - 8}" y="{y + 14}" text-anchor="end"><title>{esc(label)}</title>'
            f"{esc(short)}</text>"
            f'<rect x="{label_w}" y="{y + 3}" width="{w:.1f}" height="{row_h - 6}" fill="{color}">'
            f"<title>{esc(label)}: {value:.3f} {esc(unit)}</title></rect>"
            f'<text x="{label_w + w + 4:.1f}" y="{y + 14}">{value:.2f}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def grouped_bar_chart(
    categories: Sequence[str], series: Sequence[tuple[str, Sequence[float], str]], unit: str
) -> str:
    """Vertical bars: for each category, one bar per series (name, values, colour)."""
    left, bottom, top, height = 50, 40, 30, 300
    plot_w, plot_h = WIDTH - left - 20, height - top - bottom
    top_value = _nice_max(max((v for _, vs, _ in series for v in vs), default=0))
    group_w = plot_w / max(1, len(categories))
    bar_w = group_w * 0.8 / max(1, len(series))
    parts = [f'<svg width="{WIDTH}" height="{height}" role="img">']
    for k in range(5):
        y = top + plot_h - plot_h * k / 4
        parts.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{WIDTH - 20}" y2="{y:.1f}" stroke="#e5e7eb"/>'
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" fill="#6b7280">'
            f"{top_value * k / 4:g}</text>"
        )
    for i, cat in enumerate(categories):
        x0 = left + i * group_w + group_w * 0.1
        for j, (name, values, color) in enumerate(series):
            h = plot_h * values[i] / top_value
            parts.append(
                f'<rect x="{x0 + j * bar_w:.1f}" y="{top + plot_h - h:.1f}" width="{bar_w:.1f}" '
                f'height="{h:.1f}" fill="{color}"><title>{esc(name)}, length {esc(cat)}: '
                f"{values[i]:.2f} {esc(unit)}</title></rect>"
            )
        parts.append(
            f'<text x="{left + (i + 0.5) * group_w:.1f}" y="{top + plot_h + 16}" '
            f'text-anchor="middle">{esc(cat)}</text>'
        )
    for j, (name, _, color) in enumerate(series):
        x = left + 10 + j * 260
        parts.append(
            f'<rect x="{x}" y="6" width="12" height="12" fill="{color}"/>'
            f'<text x="{x + 18}" y="16">{esc(name)}</text>'
        )
    parts.append(
        f'<text x="{left + plot_w / 2}" y="{height - 6}" text-anchor="middle" fill="#6b7280">'
        f"token length</text></svg>"
    )
    return "".join(parts)


def loglog_scatter(ys: Sequence[int], x_label: str, y_label: str) -> str:
    """Points (k + 1, ys[k]) on log-log axes, with the median of log-spaced bins as a
    line; zeros are drawn on a separate baseline marked 0."""
    if not ys:
        return "<p class=muted>no merges</p>"
    left, bottom, top, height = 60, 44, 16, 380
    plot_w, plot_h = WIDTH - left - 20, height - top - bottom - 20
    n = len(ys)
    x_max = math.log10(max(10, n))
    y_max = math.ceil(math.log10(max(10, max(ys))))

    def px(rank: float) -> float:
        return left + plot_w * math.log10(rank) / x_max

    def py(count: float) -> float:
        if count <= 0:
            return top + plot_h + 16
        return top + plot_h - plot_h * math.log10(count) / y_max

    parts = [f'<svg width="{WIDTH}" height="{height}" role="img">']
    for d in range(0, y_max + 1):
        y = py(10**d)
        parts.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{WIDTH - 20}" y2="{y:.1f}" stroke="#e5e7eb"/>'
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" fill="#6b7280">'
            f"{10**d:g}</text>"
        )
    parts.append(
        f'<text x="{left - 6}" y="{py(0) + 4:.1f}" text-anchor="end" fill="#6b7280">0</text>'
    )
    for d in range(0, math.floor(x_max) + 1):
        x = px(10**d)
        parts.append(
            f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + plot_h + 20}" '
            f'stroke="#e5e7eb"/><text x="{x:.1f}" y="{top + plot_h + 34}" '
            f'text-anchor="middle" fill="#6b7280">{10**d:g}</text>'
        )
    path = "".join(f"M{px(k + 1):.1f} {py(c):.1f}h1.6v1.6h-1.6z" for k, c in enumerate(ys))
    parts.append(f'<path d="{path}" fill="{BLUE}" fill-opacity="0.45"/>')
    # Median per log-spaced bin of ranks.
    line = []
    edges = sorted({max(1, round(10 ** (x_max * i / 40))) for i in range(41)} | {n + 1})
    for a, b in zip(edges, edges[1:], strict=False):
        chunk = sorted(ys[a - 1 : min(b, n + 1) - 1])
        if chunk:
            median = chunk[len(chunk) // 2]
            line.append(f"{px(math.sqrt(a * max(a, b - 1))):.1f},{py(median):.1f}")
    if len(line) > 1:
        parts.append(
            f'<polyline points="{" ".join(line)}" fill="none" stroke="{ORANGE}" stroke-width="2"/>'
        )
    parts.append(
        f'<text x="{left + plot_w / 2}" y="{height - 4}" text-anchor="middle" fill="#6b7280">'
        f"{esc(x_label)}</text>"
        f'<text transform="translate(14 {top + plot_h / 2}) rotate(-90)" text-anchor="middle" '
        f'fill="#6b7280">{esc(y_label)}</text>'
        f'<rect x="{WIDTH - 230}" y="{top + 2}" width="10" height="10" fill="{BLUE}"/>'
        f'<text x="{WIDTH - 214}" y="{top + 11}">one merge</text>'
        f'<line x1="{WIDTH - 140}" y1="{top + 7}" x2="{WIDTH - 124}" y2="{top + 7}" '
        f'stroke="{ORANGE}" stroke-width="2"/><text x="{WIDTH - 118}" y="{top + 11}">median</text>'
        "</svg>"
    )
    return "".join(parts)


LINE_COLORS = ("#2563eb", "#ea580c", "#0d9488", "#db2777", "#7c3aed", "#65a30d", "#ca8a04",
               "#0891b2")  # fmt: skip


def line_chart(
    xs: Sequence[int], series: Sequence[tuple[str, Sequence[float | None]]], y_label: str
) -> str:
    """One line per (name, ys) over xs on a log-2 x axis (vocabulary sizes); the
    last series is drawn dark and thick (the whole corpus)."""
    if not xs or not series:
        return "<p class=muted>no sizes</p>"
    left, bottom, top, legend_w = 60, 44, 16, 250
    height = max(320, top + bottom + 20 + 16 * len(series))
    plot_w, plot_h = WIDTH - left - legend_w - 20, height - top - bottom
    lo, hi = math.log2(min(xs)), math.log2(max(xs))
    values = [y for _, ys in series for y in ys if y is not None]
    y_max = _nice_max(max(values, default=1.0))

    def px(x: float) -> float:
        return left + (plot_w * (math.log2(x) - lo) / (hi - lo) if hi > lo else plot_w / 2)

    def py(y: float) -> float:
        return top + plot_h - plot_h * y / y_max

    parts = [f'<svg width="{WIDTH}" height="{height}" role="img">']
    for k in range(5):
        y = y_max * k / 4
        parts.append(
            f'<line x1="{left}" y1="{py(y):.1f}" x2="{left + plot_w}" y2="{py(y):.1f}" '
            f'stroke="#e5e7eb"/><text x="{left - 6}" y="{py(y) + 4:.1f}" text-anchor="end" '
            f'fill="#6b7280">{y:g}</text>'
        )
    for x in xs:
        parts.append(
            f'<line x1="{px(x):.1f}" y1="{top}" x2="{px(x):.1f}" y2="{top + plot_h}" '
            f'stroke="#f3f4f6"/><text x="{px(x):.1f}" y="{top + plot_h + 16}" '
            f'text-anchor="middle" fill="#6b7280">{fmt_int(x)}</text>'
        )
    for n, (name, ys) in enumerate(series):
        last = n == len(series) - 1
        color = "#111827" if last else LINE_COLORS[n % len(LINE_COLORS)]
        points = " ".join(
            f"{px(x):.1f},{py(y):.1f}" for x, y in zip(xs, ys, strict=True) if y is not None
        )
        parts.append(
            f'<polyline points="{points}" fill="none" stroke="{color}" '
            f'stroke-width="{3 if last else 1.6}"><title>{esc(name)}</title></polyline>'
        )
        ly = top + 8 + 16 * n
        short = name if len(name) <= 34 else name[:33] + "\u2026"
        parts.append(
            f'<line x1="{WIDTH - legend_w}" y1="{ly}" x2="{WIDTH - legend_w + 16}" y2="{ly}" '
            f'stroke="{color}" stroke-width="{3 if last else 2}"/>'
            f'<text x="{WIDTH - legend_w + 22}" y="{ly + 4}">{esc(short)}</text>'
        )
    parts.append(
        f'<text x="{left + plot_w / 2}" y="{height - 4}" text-anchor="middle" fill="#6b7280">'
        "vocabulary size (log scale)</text>"
        f'<text transform="translate(14 {top + plot_h / 2}) rotate(-90)" text-anchor="middle" '
        f'fill="#6b7280">{esc(y_label)}</text></svg>'
    )
    return "".join(parts)


def sweep_section(sweep: dict, max_lines: int = 8) -> str:
    """Bytes per token against vocabulary size: the largest sources, then all."""
    lines = sorted(sweep["sources"], key=lambda x: -x["bytes"])[:max_lines]
    series = [(x["name"], x["bytes_per_token"]) for x in lines]
    # A held-out sweep measured other text than the corpus the page is about.
    held_out = sweep.get("held_out")
    whole = "all held-out documents" if held_out else "all documents"
    # A superword tokenizer's gain is over ordinary BPE of each size (sweep's
    # own table): its line, where that BPE reached the size.
    ordinary = sweep["all"].get("bpe_bytes_per_token") or []
    against = ""
    if sweep.get("superword_at") and any(y is not None for y in ordinary):
        series.append((f"ordinary BPE, {whole}", ordinary))
        against = (
            f" Superword tokens from {fmt_int(sweep['superword_at'])} ids; ordinary BPE of the "
            "same sizes, its line beside the thick one."
        )
    series.append((whole, sweep["all"]["bytes_per_token"]))
    sample = f" on {sweep['sample']} sampled documents" if sweep.get("sample") else ""
    if held_out:
        sample = (
            f" on held-out text, <code>{esc(held_out)}</code> ({fmt_int(sweep['all']['documents'])}"
            " documents the tokenizer was not trained on), not this corpus"
        )
    return (
        "<h2 id=sweep>Bytes per token against vocabulary size</h2><p class=muted>From "
        f"<code>tokenmill sweep</code>{sample}: the tokenizer's merges cut to each size, "
        "which is what training to that size gives. One line per source (the "
        f"{len(lines)} largest), the thick one for {whole}.{against}</p>"
        + line_chart(sweep["vocab_sizes"], series, "bytes per token")
    )


def tokenization(doc: SampleDocument) -> str:
    """A document as coloured spans, one per token (tokens that are only part of a
    UTF-8 character are joined with their neighbours and outlined)."""
    spans = []
    for k, (text, ids, kind) in enumerate(doc.pieces):
        tip = esc(f"id {' + '.join(map(str, ids))}: {text!r}")
        shown = esc(text).replace("\n", '<span class="nl">\u21b5</span>\n')
        if kind == "special":
            spans.append(f'<span class="sp" title="{tip}">{shown}</span>')
        else:
            extra = ' class="part"' if kind == "partial" else ""
            color = PALETTE[k % len(PALETTE)]
            spans.append(f'<span{extra} style="background:{color}" title="{tip}">{shown}</span>')
    shown_tokens = sum(len(ids) for _, ids, _ in doc.pieces)
    cut = f", first {fmt_int(shown_tokens)} shown" if shown_tokens < doc.total_tokens else ""
    return (
        f'<div class="doc"><b>{esc(doc.title)}</b> <span class="muted">'
        f"{fmt_int(doc.total_tokens)} tokens, {fmt_int(doc.n_bytes)} bytes{cut}</span>"
        f'<div class="toks">{"".join(spans)}</div></div>'
    )


def mix_section(mix: dict) -> str:
    """The data recipe: per source, what it asked against what the mixture holds."""

    def asked(x: dict) -> str:
        if not x["asked"]:
            return "left out"
        form, value = next(iter(x["asked"].items()))
        return f"{value} {form}" if form != "weight" else f"weight {value}"

    def documents(x: dict) -> str:
        taken = fmt_int(x["taken"]["documents"])
        if x["asked"] or "available" not in x:
            return taken
        return f"{taken} of {fmt_int(x['available']['documents'])}"  # what a left-out one had

    rows = "".join(
        f"<tr><td>{esc(x['name'])}</td><td>{esc(asked(x))}</td>"
        f"<td class=num>{fmt_int(x['budget'])}</td><td class=num>{fmt_int(x['taken']['tokens'])}"
        f"</td><td class=num>{100 * x['asked_share']:.1f} %</td>"
        f"<td class=num>{100 * x['share']:.1f} %</td>"
        f"<td class=num>{documents(x)}</td>"
        f"<td class=num>{fmt_int(x['repeated']['documents'])}</td>"
        f"<td class=num>{x['epochs']:.2f}</td></tr>"
        for x in mix["sources"]
    )
    order = "in input order" if mix["shuffle"] is None else f"shuffled with seed {mix['shuffle']}"
    return (
        "<h2 id=mix>Data recipe: asked against written</h2><p class=muted>The mixture the "
        f"training layouts were written from, {esc(order)}: {fmt_int(mix['tokens'])} tokens "
        f"written of {fmt_int(mix['budget'])} asked, {fmt_int(mix['documents'])} documents "
        "(a repeated document counts each time). Share of the tokens written, per source:</p>"
        + hbar_chart([(x["name"], 100 * x["share"]) for x in mix["sources"]], "%")
        + "<table><tr><th>source</th><th>asked</th><th class=num>tokens asked</th>"
        "<th class=num>tokens written</th><th class=num>share asked</th>"
        "<th class=num>share written</th><th class=num>documents</th>"
        f"<th class=num>repeated</th><th class=num>epochs</th></tr>{rows}</table>"
    )


def stats_table(lines: list[dict], title: str) -> str:
    def ratio(x: dict) -> str:
        return "-" if x["bytes_per_token"] is None else f"{x['bytes_per_token']:.3f}"

    rows = "".join(
        f"<tr><td>{esc(x['name'])}</td><td class=num>{fmt_int(x['documents'])}</td>"
        f"<td class=num>{fmt_int(x['bytes'])}</td><td class=num>{fmt_int(x['tokens'])}</td>"
        f"<td class=num>{ratio(x)}</td></tr>"
        for x in lines
    )
    return (
        f"<table><tr><th>{esc(title)}</th><th class=num>documents</th><th class=num>bytes</th>"
        f"<th class=num>tokens</th><th class=num>bytes/token</th></tr>{rows}</table>"
    )


def page(
    *,
    title: str,
    summary: dict,
    tokenizer_info: dict,
    length_buckets: list[str],
    vocab_lengths: list[float],
    corpus_lengths: list[float],
    merge_counts: list[int],
    samples: list[SampleDocument],
    max_sources: int = 30,
    sweep: dict | None = None,
) -> str:
    s = summary
    cards = [
        ("documents", fmt_int(s["documents"])),
        ("bytes", fmt_int(s["bytes"])),
        ("tokens", fmt_int(s["tokens"])),
        ("bytes per token", f"{s['bytes_per_token'] or 0:.3f}"),
        ("vocabulary", fmt_int(s["vocab_size"])),
        ("ids used", f"{100 * s['utilization']:.1f} %"),
    ]
    by_bytes = sorted(s["sources"], key=lambda x: -x["bytes"])
    shown_sources = by_bytes[:max_sources]
    source_note = (
        f" The {len(shown_sources)} largest of {len(by_bytes)} sources, by bytes."
        if len(by_bytes) > len(shown_sources)
        else ""
    )

    def bpt(lines):
        return [(x["name"], x["bytes_per_token"] or 0.0) for x in lines]

    top_rows = "".join(
        f"<tr><td class=num>{k}</td><td class=num>{t['id']}</td><td><code>{esc(repr(t['text']))}"
        f"</code></td><td class=num>{fmt_int(t['count'])}</td>"
        f"<td class=num>{100 * t['share']:.2f} %</td></tr>"
        for k, t in enumerate(s["top"], 1)
    )
    never = s["never_used"]
    never_list = ", ".join(
        f"<code>{i} {esc(repr(t))}</code>"
        for i, t in zip(never["ids"], never["texts"], strict=True)
    )
    info = " &middot; ".join(f"{esc(k)}: <code>{esc(v)}</code>" for k, v in tokenizer_info.items())
    sections = [
        f"<h1>{esc(title)}</h1><p class=muted>{info}</p>",
        '<div class="cards">'
        + "".join(f'<div class="card"><b>{v}</b>{esc(k)}</div>' for k, v in cards)
        + "</div>",
        *([f"<p class=muted>{esc(skips_line(s['skipped']))}</p>"] if s.get("skipped") else []),
        "<h2 id=shards>Bytes per token, per shard</h2>"
        "<p class=muted>UTF-8 bytes of the input text per "
        "token that is not a special token: higher means the tokenizer compresses that text "
        "better.</p>" + hbar_chart(bpt(s["shards"]), "bytes/token"),
        stats_table(s["shards"], "shard"),
    ]
    if s["source_column"]:
        sections.append(
            f"<h2 id=sources>Bytes per token, per source</h2><p class=muted>Sources are the "
            f"<code>{esc(s['source_column'])}</code> column; documents without one count "
            f"under their shard.{source_note}</p>"
            + hbar_chart(bpt(shown_sources), "bytes/token", color="#0d9488")
            + stats_table(shown_sources, "source")
        )
    if s.get("mix"):
        sections.append(mix_section(s["mix"]))
    if sweep:
        sections.append(sweep_section(sweep))
    sections += [
        "<h2 id=lengths>Token length distribution</h2><p class=muted>Length of a token in "
        f"{esc(tokenizer_info.get('mode') == 'char' and 'characters' or 'bytes')}, special "
        "tokens left out: the share of the vocabulary's ids, and the share of the tokens in "
        "the corpus.</p>"
        + grouped_bar_chart(
            length_buckets,
            [
                ("vocabulary (% of ids)", vocab_lengths, BLUE),
                ("corpus (% of tokens)", corpus_lengths, ORANGE),
            ],
            "%",
        ),
        "<h2 id=merges>Merge frequency against merge rank</h2>"
        "<p class=muted>How often the token made "
        "by each merge occurs in the encoded corpus, by the merge's rank (the order in which "
        "training learned it), on log scales. Merges whose token never occurs sit on the 0 "
        "line: they only exist as steps to longer tokens.</p>"
        + loglog_scatter(merge_counts, "merge rank", "occurrences in the corpus"),
        "<h2 id=samples>Sample documents</h2>"
        "<p class=muted>One colour per token, in turn; hover for "
        "the id. Dark: special tokens. Dashed: tokens that are parts of one UTF-8 character, "
        "shown joined.</p>" + "".join(tokenization(d) for d in samples),
        f"<h2 id=top>The {len(s['top'])} most frequent tokens</h2>"
        "<table><tr><th>#</th><th>id</th>"
        f"<th>token</th><th class=num>count</th><th class=num>share</th></tr>{top_rows}</table>",
        "<h2 id=never>Never used</h2>"
        f"<p>{fmt_int(never['count'])} of {fmt_int(s['vocab_size'])} ids "
        "never occur in the corpus"
        + (f"; the first {len(never['ids'])}: {never_list}" if never["count"] else "")
        + ".</p>",
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>"
        + "\n".join(sections)
        + "</body></html>\n"
    )
