"""Evidence F1 of every prefix of a ranked context, for all questions at once.

A policy family with an amount knob (a fixed level at k = 1..K, with a token cap; top-k over
all levels; the collapsed tree at a budget) reads a *prefix* of one ranked stream of snippets
per question: k snippets, or the first ``cap`` tokens of them. Scoring each (k, cap) with
:func:`mogg.core.metrics.token_prf` would re-tokenize the same text K x C times; here every stream is
tokenized once and the multiset overlap with the evidence is accumulated along it:

    the i-th occurrence of token w in the stream overlaps the evidence iff i <= count_evidence(w)

so ``overlap(t)`` (first t tokens) is a cumulative sum, and F1(t) = 2 overlap(t) / (t + n_ref),
which is exactly ``token_prf``'s F1 of the same text (tests compare them). A cap cuts the
stream at exactly ``cap`` tokens (a token prefix: tokens are the unit of every budget here).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mogg.core.metrics import _token_ids as _shared_token_ids
from mogg.core.segments import segment_rank


@dataclass
class PrefixTable:
    """Per question and configuration: evidence F1, precision, recall and context tokens.

    Shapes [Q, K, C]: k = 1..K snippets (index k-1), caps[c] tokens (None = uncapped).
    F1/precision/recall are NaN where the question has no gold evidence.
    """

    f1: np.ndarray
    precision: np.ndarray
    recall: np.ndarray
    tokens: np.ndarray  # int64
    caps: tuple

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.f1.shape


def prefix_table(streams: Sequence[Sequence[str]], evidence: Sequence[str], depth: int,
                 caps: Sequence[int | None] = (None,), max_tokens: int | None = None) -> PrefixTable:
    """Score every (k <= ``depth``, cap) prefix of each question's ranked snippets ``streams[q]``.

    ``max_tokens`` is the run's cap on every context (``max_context_tokens``), applied on top of
    each configuration's own cap. A stream with fewer than k snippets reads all of them.
    """
    n_q = len(streams)
    if len(evidence) != n_q:
        raise ValueError(f"{n_q} streams but {len(evidence)} evidence texts")
    if depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")
    caps = tuple(None if c is None else int(c) for c in caps)
    if any(c is not None and c < 1 for c in caps):
        raise ValueError(f"caps must be >= 1 or None, got {caps}")
    # every snippet's token ids, each distinct text tokenised once (the process-wide memo that
    # token_prf uses: most snippets recur, a document level's thousands of times)
    tid = _shared_token_ids()
    flat = [x for s in streams for x in list(s)[:depth]]  # one entry per snippet, in rank order
    arrs = [tid.ids(x, False) for x in flat]
    per_snip = np.fromiter(map(len, arrs), dtype=np.int64, count=len(arrs))
    snip_tok = np.zeros((n_q, depth), dtype=np.int64)  # token counts per snippet [Q, depth]
    n_snip = np.array([min(len(s), depth) for s in streams], dtype=np.int64)
    rows = np.repeat(np.arange(n_q), n_snip)
    snip_tok[rows, segment_rank(rows)] = per_snip
    k_tok = np.cumsum(snip_tok, axis=1)  # [Q, K] tokens of the first k snippets
    stream_len = k_tok[:, -1]
    # no configuration reads past its limit (the cap, or max_tokens): the streams are cut there,
    # exactly (a COVID-QA document stream is ~40k tokens, of which at most 4096 are ever read)
    lims = [min(x for x in (cap, max_tokens) if x is not None) if (cap or max_tokens) else None for cap in caps]
    read = stream_len if any(x is None for x in lims) else np.minimum(stream_len, max(lims))
    before = (k_tok - snip_tok)[rows, segment_rank(rows)]  # tokens ahead of each snippet in its stream
    need = np.clip(np.repeat(read, n_snip) - before, 0, per_snip)
    ids = np.concatenate([a[:n] for a, n in zip(arrs, need.tolist())]) if arrs else np.zeros(0, dtype=np.int64)
    ref_arrs = [tid.ids(e, False) for e in evidence]
    ref_len = np.fromiter(map(len, ref_arrs), dtype=np.int64, count=n_q)
    ref_ids = np.concatenate(ref_arrs) if n_q else np.zeros(0, dtype=np.int64)
    n_v = max(len(tid.vocab), 1)
    # evidence multiset as sorted (question, token) keys with counts
    ref_q = np.repeat(np.arange(n_q), ref_len)
    ref_keys, ref_counts = np.unique(ref_q * n_v + ref_ids, return_counts=True)
    tok_q = np.repeat(np.arange(n_q), read)
    key = tok_q * n_v + ids
    # occurrence number (1-based) of each token within its (question, token) group, in stream order
    order = np.argsort(key, kind="stable")
    occ = np.empty(len(key), dtype=np.int64)
    occ[order] = segment_rank(key[order]) + 1
    pos = np.searchsorted(ref_keys, key)
    pos_ok = np.minimum(pos, max(len(ref_keys) - 1, 0))
    have = (pos < len(ref_keys)) & (ref_keys[pos_ok] == key) if len(ref_keys) else np.zeros(len(key), bool)
    # no evidence anywhere (questions without labels, routed for their tokens): nothing overlaps
    hit = have & (occ <= np.where(have, ref_counts[pos_ok], 0)) if len(ref_keys) else have
    # cumulative overlap: cum[start_q + t] - cum[start_q] = overlap of question q's first t tokens
    cum = np.r_[0, np.cumsum(hit)]
    start = np.r_[0, np.cumsum(read)[:-1]]
    n_c = len(caps)
    tokens = np.broadcast_to(k_tok[:, :, None], (n_q, depth, n_c)).copy()
    for c, lim in enumerate(lims):
        if lim is not None:
            np.minimum(tokens[:, :, c], lim, out=tokens[:, :, c])
    overlap = (cum[start[:, None, None] + tokens] - cum[start[:, None, None]]).astype(float)
    n_ref = ref_len.astype(float)[:, None, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = np.where(tokens > 0, overlap / np.maximum(tokens, 1), 0.0)
        recall = np.where(n_ref > 0, overlap / np.maximum(n_ref, 1), np.nan)
        f1 = np.where(tokens + n_ref > 0, 2 * overlap / np.maximum(tokens + n_ref, 1), 0.0)
    nan = np.broadcast_to(n_ref == 0, f1.shape)
    f1 = np.where(nan, np.nan, f1)
    precision = np.where(nan, np.nan, precision)
    return PrefixTable(f1=f1, precision=precision, recall=recall, tokens=tokens.astype(np.int64), caps=caps)
