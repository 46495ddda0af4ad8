"""QA accuracy with an LLM reader: every chosen policy's snippets -> prompt -> answer -> parse.

All policies of all ladders share one reader, one prompt format, one number of snippets (``k``)
and one answer cache (keyed by prompt hash, so a killed run resumes without re-asking, and a
prompt shared by two policies is asked once). ``cot`` is the no-retrieval baseline.
"""

from __future__ import annotations

import logging
from pathlib import Path

from mogg.evaluation import names as N
from mogg.readers.cache import AnswerCache, exclusive
from mogg.readers.run import MIRAGE_NAMES, accuracy_table, answer_questions

log = logging.getLogger(__name__)


def resolve_policies(requested: list[str], results: dict, best_fixed: str) -> list[str]:
    """Policy names to read; ``fixed:best`` means the best fixed level by evidence F1, ``fixed:*``
    every fixed level; names that do not apply to this ladder (e.g. ``oracle`` without evidence)
    are skipped."""
    out: list[str] = []
    for p in requested:
        if p == "fixed:best":
            names = [best_fixed]
        elif p == "fixed:*":
            names = [n for n in results if N.is_fixed(n)]
        else:
            names = [p] if (p in results or p == "cot") else []
        out.extend(n for n in names if n not in out)
    return out


def read_policies(
    items, results: dict, policies: list[str], reader, cache_path: Path, step_by_step: bool = False,
    batch_size: int = 16,
) -> tuple[dict[str, dict], dict[str, list[dict]]]:
    """Accuracy tables and per-question reader records per policy.

    The answer cache is held exclusively for the whole reading pass (and loaded inside it), so a
    concurrent evaluation of the same run waits and then reads the answers instead of asking twice.
    """
    tables, records = {}, {}
    with exclusive(cache_path):
        cache = AnswerCache(cache_path)
        for pol in policies:
            snippets = None if pol == "cot" else results[pol].snippets
            log.info("reader: %s on %d questions", pol, len(items))
            recs = answer_questions(items, snippets, reader, cache, step_by_step=step_by_step, batch_size=batch_size)
            tables[pol] = accuracy_table(recs)
            records[pol] = recs
    return tables, records


def versus_cot(records: dict[str, list[dict]]) -> dict[str, dict]:
    """Per policy, the questions it answers right where CoT (no retrieval) is wrong (``improved``)
    and wrong where CoT is right (``degraded``), in total and per set (the MoG paper's analysis)."""
    cot = records.get("cot")
    if cot is None:
        return {}
    out = {}
    for pol, recs in records.items():
        if pol == "cot":
            continue
        row = {"improved": 0, "degraded": 0, "datasets": {}}
        for r, c in zip(recs, cot):
            d = row["datasets"].setdefault(r.get("dataset") or "", {"improved": 0, "degraded": 0})
            key = "improved" if r["correct"] and not c["correct"] else "degraded" if c["correct"] and not r["correct"] else None
            if key:
                row[key] += 1
                d[key] += 1
        out[pol] = row
    return out


def accuracy_section(name: str, tables: dict[str, dict], vs_cot: dict[str, dict] | None = None) -> list[str]:
    """Markdown: one table, policies x MIRAGE sets (accuracy % ± se), macro average, unparsed
    answers (counted wrong, never guessed) and questions improved / degraded against CoT."""
    vs_cot = vs_cot or {}
    sets = list(dict.fromkeys(d for t in tables.values() for d in t["datasets"]))
    head = ["policy", *[f"{MIRAGE_NAMES.get(d, d)} (n={next(iter(tables.values()))['datasets'][d]['n']})" for d in sets],
            "macro average", "unparsed", "improved / degraded vs CoT"]
    md = [f"## QA accuracy of `{name}` (reader)", "", "| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for pol, t in tables.items():
        cells = [pol]
        for d in sets:
            st = t["datasets"].get(d)
            cells.append("-" if st is None else f"{100 * st['accuracy']:.1f} ± {100 * st['se']:.1f}")
        a = t["average"]
        cells += [f"{100 * a['accuracy']:.1f} ± {100 * a['se']:.1f}", f"{a['unparsed']} ({100 * a['unparsed_rate']:.1f}%)"]
        v = vs_cot.get(pol)
        cells.append("-" if v is None else f"{v['improved']} / {v['degraded']}")
        md.append("| " + " | ".join(cells) + " |")
    return md + ["", f"![accuracy per set]({name}_accuracy.png)", ""]


def plot_accuracy(tables: dict[str, dict], path: Path, title: str) -> None:
    """Accuracy per MIRAGE set (and macro average) per policy, with standard errors."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from mogg.core.artifacts import atomic_path

    sets = list(dict.fromkeys(d for t in tables.values() for d in t["datasets"]))
    cols = [*sets, "average"]
    pols = list(tables)
    width = 0.8 / max(1, len(pols))
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(cols) * max(1, len(pols)) / 2), 4.2))
    for i, pol in enumerate(pols):
        stats = [tables[pol]["datasets"].get(d) for d in sets] + [tables[pol]["average"]]
        acc = [100 * s["accuracy"] if s else np.nan for s in stats]
        se = [100 * s["se"] if s else 0 for s in stats]
        ax.bar(np.arange(len(cols)) + i * width, acc, width, yerr=se, capsize=2, label=pol)
    ax.set_xticks(np.arange(len(cols)) + 0.4 - width / 2, [MIRAGE_NAMES.get(c, c) for c in cols], rotation=20, ha="right")
    ax.set_ylabel("accuracy (%)")
    ax.set_title(f"{title}: reader accuracy per set")
    ax.legend(fontsize=7)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(Path(path)) as tmp:
        fig.savefig(tmp, dpi=120, format="png")
    plt.close(fig)
