"""Report pieces that read one ladder's summary: the transfer table, the one-sentence verdict,
and the per-question records of ``records.jsonl``."""

from __future__ import annotations

import numpy as np

from mogg.evaluation import names as N
from mogg.prepared import Prepared
from mogg.routing.router_dir import Routing


def transfer_section(name: str, s: dict, routing: Routing, sources: list[str] | None = None) -> list[str]:
    """The transfer protocol's rows side by side: in-set router, transferred router, the best fixed
    level chosen on the source set, the best fixed level here (hindsight) and the oracle. With
    several ``sources`` (``train_sources``: leave-one-set-out), also each single-source router."""
    pol, gap = s["policies"], s.get("gap_closed", {})
    many = len(sources or []) > 1
    what = f"the sets {' + '.join(sources)}" if many else "the source set"
    rows = [("in-set cross-fitted router", N.ROUTER), (f"router trained on {what}", N.TRANSFER)]
    rows += [(f"router trained on {src} only", N.transfer_from(src)) for src in (sources or []) if many]
    rows += [(f"best fixed level chosen on {what}", N.SOURCE_BEST_FIXED),
             (f"best fixed level here, in hindsight ({s['best_fixed']})", s["best_fixed"]), ("oracle level", N.ORACLE)]
    title = "Leave-one-set-out" if many else "Transfer"
    md = [f"## {title}: `{name}`", "", f"n = {s['n_questions']} questions; the transferred router routed "
          f"{routing.routed.mean():.0%} of them past its fallback margin.", "",
          "| policy | evidence F1 | gap closed |", "|---|---|---|"]
    for label, key in rows:
        if key in pol:
            f = pol[key]["f1"]
            g = gap.get(key, float("nan"))
            md.append(f"| {label} | {f['mean']:.3f} ± {f['se']:.3f} | {'-' if np.isnan(g) else f'{g:+.0%}'} |")
    return md + [""]

def questions_key(ids) -> str:
    """A short fingerprint of a question set (its ids, sorted): runs over different sets never pair."""
    import hashlib

    return hashlib.sha256("\n".join(sorted(str(i) for i in ids)).encode()).hexdigest()[:16]


def verdict(name: str, s: dict, decision: str = "argmax") -> str:
    """One honest sentence: does the router beat the best fixed level, and what share of the gap."""
    pol = s["policies"]
    key = N.ROUTER if N.ROUTER in pol else N.TRANSFER if N.TRANSFER in pol else None
    if key is None:
        return f"{name}: no router evaluated."
    bf = s["best_fixed"]
    r, b = pol[key]["f1"], pol[bf]["f1"]
    what = "router" if key == N.ROUTER else "transferred router"
    txt = (f"{name} (n={s.get('n_questions', r['n'])}): {what} ({decision} rule) F1 {r['mean']:.3f} ± {r['se']:.3f} "
           f"vs best fixed level {bf} {b['mean']:.3f} ± {b['se']:.3f}")
    if s.get("evidence_in_corpus") is False:  # F1 against text the corpus lacks: no gap worth a share
        return txt + ("; no document holds any question's gold evidence, so these F1 values measure word overlap "
                      "with text the corpus lacks and no share of a gap is reported.")
    if "gap_closed" in s:
        txt += f"; oracle {pol[N.ORACLE]['f1']['mean']:.3f}; the {what} closes {s['gap_closed'][key]:.0%} of the best-fixed-to-oracle gap"
        if N.PRIOR in pol:
            txt += f" (prior weights: {s['gap_closed'][N.PRIOR]:.0%})"
    if "action_gap_closed" in s:
        a, o = pol[N.BEST_ACTION]["f1"], pol[N.ACTION_ORACLE]["f1"]
        txt += (f"; over eq. 1 actions (router.profiles) the best fixed action {s['best_action']} gives "
                f"{a['mean']:.3f} ± {a['se']:.3f} and the action oracle {o['mean']:.3f}: the {what} closes "
                f"{s['action_gap_closed'][key]:.0%} of that gap")
    return txt + "."

def question_records(name, prep: Prepared, results: dict, routings: dict[str, Routing] | None = None,
                     reader_recs=None) -> list[dict]:
    """Per-question jsonl records: retrieval per level, labels, every router's decision and every
    policy's output."""
    lad = prep.ladder
    oracle = prep.oracle_level()
    routings = routings or {}
    inset = routings.get(N.ROUTER)
    recs = []
    for q, it in enumerate(prep.items):
        rec = {
            "ladder": name, "id": it.id, "question": it.question, "gold_doc_ids": it.gold_doc_ids,
            "retrieved": {lv.name: {"chunks": prep.hits.ids[q, j].tolist(), "scores": prep.hits.scores[q, j].tolist()}
                          for j, lv in enumerate(lad.levels)},
            "soft_label": prep.labels[q].tolist(), "level_scores": prep.level_scores[q].tolist(),
            "oracle_level": int(oracle[q]),
            "router_weights": None if inset is None else inset.weights[q].tolist(),
            "prior_weights": None if inset is None else inset.prior[q].tolist(),
            "fold": None if inset is None else int(inset.fold[q]),
            "routers": {pn: {"weights": r.weights[q].tolist(), "level": int(r.level[q]), "router_choice_kept": bool(r.routed[q]),
                             "logits": r.logits[q].tolist()} for pn, r in routings.items()},
            "policies": {},
        }
        for pol, res in results.items():
            sel = res.selection
            rec["policies"][pol] = {
                "levels": sel.level[q].tolist(), "chunks": sel.chunk[q].tolist(), "docs": res.docs[q],
                "context": res.contexts[q],
                **{k: (None if np.isnan(v[q]) else float(v[q])) for k, v in res.metrics.items()},
            }
        for pol, rr in (reader_recs or {}).items():
            keep = {k: rr[q][k] for k in ("prompt_hash", "raw", "parsed", "correct", "unparsed")}
            rec["policies"].setdefault(pol, {})["reader"] = keep
        recs.append(rec)
    return recs
