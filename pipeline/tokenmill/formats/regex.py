"""Pre-tokenization regexes between the two engines in play.

tokenmill and tiktoken run patterns with fancy-regex (Rust); Hugging Face
tokenizers runs them with Oniguruma (Ruby syntax). The character classes the
presets use (\\s, \\p{L}, \\p{N}, ...) mean the same in both, but a few
constructs do not, and are rewritten so that a pattern splits text the same
way in either engine:

| construct      | fancy-regex                  | Oniguruma (Ruby syntax)              |
| -------------- | ---------------------------- | ------------------------------------ |
| `X{n,m}+`      | possessive: `(?>X{n,m})`     | `(?:X{n,m})+` (repeat the interval)  |
| `X{n}?`        | lazy, so `X{n}`              | optional: `(?:X{n})?`                |
| `$`            | end of text: `\\z`            | end of a line: `(?m:$)`              |
| `^`            | start of text: `\\A`          | start of a line, not the text's end: |
|                |                              | `(?:\\A\\|(?m:^)(?!\\z))`              |
| `{,m}`         | (not accepted)               | `{0,m}`                              |
| `a(?i)b\\|c`    | `a(?i:b)\\|(?i:c)`             | `a(?i:b\\|c)`: to the group's end     |
| `(?i)\\P{Lu}`   | case-folded: `[^\\p{Lu}]`     | not case-folded: `(?-i:\\P{Lu})`      |
| `\\pL`          | `\\p{L}`                      | the letters `pL`                     |
| `\\x7`          | (not accepted)               | `\\x{7}`                              |
| `a\\x`          | (not accepted)               | `ax`: the letter, ending the pattern |
| `\\<`, `\\>`     | a word's start, end (refused)| the characters `<`, `>`              |
| `(?P<n>X)`     | a named group                | (not accepted): `(?<n>X)`            |

A Unicode property is written as `regex_sets.PROPERTIES` spells it (the engines'
loose matching of names differs in corners), and only one of those.

Constructs whose meaning differs and that have no simple rewrite (\\w, \\b,
\\h, \\K, back-references, inline flags other than i, \\p{Word}, \\p{Graph},
\\p{Print}, case-insensitive characters Oniguruma folds to several: see
`_Translation.fold`; a case-insensitive class holding one, or holding `&&`
or a negated part, which Oniguruma folds once built and fancy-regex part by
part; an atomic group or a possessive quantifier inside a look-behind,
which fancy-regex misreads) raise TokenmillError rather than being
approximated. So, on export, do constructs fancy-regex takes and Oniguruma
refuses (a repeated anchor or look-around, `$` or a look-ahead inside a
look-behind, a capture group inside a negative one), and, where tokenizers
is installed to ask, any translation its Oniguruma does not compile.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tokenmill.errors import TokenmillError
from tokenmill.formats.regex_sets import (
    multi_fold_held,
    multi_folds,
    property_key,
    property_names,
)
from tokenmill.tokenizer.ids import PATTERNS
from tokenmill.tokenizer.pattern_errors import pattern_message, quoted

FANCY = "fancy-regex"
ONIG = "oniguruma"

# Escapes that mean the same in both engines (the letter after the backslash).
# (Not \< and \>: word boundaries to fancy-regex, the characters to Oniguruma.)
_SAME_ESCAPES = set("sSdDnrtfvpPxuAz\\.^$|?*+()[]{}-/'\" #&~,:;=!@%`_")
_CONTROLS = {"n": "\n", "r": "\r", "t": "\t", "f": "\f", "v": "\v"}
_INTERVAL = re.compile(r"\{(\d*)(,?)(\d*)\}")
_HEX = re.compile(r"[0-9A-Fa-f]{0,2}")
_DASH = "a-z"  # a class's dash among its characters, unlike any one character
_GROUP_OPENERS = ("(?:", "(?=", "(?!", "(?<=", "(?<!", "(?>")
_FLAG_GROUP = re.compile(r"\(\?(-?i)(:|\))")
_NAMED_GROUP = re.compile(r"\(\?P?<([A-Za-z_][A-Za-z0-9_]*)>")

# The regex of tokenizers' ByteLevel(use_regex=true) (its byte_level.rs).
BYTE_LEVEL_REGEX = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"

# Presets as other tools spell them in tokenizer.json (Oniguruma patterns),
# each split exactly as the preset splits: tests/formats/test_preset_spellings.py
# runs tokenizers' own splitting over every code point in several contexts.
# The preset's own spellings (tiktoken's, tokenmill's export) are `preset_name`'s.
ONIG_SPELLINGS = {
    BYTE_LEVEL_REGEX: "gpt2",
    # tiktoken's r50k pattern, as transformers' TikTokenConverter writes it:
    # Oniguruma's `$` ends a line, but after `\s++` only the text's end is left.
    r"'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s": "gpt2",
}

# Spellings that split otherwise than the preset they look like, and why.
NOT_PRESETS = {
    # tiktoken's cl100k pattern, as transformers' TikTokenConverter writes it.
    r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"
    r"|\s++$|\s*[\r\n]|\s+(?!\S)|\s": "cl100k's as tiktoken writes it, but Oniguruma reads "
    "\\p{N}{1,3}+ as one piece per run of digits, not pieces of three",
    # transformers' TikTokenConverter's default: cl100k's older spelling.
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+": "cl100k's older spelling, but it splits the spaces after "
    "a text's last newline from it, which cl100k keeps in one piece",
}


def fancy_to_onig(pattern: str) -> str:
    """A fancy-regex pattern (tokenmill's, tiktoken's) as Oniguruma reads it;
    TokenmillError where Oniguruma cannot read it alike, or (where
    tokenizers is installed to ask) cannot compile the translation."""
    onig = _Translation(pattern, FANCY).run()
    _compiles_in_oniguruma(pattern, onig)
    return onig


def _compiles_in_oniguruma(pattern: str, onig: str) -> None:
    """Refuse a translation that tokenizers' Oniguruma does not compile: an
    export would write a file that tokenizers cannot load. tokenizers is an
    optional dependency; without it the translation's own refusals stand."""
    try:
        import tokenizers
    except ImportError:
        return
    try:
        tokenizers.Regex(onig)
    except Exception as e:  # tokenizers raises Exception itself
        reason = " ".join(str(e).split())
        written = "" if onig == pattern else f", written {quoted(onig)} for Oniguruma,"
        raise TokenmillError(
            f"pre-tokenization pattern {quoted(pattern)}{written} is one that Oniguruma "
            f"(Hugging Face tokenizers) refuses ({reason})"
        ) from None


def onig_to_fancy(pattern: str) -> str:
    """An Oniguruma pattern (from a tokenizer.json) as fancy-regex reads it;
    TokenmillError naming `pattern` (positions counted in it) where
    fancy-regex cannot compile that."""
    from tokenmill import _native

    translation = _Translation(pattern, ONIG)
    fancy = translation.run()
    # A first branch that matches any character: the core refuses a pattern
    # that leaves text unmatched, and this one leaves none.
    head = "[\\s\\S]|(?:"
    compiled = f"{head}{fancy})"
    try:
        _native.pretokenize("", compiled)
    except _native.NativeError as e:

        def written(m: re.Match) -> str:
            at = len(compiled.encode()[: int(m[2])].decode(errors="ignore")) - len(head)
            return m[1] + str(len(pattern[: translation.origin(at)].encode()))

        message = re.sub(r"(at position )(\d+)", written, str(e), count=1)
        raise TokenmillError(pattern_message(message, pattern)) from None
    return fancy


def covering(pattern: str) -> str:
    """`pattern` plus a last branch that matches each maximal run of text the
    pattern does not match, so that finding all matches (fancy-regex, which
    drops unmatched text) gives the pieces of Hugging Face's Split with
    behavior "isolated" (which keeps unmatched text as pieces). A pattern of
    that form already is returned as it is, so exporting and importing it
    again keeps it (and `[\\s\\S]`, unlike `(?s:.)`, Oniguruma reads alike)."""
    # The covered pattern is the first of the two copies of it.
    inner = pattern[3 : 3 + (len(pattern) - len(_covering(""))) // 2]
    if pattern == _covering(inner):
        return pattern
    return _covering(pattern)


def _covering(pattern: str) -> str:
    return f"(?:{pattern})|(?:(?!(?:{pattern}))[\\s\\S])+"


def _unsupported(what: str, pattern: str) -> TokenmillError:
    return TokenmillError(
        f"pre-tokenization pattern uses {what}, which Oniguruma (Hugging Face) and "
        f"fancy-regex (tokenmill, tiktoken) read differently: {quoted(pattern)}"
    )


def _not_oniguruma(what: str, pattern: str) -> TokenmillError:
    return TokenmillError(
        f"pre-tokenization pattern uses {what}, which Oniguruma (Hugging Face tokenizers) "
        f"refuses: {quoted(pattern)}"
    )


@dataclass
class _Group:
    start: int  # index in `out` of its opener (-1: the whole pattern)
    case_insensitive: bool  # where it opens, and again after it closes
    bare: int = 0  # groups opened for its bare flags, closed with it
    flag: str = ""  # fancy-regex: the last bare flag, in force after a `|` too
    restores: bool = True  # fancy-regex: whether its flags end with it (only (?:...) do)
    opener: str = ""  # as written: "(?:", "(?<=", "(" ...
    behind: str = ""  # the look-behinds it is in, its own too: "=" or "!" each
    # Oniguruma refuses to repeat an assertion (an anchor, a look-around), or
    # a (?:...) group one of whose alternatives is one assertion alone:
    atoms: int = 0  # the atoms of its current alternative so far
    assertion: bool = False  # whether the last of them is an assertion
    asserts: bool = False  # whether one of its alternatives is one assertion alone


class _Translation:
    """`pattern` of engine `source` as the other engine reads it (`run`)."""

    def __init__(self, pattern: str, source: str) -> None:
        self.pattern = pattern
        self.source = source
        self.out: list[
            tuple[str, int]
        ] = []  # the translation's parts, each with its index in pattern
        self.atom: int | None = None  # index in `out` of the atom a quantifier applies to
        self.groups = [_Group(-1, False)]
        self.case_insensitive = False
        self.folded = ""  # the case-insensitive characters just before, case-folded

    def run(self) -> str:
        p = self.pattern
        i = 0
        while i < len(p):
            c = p[i]
            if c == "\\":
                i = self.escape(i)
            elif c == "[":
                i = self.char_class(i)
            elif c == "(":
                i = self.open_group(i)
            elif c == ")":
                self.close_group(i)
                i += 1
            elif c == "|":
                self.alternative(i)
                i += 1
            elif c in "^$":
                self.anchor(c, i)
                i += 1
            elif c in "*+?" or (c == "{" and _INTERVAL.match(p, i)):
                i = self.quantifier(i)
            elif c == ".":
                self.mark_atom(len(self.out))
                self.emit(c, i)
                self.folded = ""
                i += 1
            else:
                self.literal(c, c, i)
                i += 1
        if len(self.groups) > 1:
            raise TokenmillError(f"unclosed ( in pre-tokenization pattern {quoted(p)}")
        self.close_bare(self.groups[0], len(p))
        return "".join(text for text, _ in self.out)

    def origin(self, k: int) -> int:
        """The index in the pattern of the translation's character `k`."""
        end = 0
        for text, at in self.out:
            end += len(text)
            if k < end:
                start = end - len(text)
                return at + max(k - start, 0) if self.pattern.startswith(text, at) else at
        return len(self.pattern)

    def emit(self, text: str, at: int) -> None:
        self.out.append((text, at))

    def mark_atom(self, index: int, assertion: bool = False) -> None:
        """The atom a quantifier would apply to starts at `index` in `out`."""
        group = self.groups[-1]
        group.atoms += 1
        group.assertion = assertion
        self.atom = index

    def literal(self, text: str, char: str, at: int) -> None:
        if self.case_insensitive:
            self.fold(char)
        else:
            self.folded = ""
        self.mark_atom(len(self.out))
        self.emit(text, at)

    def anchor(self, c: str, at: int) -> None:
        if self.source == ONIG:
            # Oniguruma's ^ is the text's start, or follows a newline but not
            # at the text's end (`\n^` matches no text's last newline).
            text = r"(?:\A|(?m:^)(?!\z))" if c == "^" else "(?m:$)"
        elif c == "$" and self.groups[-1].behind:  # \z, which Oniguruma refuses there
            raise _not_oniguruma("the end of the text $ inside a look-behind", self.pattern)
        else:
            text = r"\A" if c == "^" else r"\z"
        self.mark_atom(len(self.out), assertion=True)
        self.emit(text, at)
        self.folded = ""

    def fold(self, char: str) -> None:
        """Refuse case-insensitive text that Oniguruma folds to or from
        several characters, as fancy-regex never does: `(?i)ß` matches "ss"
        and `(?i)ss` matches "ß" in Oniguruma only. Its folding reaches
        across literal characters, escaped ones and non-capturing groups
        (`(?i)s(?:s)` matches "ß"), so every run of them is checked, across
        groups and quantifiers too; a class, a `|` or any other atom ends
        the run (`(?i)s[s]` and `(?i)s|s` match no "ß" in either engine)."""
        folded = char.casefold()
        if len(folded) > 1:
            raise self.folds(char, folded)
        _, targets, longest = multi_folds()
        self.folded = (self.folded + folded)[-longest:]
        for k in range(2, len(self.folded) + 1):
            if self.folded[-k:] in targets:
                raise self.folds(self.folded[-k:], targets[self.folded[-k:]])

    def folds(self, text: str, to: str) -> TokenmillError:
        return _unsupported(
            f"case-insensitive {text!r} (Oniguruma matches {to!r} to it too)", self.pattern
        )

    def escape(self, i: int) -> int:
        end, kind, text, char = self.read_escape(i, in_class=False)
        if kind == "literal":
            self.literal(text, char, i)
            return end
        if kind == "property" and self.case_insensitive:
            # Oniguruma leaves a property outside a class as it is under (?i)
            # and folds one in a class; fancy-regex folds both.
            if self.source == ONIG:
                text = f"(?-i:{text})"
            elif text[1] == "P":  # a negated class: Oniguruma folds none to several
                text = f"[^\\p{text[2:]}]"
            else:
                self.check_multi_folds(f"{text}, to Oniguruma a class holding", text)
                text = f"[{text}]"
        if text == r"\z" and self.groups[-1].behind:
            raise _not_oniguruma(r"\z inside a look-behind", self.pattern)
        self.mark_atom(len(self.out), assertion=text in (r"\A", r"\z"))
        self.emit(text, i)
        self.folded = ""
        return end

    def check_multi_folds(self, what: str, fancy: str) -> None:
        """Refuse a case-insensitive class (not negated) holding a character
        that folds to several: Oniguruma matches that folding's text to it
        too (`(?i)[\\p{Ll}]#` matches "fi#", as ﬁ folds to "fi"), trying it
        where the one character fails; fancy-regex never does."""
        held = multi_fold_held(fancy)
        if held is not None:
            raise _unsupported(
                f"the case-insensitive {what} {held!r} (Oniguruma matches "
                f"{held.casefold()!r} to it too)",
                self.pattern,
            )

    def read_escape(self, i: int, in_class: bool) -> tuple[int, str, str, str]:
        """(the index past the escape at pattern[i], its kind: "literal",
        "property" or "other", its translation, the character it stands for
        if a literal)."""
        p = self.pattern
        if i + 1 >= len(p):
            raise TokenmillError(f"pre-tokenization pattern ends with a backslash: {quoted(p)}")
        c = p[i + 1]
        if c in "xu" and i + 2 == len(p) and self.source == ONIG:
            return i + 2, "literal", c, c  # Oniguruma reads one that ends the pattern as the letter
        if c in "<>":  # to fancy-regex a word boundary, to Oniguruma the character
            if self.source == ONIG:
                return i + 2, "literal", c, c
            if not in_class:  # (in a class the character to both)
                raise _unsupported(f"the escape {p[i : i + 2]}", p)
        if c in "pP":
            if p.startswith("{", i + 2):
                end = self.brace_end(i + 2)
                return end, "property", self.property(c, p[i + 3 : end - 1], p[i:end]), ""
            if self.source == ONIG:  # Oniguruma reads \pL as the letters pL
                return i + 2, "literal", c, c
            if i + 2 >= len(p):
                raise TokenmillError(f"pre-tokenization pattern ends with \\{c}: {quoted(p)}")
            return i + 3, "property", self.property(c, p[i + 2], p[i : i + 3]), ""
        if c == "x":
            if p.startswith("{", i + 2):
                end = self.brace_end(i + 2)
                text, digits = p[i:end], p[i + 3 : end - 1]
            elif self.source == ONIG:  # one or two digits, or none (NUL)
                m = _HEX.match(p, i + 2)
                assert m is not None  # it matches the empty string
                end, digits = m.end(), m.group() or "0"
                text = p[i:end] if len(m.group()) == 2 else f"\\x{{{digits}}}"
            else:
                end = i + 4
                text, digits = p[i:end], p[i + 2 : end]
            return end, *_hex_literal(text, digits)
        if c == "u":
            if p.startswith("{", i + 2):  # fancy-regex's; both read \x{...}
                esc = p[i : self.brace_end(i + 2)]
                raise _unsupported(f"the escape {esc} (write it \\x{esc[2:]})", p)
            return i + 6, *_hex_literal(p[i : i + 6], p[i + 2 : i + 6])
        esc = p[i : i + 2]
        if c.isdigit():
            raise _unsupported(f"the back-reference {esc}", p)
        if c.isalnum() and c not in _SAME_ESCAPES:
            raise _unsupported(f"the escape {esc}", p)
        if c in "sSdDAz":
            return i + 2, "other", esc, ""
        return i + 2, "literal", esc, _CONTROLS.get(c, c)

    def folds_class(self, what: str, pattern: str) -> TokenmillError:
        return _unsupported(
            f"{what} under (?i) (Oniguruma case-folds a class once it is built, fancy-regex "
            "each of its parts)",
            pattern,
        )

    def brace_end(self, i: int) -> int:
        close = self.pattern.find("}", i)
        if close < 0:
            raise TokenmillError(f"unclosed {{ in pre-tokenization pattern {quoted(self.pattern)}")
        return close + 1

    def property(self, c: str, name: str, esc: str) -> str:
        if "=" in name:  # \p{Script=Greek}: Oniguruma knows \p{Greek} only
            raise _unsupported(
                f"the property {esc} (write it without its key: \\p{{Greek}})", self.pattern
            )
        negated = (c == "P") != name.startswith("^")
        known = property_names().get(property_key(name.removeprefix("^")))
        if known is None:
            raise TokenmillError(
                f"pre-tokenization pattern uses the property {esc}, which is not one of those "
                "Oniguruma (Hugging Face) and fancy-regex (tokenmill, tiktoken) are known to "
                f"read alike: {quoted(self.pattern)}"
            )
        return f"\\{'P' if negated else 'p'}{{{known}}}"

    def char_class(self, i: int) -> int:
        end, text, chars, ranges = self.read_class(i)
        if self.case_insensitive:
            for char in chars:
                if len(char.casefold()) > 1:
                    raise self.folds(char, char.casefold())
            sources, _, _ = multi_folds()
            for lo, hi in ranges:
                held = next((c for c in sources if lo <= c <= hi), None)
                if held is not None:
                    raise self.folds(chr(held), chr(held).casefold())
            if not self.pattern.startswith("[^", i):  # properties, \S, nested classes...
                written = self.pattern[i:end]
                fancy = text if self.source == ONIG else written
                self.check_multi_folds(f"class {written}, holding", fancy)
        self.mark_atom(len(self.out))
        self.emit(text, i)
        self.folded = ""
        return end

    def read_class(
        self, i: int, nested: bool = False
    ) -> tuple[int, str, list[str], list[tuple[int, int]]]:
        """(the index past the class at pattern[i], its translation, the
        characters it names, the ranges of code points it names)."""
        p = self.pattern
        parts = ["["]
        j = i + 1
        if p.startswith("^", j):
            if nested and self.case_insensitive:
                raise self.folds_class(f"a negated class {p[i : j + 1]}...] in a class", p)
            parts.append("^")
            j += 1
        if p.startswith("]", j):  # a leading ] is a literal
            parts.append("]")
            j += 1
        # Its characters, _DASH for a dash between two (a range), "" for anything else.
        items: list[str] = []
        chars: list[str] = []
        ranges: list[tuple[int, int]] = []
        while j < len(p):
            c = p[j]
            if c == "\\":
                end, kind, text, char = self.read_escape(j, in_class=True)
                if kind == "property" and text[1] == "P" and self.case_insensitive:
                    raise self.folds_class(f"the negated property {p[j:end]} in a class", p)
                parts.append(text)
                items.append(char if kind == "literal" else "")
                j = end
            elif c == "[":
                if p.startswith("[:", j):
                    raise _unsupported("a POSIX bracket class", p)
                end, text, inner, inner_ranges = self.read_class(j, nested=True)
                parts.append(text)
                chars += inner
                ranges += inner_ranges
                items.append("")
                j = end
            elif c == "]":
                for k, item in enumerate(items):
                    ends = items[k - 1 : k + 2 : 2] if k > 0 else []
                    if item == _DASH and len(ends) == 2 and all(len(e) == 1 for e in ends):
                        ranges.append((ord(items[k - 1]), ord(items[k + 1])))
                chars += [item for item in items if len(item) == 1]
                return j + 1, "".join([*parts, "]"]), chars, ranges
            elif p.startswith(("--", "~~"), j):  # Rust's class difference; Oniguruma's ranges
                raise _unsupported(f"the class operation {p[j : j + 2]}", p)
            elif p.startswith("&&", j) and self.case_insensitive:
                raise self.folds_class("the class intersection &&", p)
            else:
                parts.append(c)
                items.append(_DASH if c == "-" else c)
                j += 1
        raise TokenmillError(f"unclosed [ in pre-tokenization pattern {quoted(p)}")

    def open_group(self, i: int) -> int:
        p = self.pattern
        opener = next((o for o in _GROUP_OPENERS if p.startswith(o, i)), None)
        flag = _FLAG_GROUP.match(p, i)
        named = _NAMED_GROUP.match(p, i)
        parent = self.groups[-1]
        if flag and flag.group(2) == ")":
            # A bare flag holds to the end of its group. Oniguruma reads
            # a(?i)b|c as a(?i:b|c), fancy-regex as a(?i:b)|(?i:c): written
            # as such groups, either reads it as the other does. (fancy-regex
            # ends it with a (?:...) group only: see `close_group`.)
            parent.bare += 1
            parent.flag = flag.group(1)
            self.emit(f"(?{parent.flag}:", i)
            self.case_insensitive = parent.flag == "i"
            self.mark_atom(len(self.out) - 1)  # a group to Oniguruma, never an assertion
            self.atom = None
            return flag.end()
        end = i
        if opener:
            text = opener
        elif flag:
            text = flag.group(0)
        elif named:
            # fancy-regex takes (?P<name>...), Oniguruma (Ruby syntax) only (?<name>...).
            text, end = f"(?<{named.group(1)}>", named.end()
        elif p.startswith("(?", i):
            raise _unsupported(f"the group syntax {p[i : i + 4]}...", p)
        else:
            text = "("
        end = max(end, i + len(text))
        if parent.behind:
            self.check_in_lookbehind(text, parent.behind)
        behind = parent.behind + {"(?<=": "=", "(?<!": "!"}.get(text, "")
        restores = text == "(?:" or bool(flag)
        self.groups.append(
            _Group(
                len(self.out), self.case_insensitive, restores=restores, opener=text, behind=behind
            )
        )
        self.emit(text, i)
        if flag:
            self.case_insensitive = flag.group(1) == "i"
        self.atom = None
        return end

    def check_in_lookbehind(self, opener: str, behind: str) -> None:
        """Refuse a group inside a look-behind that fancy-regex misreads, or
        (on export: Oniguruma already refused it in a tokenizer.json) that
        Oniguruma refuses there."""
        p = self.pattern
        if opener == "(?>":  # fancy-regex: (?<!(?>a*))b does not match "xb"
            raise _unsupported("an atomic group (?>...) inside a look-behind", p)
        if self.source == ONIG:
            return
        if opener in ("(?=", "(?!"):
            raise _not_oniguruma(f"a look-ahead {opener}...) inside a look-behind", p)
        if opener == "(?<!" and "=" in behind:
            raise _not_oniguruma("a negative look-behind inside a look-behind (?<=...)", p)
        capture = opener == "(" or (opener.startswith("(?<") and opener[3] not in "=!")
        if capture and "!" in behind:
            raise _not_oniguruma("a capture group inside a negative look-behind", p)

    def close_group(self, i: int) -> None:
        if len(self.groups) == 1:
            raise TokenmillError(f"unbalanced ) in pre-tokenization pattern {quoted(self.pattern)}")
        group = self.groups.pop()
        if self.source == FANCY and not group.restores:
            if self.case_insensitive != group.case_insensitive:
                # fancy-regex keeps a bare flag in force past the end of
                # a group other than (?:...): (a(?i)b)c matches "abC".
                raise _unsupported(
                    "a bare (?i) or (?-i) that a group other than (?:...) ends (fancy-regex "
                    "keeps it in force after the group; write (?i:...) instead)",
                    self.pattern,
                )
        self.close_bare(group, i)
        self.emit(")", i)
        self.case_insensitive = group.case_insensitive
        group.asserts |= group.atoms == 1 and group.assertion
        look_around = group.opener in ("(?=", "(?!", "(?<=", "(?<!")
        self.mark_atom(group.start, look_around or group.opener == "(?:" and group.asserts)

    def close_bare(self, group: _Group, at: int) -> None:
        if group.bare:
            self.emit(")" * group.bare, at)
            group.bare = 0

    def alternative(self, i: int) -> None:
        group = self.groups[-1]
        group.asserts |= group.atoms == 1 and group.assertion
        # After a bare flag each alternative is in a group of the flag's (fancy-regex's
        # reading), or in one group with the rest (Oniguruma's): none is an assertion alone.
        group.atoms, group.assertion = min(group.bare, 1), False
        if self.source == FANCY and group.bare:
            self.close_bare(group, i)
            self.emit(f"|(?{group.flag}:", i)
            group.bare = 1
        else:
            self.emit("|", i)
        self.atom = None
        self.folded = ""

    def quantifier(self, i: int) -> int:
        p = self.pattern
        c = p[i]
        if self.atom is None:
            raise TokenmillError(
                f"quantifier {c!r} follows nothing in pre-tokenization pattern {quoted(p)}"
            )
        group = self.groups[-1]
        m = _INTERVAL.match(p, i) if c == "{" else None
        written = m.group(0) if m else c
        after = p[i + len(written) : i + len(written) + 1]
        if group.assertion:
            raise _not_oniguruma(
                f"a quantifier {written!r} on an anchor or a look-around (or on a (?:...) group "
                "with one as an alternative)",
                p,
            )
        if after == "+" and group.behind:  # fancy-regex: (?<=p++) matches after "pp"
            raise _unsupported(f"the quantifier {written + after!r} inside a look-behind", p)
        group.assertion = False
        if m:
            lo, comma, hi = m.groups()
            if not lo and not hi:
                raise _unsupported(f"the interval {m.group(0)}", p)
            quant = f"{{{lo or 0}{comma}{hi}}}"
            if after == "+" and self.source == FANCY:  # possessive interval
                self.wrap("(?>", quant + ")", i)
            elif after == "+":  # the interval, repeated
                self.wrap("(?:", quant + ")+", i)
            elif after == "?" and not comma and self.source == ONIG:  # X{n}, optional
                self.wrap("(?:", quant + ")?", i)
            elif after == "?" and not comma:  # lazy, exactly n times: n times
                self.emit(quant, i)
            else:
                lazy = after == "?"  # X{n,m}?: the same in both engines
                self.emit(quant + "?" * lazy, i)
                self.atom = None
                return m.end() + lazy
            self.atom = None
            return m.end() + 1
        quant = c
        i += 1
        if i < len(p) and p[i] in "?+":  # lazy or possessive: same in both engines
            quant += p[i]
            i += 1
        self.emit(quant, i - len(quant))
        self.atom = None
        return i

    def wrap(self, before: str, after: str, at: int) -> None:
        assert self.atom is not None  # the caller checked it
        self.out[self.atom : self.atom] = [(before, at)]
        self.emit(after, at)


def _hex_literal(text: str, digits: str) -> tuple[str, str, str]:
    """(kind, translation, character) of a hexadecimal escape; kind "other"
    where the digits are none (fancy-regex names the fault)."""
    try:
        return "literal", text, chr(int(digits, 16))
    except ValueError:
        return "other", text, ""


def literal(text: str) -> str:
    """A pattern matching `text` literally (both engines)."""
    return "".join("\\" + c if c in r"\.+*?()|[]{}^$#&-~" else c for c in text)


def matches_empty(pattern: str, written: str) -> bool:
    """Whether `pattern` (`written`, as its file has it) matches the empty
    string (pieces would be lost)."""
    from tokenmill import _native

    # A first branch that matches any character: the core refuses a pattern
    # that leaves text unmatched, and this one leaves none.
    try:
        return _native.pretokenize("", rf"[\s\S]|(?:{pattern})") == [""]
    except _native.NativeError as e:  # named as written, not as wrapped here
        raise TokenmillError(pattern_message(str(e), written)) from None


def why_not_preset(pattern: str) -> str | None:
    """Why a pattern imported from tokenizer.json (`covering` an Oniguruma
    pattern read by `onig_to_fancy`) is not the preset it looks like."""
    for spelling, why in NOT_PRESETS.items():
        if pattern == covering(_Translation(spelling, ONIG).run()):
            return f"it is {why}"
    return None


def preset_name(pattern: str) -> str | None:
    """The preset (gpt2, cl100k, o200k) that a fancy-regex pattern is, verbatim
    or as it comes back from Oniguruma (`onig_to_fancy(fancy_to_onig(...))`)."""
    from tokenmill import _native

    for name in PATTERNS:
        source = _native.preset_regex(name)
        assert source is not None  # every preset has its regex
        onig = _Translation(source, FANCY).run()  # tokenizers loads every preset
        if pattern in (name, source, _Translation(onig, ONIG).run()):
            return name
    return None
