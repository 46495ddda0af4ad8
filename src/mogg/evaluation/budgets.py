"""Equal-budget comparison: every policy's context filled to shared token budgets.

At equal k a ladder whose chunks are longer reads more and can win by that alone. Here every
policy ranks ``budget_k`` snippets (its own order: eq. 1-2, the collapsed tree, MAL's rule, ...)
and its context is filled in that order to each budget B (the snippet that crosses B is cut), so
all policies of all ladders are compared at the same number of tokens (or fewer, where a policy
ran out of retrieved text: the mean tokens used are reported beside each F1).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mogg.core.artifacts import atomic_path
from mogg.core.metrics import aggregate, token_prf
from mogg.core.text import count_tokens
from mogg.evaluation import names as N
from mogg.evaluation.policies import PolicyResult
from mogg.prepared import Prepared
from mogg.selection import cap_contexts

SKIP = (N.LABELS, N.RANDOM)  # label quality and chance: not methods to compare at a budget


def budget_table(prep: Prepared, deep: dict[str, PolicyResult], budgets: list[int]) -> dict[str, dict]:
    """``{policy: {budget: {"f1": aggregate, "tokens": aggregate}}}`` from deep (budget_k) selections."""
    evidence = [it.evidence_text for it in prep.items]
    out: dict[str, dict] = {}
    for name, res in deep.items():
        if name in SKIP:
            continue
        row = {}
        for b in budgets:
            snippets, _ = cap_contexts(res.snippets, b)
            ctx = [" ".join(c) for c in snippets]
            f1 = token_prf(ctx, evidence)[2]
            row[int(b)] = {"f1": aggregate(f1), "tokens": aggregate(np.array([count_tokens(c) for c in ctx], dtype=float))}
        out[name] = row
    return out


def budget_section(name: str, table: dict[str, dict], budgets: list[int]) -> list[str]:
    """Markdown: evidence F1 ± se (mean tokens used) per policy at each shared budget."""
    head = ["policy", *[f"{b} tokens" for b in budgets]]
    md = [f"## Equal token budgets: `{name}`", "",
          "Every policy's own ranking of its snippets, filled to the budget (evidence F1 ± se, mean tokens used).", "",
          "| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    # bold: the best deployable policy at each budget (references such as the oracle are ceilings, never bold)
    best = {b: max((r[b]["f1"]["mean"] for p, r in table.items() if r[b]["f1"]["n"] and p not in N.REFERENCES),
                   default=np.nan) for b in budgets}
    for pol, row in table.items():
        cells = [pol]
        for b in budgets:
            f, t = row[b]["f1"], row[b]["tokens"]
            txt = "-" if not f["n"] else f"{f['mean']:.3f} ± {f['se']:.3f} ({t['mean']:.0f})"
            cells.append(f"**{txt}**" if f["n"] and pol not in N.REFERENCES and f["mean"] == best[b] else txt)
        md.append("| " + " | ".join(cells) + " |")
    refs = [p for p in table if p in N.REFERENCES]
    return md + ["", "**Bold**: the best policy at that budget, references aside"
                 + (f" ({', '.join(refs)}: chosen with the questions' labels or at random, never bold)" if refs else "")
                 + ". The oracle picks the level with the best F1 at its own k and is then cut to the budget, so at a "
                 "budget it can fall below a fixed level that was better once cut.", "",
                 f"![F1 vs tokens]({name}_budgets.png)", ""]


def plot_budgets(name: str, table: dict[str, dict], budgets: list[int], path: Path) -> None:
    """Evidence F1 against the tokens actually used, one line per policy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mogg.evaluation.style import policy_style

    fig, ax = plt.subplots(figsize=(9, 4.8))
    n_fixed = sum(N.is_fixed(p) for p in table)
    for pol, row in table.items():
        x = [row[b]["tokens"]["mean"] for b in budgets]
        y = [row[b]["f1"]["mean"] for b in budgets]
        ax.plot(x, y, marker="o", ms=3.5, label=pol, **policy_style(pol, n_fixed))
    ax.set_xlabel("mean context tokens used (each policy filled to budgets " + ", ".join(map(str, budgets)) + ")")
    ax.set_ylabel("evidence F1")
    ax.set_title(f"{name}: every policy's own ranking filled to the budget (points: one per budget)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)  # outside the data
    note = oracle_dip_note(table, budgets)
    if note:  # said on the plot itself: a reader sees the dip before the table's legend
        fig.text(0.01, 0.01, note, fontsize=7.5, ha="left", va="bottom", wrap=True)
    fig.tight_layout(rect=(0, 0.07 if note else 0, 1, 1))
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(Path(path)) as tmp:
        fig.savefig(tmp, dpi=120, format="png")
    plt.close(fig)


def oracle_dip_note(table: dict[str, dict], budgets: list[int]) -> str | None:
    """Why the oracle line falls below a fixed level at some budgets (None where it never does): it
    picks the level with the best F1 at its own k, then its context is cut to the budget."""
    orc = table.get(N.ORACLE)
    if not orc:
        return None
    dips = []
    for b in budgets:
        fixed = {p: r[b]["f1"]["mean"] for p, r in table.items() if N.is_fixed(p) and r[b]["f1"]["n"]}
        if fixed and orc[b]["f1"]["n"] and orc[b]["f1"]["mean"] < max(fixed.values()):
            dips.append((b, max(fixed, key=fixed.get)))
    if not dips:
        return None
    where = ", ".join(f"{b} tokens ({p})" for b, p in dips)
    return (f"The oracle falls below a fixed level at {where}: it picks each question's best level at its own k "
            "(with the labels), then that context is cut to the budget; the fixed level was better once cut.")


def budget_overview(summaries: dict[str, dict], budgets: list[int]) -> list[str]:
    """Markdown: every ladder side by side at each shared budget - its best fixed level (chosen at
    that budget), its router and its oracle level, evidence F1 ± se - so no ladder wins by reading more."""
    head = ["ladder", *[f"{w} @ {b}" for b in budgets for w in ("best fixed", "router", "oracle")]]
    md = ["## Ladders at equal token budgets", "",
          "Each ladder's policies filled to the same budgets (evidence F1 ± se; best fixed level chosen at that budget).", "",
          "| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for ladder, s in summaries.items():
        t = s.get("budgets")
        if not t:
            continue
        cells = [ladder]
        for b in budgets:
            fixed = {p: r[b]["f1"] for p, r in t.items() if N.is_fixed(p) and r[b]["f1"]["n"]}
            bf = max(fixed, key=lambda p: fixed[p]["mean"]) if fixed else None
            for key in (bf, N.ROUTER, N.ORACLE):
                f = t.get(key, {}).get(b, {}).get("f1") if key else None
                cells.append("-" if not f or not f["n"] else f"{f['mean']:.3f} ± {f['se']:.3f}")
        md.append("| " + " | ".join(cells) + " |")
    return md + [""]
