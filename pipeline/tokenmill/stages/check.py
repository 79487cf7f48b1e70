"""check: a lint of a `run` output folder before a training run on it.

`tokenmill check OUT` reads back what OUT holds and names, one line each,
whatever would not train as the run meant it to:

1. every layout OUT has (files of its folder in the manifest), its files
   those the manifest lists (stages/check_files.py), read back by
   the trainer's own reading code when installed, else by tokenmill's (and
   said so): its documents, split by split, are the token shards' rows framed
   by the layout's rule: ``<|bos|>`` first with --bos; ``<|endoftext|>`` last
   in megatron, datatrove, olmo and packed (layouts/stream.py), bin's rows as
   the shard holds them. Every document is compared, a few thousand at a time
   as flat arrays of ids and of lengths; no file of a layout is empty
   (numpy's memmap cannot open one: bin writes none for documents of no
   ids, and records them in its index.json); each datatrove .ds.metadata
   is the three lines datatrove writes, its count that of its .ds; a file
   that cannot be read is named;
2. the dtype of every layout's ids holds the vocabulary's largest id;
3. the token shards' rows end in ``<|endoftext|>`` when the run ended
   documents with it, and in no such id with --no-eos; --bos needs the
   tokenizer's ``<|bos|>``;
4. the tokenizer's sha256 (and pattern, and the ids the layouts record) in
   the token shards, the layouts' files and the manifest are those of
   OUT/tokenizer.json;
5. a sample of documents, spread over the token shards, decodes to its text
   in DATA (char mode keeps words, not the spaces between them: there the
   text is compared as char mode reads it), and DATA's inputs are still the
   ones the run read; each token shard records the input the manifest lists
   it for;
6. with a mixture (OUT/mix/, which the layouts were written from), each of
   its parts' rows is the token shard row it names (stages/check_mix.py),
   and the layouts' problems name the part.

The token shards are the source of truth: the layouts are compared with
them. `verify` checks that OUT's files are the bytes the run wrote; `check`,
that they mean what the run meant.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from operator import attrgetter

import numpy as np
import pyarrow as pa

from tokenmill.errors import NoSuchPath, TokenmillError, one_line
from tokenmill.io.readers import read_batches
from tokenmill.io.storage import AnyPath, is_remote, location
from tokenmill.layouts import Document, Layout, TrainerMissing, layout
from tokenmill.stages.check_documents import Frame, compare
from tokenmill.stages.check_files import file_problems, layouts_of
from tokenmill.stages.check_mix import Digests, part_problems
from tokenmill.stages.layout import MANIFEST, TOKENIZER
from tokenmill.stages.manifest import changed_from, read_manifest
from tokenmill.stages.results import CheckResult
from tokenmill.stages.split import SPLITS
from tokenmill.stages.tokens import TokenShard, list_ids, open_token_shard
from tokenmill.tokenizer import BOS, ENDOFTEXT, Tokenizer


@dataclass(frozen=True)
class Run:
    """What OUT says the run was: its tokenizer, token shards and options."""

    out: AnyPath
    manifest: dict
    tok: Tokenizer
    shards: list[TokenShard]  # in input order
    # what the layouts were written from: the shards, or the parts of the run's mixture
    layout_shards: list[TokenShard]
    eos: bool  # encode ended every row in <|endoftext|>
    bos: int | None  # --bos: the id put first in every layout's documents
    fraction: float  # --val-fraction
    layout_folder: str = "tokens"  # of layout_shards in OUT

    @property
    def config(self) -> dict:
        return self.manifest.get("config", {})

    def eos_id(self) -> int | None:
        return self.tok.eos_id if ENDOFTEXT in self.tok.special_tokens else None


def listed_shard(out: AnyPath, folder: str, name: str) -> TokenShard:
    """A token shard or mixture part the manifest lists, opened."""
    try:
        return open_token_shard(out / folder / name, name)
    except NoSuchPath:
        # The rest of the check compares with these: without one, none is said.
        raise TokenmillError(
            f"{out / folder / name}: missing, though {MANIFEST} lists it; `tokenmill verify` "
            "says what else differs, a rerun of `tokenmill run` makes it again"
        ) from None


def load_run(out: AnyPath, problems: list[str]) -> Run:
    manifest = read_manifest(out)
    config = manifest.get("config", {})
    names = [e["path"].removeprefix("tokens/") for e in manifest.get("outputs", [])]
    if not names:
        raise TokenmillError(f"{out}: the manifest lists no token shards (run `tokenmill run`)")
    tok = Tokenizer.load(out / TOKENIZER)
    # Opened one by one, not by token_shards: a shard recording another
    # tokenizer is a problem to name, not a reason to stop.
    shards = sorted((listed_shard(out, "tokens", name) for name in names), key=lambda s: s.source)
    bos = None
    if config.get("bos"):
        if BOS in tok.special_tokens:
            bos = tok.special_id(BOS)
        else:
            problems.append(f"{TOKENIZER}: has no {BOS}, which the run's --bos puts first")
    eos = bool(config.get("eos", True))
    parts = [e["path"] for e in manifest.get("files", []) if e["path"].startswith("mix/")]
    mixed = [listed_shard(out, "mix", p.removeprefix("mix/")) for p in parts]
    fraction = float(config.get("val_fraction", 0.0))
    folder = "mix" if mixed else "tokens"
    return Run(out, manifest, tok, shards, mixed or shards, eos, bos, fraction, folder)


# ---- 4: the tokenizer each part of OUT records ----------------------------


def short(sha: str) -> str:
    return f"{sha[:12]}..."


def tokenizer_problems(run: Run) -> list[str]:
    tok, manifest, problems = run.tok, run.manifest, []
    for shard in run.shards:
        if shard.sha256 != tok.sha256:
            problems.append(
                f"tokens/{shard.name}: records tokenizer sha256 {short(shard.sha256)}, "
                f"{TOKENIZER}'s is {short(tok.sha256)}"
            )
        if shard.vocab_size and shard.vocab_size != tok.vocab_size:
            problems.append(
                f"tokens/{shard.name}: records a vocabulary of {shard.vocab_size} ids, "
                f"{TOKENIZER} has {tok.vocab_size}"
            )
        problems += dtype_problems(f"tokens/{shard.name}", shard.id_dtype, tok.vocab_size)
    recorded = manifest.get("tokenizer_sha256")
    if recorded is not None and recorded != tok.sha256:
        problems.append(
            f"{MANIFEST}: records tokenizer sha256 {short(recorded)}, "
            f"{TOKENIZER}'s is {short(tok.sha256)}"
        )
    pattern = run.config.get("pattern")
    if run.config.get("superword_at") is not None:
        # The config records stage 1's pattern; superword tokens encode with stage 2's.
        from tokenmill.tokenizer.superword import PATTERN

        pattern = PATTERN
    # Char mode splits at whitespace: its tokenizer has no pattern to compare.
    if tok.mode == "byte" and pattern is not None and pattern != tok.pattern:
        problems.append(
            f"{MANIFEST}: records pattern {pattern!r}, {TOKENIZER}'s is {tok.pattern!r}"
        )
    return problems


def source_problems(run: Run) -> list[str]:
    """Each token shard made from the input the manifest lists it for: a shard
    copied over another decodes to its own input's text, so the sample alone
    would pass it."""
    listed = {e["path"].removeprefix("tokens/"): e.get("shard") for e in run.manifest["outputs"]}
    return [
        f"tokens/{shard.name}: holds the tokens of input {shard.source}, "
        f"the manifest lists it for {listed[shard.name]}"
        for shard in run.shards
        if listed.get(shard.name) not in (None, shard.source)
    ]


def recorded_problems(where: str, recorded: dict[str, str], run: Run) -> list[str]:
    """What a layout's files record of the tokenizer, against OUT's."""
    tok = run.tok
    want = {
        "tokenizer_sha256": tok.sha256,
        "vocab_size": str(tok.vocab_size),
        "eos_id": str(run.eos_id()),
        "bos_id": str(run.bos),
        "pattern": tok.pattern,
    }
    problems = []
    for key, value in recorded.items():
        # A format's "no id" (null in JSON) reads as None.
        value = "None" if key == "bos_id" and value in ("", "null") else value
        if key in want and value != want[key]:
            problems.append(f"{where}: records {key} {value}, {TOKENIZER}'s is {want[key]}")
    return problems


def dtype_problems(where: str, dtype: np.dtype, vocab_size: int) -> list[str]:
    """Whether ids of `dtype` hold every id of the vocabulary (0 to vocab_size - 1)."""
    if dtype.kind not in "iu":
        return [f"{where}: ids of {dtype.name}, not integers"]
    if np.iinfo(dtype).max < vocab_size - 1:
        return [
            f"{where}: ids of {dtype.name} (at most {np.iinfo(dtype).max}) cannot hold "
            f"the vocabulary's ids up to {vocab_size - 1}"
        ]
    return []


# ---- 3 and 5: the token shards' rows, and a sample of them ----------------


@dataclass(frozen=True)
class Sampled:
    shard: TokenShard
    row: int
    ids: list[int]


def sample_positions(run: Run, n: int) -> np.ndarray:
    """`n` documents spread evenly over the token shards, as positions in their
    concatenation in input order (the same ones every time)."""
    total = sum(s.documents for s in run.shards)
    if n <= 0 or total == 0:
        return np.empty(0, np.int64)
    return np.unique(np.linspace(0, total - 1, min(n, total)).round().astype(np.int64))


def scan_shards(
    run: Run, positions: np.ndarray, table: Digests | None = None
) -> tuple[list[str], list[Sampled]]:
    """Every row's end (check 3) and ids within the vocabulary, shard by
    shard; the rows at `positions` (check 5); and into `table`, each
    document's digest (check 6)."""
    problems, sampled, first = [], [], 0
    eos, size = run.eos_id(), run.tok.vocab_size
    for shard in run.shards:
        bad_end, first_bad, beyond = 0, None, 0
        done = 0  # rows of the shard read
        for batch in shard.batches(columns=("row", "ids")):
            flat, offsets = list_ids(batch.column("ids"))
            rows = batch.column("row").to_numpy()
            lens = np.diff(offsets)
            last = np.full(len(lens), -1, np.int64)
            last[lens > 0] = flat[offsets[1:][lens > 0] - 1]
            if eos is not None:
                bad = (last != eos) if run.eos else (last == eos)
                if bad.any():
                    bad_end += int(bad.sum())
                    first_bad = first_bad if first_bad is not None else int(rows[bad][0])
            beyond += int((flat >= size).sum())
            if table is not None:
                table.add(shard, rows, flat, offsets)
            here = positions[(positions >= first + done) & (positions < first + done + len(lens))]
            for i in (here - first - done).tolist():
                sampled.append(
                    Sampled(shard, int(rows[i]), flat[offsets[i] : offsets[i + 1]].tolist())
                )
            done += len(lens)
        first += done
        if bad_end:
            what = (
                f"do not end in {ENDOFTEXT} (id {eos}), which the run ends documents with"
                if run.eos
                else f"end in {ENDOFTEXT} (id {eos}) though the run had --no-eos"
            )
            problems.append(
                f"tokens/{shard.name}: {bad_end} of {done} rows {what}; the first: row {first_bad}"
            )
        if beyond:
            problems.append(f"tokens/{shard.name}: {beyond} ids beyond the vocabulary of {size}")
    return problems, sampled


def sample_problems(run: Run, sampled: list[Sampled], data: AnyPath | None) -> list[str]:
    """Each sampled row decoded (without the <|endoftext|> the run added)
    against its text in DATA."""
    if not sampled:
        return []
    data = location(data if data is not None else run.manifest["data"])
    inputs = {e["path"]: e for e in run.manifest.get("inputs", [])}
    problems = []
    for shard, group in itertools.groupby(sampled, key=attrgetter("shard")):
        wanted = {s.row: s for s in group}
        path = data if data.is_file() else data / shard.source
        if not path.is_file():
            problems.append(f"input {shard.source}: not in DATA ({path}); its sample not compared")
            continue
        entry = inputs.get(shard.source)
        if entry is not None and changed_from(entry, path):
            problems.append(
                f"input {shard.source}: changed since the run (sha256 not the manifest's)"
            )
        try:
            texts = input_texts(path, set(wanted), run.config)
        except TokenmillError as e:
            problems.append(f"input {shard.source}: {e}")
            continue
        for row, s in wanted.items():
            if row not in texts:
                problems.append(f"input {shard.source}: has no row {row} (tokens/{shard.name} has)")
                continue
            got, want = decoded(run, s.ids), as_encoded(run.tok, texts[row])
            if got != want:
                at = len(os.path.commonprefix([got, want]))
                problems.append(
                    f"tokens/{shard.name} row {row}: decodes to other text than {shard.source} "
                    f"row {row} in DATA, from character {at}: {got[at : at + 20]!r} "
                    f"against {want[at : at + 20]!r}"
                )
    return problems


def input_texts(path: AnyPath, rows: set[int], config: dict) -> dict[int, str]:
    """The text of the documents at `rows` of an input shard, read as the run read it."""
    found: dict[int, str] = {}
    for batch_rows, docs in read_batches(
        path,
        config.get("text_column", "text"),
        on_skip=lambda _: None,
        txt_unit=config.get("txt_unit", "line"),
    ):
        numbers = batch_rows.to_numpy()
        for i in np.flatnonzero(np.isin(numbers, list(rows))).tolist():
            found[int(numbers[i])] = docs[i].as_py()
        if len(found) == len(rows):
            break
    return found


def decoded(run: Run, ids: list[int]) -> str:
    if run.eos and ids and ids[-1] == run.eos_id():
        ids = ids[:-1]
    try:
        return run.tok.decode(ids)
    except TokenmillError as e:
        return f"<{e}>"


def as_encoded(tok: Tokenizer, text: str) -> str:
    """`text` as decoding its ids can give it back: normalized as the
    tokenizer normalizes (byte mode); as char mode reads it (words, lowercased
    if so trained, unknown characters as <unk>)."""
    if tok.mode == "char":
        return tok.decode(tok.encode_ordinary(text))
    return tok._normalize(pa.array([text], pa.large_string()))[0].as_py()


# ---- 1 and 2: each layout read back (stages/check_documents.py) ---------


def check_layout(run: Run, name: str) -> tuple[dict, list[str]]:
    """One layout of OUT read back: what was read, and with what; its problems."""
    lay: Layout = layout(name)
    folder = location(run.out) / lay.folder
    where = f"{lay.folder}/"
    reader = lay.reader
    missing = ""  # why the trainer's reader was not used

    def read() -> Iterator[Document]:
        nonlocal missing
        split = run.fraction > 0
        if lay.local_only and is_remote(folder):
            missing = f"{reader} reads local files only"
            return lay.read(folder, split)
        try:
            return lay.framework_read(folder, split)
        except TrainerMissing as e:
            missing = str(e)
            return lay.read(folder, split)

    frame = Frame(run.eos_id(), run.bos, lay.ends_in_eos, run.fraction)
    shards = run.layout_shards
    order = list(range(len(shards)))
    compared = compare(where, read, shards, order, frame, run.layout_folder)
    # One set of files per token shard may come back in the order of the files'
    # names rather than of the inputs: either is the corpus.
    by_name = sorted(order, key=lambda k: shards[k].name)
    if compared.problems and by_name != order:
        again = compare(where, read, shards, by_name, frame, run.layout_folder)
        compared = compared if again.problems else again
    how = f"tokenmill's reader: {missing}" if missing else reader
    summary = {"name": name, "folder": where, "documents": compared.documents, "read_with": how}
    summary["equal"] = not compared.problems
    summary["readable"] = compared.readable
    problems = compared.problems
    if name == "packed" and compared.readable:  # else its files were named already
        from tokenmill.layouts.packed_read import sequence_problems

        for side in SPLITS if run.fraction > 0 else ("",):
            problems += sequence_problems(folder / side if side else folder, f"{where}{side}")
    if name == "datatrove" and compared.readable:  # else its files were named already
        from tokenmill.layouts.datatrove import metadata_problems

        problems += metadata_problems(folder, where)
    for dtype in sorted(compared.dtypes, key=str):
        problems += dtype_problems(where, dtype, run.tok.vocab_size)
    try:
        problems += recorded_problems(where, lay.recorded(folder), run)
    except (TokenmillError, OSError, ValueError) as e:
        why = one_line(e)
        if not any(why in p for p in problems):  # a file the reading named already
            problems.append(f"{where}: cannot read what it records of the tokenizer ({why})")
    return summary, problems


def not_compared(name: str) -> dict:
    """The summary of a layout whose files are not the manifest's: not read."""
    lay = layout(name)
    return {
        "name": name,
        "folder": f"{lay.folder}/",
        "documents": 0,
        "read_with": None,
        "equal": False,
        "readable": True,
        "listed": False,
    }


def run_check(out: AnyPath, *, data: AnyPath | None = None, decode: int = 100) -> CheckResult:
    """Check the `run` output folder `out` (see the module's docstring), `decode`
    documents decoded against their text in `data` (default: the manifest's DATA)."""
    start = time.monotonic()
    out = location(out)
    problems: list[str] = []
    run = load_run(out, problems)
    problems += tokenizer_problems(run) + source_problems(run)
    table = Digests() if run.layout_folder == "mix" else None
    scanned, sampled = scan_shards(run, sample_positions(run, decode), table)
    problems += scanned
    if table is not None:
        problems += part_problems(run.layout_shards, table)
    names, missing = layouts_of(run.manifest)
    problems += missing
    layouts = []
    for name in names:
        if unlisted := file_problems(out, run.manifest, name):
            layouts.append(not_compared(name))
            problems += unlisted
            continue
        summary, found = check_layout(run, name)
        layouts.append(summary)
        problems += found
    problems += sample_problems(run, sampled, data)
    return CheckResult(
        seconds=time.monotonic() - start,
        layouts=layouts,
        documents=sum(s.documents for s in run.shards),
        mixture=sum(s.documents for s in run.layout_shards) if run.layout_folder == "mix" else None,
        sampled=len(sampled),
        problems=problems,
    )
