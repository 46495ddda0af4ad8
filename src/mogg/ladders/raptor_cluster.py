"""Clustering one RAPTOR layer (:mod:`mogg.ladders.raptor`): a cosine kNN graph, seeded UMAP
reduction with epochs scaled to the layer size, Gaussian mixtures sized by BIC (seeded), global then
local clustering with soft membership, and token-capped re-splits.
"""

from __future__ import annotations

import logging
import time
import warnings

import numpy as np

from mogg.core.vectors import l2_normalize

log = logging.getLogger(__name__)

# BIC is scanned over this grid (capped by max clusters and layer size) instead of every size
# from 1 to 50: same choices in practice, ~3x fewer mixture fits on large layers.
_BIC_PATIENCE = 3
# UMAP epochs by layer size: UMAP's own range (500 below 10k points, 200 above), scaled so one
# layer's optimisation is about UMAP_EPOCH_BUDGET point-epochs: 500 up to 4k points, 458 at 4,363,
# 200 from 10k; every fit of a layer (global, local, re-splits) uses the layer's count.
UMAP_EPOCH_BUDGET = 2_000_000
_GMM_GRID = (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 50, 64, 80, 100)



def cosine_knn(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact cosine kNN graph as UMAP takes it: (ids int64 [n, k], distances float32 [n, k]),
    each row starting with the point itself at distance 0, then by (distance, id).

    Scored by :class:`DenseRetriever`'s exact search (faiss candidates, per-pair dot products, the
    k-th place settled on exact scores), so the graph is the same bits on any number of threads:
    faiss's own blocked BLAS scores differ in the last bits with the thread count, and from them UMAP
    builds another embedding and RAPTOR another tree (a 4,363-leaf tree had 210 layer-1 nodes on 2
    threads and 201 on 1 before).
    """
    from mogg.retrieval.dense import DenseRetriever

    xn = np.ascontiguousarray(l2_normalize(np.asarray(x, dtype=np.float32)))
    n = len(xn)
    sims, ids = DenseRetriever(None, backend="faiss").fit_embeddings(xn).search_embeddings(xn, min(n, k + 1))
    own = ids == np.arange(n)[:, None]  # [n, k+1]: self (or an exact duplicate) among them
    sims = np.where(own, -np.inf, sims)  # drop self wherever it landed, keep the k-1 best others
    order = np.argsort(-sims, axis=1, kind="stable")  # (similarity, id) order kept, self moved to the end
    ids = np.take_along_axis(ids, order, 1)[:, : k - 1]
    sims = np.take_along_axis(sims, order, 1)[:, : k - 1]
    out_i = np.concatenate([np.arange(n)[:, None], ids], axis=1).astype(np.int64)
    out_d = np.concatenate([np.zeros((n, 1)), np.clip(1.0 - sims, 0.0, 2.0)], axis=1).astype(np.float32)
    return out_i, out_d


def layer_epochs(n: int, budget: int = UMAP_EPOCH_BUDGET) -> int:
    """UMAP epochs for a layer of ``n`` nodes: ``budget / n`` clipped to UMAP's own [200, 500]."""
    return int(np.clip(round(budget / max(n, 1)), 200, 500))


def reduce_dims(x: np.ndarray, dim: int, neighbors: int, seed: int, epochs: int = 200) -> np.ndarray:
    """UMAP to ``dim`` dims (cosine, seeded, ``n_neighbors`` capped at n-1); PCA for tiny layers.

    UMAP's spectral init needs n comfortably above dim + 1; below ``2 * (dim + 2)`` points a
    deterministic SVD projection onto min(dim, n-1) axes is used instead.
    """
    n = len(x)
    if n <= 2 * (dim + 2):
        xc = x - x.mean(axis=0, keepdims=True)
        if n < 2:
            return np.zeros((n, 1), dtype=np.float64)
        u, s, _ = np.linalg.svd(xc.astype(np.float64), full_matrices=False)
        m = max(1, min(dim, n - 1))
        z = u[:, :m] * s[:m]
        signs = np.sign(z[np.abs(z).argmax(axis=0), np.arange(m)])  # fix SVD sign ambiguity
        return z * np.where(signs == 0, 1, signs)
    import umap

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "n_jobs overridden by random_state", "k >= N" notes
        # Speed (measured on 384-d embeddings, 2 cores): the cosine kNN graph is computed exactly by
        # faiss and handed to UMAP (no nearest-neighbour descent: its JIT compilation alone cost
        # ~60 s per process, its search 7 s on 2k points); ``epochs`` from :func:`layer_epochs`.
        # Tree quality before and after: docs/methods.md, RAPTOR section.
        k = int(max(2, min(neighbors, n - 1)))
        red = umap.UMAP(n_neighbors=k, n_components=dim, metric="cosine", random_state=seed, n_jobs=1,
                        low_memory=True, n_epochs=int(epochs), precomputed_knn=(*cosine_knn(x, k), None))
        return red.fit_transform(x).astype(np.float64)


def gmm_soft_clusters(z: np.ndarray, max_clusters: int, threshold: float, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Gaussian mixture sized by BIC; returns ``[(members int64, probs float)]`` per cluster.

    A node joins every cluster whose probability is at least ``threshold`` and always its argmax
    cluster, so no node is ever dropped. Sizes are scanned upwards on a grid, at most one
    component per ``dim + 1`` points, stopping once BIC has risen ``_BIC_PATIENCE`` times in a row.
    """
    from sklearn.mixture import GaussianMixture
    from threadpoolctl import threadpool_limits

    n, dim = z.shape
    n_distinct = len(np.unique(np.round(z, 9), axis=0))
    # A full-covariance component needs about dim + 1 points; larger sizes are singular fits that
    # BIC rejects anyway, and scanning them dominated build time on small local clusters.
    cap = max(1, min(max_clusters, n_distinct, n // (dim + 1)))
    if cap == 1:
        return [(np.arange(n), np.ones(n))]
    sizes = [k for k in _GMM_GRID if k <= cap] + ([cap] if cap not in _GMM_GRID else [])
    best, best_bic, worse = None, np.inf, 0
    # One BLAS/OpenMP thread: the fits' [n, dim] products are too small to gain from threads (a
    # 4,363-node layer's sweep: 4.7 s on 2 threads, 2.4 s on 1), and their rounding would vary with
    # the thread count, so the same layer could get other memberships on another machine.
    with warnings.catch_warnings(), threadpool_limits(limits=1):
        warnings.simplefilter("ignore")  # convergence notes on tiny or duplicated clusters
        for k in sizes:
            gm = GaussianMixture(n_components=k, random_state=seed, reg_covar=1e-5).fit(z)
            bic = gm.bic(z)
            if bic < best_bic - 1e-9:
                best, best_bic, worse = gm, bic, 0
            else:
                worse += 1
                if worse == _BIC_PATIENCE:  # BIC rose for several sizes in a row: past the minimum
                    break
        probs = best.predict_proba(z)  # [n, K]
    member = probs >= threshold
    member[np.arange(n), probs.argmax(axis=1)] = True
    out = [(np.flatnonzero(member[:, c]), probs[member[:, c], c]) for c in range(probs.shape[1])]
    return [(m, p) for m, p in out if len(m)]


def _split_by_tokens(tokens: np.ndarray, cap: int) -> list[np.ndarray]:
    """Contiguous groups of positions whose token sums stay within ``cap`` (a last resort)."""
    groups, cur, size = [], [], 0
    for i, t in enumerate(tokens):
        if cur and size + t > cap:
            groups.append(np.asarray(cur))
            cur, size = [], 0
        cur.append(i)
        size += int(t)
    groups.append(np.asarray(cur))
    return groups


def cluster_nodes(emb: np.ndarray, tokens: np.ndarray, dim: int, neighbors: int, max_clusters: int,
                  threshold: float, token_cap: int, seed: int, depth: int = 0,
                  timings: dict | None = None, epochs: int | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
    """RAPTOR clustering of one layer: global, then local, then re-split of over-long clusters.

    ``emb`` float32 [n, d], ``tokens`` int64 [n]. Returns clusters ``(members, membership)`` sorted
    by their first member, so ids are stable for a given input and seed. ``timings`` (optional)
    accumulates seconds under "umap" and "mixture". ``epochs``: UMAP epochs of every fit (default
    :func:`layer_epochs` of this layer's size).
    """
    timings = {"umap": 0.0, "mixture": 0.0} if timings is None else timings
    epochs = layer_epochs(len(emb)) if epochs is None else int(epochs)

    def reduce(x):
        t0 = time.perf_counter()
        z = reduce_dims(x, dim, neighbors, seed, epochs)
        timings["umap"] = timings.get("umap", 0.0) + time.perf_counter() - t0
        return z

    def mixture(z):
        t0 = time.perf_counter()
        c = gmm_soft_clusters(z, max_clusters, threshold, seed)
        timings["mixture"] = timings.get("mixture", 0.0) + time.perf_counter() - t0
        return c

    n = len(emb)
    if n <= 1:
        return [(np.arange(n), np.ones(n))]
    clusters = []
    for g_mem, g_prob in mixture(reduce(emb)):
        if len(g_mem) <= dim + 1:
            clusters.append((g_mem, g_prob))
            continue
        local = mixture(reduce(emb[g_mem]))
        clusters.extend((g_mem[m], g_prob[m] * p) for m, p in local)
    out = []
    for mem, prob in clusters:
        if len(mem) > 1 and tokens[mem].sum() > token_cap:
            sub = None
            if depth < 3:
                sub = cluster_nodes(emb[mem], tokens[mem], dim, neighbors, max_clusters, threshold, token_cap,
                                    seed, depth + 1, timings, epochs)
            if sub is None or len(sub) == 1:  # no progress: cut by tokens, in node order
                sub = [(g, np.ones(len(g))) for g in _split_by_tokens(tokens[mem], token_cap)]
            out.extend((mem[m], prob[m] * p) for m, p in sub)
        else:
            out.append((mem, prob))
    out.sort(key=lambda c: (int(c[0][0]), len(c[0])))
    return out
