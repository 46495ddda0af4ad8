"""RAPTOR trees as a ladder (Sarthi et al., docs/design.md section 1): layers are levels.

Level 0 holds the leaves (~``leaf_tokens``-token chunks that never cross a document); level l holds
the summary nodes of tree layer l. Each layer is clustered as in RAPTOR: UMAP reduction (seeded,
neighbours capped), a Gaussian mixture sized by BIC (seeded), global then local clustering, soft
membership above ``threshold`` (each node always joins its most likely cluster), and clusters over
``cluster_token_cap`` tokens re-split. Each cluster is summarized and embedded; repeat until a
tree's layer has at most ``stop_size`` nodes or ``max_layers`` summary layers exist.

Membership strengths are kept: the link child->parent carries global x local probability, and a
leaf's strength for a layer-l ancestor is the sum over paths of the products (a sparse product of
the link matrices). ``coverage`` of a node is every leaf with non-zero strength (= the union of its
children's coverage) and ``home[u]`` the strongest ancestor of leaf u in that layer.

``ladder.arrays`` (saved as npz, no pickle): ``emb_layer{l}`` float32 [C_l, d] (L2-normalised),
``tokens_layer{l}`` int64 [C_l], ``tree_layer{l}`` int64 [C_l] (tree id: 0, or the document in
per-document mode), and for l >= 1 ``children_layer{l}_indptr`` / ``_indices`` (CSR into layer
l-1) and ``children_layer{l}_prob`` float32 (link membership).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
from tqdm.auto import tqdm

from mogg.core.text import UNIT_RULE, count_tokens, log_cuts, split_units
from mogg.core.vectors import l2_normalize
from mogg.data.records import Document
from mogg.ladders.base import Ladder, Level, Units, partition_level
from mogg.ladders.builder import LadderBuilder
from mogg.ladders.mog import pack_sentences
from mogg.ladders.raptor_cluster import UMAP_EPOCH_BUDGET, cluster_nodes

log = logging.getLogger(__name__)

__all__ = ["RaptorLadderBuilder", "add_documents", "cluster_nodes", "tree_children"]

def tree_children(ladder: Ladder, layer: int) -> sp.csr_matrix:
    """Parent->child links of ``layer`` (>= 1) as CSR [C_layer, C_{layer-1}] holding memberships."""
    a = ladder.arrays
    ptr, ind = a[f"children_layer{layer}_indptr"], a[f"children_layer{layer}_indices"]
    data = a.get(f"children_layer{layer}_prob", np.ones(len(ind), dtype=np.float32))
    return sp.csr_matrix((data, ind, ptr), shape=(len(ladder.levels[layer]), len(ladder.levels[layer - 1])))


class RaptorLadderBuilder(LadderBuilder):
    """Build a RAPTOR tree (one over the corpus, or one per document) as a :class:`Ladder`.

    Args:
        encoder: embeds leaves and summaries (``encode(texts) -> float32 [N, d]``, ``config()``).
        summarizer: a :class:`mogg.ladders.summarizers.Summarizer` (extractive by default in conf).
        leaf_tokens: token budget of a leaf (whole sentences packed; RAPTOR: 100).
        umap_dim, umap_neighbors: UMAP target dimension and neighbours (capped at layer size - 1).
        gmm_max_clusters: largest mixture size scanned by BIC.
        threshold: soft membership probability for joining a cluster.
        cluster_token_cap: clusters with more child tokens are re-clustered (RAPTOR: 3500).
        max_layers: summary layers at most; stop_size: a tree whose layer has at most this many
            nodes stops growing.
        per_document: one tree per document instead of one over the whole corpus.
        seed: passed to UMAP and to every Gaussian mixture.
        policies, reports: spine hooks (:mod:`mogg.ladders.builder`): the collapsed tree and tree
            traversal, the tree plot (from ``conf/ladder/raptor.yaml``).
    """

    method = "raptor"
    document_local = False  # summary nodes cluster leaves of many documents

    def __init__(self, encoder, summarizer, leaf_tokens: int = 100, umap_dim: int = 10, umap_neighbors: int = 15,
                 gmm_max_clusters: int = 50, threshold: float = 0.1, cluster_token_cap: int = 3500,
                 max_layers: int = 4, stop_size: int = 10, per_document: bool = False, seed: int = 0,
                 policies=None, reports=None, leaf_chunker=None):
        super().__init__(policies, reports)
        self.leaf_chunker = leaf_chunker  # semantic chunks as leaves instead of ~leaf_tokens sentence packs
        if leaf_tokens < 1 or umap_dim < 1 or umap_neighbors < 2 or gmm_max_clusters < 1 or max_layers < 0:
            raise ValueError("leaf_tokens, umap_dim, gmm_max_clusters >= 1, umap_neighbors >= 2, max_layers >= 0")
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], got {threshold}")
        self.encoder, self.summarizer = encoder, summarizer
        self.leaf_tokens, self.umap_dim, self.umap_neighbors = int(leaf_tokens), int(umap_dim), int(umap_neighbors)
        self.gmm_max_clusters, self.threshold = int(gmm_max_clusters), float(threshold)
        self.cluster_token_cap, self.max_layers, self.stop_size = int(cluster_token_cap), int(max_layers), int(stop_size)
        self.per_document, self.seed = bool(per_document), int(seed)
        self.timings: dict[str, float] = {}  # seconds per stage of the last build

    def config(self) -> dict:
        return {
            "method": self.method, "encoder": self.encoder.config(), "summarizer": self.summarizer.config(),
            "leaf_tokens": self.leaf_tokens, "umap_dim": self.umap_dim, "umap_neighbors": self.umap_neighbors,
            "gmm_max_clusters": self.gmm_max_clusters, "threshold": self.threshold,
            "cluster_token_cap": self.cluster_token_cap, "max_layers": self.max_layers, "stop_size": self.stop_size,
            "per_document": self.per_document, "seed": self.seed, "umap_epoch_budget": UMAP_EPOCH_BUDGET,
            "unit_rule": UNIT_RULE,  # leaves pack split_units' units: a new rule, new leaves
            **({"leaf_chunker": self.leaf_chunker.config()} if self.leaf_chunker is not None else {}),
        }

    def units(self, documents: Sequence[Document], show_progress: bool = False) -> Units:
        """Leaves: whole sentences and list items (:func:`mogg.core.text.split_units`) packed up to ``leaf_tokens``
        tokens, never across documents."""
        texts: list[str] = []
        counts = np.zeros(len(documents), dtype=np.int64)
        cuts: dict = {}  # a sentence longer than a leaf is cut at leaf_tokens (logged)
        chunks = self.leaf_chunker.chunk_documents(documents, show_progress) if self.leaf_chunker is not None else None
        for d, doc in enumerate(tqdm(documents, desc="leaves", disable=not show_progress or chunks is not None)):
            leaves = chunks[d] if chunks is not None else \
                pack_sentences(split_units(doc.text, self.leaf_tokens, cuts), "tokens", self.leaf_tokens)
            texts.extend(leaves)
            counts[d] = len(leaves)
        log_cuts(cuts, self.leaf_tokens, "RAPTOR leaves")
        doc = np.repeat(np.arange(len(documents), dtype=np.int64), counts)
        return Units(text=texts, doc=doc, doc_ids=[d.id for d in documents])

    def build(self, documents: Sequence[Document], show_progress: bool = False) -> Ladder:
        """Leaves + summary layers for ``documents``."""
        units = self.units(documents, show_progress)
        if len(units) == 0:
            raise ValueError("cannot build a RAPTOR tree over zero leaves (empty corpus?)")
        t0 = time.perf_counter()
        emb = l2_normalize(self.encoder.encode(units.text, show_progress=show_progress))
        self.timings = {"embedding": time.perf_counter() - t0}
        return self.build_from_leaves(units, emb, show_progress)

    def build_from_leaves(self, units: Units, leaf_emb: np.ndarray, show_progress: bool = False) -> Ladder:
        """Grow the summary layers over given leaves and their embeddings [U, d]."""
        for k in ("umap", "mixture", "summarizing"):
            self.timings[k] = 0.0
        self.timings.setdefault("embedding", 0.0)
        n_u = len(units)
        tokens = np.fromiter((count_tokens(t) for t in units.text), dtype=np.int64, count=n_u)
        tree = units.doc.copy() if self.per_document else np.zeros(n_u, dtype=np.int64)
        arrays = {"emb_layer0": l2_normalize(leaf_emb), "tokens_layer0": tokens, "tree_layer0": tree}
        levels = [partition_level(f"leaf:{self.leaf_tokens}tok", np.arange(n_u, dtype=np.int64))]
        strength = sp.identity(n_u, dtype=np.float64, format="csr")  # [U, C_l] leaf -> node membership
        emb, layer = arrays["emb_layer0"], 0
        bar = tqdm(total=self.max_layers, desc="raptor layers", disable=not show_progress)
        while layer < self.max_layers:
            rows, cols, probs, groups, new_tree = self._cluster_layer(emb, tokens, tree)
            if not groups:
                break
            layer += 1
            n_new = len(groups)
            child_texts = levels[-1].texts if levels[-1].texts is not None else units.text
            t0 = time.perf_counter()
            summaries = self.summarizer.summarize([[child_texts[c] for c in g] for g in groups])
            self.timings["summarizing"] += time.perf_counter() - t0
            t0 = time.perf_counter()
            emb = l2_normalize(self.encoder.encode(summaries))
            self.timings["embedding"] += time.perf_counter() - t0
            tokens = np.fromiter((count_tokens(s) for s in summaries), dtype=np.int64, count=n_new)
            tree = np.asarray(new_tree, dtype=np.int64)
            link = sp.csr_matrix((probs, (rows, cols)), shape=(len(levels[-1]), n_new))  # [C_{l-1}, C_l]
            strength = (strength @ link).tocsr()  # [U, C_l]: sum over paths of membership products
            levels.append(_tree_level(f"layer{layer}", strength, summaries))
            children = link.T.tocsr()
            children.sort_indices()
            arrays.update({
                f"emb_layer{layer}": emb, f"tokens_layer{layer}": tokens, f"tree_layer{layer}": tree,
                f"children_layer{layer}_indptr": children.indptr.astype(np.int64),
                f"children_layer{layer}_indices": children.indices.astype(np.int64),
                f"children_layer{layer}_prob": children.data.astype(np.float32),
            })
            bar.update(1)
        bar.close()
        log.info("RAPTOR ladder: %d leaves, nodes per layer %s, timings %s", n_u, [len(lv) for lv in levels],
                 {k: round(v, 2) for k, v in self.timings.items()})
        return Ladder(method=self.method, units=units, levels=levels, meta=self.config(), arrays=arrays)

    def _cluster_layer(self, emb, tokens, tree):
        """Cluster every still-growing tree's nodes; links as COO (child, parent, prob) + groups."""
        rows, cols, probs, groups, new_tree = [], [], [], [], []
        order = np.argsort(tree, kind="stable")
        bounds = np.flatnonzero(np.r_[True, np.diff(tree[order]) != 0, True])
        for b in range(len(bounds) - 1):  # build time: one clustering per tree
            idx = order[bounds[b] : bounds[b + 1]]
            if len(idx) <= max(self.stop_size, 1):
                continue
            clusters = self._timed_cluster(emb[idx], tokens[idx])
            if len(clusters) >= len(idx):  # no reduction: make the tree's root instead of looping
                clusters = [(np.arange(len(idx)), np.ones(len(idx)))]
            for mem, p in clusters:
                rows.append(idx[mem])
                cols.append(np.full(len(mem), len(groups)))
                probs.append(p)
                groups.append(idx[mem].tolist())
                new_tree.append(int(tree[idx[0]]))
        if not groups:
            return None, None, None, [], []
        return np.concatenate(rows), np.concatenate(cols), np.concatenate(probs), groups, new_tree

    def _timed_cluster(self, emb, tokens):
        return cluster_nodes(emb, tokens, self.umap_dim, self.umap_neighbors, self.gmm_max_clusters,
                             self.threshold, self.cluster_token_cap, self.seed, timings=self.timings)


def _tree_level(name: str, strength: sp.csr_matrix, texts: list[str]) -> Level:
    """Level from leaf->node strengths [U, C]: coverage = non-zero pattern, home = row argmax."""
    strength = strength.tocsr()
    strength.eliminate_zeros()
    cov = strength.T.tocsr().astype(bool).astype(np.float32)  # [C, U]
    cov.sort_indices()
    n_u = strength.shape[0]
    lengths = np.diff(strength.indptr)
    row = np.repeat(np.arange(n_u), lengths)
    order = np.lexsort((strength.indices, -strength.data, row))  # per leaf: strongest, then lowest id
    home = np.full(n_u, -1, dtype=np.int64)
    has = lengths > 0
    home[has] = strength.indices[order][strength.indptr[:-1][has]]
    return Level(name=name, coverage=cov, home=home, texts=list(texts))


def add_documents(ladder: Ladder, documents: Sequence[Document], builder: RaptorLadderBuilder,
                  show_progress: bool = False) -> Ladder:
    """A new ladder: ``ladder`` plus ``documents``, with the summary layers re-grown.

    Design: the leaves are kept (their stored embeddings reused; only new leaves are encoded) and
    appended in corpus order; every layer above is re-clustered from the leaves up, because a
    global mixture's clusters all move when data is added. Summaries of clusters whose children did
    not change are served by the builder's :class:`SummaryCache` (if it has one), and in
    per-document mode the trees of unchanged documents come out identical (same inputs, same seed),
    so the cost is the clustering plus the new summaries. ``builder`` must match ``ladder.meta``.
    Duplicate document ids are refused; an empty ``documents`` logs a warning and re-grows the
    same tree.
    """
    if builder.config() != ladder.meta:
        diff = sorted(k for k in set(builder.config()) | set(ladder.meta) if builder.config().get(k) != ladder.meta.get(k))
        raise ValueError(f"builder config differs from the ladder's in {diff}")
    old_ids = set(ladder.units.doc_ids)
    dup = [d.id for d in documents if d.id in old_ids]
    if dup:
        raise ValueError(f"documents already in the tree: {dup[:5]}")
    if not documents:
        log.warning("add_documents: no documents given; the tree is unchanged")
    new = builder.units(documents, show_progress)
    n_old_docs = len(ladder.units.doc_ids)
    units = Units(text=ladder.units.text + new.text, doc=np.r_[ladder.units.doc, new.doc + n_old_docs].astype(np.int64),
                  doc_ids=ladder.units.doc_ids + new.doc_ids)
    t0 = time.perf_counter()
    new_emb = builder.encoder.encode(new.text) if len(new) else np.zeros((0, ladder.arrays["emb_layer0"].shape[1]))
    builder.timings = {"embedding": time.perf_counter() - t0}
    emb = np.concatenate([ladder.arrays["emb_layer0"], l2_normalize(new_emb)]) if len(new) else ladder.arrays["emb_layer0"]
    return builder.build_from_leaves(units, emb, show_progress)
