"""A small picture of a RAPTOR tree: nodes per layer and the distribution of cluster sizes."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from mogg.core.artifacts import atomic_path
from mogg.ladders.base import Ladder

log = logging.getLogger(__name__)

__all__ = ["TreeReport", "tree_stats", "plot_tree"]


def tree_stats(ladder: Ladder) -> dict:
    """Nodes per layer and, per summary layer, the number of children of every node (int lists)."""
    sizes = {}
    for j in range(1, ladder.n_levels):
        ptr = ladder.arrays.get(f"children_layer{j}_indptr")
        if ptr is not None:
            sizes[j] = np.diff(ptr).tolist()
    return {"nodes_per_layer": [len(lv) for lv in ladder.levels], "cluster_sizes": sizes}


def plot_tree(ladder: Ladder, path: str | Path) -> Path:
    """Write a two-panel PNG/PDF (by suffix): nodes per layer (bars), children per node (histogram)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    stats = tree_stats(ladder)
    path = Path(path)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.4))
    n = stats["nodes_per_layer"]
    ax1.bar(range(len(n)), n, color="tab:blue")
    ax1.set_yscale("log")
    ax1.set_xticks(range(len(n)), [lv.name for lv in ladder.levels], rotation=20, fontsize=8)
    ax1.set_ylabel("nodes")
    ax1.set_title("nodes per layer")
    for j, c in stats["cluster_sizes"].items():
        if c:
            ax2.hist(c, bins=np.arange(1, max(c) + 2) - 0.5, alpha=0.6, label=f"layer {j}")
    ax2.set_xlabel("children per node (cluster size)")
    ax2.set_ylabel("clusters")
    ax2.set_title("cluster sizes")
    if stats["cluster_sizes"]:
        ax2.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=120, format="png")
    plt.close(fig)
    log.info("tree plot written to %s", path)
    return path


class TreeReport:
    """Report hook of tree ladders: nodes per layer and the tree plot."""

    def __call__(self, name: str, ladder: Ladder, out_dir: Path) -> tuple[dict, list[str]]:
        plot_tree(ladder, Path(out_dir) / f"{name}_tree.png")
        sizes = [len(lv) for lv in ladder.levels]
        md = [f"## Tree of `{name}`", "", "nodes per layer: " + " / ".join(f"{s:,}" for s in sizes), "",
              f"![tree]({name}_tree.png)", ""]
        return {"tree": {"nodes_per_layer": sizes}}, md
