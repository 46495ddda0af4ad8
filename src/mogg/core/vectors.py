"""Vector helpers shared by dense retrieval, RAPTOR trees, tree policies and summarizers."""

from __future__ import annotations

import numpy as np


def l2_normalize(x: np.ndarray) -> np.ndarray:
    """Row-wise L2 normalisation of [N, d] to float32; all-zero rows stay zero."""
    x = np.asarray(x, dtype=np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), np.float32(1e-12))
