"""Shared text primitives: one tokenizer for BM25, token counts and token-F1, one sentence splitter.

Everything that counts "tokens" in mogg (chunk sizes, context budgets, token F1, BM25 terms) goes
through :func:`tokenize`, so numbers are comparable across modules.

Length (over ~350 lines): the paragraph rule (:func:`paragraphs`, its headings, lists and versions) sits beside the
sentence splitter because the two must read one text alike: :func:`unit_paragraphs` places the splitter's units in the
rule's paragraphs, a list's items are units (:func:`split_units`) and stay in their paragraph by one bullet pattern,
and a change to either is a change to the ladders' paragraph arrays (``PARAGRAPH_RULE``).
"""

from __future__ import annotations

import logging
import re
from array import array
from collections import defaultdict
from collections.abc import Iterable, Sequence
from functools import lru_cache
from itertools import count

import numpy as np
import regex

# Bumped whenever tokenize / split_sentences change what they return: part of every ladder's
# artifact key, so ladders built by an older splitter are rebuilt instead of silently reused.
TEXT_VERSION = 2

# Word tokens: runs of letters/digits; keeps "il-6" as "il", "6" (BM25 and F1 treat both the same).
_TOKEN_RE = re.compile(r"\w+", re.UNICODE)

# Sentence boundary: ., ! or ? (optionally followed by a closing quote or bracket), whitespace, and
# an upper-case letter of any script, a digit or an opening bracket/quote; or a CJK full stop,
# exclamation or question mark, after which no space is needed. Protected abbreviations and
# initials are masked first so "et al. Smith", "vs. B" or "J. R. Smith" do not split, while
# "vitamin D. The" and "drug x. It" do.
_ABBREVIATIONS = (
    "e.g.", "i.e.", "et al.", "vs.", "etc.", "fig.", "figs.", "dr.", "mr.", "mrs.", "ms.", "no.",
    "approx.", "ca.", "cf.", "resp.", "min.", "max.", "sec.", "vol.", "st.", "inc.", "ltd.", "jr.",
    "sr.", "dept.", "univ.", "eq.", "ref.", "refs.", "spp.", "sp.", "var.", "mg.", "ml.", "p.", "pp.",
    "ed.", "eds.", "al.", "viz.", "nos.", "tab.",
)
_SENT_END_RE = regex.compile(
    r"""(?:(?<=[.!?])|(?<=[.!?]["'\u201d\u2019)\]]))\s+(?=["'\u201c\u2018(\[]?[\p{Lu}\p{Lt}\p{N}])"""
    r"""|(?<=[\u3002\uff01\uff1f])\s*(?=\S)"""
)
# A single capital is an initial when it follows another initial, the start of the text, or a
# capitalised word followed by a comma ("Smith, J."), or when a capitalised name follows it and
# a capitalised word (not a lower-case one: "vitamin D.") precedes it.
_INITIAL_RE = regex.compile(
    r"""(?<=^|\p{Lu}\.\s|\p{Lu}\p{Ll}+,\s)(\p{Lu})\.(?=\s)"""  # "J. R.", "Smith, J."
    r"""|(?<=\p{Lu}[\p{Ll}\-']*\s)(\p{Lu})\.(?=\s+\p{Lu}\p{Ll})"""  # "John F. Kennedy"
    r"""|(\p{Lu})\.(?=\s+\p{Lu}\.\s)"""  # "by J. R. Smith"
)
# dotted acronyms ("U.S.", "C.I.", "e.g.") never end a sentence
_ACRONYM_RE = regex.compile(r"(?<![\w.])(?:\p{L}\.){2,}")
_MASK = "\x00"


@lru_cache(maxsize=1)
def _abbrev_re() -> regex.Pattern:
    alts = "|".join(regex.escape(a[:-1]) for a in sorted(_ABBREVIATIONS, key=len, reverse=True))
    return regex.compile(rf"(?i)(?<![\w.])({alts})\.(?=\s)")


@lru_cache(maxsize=1)
def stop_words() -> frozenset[str]:
    """scikit-learn's English stop words (imported on first use: scikit-learn's import takes ~1.5 s)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS)


def tokenize(text: str, stopwords: bool = False) -> list[str]:
    """Lower-cased word tokens; ``stopwords=True`` drops sklearn's English stop words."""
    toks = _TOKEN_RE.findall(text.lower())
    if stopwords:
        stop = stop_words()
        return [t for t in toks if t not in stop]
    return toks


def encode_texts(texts: Iterable[str], stopwords: bool = False) -> tuple[list[str], np.ndarray, np.ndarray]:
    """:func:`tokenize` of every text as term ids: ``(vocab, ids int64 [T], lengths int64 [N])``.

    ``vocab`` lists the terms in order of first occurrence over the texts, ``ids`` the tokens of all
    texts one after the other, ``lengths[i]`` text i's token count: the same tokens as
    ``[tokenize(t, stopwords) for t in texts]`` (a test holds it to that). Per token the work is
    C-level (a ``defaultdict`` whose factory numbers new terms, read through ``map``), and stop words
    are dropped afterwards by one mask over the term ids instead of a set test per token.
    """
    index: defaultdict[str, int] = defaultdict(count().__next__)  # term -> id, numbered on first sight
    get = index.__getitem__
    findall = _TOKEN_RE.findall
    ids, lengths = array("q"), array("q")
    for text in texts:
        before = len(ids)
        ids.extend(map(get, findall(text.lower())))
        lengths.append(len(ids) - before)
    vocab = list(index)  # insertion order = id order
    ids_np = np.frombuffer(ids, dtype=np.int64) if len(ids) else np.zeros(0, np.int64)
    len_np = np.frombuffer(lengths, dtype=np.int64) if len(lengths) else np.zeros(0, np.int64)
    if stopwords and vocab:
        stop = stop_words()
        keep = np.fromiter((t not in stop for t in vocab), dtype=bool, count=len(vocab))  # [V]
        tok_keep = keep[ids_np]
        # renumber the kept terms: dropping others leaves their first-occurrence order unchanged
        new_id = np.cumsum(keep) - 1
        rows = np.repeat(np.arange(len(len_np)), len_np)
        ids_np = new_id[ids_np[tok_keep]]
        len_np = np.bincount(rows[tok_keep], minlength=len(len_np)).astype(np.int64)
        vocab = [t for t, k in zip(vocab, keep) if k]
    return vocab, ids_np, len_np


@lru_cache(maxsize=1 << 16)
def count_tokens(text: str) -> int:
    """Number of :func:`tokenize` tokens (the unit of every size and budget in mogg). Memoised:
    budgets and context caps count the same chunks under every policy."""
    return len(_TOKEN_RE.findall(text))


def split_sentences(text: str, max_tokens: int | None = None, stats: dict | None = None) -> list[str]:
    """Split ``text`` into sentences with a rule-based splitter (fast, no model).

    Abbreviations such as "et al." and "e.g." and initials ("J. R. Smith") do not end a sentence;
    upper-case letters of any script start one, and CJK terminators end one. With ``max_tokens``
    a longer "sentence" (a table, a list without full stops) is cut into pieces of at most that
    many tokens at word boundaries, so no unit of a ladder can grow without bound (``stats``, if
    given, counts the cuts: ``cut`` sentences, ``longest`` token count). Empty input gives an
    empty list; whitespace is normalised inside sentences.
    """
    text = " ".join(text.split())
    if not text:
        return []
    masked = _ACRONYM_RE.sub(lambda m: m.group(0).replace(".", _MASK), text)
    masked = _abbrev_re().sub(lambda m: m.group(1) + _MASK, masked)
    masked = _INITIAL_RE.sub(lambda m: (m.group(1) or m.group(2) or m.group(3)) + _MASK, masked)
    parts = [p.replace(_MASK, ".").strip() for p in _SENT_END_RE.split(masked)]
    parts = [p for p in parts if p]
    if max_tokens is None:
        return parts
    out = []
    for p in parts:
        pieces = cap_tokens(p, max_tokens)
        if len(pieces) > 1 and stats is not None:
            stats["cut"] = stats.get("cut", 0) + 1
            stats["longest"] = max(stats.get("longest", 0), count_tokens(p))
        out.extend(pieces)
    return out


# The ladders' units (MoG's units and MoGG's nodes, RAPTOR's leaves, MAL's paragraph units, semantic chunks' sentences):
# 1: a line that opens a list item starts a unit (split_units). A list's items end no sentence, so the sentence
# splitter read a whole list ("Signs may include: - loss of side vision - blurred vision - ...") as one unit, up to
# max_sentence_tokens, which no budget shorter than the list could read in part (docs/results.md, "A page's lists").
# Its version names every ladder's key, so a ladder stored before is rebuilt.
# 2: a list written inline, its line breaks lost ("Signs may include: - fever - a cough - headache"), is read as its
# items too: after a lead-in that ends on a stop or ":", three or more items, each opened by "- " or "\u2022 " (a hyphen
# between words, "Klippel - Trenaunay - Weber", follows no such lead-in)
UNIT_RULE = 2
# a list's bullets: a line that opens with one, then a space, is a list item (is_list_item, split_units)
_BULLET = r"[-*+\u2022\u00b7\u2013\u25aa\u25e6\u2023]"
_ITEM_BREAK = re.compile(r"\n(?=[ \t]*" + _BULLET + r"[ \t]+\S)")  # a line break before an item
# inline: a hyphen or a bullet sign, then a space, after a lead-in's end; the spaces before each further item. Only
# "-" and "\u2022": an en dash or "*" inside a line is a range or a footnote more often than an item
_INLINE_LEAD = re.compile(r"(?<=[:.!?])[ \t]+(?=[-\u2022][ \t]+\S)")
_INLINE_BREAK = re.compile(r"[ \t]+(?=[-\u2022][ \t]+\S)")
INLINE_ITEMS = 3  # the fewest items after a lead-in that read as a list


def _inline_items(piece: str) -> list[str]:
    """``piece`` cut before each item of the first inline list it holds (:data:`UNIT_RULE` 2): the text up to the
    lead-in's end, then each item to the next (the last one to the piece's end); ``[piece]`` where none is."""
    for lead in _INLINE_LEAD.finditer(piece):
        items: list[str] = []
        for it in _INLINE_BREAK.split(piece[lead.end():]):
            if items and items[-1].strip() in ("-", "\u2022"):  # a doubled bullet ("- - All ...") opens one item
                items[-1] = f"{items[-1]} {it}"
            else:
                items.append(it)
        if len(items) >= INLINE_ITEMS:
            return [piece[:lead.start()], *items]
    return [piece]


def split_units(text: str, max_tokens: int | None = None, stats: dict | None = None) -> list[str]:
    """A text's units for a ladder: :func:`split_sentences` of each piece between the line breaks that open a list
    item (a bullet, then a space: "\\n- fever", :data:`UNIT_RULE`) and of each item of a list written inline ("...
    include: - fever - a cough - headache"), so each item is a unit of its own (or several, where it holds
    sentences); a text without either is split as :func:`split_sentences` splits it."""
    pieces = _ITEM_BREAK.split(text) if "\n" in text else [text]
    return [s for piece in pieces for part in _inline_items(piece) for s in split_sentences(part, max_tokens, stats)]


def log_cuts(stats: dict, max_tokens: int, where: str) -> None:
    """One warning for the sentences :func:`split_sentences` had to cut."""
    if stats.get("cut"):
        logging.getLogger(__name__).warning(
            "%s: %d sentence(s) longer than %d tokens were cut into pieces (longest: %d tokens); "
            "no unit exceeds max_sentence_tokens", where, stats["cut"], max_tokens, stats["longest"])


def cap_tokens(text: str, max_tokens: int) -> list[str]:
    """``text`` as pieces of at most ``max_tokens`` tokens, cut at whitespace (one piece if short)."""
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    if count_tokens(text) <= max_tokens:
        return [text]
    return pack_by_tokens(text.split(" "), max_tokens)


def pack_by_tokens(pieces: Sequence[str], max_tokens: int) -> list[str]:
    """Greedy packing of consecutive ``pieces`` (words, sentences), space-joined, into groups of
    at most ``max_tokens`` :func:`count_tokens` tokens; a piece longer than that stays alone."""
    out: list[str] = []
    cur: list[str] = []
    n = 0
    for piece in pieces:
        k = count_tokens(piece)
        if cur and n + k > max_tokens:
            out.append(" ".join(cur))
            cur, n = [], 0
        cur.append(piece)
        n += k
    if cur:
        out.append(" ".join(cur))
    return out


def truncate_tokens(text: str, max_tokens: int) -> str:
    """``text`` cut right after its ``max_tokens``-th token: a prefix holding exactly its first
    ``max_tokens`` tokens (all of it when shorter), so a context capped at B tokens is the B-token
    prefix every budget and the frontier's prefix scores count (a cut at whitespace would read
    fewer, and a long unbroken piece more)."""
    if max_tokens < 0:
        raise ValueError(f"max_tokens must be >= 0, got {max_tokens}")
    if max_tokens == 0:
        return ""
    for i, m in enumerate(_TOKEN_RE.finditer(text), 1):
        if i == max_tokens:
            return text[: m.end()]
    return text


_BLANK_LINE = re.compile(r"\n[ \t\r]*\n")  # a paragraph break: an empty (or blank) line, "\r\n" endings too
# Where a text holds no blank line, its line breaks are paragraph breaks when at least this share of its prose lines
# (all but the last, longer than HEADING_WORDS words) end a sentence: hard-wrapped prose ends a line mid-sentence
# (a page written one section per line ends most on a full stop; a MedMCQA explanation's list lines are 13% of its
# documents), so a wrapped abstract stays one paragraph ...
LINE_BREAK_SHARE = 0.5
# ... or when its lines (all but the last) are longer than this many characters at the median: nobody wraps prose
# that wide (mail and terminals at 72-80 columns, editors at 100-120), and a section that ends on a reference, not
# a full stop, still ends its line (the page stand-in written one section per line: 11 of 443 pages read as one
# paragraph with it, 81 without)
WRAP_CHARS = 160
# The paragraph rule's version: the ladder arrays read off it are named by it (mogg.ladders.sources.PARAGRAPHS), so a
# ladder stored under an earlier rule (3: lines wider than WRAP_CHARS; 2: line breaks and headings; 1: blank lines
# alone) gets them again, once. 4: a page that opens with a heading and holds two or more reads as its headed
# sections (headed_sections); 5: a question line of up to QUESTION_WORDS words is a heading; 6: a list's items are
# never headings and join the block before them (text_blocks); 7: a line that ends on a list written inline ends
# where its last item does (_line_ends): a page written one section a line, each list on its lead-in's line, read
# as one paragraph where most of its sections end on a list (docs/results.md, "A list written inline")
PARAGRAPH_RULE = 7
# The version of the blocks and headings alone (text_blocks, is_heading), which the structural ladder parses its own
# sections from: rule 4 changed how paragraphs join, not the blocks, so a stored structural ladder stayed valid; 4: a
# question line of up to QUESTION_WORDS words is a heading (rule 5); 5: a list is one block with its lead-in (rule 6);
# 6: a line ending on a list written inline ends a block (rule 7)
BLOCK_RULE = 6
# A heading: one line of at most this many words that does not end a sentence ("Symptoms", "Superficial relations:",
# "What causes it?"), or any line opening with "#". It belongs to the paragraph after it (a section is its heading
# and its text), so the best candidate's paragraph is never a heading alone.
HEADING_WORDS = 12
# ... and a question line at most this many words: a page of questions and their answers writes each question above
# its answer, and a consumer-health question names its condition in full ("What are the genetic changes related to
# familial hypophosphatemic rickets with hypercalciuria in early childhood ?", 13 words); under HEADING_WORDS alone
# such a line read as a paragraph of the section before, which then took the next question's answer too
# (docs/results.md, "Question lines of any length"). Longer than two lines of prose is not a heading.
QUESTION_WORDS = 40
_CLOSED = r"""["'\u2019\u201d)\]]*\s*$"""  # what may follow the last stop: closing quotes and brackets, spaces
_SENTENCE_END = re.compile(r"[.!?:;]" + _CLOSED)  # a line that ends a sentence (or a clause)
_PROSE_END = re.compile(r"[.!]" + _CLOSED)  # ... a statement: a heading never ends so
_QUESTION_END = re.compile(r"\?" + _CLOSED)  # ... a question
# a question line: one interrogative sentence (no stop inside it), as a page of questions and answers heads each answer
# ("Q:" or "Question 3." before it too); a paragraph of prose that ends on a question ("We asked: (1) Is ...? (2) Can
# ...?") is not one
_QUESTION_LINE = re.compile(r"(?:(?:q|question)\s*\d*\s*[:.)-]\s*)?(?:what|how|who|whom|whose|which|when|where|why|is|are|was|were|do|does|did|can|could|"
                            r"should|would|will|may|has|have)\b[^.!?:;]*\?" + _CLOSED, re.IGNORECASE)


# a list item: a line that opens with a bullet, then a space ("- fever", "\u2022 fever", "* fever"). An enumerated line
# ("3. Genetic analysis", "b) Features of the mandible") is not one: explanations number their sub-headings so, and
# the heading rule reads them as before
_LIST_ITEM = re.compile(r"\s*" + _BULLET + r"\s+\S")
_LEAD_IN = re.compile(r":" + _CLOSED)  # a line that introduces what follows it ("Signs may include:")


def is_list_item(line: str) -> bool:
    """Whether ``line`` (its first line, for a block) opens a list item: a bullet, then a space (:data:`PARAGRAPH_RULE`
    6)."""
    return bool(_LIST_ITEM.match(line.strip().split("\n", 1)[0]))


def _short_item(block: str) -> bool:
    """Whether ``block`` is one line of a list that the heading rule read as a heading: a list item of at most
    :data:`HEADING_WORDS` words that ends neither a statement nor on ":" ("- loss of side vision"). A longer bulleted
    line, or one ending on a full stop, reads as before: a paper's bulleted sub-headings ("\u2022 Poultry trade and
    market.") and paragraphs, an explanation's bulleted sections, stay paragraphs of their own; an item ending on ":"
    labels what follows it ("- Hurt cry:"), a heading, as before."""
    return _item_line(block) and len(block.split()) <= HEADING_WORDS and not _PROSE_END.search(block.strip())


def _join_lists(blocks: list[str]) -> list[str]:
    """``blocks`` with each short list item (:func:`_short_item`) joined (by a line break) to the block before it,
    unless that block is a heading that introduces no list (a heading ending on ":" does: "Signs may include:"), and
    any one-line item joined to a block that ends on a short one: a list belongs to the paragraph or lead-in above it,
    however its items are separated (one a line, blank lines between them), where each short item read as a heading
    and went, with the lead-in, to the paragraph after the list (docs/results.md, "A page's lists")."""
    out: list[str] = []
    for b in blocks:
        prev = out[-1] if out else None
        if prev is not None and (_short_item(b) and (not is_heading(prev) or _introduces(prev)) or (
                _item_line(b) and _short_item(_lines(prev)[-1]))):
            out[-1] = f"{prev.rstrip()}\n{b.strip()}"
        else:
            out.append(b)
    return out


def _introduces(heading: str) -> bool:
    """Whether a heading line introduces a list ("Signs may include:"): it ends on ":" and is neither a Markdown heading
    nor a question line."""
    s = heading.strip()
    return bool(_LEAD_IN.search(s)) and not s.startswith("#") and not is_question_line(s)


def _item_line(block: str) -> bool:
    """Whether ``block`` is one line, a list item that does not end on ":" (of any length)."""
    s = block.strip()
    return "\n" not in s and is_list_item(s) and not _LEAD_IN.search(s)


def _lines(block: str) -> list[str]:
    return [line for line in block.split("\n") if line.strip()]


def _line_paragraphs(block: str) -> bool:
    """Whether the line breaks of ``block`` (a text without a blank line) separate paragraphs: see
    :data:`LINE_BREAK_SHARE` and :data:`WRAP_CHARS`."""
    lines = _lines(block)[:-1]
    if not lines:
        return False
    if float(np.median([len(line.strip()) for line in lines])) > WRAP_CHARS:
        return True
    prose = [line for line in lines if len(line.split()) > HEADING_WORDS and not is_list_item(line)]  # a list's
    # lines break where its items end, whether or not they end a sentence: they say nothing of the prose's wrapping
    return bool(prose) and sum(_line_ends(line) for line in prose) >= LINE_BREAK_SHARE * len(prose)


def _line_ends(line: str) -> bool:
    """Whether a line ends a sentence, or ends on a list written inline (its last item runs to the line's end: "...
    include: - fever - a cough - headache", :data:`PARAGRAPH_RULE` 7)."""
    return bool(_SENTENCE_END.search(line)) or len(_inline_items(line)) > 1


def text_blocks(text: str) -> list[str]:
    """A text's blocks, in order: its non-blank blocks between blank lines; where it holds no blank line, its lines
    when they end sentences or are wider than prose is wrapped (:data:`LINE_BREAK_SHARE`, :data:`WRAP_CHARS`: a page
    written one section per line), else the whole text (hard-wrapped prose); a list's short items joined to the
    block before them (:func:`_join_lists`, :data:`PARAGRAPH_RULE` 6). None for a blank text. A block is a paragraph
    or a heading (:func:`is_heading`)."""
    if "\n" not in text:
        return [text] if text.strip() else []
    blocks = [p for p in _BLANK_LINE.split(text) if p.strip()]
    if len(blocks) == 1 and _line_paragraphs(blocks[0]):
        blocks = _lines(blocks[0])
    return _join_lists(blocks)


def is_heading(block: str, max_words: int = HEADING_WORDS) -> bool:
    """Whether ``block`` (of :func:`text_blocks`) is a heading: one line opening with "#", of at most ``max_words``
    words that does not end a statement (:data:`HEADING_WORDS`) and is not a list's short item, or one interrogative
    sentence of at most :data:`QUESTION_WORDS` words."""
    s = block.strip()
    if not s or "\n" in s:
        return False
    return s.startswith("#") or is_question_line(s) or (
        len(s.split()) <= max_words and not _PROSE_END.search(s) and not _short_item(s))


def is_question_line(line: str) -> bool:
    """Whether ``line`` is one interrogative sentence of at most :data:`QUESTION_WORDS` words (a question line: a
    heading of a page of questions and answers, :func:`is_heading`)."""
    s = line.strip()
    return bool(s) and "\n" not in s and len(s.split()) <= QUESTION_WORDS and bool(_QUESTION_LINE.fullmatch(s))


def paragraphs(text: str) -> list[str]:
    """A text's paragraphs, in order: its blocks (:func:`text_blocks`), each heading joined to the paragraph after
    it (:func:`is_heading`; a last one to the paragraph before). None for a blank text. A page written in headed
    sections (it opens with a heading and two or more of its paragraphs do: :func:`headed_sections`) reads as its
    sections instead: each headed paragraph with the unheaded ones after it, joined by a blank line. The ladder's
    paragraph counts and starts read them (:mod:`mogg.ladders.sources`), as does the export of a page's sections
    (:mod:`mogg.data.export`)."""
    out: list[str] = []
    headed: list[bool] = []  # whether each paragraph opens with a heading
    held: list[str] = []  # headings waiting for their paragraph
    for b in text_blocks(text):
        if is_heading(b):
            held.append(b)
            continue
        out.append("\n".join([*held, b]))
        headed.append(bool(held) or _heading_above(b))
        held = []
    if held:
        out = [*out[:-1], "\n".join([*out[-1:], *held])]
        headed = headed or [True]
    return headed_sections(out, headed)


def unit_paragraphs(text: str, units: Sequence[str]) -> np.ndarray:
    """Within one text: each of ``units``' (its units, in order) paragraph (:func:`paragraphs`), int64 [len(units)],
    non-decreasing from 0. Each unit's text is found in order in the paragraphs joined by one space, whitespace
    normalised (a sentence splitter's units are such substrings), and belongs to the paragraph holding its middle; a
    unit not found (a builder that rewrites text) stays in the paragraph before it. A text of one paragraph: all 0."""
    paras = [" ".join(p.split()) for p in paragraphs(text)]
    para = np.zeros(len(units), dtype=np.int64)
    if len(paras) < 2 or len(units) < 2:
        return para
    ends = np.cumsum([len(p) + 1 for p in paras])  # each paragraph's end in the joined text (its space included)
    whole = " ".join(paras)
    cur = last = 0
    for k, u in enumerate(units):  # one text's units: the corpus pass at build, as the sentence split's
        t = " ".join(u.split())
        at = whole.find(t, cur) if t else -1
        if at >= 0:
            last = min(int(np.searchsorted(ends, at + len(t) // 2, side="right")), len(paras) - 1)
            cur = at + 1
        para[k] = last
    return np.maximum.accumulate(para)


def _heading_above(block: str) -> bool:
    """Whether a block of several lines opens with a heading written above its text: a Markdown heading ("## Causes")
    or a question ("What causes it?", a page of questions and their answers). A plain short line so written ("Deep
    relations:") is not one: explanations label their own parts that way inside a section (docs/results.md,
    "Sections under headings")."""
    lines = _lines(block)
    if len(lines) < 2:
        return False
    first = lines[0].strip()
    return first.startswith("#") or (is_heading(first) and bool(_QUESTION_END.search(first)))


def headed_sections(paras: list[str], headed: list[bool]) -> list[str]:
    """``paras`` (a page's paragraphs, :func:`paragraphs`) as its headed sections where the page is written so: it
    opens with a heading and two or more of its paragraphs do (``headed`` [P]); each headed paragraph then takes the
    unheaded ones after it, joined by a blank line. A web page's section often runs over several paragraphs under
    one heading; a page with a title alone, or a heading-like line or two inside prose (an opening "Symptoms
    include:"), keeps its paragraphs (docs/results.md, "Sections under headings")."""
    if len(paras) < 2 or not headed[0] or sum(headed) < 2:
        return paras
    out: list[str] = []
    for p, h in zip(paras, headed):
        if h or not out:
            out.append(p)
        else:
            out[-1] = f"{out[-1]}\n\n{p}"
    return out
