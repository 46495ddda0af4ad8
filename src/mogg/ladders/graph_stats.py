"""Statistics of a MoGG node graph (from the ladder's stored edge list) and a degree plot."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from mogg.core.artifacts import atomic_path
from mogg.ladders.base import Ladder

log = logging.getLogger(__name__)

__all__ = ["GraphReport", "graph_statistics", "plot_degree_histogram"]


def graph_statistics(ladder: Ladder) -> dict:
    """Nodes, edges, degrees, cross-document share and components of ``ladder.arrays["edges"]``.

    Returns a JSON-able dict; ``degree_histogram[d]`` is the number of nodes of degree d.
    """
    import networkx as nx

    if "edges" not in ladder.arrays:
        raise ValueError(f"ladder {ladder.method!r} has no edge list (arrays['edges'])")
    edges = np.asarray(ladder.arrays["edges"], dtype=np.int64).reshape(-1, 2)
    n = len(ladder.units)
    g = nx.Graph()
    g.add_nodes_from(range(n))
    g.add_edges_from(edges.tolist())
    degree = np.fromiter((d for _, d in g.degree()), dtype=np.int64, count=n)
    docs = ladder.units.doc
    between = docs[edges[:, 0]] != docs[edges[:, 1]] if len(edges) else np.zeros(0, dtype=bool)
    sizes = sorted((len(c) for c in nx.connected_components(g)), reverse=True)
    largest = sizes[0] if sizes else 0
    stats = {
        "nodes": n,
        "edges": int(g.number_of_edges()),
        "mean_degree": float(degree.mean()) if n else 0.0,
        "max_degree": int(degree.max()) if n else 0,
        "isolated_nodes": int((degree == 0).sum()),
        "degree_histogram": [int(c) for c in nx.degree_histogram(g)],
        "cross_document_edge_share": float(between.mean()) if len(between) else 0.0,
        "components": len(sizes),
        "largest_component": int(largest),
        "largest_component_share": float(largest / n) if n else 0.0,
    }
    if "knn_recall" in ladder.meta:  # approximate dense kNN: recall measured at build time
        stats["knn_recall"] = dict(ladder.meta["knn_recall"])
    if "edge_sim" in ladder.arrays and len(ladder.arrays["edge_sim"]):
        stats["edge_sim_quantiles"] = {
            str(q): float(v) for q, v in zip((0.1, 0.5, 0.9), np.quantile(ladder.arrays["edge_sim"], [0.1, 0.5, 0.9]))
        }
    return stats


def plot_degree_histogram(stats: dict, path: str | Path) -> Path:
    """Bar plot of ``stats["degree_histogram"]`` (log-scale counts) written to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hist = np.asarray(stats["degree_histogram"], dtype=np.int64)
    path = Path(path)
    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.bar(np.arange(len(hist)), hist, color="#4c72b0")
    ax.set_yscale("log")
    ax.set_xlabel("degree")
    ax.set_ylabel("nodes")
    ax.set_title(f"{stats['nodes']} nodes, {stats['edges']} edges, "
                 f"{100 * stats['cross_document_edge_share']:.0f}% cross-document")
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=120, format="png")
    plt.close(fig)
    return path


class GraphReport:
    """Report hook of graph ladders: statistics table and degree histogram."""

    def __call__(self, name: str, ladder: Ladder, out_dir: Path) -> tuple[dict, list[str]]:
        st = graph_statistics(ladder)
        plot_degree_histogram(st, Path(out_dir) / f"{name}_degree.png")
        md = [
            f"## Graph of `{name}`",
            "",
            "| nodes | edges | mean degree | max degree | isolated | cross-document edges | components | largest component |",
            "|---|---|---|---|---|---|---|---|",
            f"| {st['nodes']:,} | {st['edges']:,} | {st['mean_degree']:.2f} | {st['max_degree']} | {st['isolated_nodes']:,} "
            f"| {st['cross_document_edge_share']:.1%} | {st['components']:,} | {st['largest_component']:,} ({st['largest_component_share']:.1%}) |",
            "",
            f"![degree histogram]({name}_degree.png)",
            "",
        ]
        if "knn_recall" in st:
            r = st["knn_recall"]
            md[-3:-3] = [f"Approximate kNN (`{r['index']}`): neighbour recall {r['neighbour_recall']:.4f}, rows found "
                         f"whole {r['rows_equal']:.1%}, against brute force on {r['sampled_nodes']:,} seeded nodes "
                         f"({r['exact_neighbours']:,} exact neighbours).", ""]
        return {"graph": st}, md
