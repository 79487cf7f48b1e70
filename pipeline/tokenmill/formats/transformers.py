"""Tokenizer -> a folder that Hugging Face transformers loads.

`save` writes DIR with

* `tokenizer.json`: the `hf` export (see `hf.py`), byte or char mode;
* `tokenizer_config.json`: `tokenizer_class` PreTrainedTokenizerFast, the
  special tokens by role, `model_max_length` (transformers' own "no limit":
  tokenmill knows no context length), `clean_up_tokenization_spaces` false
  (so that decoding gives the text back as it was), `add_bos_token` and
  `add_eos_token` false;
* `special_tokens_map.json`: the special tokens by role, as older
  transformers versions read them.

so that `AutoTokenizer.from_pretrained(DIR)` is a fast tokenizer with

    tok(text, add_special_tokens=False).input_ids + [tok.eos_token_id]

equal to the ids `encode` writes for the document (with `--eos`), for text
that holds no special token's text (transformers cuts that out as the special
token; tokenmill encodes it as text). `tok(text)` adds nothing either, as
GPT-2's tokenizer does: the eos goes between documents, not after a prompt;
`tok.add_eos_token = True` makes `tok(text)` append it.

Roles: `<|endoftext|>` is `eos_token`, `<|bos|>` (`--bos`) `bos_token`,
`<unk>` (char mode) `unk_token`; every other special token (`--special-token`)
is one of `additional_special_tokens`, with its id from tokenizer.json.

DIR is never left half-written. A new DIR is written as a temporary folder
beside it, then renamed. An existing DIR may be empty or hold only these
three files (an earlier export, replaced; temporaries a killed export left
are removed); anything else in it is refused, so that an export never
deletes a file it did not write. Its files are all written under temporary
names first, then each renamed into place: the folder itself stays (renaming
over it would fail on a mount point, and pull it from under a shell whose
working directory it is).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from pathlib import Path

from tokenmill.errors import TokenmillError, WriteError
from tokenmill.formats import hf
from tokenmill.io.writers import TMP_MARK, is_temporary, os_reason
from tokenmill.tokenizer import BOS, ENDOFTEXT, UNK, Tokenizer

TOKENIZER_FILE = "tokenizer.json"
CONFIG_FILE = "tokenizer_config.json"
SPECIAL_TOKENS_FILE = "special_tokens_map.json"
FILES = (TOKENIZER_FILE, CONFIG_FILE, SPECIAL_TOKENS_FILE)

ROLES = {ENDOFTEXT: "eos_token", BOS: "bos_token", UNK: "unk_token"}

# transformers' VERY_LARGE_INTEGER, what it assumes when a folder names no
# limit; written out so that the file says so rather than leaving it implied.
MODEL_MAX_LENGTH = int(1e30)


def special_tokens_map(tok: Tokenizer) -> dict:
    """The special tokens by role; the rest, in id order, as additional ones."""
    by_id = sorted(tok.special_map.items(), key=lambda item: item[1])
    roles = {ROLES[t]: t for t, _ in by_id if t in ROLES}
    extra = [t for t, _ in by_id if t not in ROLES]
    return {**roles, **({"additional_special_tokens": extra} if extra else {})}


def config(tok: Tokenizer) -> dict:
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        **special_tokens_map(tok),
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": MODEL_MAX_LENGTH,
    }


def _json(obj: dict) -> str:
    return json.dumps(obj, ensure_ascii=False, indent=2) + "\n"


def save(tok: Tokenizer, folder: Path) -> list[Path]:
    """Write the folder (see the module docstring); returns its files."""
    # Everything that can refuse the tokenizer (hf's checks) runs before
    # anything is written.
    files = {
        TOKENIZER_FILE: hf.to_json(tok),
        CONFIG_FILE: _json(config(tok)),
        SPECIAL_TOKENS_FILE: _json(special_tokens_map(tok)),
    }
    folder = Path(folder)
    _check_target(folder)
    if folder.exists():
        _replace_files(folder, files)
    else:
        _write_new_folder(folder, files)
    return [folder / name for name in files]


def _leftover(name: str) -> bool:
    """A temporary of one of the export's files, left by a killed export."""
    return is_temporary(name) and name[1:].split(TMP_MARK)[0] in FILES


def _temporary(path: Path) -> Path:
    return path.with_name(f".{path.name[:200]}{TMP_MARK}{os.getpid()}-{secrets.token_hex(4)}")


def _check_target(folder: Path) -> None:
    if not folder.exists():
        return
    if not folder.is_dir():
        raise TokenmillError(f"{folder}: exists and is not a folder")
    others = sorted(
        p.name
        for p in folder.iterdir()
        if (p.name not in FILES and not _leftover(p.name)) or p.is_dir()
    )
    if others:
        shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
        raise TokenmillError(
            f"{folder}: holds files a transformers export does not write ({shown}); "
            "give a new or empty folder, or an earlier export to replace"
        )
    present = [name for name in FILES if (folder / name).exists() or (folder / name).is_symlink()]
    if present and not _earlier_export(folder, present):
        raise TokenmillError(
            f"{folder}: holds {', '.join(present)}, not as tokenmill's export writes them; "
            "give a new or empty folder, or an earlier export to replace"
        )


def _earlier_export(folder: Path, present: list[str]) -> bool:
    """Whether the export's files in `folder` are an earlier export's: regular
    files (never a link or FIFO, which replacing would follow or bypass), with
    the config tokenmill writes (another tool's model folder has these names
    too, and its own settings in them)."""
    if any((folder / n).is_symlink() or not (folder / n).is_file() for n in present):
        return False
    try:
        written = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (
        isinstance(written, dict)
        and written.get("tokenizer_class") == "PreTrainedTokenizerFast"
        and written.get("model_max_length") == MODEL_MAX_LENGTH
    )


def _write_new_folder(folder: Path, files: dict[str, str]) -> None:
    folder.parent.mkdir(parents=True, exist_ok=True)
    # absolute: `missing/..` has no name to put a temporary beside
    tmp = _temporary(Path(os.path.abspath(folder)))
    try:
        tmp.mkdir()
        for name, text in files.items():
            (tmp / name).write_text(text, encoding="utf-8")
        os.replace(tmp, folder)
    except OSError as e:
        raise WriteError(f"{folder}: cannot write ({os_reason(e)})") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _replace_files(folder: Path, files: dict[str, str]) -> None:
    for p in folder.iterdir():
        if _leftover(p.name):
            p.unlink(missing_ok=True)
    staged: list[tuple[Path, Path]] = []
    try:
        for name, text in files.items():
            staged.append((_temporary(folder / name), folder / name))
            staged[-1][0].write_text(text, encoding="utf-8")
        # The config first: an export killed between two renames is still
        # known as tokenmill's (_earlier_export) by it.
        for tmp, path in sorted(staged, key=lambda pair: pair[1].name != CONFIG_FILE):
            os.replace(tmp, path)
    except OSError as e:
        raise WriteError(f"{folder}: cannot write ({os_reason(e)})") from None
    finally:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
