"""The action scorer's dropout as a counter-based hash (numba; compiled on first call, cached on disk).

A fit of the action router drops units of a [rows, actions, 2 * hidden] hidden layer: ~19M
draws per fold and epoch on PubMedQA*, 80M on MedMCQA. Drawn from torch's generator
(``rand(float64) < keep``, one Mersenne-Twister pair per unit) they cost as much as the fit's
matrix products; here unit ``j`` of question row ``r`` keeps iff

    splitmix64(key + (r * width + j + 1) * golden) >> 11  <  keep * 2**53

(the 53-bit uniform of splitmix64, compared as ``keep_mask`` compares torch's 53-bit uniforms),
with ``key`` hashed from the fold's seed and the epoch. A mask is a function of (seed, epoch,
question, unit): the same whichever batch, fold stack or thread count computes it, and
recomputed in the backward pass instead of stored.
"""

from __future__ import annotations

import numba as nb
import numpy as np

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


@nb.njit(cache=True, inline="always")
def _mix(z):  # the splitmix64 finaliser (uint64 -> uint64)
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


@nb.njit(cache=True)
def mix64(z):
    """The splitmix64 finaliser of one uint64 (a fold's and epoch's key from its seed)."""
    return _mix(np.uint64(z))


@nb.njit(cache=True, inline="always")
def _drop_row(x, i, key, row, keep53, scale):
    width = x.shape[1]
    base = np.uint64(row) * np.uint64(width) + np.uint64(1)
    for j in range(width):
        z = _mix(key + (base + np.uint64(j)) * GOLDEN)
        x[i, j] = x[i, j] * scale if (z >> np.uint64(11)) < keep53 else np.float32(0.0)


@nb.njit(parallel=True, cache=True)
def _dropout_parallel(x, key, rows, keep53, scale):
    for i in nb.prange(x.shape[0]):  # rows are independent: any split over threads gives the same mask
        _drop_row(x, i, key, rows[i], keep53, scale)


@nb.njit(cache=True)
def _dropout_serial(x, key, rows, keep53, scale):
    for i in range(x.shape[0]):
        _drop_row(x, i, key, rows[i], keep53, scale)


# Below this many units one thread: a parallel launch costs more than it saves, and far more when
# another job holds the cores (a woken thread waits for its time slice)
_PARALLEL_FROM = 1 << 18


def dropout_rows_(x: np.ndarray, key, rows: np.ndarray, keep53, scale) -> None:
    """In place: ``x[i, j] *= scale`` where unit j of question ``rows[i]`` is kept under ``key``,
    else 0. ``x`` float32 [n, width] (C order), ``rows`` int64 [n], ``keep53`` = keep * 2**53."""
    kernel = _dropout_parallel if x.size >= _PARALLEL_FROM else _dropout_serial
    kernel(x, np.uint64(key), rows, np.uint64(keep53), np.float32(scale))


@nb.njit(parallel=True, cache=True)
def layer1_(h1, qp, cp, v, wv_t, key, rows, keep53, scale, use_mask):
    """The first layer in one pass: ``h1[b, a] = drop(relu(qp[b] + cp[a] + v[b, a] @ wv_t))``
    (``h1`` float32 [B, A, W] out, ``qp`` [B, W], ``cp`` [A, W], ``v`` [B, A, Dv], ``wv_t`` [Dv, W]);
    ``use_mask``: unit ``a * W + u`` of question ``rows[b]`` kept under ``key`` (the hash of
    :func:`dropout_rows_`) and scaled by ``scale``, else 0. The pre-activations are not kept: the
    backward pass needs only where ``h1 > 0`` (unit active and kept)."""
    n_b, n_a, width = h1.shape
    n_v = v.shape[2]
    key = np.uint64(key)
    w = np.uint64(n_a * width)
    for b in nb.prange(n_b):
        base = np.uint64(rows[b]) * w + np.uint64(1)
        for a in range(n_a):
            out = h1[b, a]
            for u in range(width):  # innermost loops over units: vectorised
                out[u] = qp[b, u] + cp[a, u]
            for j in range(n_v):
                x = v[b, a, j]
                for u in range(width):
                    out[u] += x * wv_t[j, u]
            for u in range(width):  # relu, then the mask: relu(z) * scale, as torch's relu then dropout_rows_
                r = out[u] if out[u] > np.float32(0.0) else np.float32(0.0)
                out[u] = r
            if use_mask:
                c0 = base + np.uint64(a * width)
                for u in range(width):
                    z = _mix(key + (c0 + np.uint64(u)) * GOLDEN)
                    out[u] = out[u] * scale if (z >> np.uint64(11)) < keep53 else np.float32(0.0)


@nb.njit(parallel=True, cache=True)
def layer1_grads(g, h1, v, scale, n_parts):
    """The first layer's gradients from ``g`` = dL/dh1 [B, A, W] float32 in one read: relu's and the
    dropout mask's derivative is ``scale`` where ``h1 > 0`` (the unit active and kept; ``scale`` 1
    without dropout), else 0; the result summed over the actions per question ([B, W]), over the
    questions per action ([A, W]) and against the varying features ``v`` [B, A, Dv] ([Dv, W]).
    Questions are split into ``n_parts`` fixed parts summed in order, so the sums do not depend on
    the thread count."""
    n_b, n_a, width = g.shape
    n_v = v.shape[2]
    g_q = np.zeros((n_b, width), dtype=np.float32)
    part_a = np.zeros((n_parts, n_a, width), dtype=np.float32)
    part_v = np.zeros((n_parts, n_v, width), dtype=np.float32)
    zero = np.float32(0.0)
    for p in nb.prange(n_parts):
        x = np.empty(width, dtype=np.float32)
        for b in range(p * n_b // n_parts, (p + 1) * n_b // n_parts):
            for a in range(n_a):
                gb, hb = g[b, a], h1[b, a]
                for u in range(width):
                    x[u] = gb[u] * scale if hb[u] > zero else zero
                for u in range(width):
                    g_q[b, u] += x[u]
                    part_a[p, a, u] += x[u]
                for j in range(n_v):
                    vj = v[b, a, j]
                    for u in range(width):
                        part_v[p, j, u] += vj * x[u]
    g_a = part_a[0].copy()
    g_v = part_v[0].copy()
    for p in range(1, n_parts):
        g_a += part_a[p]
        g_v += part_v[p]
    return g_q, g_a, g_v
