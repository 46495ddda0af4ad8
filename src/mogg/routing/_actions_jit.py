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
