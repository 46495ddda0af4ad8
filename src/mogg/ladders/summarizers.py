"""Cluster summarizers for RAPTOR trees: extractive (no model), local HF causal LM, OpenAI HTTP.

All share one interface: ``summarize(texts_groups, max_tokens=None) -> list[str]`` (one summary per
group of child texts, batched) and ``config()`` (what changes the output; enters artifact keys).
:class:`SummaryCache` wraps any summarizer with a content-hash cache so a rebuild pays once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from mogg.core.text import count_tokens, split_sentences
from mogg.core.vectors import l2_normalize

log = logging.getLogger(__name__)

__all__ = ["Summarizer", "ExtractiveSummarizer", "HFCausalLMSummarizer", "OpenAISummarizer", "SummaryCache"]

PROMPT = (
    "Summarize the following passages in one paragraph of at most {max_tokens} words. "
    "Keep every key medical fact, number and named entity.\n\n{context}\n\nSummary:"
)


@runtime_checkable
class Summarizer(Protocol):
    """One summary per group of texts."""

    def summarize(self, texts_groups: list[list[str]], max_tokens: int | None = None) -> list[str]: ...

    def config(self) -> dict: ...


def _truncate_tokens(text: str, n: int) -> str:
    """The first ``n`` word tokens' span of ``text`` (keeps original spacing and punctuation)."""
    import re

    ends = [m.end() for m in re.finditer(r"\w+", text)]
    return text if len(ends) <= n else text[: ends[n - 1]]


class ExtractiveSummarizer:
    """Centrality summary: the sentences closest to their group's centroid, within ``max_tokens``.

    Sentences are embedded with ``encoder`` (cosine to the group centroid == degree centrality on
    the similarity graph), or as hashed term-frequency vectors when ``encoder`` is None (no model). Sentences are
    taken by decreasing centrality, skipping any that would overflow the budget, and emitted in
    their original order. Sentence embeddings are memoised: upper-layer summaries consist of
    sentences already embedded below, so they cost nothing.
    """

    def __init__(self, encoder=None, max_tokens: int = 128):
        if max_tokens < 1:
            raise ValueError("max_tokens must be >= 1")
        self.encoder, self.max_tokens = encoder, int(max_tokens)
        self._memo: dict[str, np.ndarray] = {}

    def config(self) -> dict:
        enc = None if self.encoder is None else self.encoder.config()
        return {"kind": "extractive", "encoder": enc, "max_tokens": self.max_tokens}

    def _embed(self, sentences: list[str]) -> np.ndarray:
        """Row-normalised sentence vectors [S, d] (dense) for the unique ``sentences``."""
        if self.encoder is None:
            from sklearn.feature_extraction.text import HashingVectorizer

            # Stateless hashed term frequencies (stop words dropped): a group's summary never
            # depends on which other groups share the batch, so cached entries stay exact.
            vec = HashingVectorizer(n_features=2**18, stop_words="english", alternate_sign=False, norm="l2")
            return vec.transform(sentences).tocsr()  # sparse [S, V], rows L2-normalised
        new = [s for s in sentences if s not in self._memo]
        if new:
            emb = l2_normalize(self.encoder.encode(new))
            self._memo.update(zip(new, emb))
        return np.stack([self._memo[s] for s in sentences])

    def summarize(self, texts_groups: list[list[str]], max_tokens: int | None = None) -> list[str]:
        import scipy.sparse as sp

        budget = int(max_tokens or self.max_tokens)
        # Sentence instances: group id and text; duplicates inside a group appear once.
        inst_group, inst_text = [], []
        for g, texts in enumerate(texts_groups):
            seen = dict.fromkeys(s for t in texts for s in split_sentences(t))
            inst_group.extend([g] * len(seen))
            inst_text.extend(seen)
        if not inst_text:
            return [""] * len(texts_groups)
        uniq, inv = np.unique(np.array(inst_text, dtype=object), return_inverse=True)
        vecs = self._embed(list(uniq))  # [S, d] over unique sentences
        inst_group = np.asarray(inst_group, dtype=np.int64)
        n_g = len(texts_groups)
        # Group centroids via a sparse (groups x instances) average: [G, d].
        gmat = sp.csr_matrix((np.ones(len(inv)), (inst_group, inv)), shape=(n_g, len(uniq)))
        centroid = gmat @ vecs
        if sp.issparse(centroid):
            cent_inst = centroid[inst_group]
            score = np.asarray(vecs[inv].multiply(cent_inst).sum(axis=1)).ravel()
        else:
            score = np.einsum("id,id->i", np.asarray(vecs)[inv], np.asarray(centroid)[inst_group])
        tokens = np.fromiter((count_tokens(s) for s in inst_text), dtype=np.int64, count=len(inst_text))
        # Rank within each group: by group, then centrality desc, then original position.
        order = np.lexsort((np.arange(len(score)), -score, inst_group))
        out = [""] * n_g
        bounds = np.searchsorted(inst_group[order], np.arange(n_g + 1))
        for g in range(n_g):  # build time only: a short greedy pass per cluster
            idx = order[bounds[g] : bounds[g + 1]]
            if len(idx) == 0:
                continue
            left, keep = budget, []
            for i in idx:
                if tokens[i] <= left:
                    keep.append(i)
                    left -= tokens[i]
            if not keep:  # every sentence is longer than the budget: cut the most central one
                out[g] = _truncate_tokens(inst_text[idx[0]], budget)
                continue
            out[g] = " ".join(inst_text[i] for i in sorted(keep))
        return out


class HFCausalLMSummarizer:
    """Abstractive summaries from a local Hugging Face causal LM (hub name or path), greedy decoding.

    Generation is :class:`mogg.readers.HFReader`'s (lazy load, chat template or plain rendering,
    length-sorted left-padded batches), so readers and summarizers share one decoding path.
    """

    def __init__(self, name_or_path: str, max_new_tokens: int = 160, batch_size: int = 8, device: str | None = None,
                 max_input_tokens: int = 3072, max_tokens: int = 128, dtype: str = "auto"):
        from mogg.readers.hf import HFReader

        if max_input_tokens < 1 or max_tokens < 1:
            raise ValueError("max_input_tokens and max_tokens must be >= 1")
        self.max_input_tokens, self.max_tokens = int(max_input_tokens), int(max_tokens)
        self.reader = HFReader(name_or_path, max_new_tokens=max_new_tokens, batch_size=batch_size,
                               device=device, dtype=dtype)

    def config(self) -> dict:
        r = self.reader
        return {"kind": "hf", "name_or_path": r.name_or_path, "max_new_tokens": r.max_new_tokens,
                "max_input_tokens": self.max_input_tokens, "max_tokens": self.max_tokens, "prompt": PROMPT}

    def messages(self, texts: list[str], max_tokens: int) -> list[dict]:
        """The chat prompt for one cluster: its children joined, cut to ``max_input_tokens`` words."""
        context = _truncate_tokens("\n\n".join(texts), self.max_input_tokens)
        return [{"role": "user", "content": PROMPT.format(max_tokens=max_tokens, context=context)}]

    def summarize(self, texts_groups: list[list[str]], max_tokens: int | None = None) -> list[str]:
        budget = int(max_tokens or self.max_tokens)
        out = self.reader.generate([self.messages(g, budget) for g in texts_groups])
        return [_truncate_tokens(t.strip(), budget) for t in out]


class OpenAISummarizer:
    """Summaries from an OpenAI-compatible ``/v1/chat/completions`` endpoint (OpenAI, vLLM, ...).

    Requests go through :class:`mogg.readers.openai_http.OpenAIReader` (the project's one client for
    such endpoints): ``concurrency`` at a time, 429/5xx/timeouts/connection errors retried
    ``retries`` times with exponential backoff or the server's ``Retry-After``. Temperature 0 so a
    server with deterministic decoding gives the same tree twice.
    """

    def __init__(self, base_url: str, model: str, api_key: str | None = None, max_tokens: int = 128,
                 concurrency: int = 4, retries: int = 5, timeout: float = 60.0, backoff: float = 1.0,
                 temperature: float = 0.0, max_input_tokens: int = 6000):
        from mogg.readers.openai_http import OpenAIReader

        base_url = base_url.rstrip("/")
        base_url = base_url if base_url.endswith("/v1") else base_url + "/v1"
        self.max_tokens, self.max_input_tokens = int(max_tokens), int(max_input_tokens)
        self.reader = OpenAIReader(base_url, model, api_key, max_tokens=self._request_tokens(self.max_tokens),
                                   temperature=temperature, concurrency=concurrency, retries=retries,
                                   backoff=backoff, timeout=timeout)

    @staticmethod
    def _request_tokens(budget: int) -> int:
        # words -> model tokens, with room for a short preamble; the answer is cut to ``budget`` words
        return int(budget * 1.5) + 16

    def config(self) -> dict:  # never the API key, nor a password in the URL
        from mogg.core.secrets import scrub_url

        r = self.reader
        return {"kind": "openai", "base_url": scrub_url(r.base_url), "model": r.model, "max_tokens": self.max_tokens,
                "temperature": r.temperature, "max_input_tokens": self.max_input_tokens, "prompt": PROMPT}

    def summarize(self, texts_groups: list[list[str]], max_tokens: int | None = None) -> list[str]:
        budget = int(max_tokens or self.max_tokens)
        prompts = [[{"role": "user", "content": PROMPT.format(
            max_tokens=budget, context=_truncate_tokens("\n\n".join(g), self.max_input_tokens))}] for g in texts_groups]
        out = self.reader.generate(prompts, max_tokens=self._request_tokens(budget))
        return [_truncate_tokens(t.strip(), budget) for t in out]


class SummaryCache:
    """Content-hash cache around ``summarizer``: one JSON file per sha256(config, budget, texts).

    Only missing groups reach the wrapped summarizer (in one batched call). Files are written to a
    temporary name and renamed, so concurrent builds never read a partial entry.
    """

    def __init__(self, summarizer: Summarizer, directory: str | os.PathLike):
        self.summarizer, self.directory = summarizer, Path(directory)
        self.hits = self.misses = 0

    def config(self) -> dict:
        return self.summarizer.config()  # the cache does not change what is produced

    def key(self, texts: Sequence[str], max_tokens: int | None) -> str:
        blob = json.dumps([self.summarizer.config(), max_tokens, list(texts)], sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def summarize(self, texts_groups: list[list[str]], max_tokens: int | None = None) -> list[str]:
        keys = [self.key(g, max_tokens) for g in texts_groups]
        out: list[str | None] = [None] * len(keys)
        for i, k in enumerate(keys):
            path = self.directory / k[:2] / f"{k}.json"
            if path.is_file():
                try:
                    out[i] = json.loads(path.read_text(encoding="utf-8"))["summary"]
                except (ValueError, KeyError):
                    log.warning("ignoring unreadable cache entry %s", path)
        miss = [i for i, s in enumerate(out) if s is None]
        self.hits += len(keys) - len(miss)
        self.misses += len(miss)
        if miss:
            new = self.summarizer.summarize([texts_groups[i] for i in miss], max_tokens)
            for i, s in zip(miss, new):
                out[i] = s
                self._write(keys[i], s)
        return out  # type: ignore[return-value]

    def _write(self, key: str, summary: str) -> None:
        d = self.directory / key[:2]
        d.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"summary": summary}, f, ensure_ascii=False)
        os.replace(tmp, d / f"{key}.json")
