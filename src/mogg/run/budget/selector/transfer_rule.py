"""The evidence selector's transfer rule a directory deploys, chosen by its **worst** held-out shape (issue 58).

A transfer directory is read on a set it never saw, so the rule it deploys (the evidence-length
estimate E and the price-of-a-token rule) is validated by leaving one evidence shape out at a time
(``experiment=loso_shapes heldout=...``, seeds as ``_s<seed>``) and is chosen by how it does on the
shape it does worst on: a rule that wins on average over three splits but fails one shape fails a
user whose set has that shape. Per candidate rule (every ``transferred selector (E e[, lambda
learned])`` row of the runs' reports) and held-out shape:

* ``gain``: the mean over budgets of the paired difference (pooled over seeds, question by question:
  :func:`mogg.evaluation.collect_frontier.collect_frontier`) to that shape's own labelled envelope,
  the yardstick a rule that needs no labels should meet;
* ``above training``: at how many budgets it is above the envelope the training sets choose beyond
  the pooled 95% interval (what a user without labels would deploy otherwise);
* ``at own``: at how many budgets it is at or above the shape's own envelope, mean for mean.

The chosen rule maximises the worst shape's ``gain``; rules whose worst shape is within one standard
error of the best one's (the pooled interval's half-width over 1.96, averaged over budgets) are tied,
and the tie goes to the best next-worst shape, and so on (leximin): a worst-shape difference inside the
noise does not decide.

    python scripts/choose_transfer_rule.py --reports reports --pattern 'loso_shapes_*'
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from mogg.evaluation.collect_frontier import FrontierCollectError, _groups, _policies_in, collect_frontier

ROW = re.compile(r"transferred selector \((?:deployed: )?E (\w+)(?:, lambda (\w+))?\)")
TRAINING = "training sets' envelope"


def rule_of(policy: str) -> tuple[str, str] | None:
    """(E, lambda rule) of a transferred-selector row name (None: another row)."""
    m = ROW.fullmatch(policy)
    return (m.group(1), m.group(2) or "here") if m else None


def choose_rule(reports: Path, pattern: str) -> dict:
    """``{"table": {rule: {shape: {gain, above_training, at_own, budgets}}}, "chosen": rule, "worst":
    {rule: (shape, gain)}}`` over the runs matching ``pattern`` under ``reports`` (each group of seeds
    one held-out shape)."""
    groups = _groups(Path(reports), pattern)
    if len(groups) < 2:
        raise FrontierCollectError(f"{reports}/{pattern}: {len(groups)} held-out shape(s) found; the choice needs "
                                   "the leave-one-shape-out runs (experiment=loso_shapes heldout=...)")
    table: dict[tuple[str, str], dict[str, dict]] = {}
    for shape, runs in sorted(groups.items()):
        metrics = [json.loads((r / "metrics.json").read_text()) for _, r in runs]
        ladders = [lad for lad, s in metrics[0].items() if isinstance(s, dict) and "frontier" in s]
        names = {p: rule_of(p) for p in _policies_in(metrics, ladders)}
        cands = tuple(sorted(p for p, r in names.items() if r is not None))
        if not cands:
            raise FrontierCollectError(f"{shape}: no transferred-selector rows (train with frontier/routers=[actions,selector])")
        own = collect_frontier(Path(reports), f"{shape}*", cands, "envelope")  # then only this shape's rows
        train = collect_frontier(Path(reports), f"{shape}*", cands, TRAINING)
        own = [r for r in own if r["experiment"] == shape and r["policy"] in cands]
        train = {(r["budget"], r["policy"]): r for r in train if r["experiment"] == shape and r["policy"] in cands}
        for p in cands:
            rows = [r for r in own if r["policy"] == p]
            if not rows:
                continue
            gains = [r["diff_mean"] for r in rows]
            ses = [(r["diff_hi"] - r["diff_lo"]) / (2 * 1.96) for r in rows]
            table.setdefault(names[p], {})[shape] = {
                "gain": sum(gains) / len(gains), "se": sum(ses) / len(ses),
                "above_training": sum(train[(r["budget"], p)].get("diff_lo", float("nan")) > 0 for r in rows),
                "at_own": sum(g >= 0 for g in gains), "budgets": len(rows), "seeds": rows[0]["seeds"],
                "n": rows[0]["n"], "deployed": "(deployed:" in p}
    shapes = sorted(groups)
    complete = {r: s for r, s in table.items() if all(x in s for x in shapes)}
    if not complete:
        raise FrontierCollectError("no rule has rows on every held-out shape")
    return {"table": complete, "shapes": shapes, **worst_shape_choice(complete, shapes)}


def worst_shape_choice(table: dict, shapes: list[str]) -> dict:
    """``{"worst": {candidate: (shape, gain)}, "chosen", "tied", "tolerance"}`` over ``table``
    (candidate -> shape -> {"gain", "se"}): the best worst-shape gain, candidates within one standard
    error of it tied and decided by the next-worst shape, and so on (leximin; the module doc)."""
    worst = {r: min(((x, s[x]["gain"]) for x in shapes), key=lambda t: t[1]) for r, s in table.items()}
    best = max(table, key=lambda r: worst[r][1])
    tol = table[best][worst[best][0]]["se"]
    tied = [r for r in table if worst[r][1] >= worst[best][1] - tol]
    # leximin among the tied: the next-worst shape decides (the worst ones are equal within the noise)
    chosen = max(tied, key=lambda r: tuple(sorted(table[r][x]["gain"] for x in shapes))[1:])
    return {"worst": worst, "chosen": chosen, "tied": tied, "tolerance": tol}


def rule_markdown(res: dict) -> str:
    """The candidates' table (one row a rule; per shape its gain over the shape's own envelope, the
    budgets above the training sets' envelope and at or above its own) and the choice."""
    shapes = res["shapes"]
    head = "| rule (E, lambda) | " + " | ".join(shapes) + " | worst shape (gain) |"
    lines = [head, "|" + "---|" * (len(shapes) + 2)]
    for r in sorted(res["table"], key=lambda r: -res["worst"][r][1]):
        s = res["table"][r]
        mark = " **(chosen)**" if r == res["chosen"] else ""
        cells = [f"{s[x]['gain']:+.3f} ({s[x]['above_training']}/{s[x]['budgets']}, {s[x]['at_own']}/{s[x]['budgets']})"
                 for x in shapes]
        w = res["worst"][r]
        lines.append(f"| E {r[0]}, lambda {r[1]}{mark} | " + " | ".join(cells) + f" | {w[0]} ({w[1]:+.3f}) |")
    first = res["table"][res["chosen"]][shapes[0]]
    tied = ", ".join(f"E {r[0]}, lambda {r[1]}" for r in res["tied"])
    lines += ["", f"Cells: the mean over budgets of the paired F1 difference to the held-out shape's own envelope "
                  f"(pooled over {first['seeds']} seed(s)); (budgets above the training sets' envelope beyond the "
                  "pooled 95% interval, budgets at or above the shape's own envelope). Chosen: the best worst shape; "
                  f"within one standard error of it ({res['tolerance']:.3f}): {tied}, decided by the next-worst shape."]
    return "\n".join(lines) + "\n"
