"""What the budget-router kinds share above the routing layer: the chunk plans' table and inputs of
a prepared ladder (:func:`action_table_of`: every fixed (level, k, cap) with its evidence F1 and tokens,
the query inputs and the action features), the same for new questions without labels
(:func:`action_inputs`, what ``mogg-route --budget`` computes), and the context each plan reads
(:func:`action_contexts`: the action router's deployed plans, and the selector's envelope)."""

from __future__ import annotations

import numpy as np

from mogg.core.text import count_tokens
from mogg.evaluation.families import action_table
from mogg.evaluation.frontier import Family
from mogg.routing.plans import ActionSpace, action_features
from mogg.run.budget.explain import action_words, cut_at_sentence_end
from mogg.selection import fixed_level_select
from mogg.selection.mog import cap_contexts


def action_table_of(prep, fs) -> tuple[ActionSpace, Family, np.ndarray, np.ndarray]:
    """The action space, its table (labels = F1, costs = tokens) and the router's inputs:
    query inputs [Q, D + L] (the level router's features and each level's log top-chunk tokens)
    and action features [Q, A, F]."""
    if prep.deep is None:
        raise ValueError("the frontier needs deep hits: prepare with depth=frontier.depth")
    return action_inputs(prep.ladder, prep.deep, prep.features, [it.evidence_text for it in prep.items], fs.depth, fs.caps,
                         prep.max_context_tokens)


def action_inputs(ladder, deep, features: np.ndarray, evidence: list[str], depth: int, caps, max_tokens
                  ) -> tuple[ActionSpace, Family, np.ndarray, np.ndarray]:
    """:func:`action_table_of` from its parts (``mogg-route --budget`` calls it on questions without
    labels: ``evidence`` empty strings, the table's tokens only)."""
    space, table = action_table(ladder, deep, evidence, depth, caps, max_tokens)
    n_q, n_l = len(features), ladder.n_levels
    # each level's top chunk at its largest cap (uncapped when null is a cap): [Q, L]
    top_tokens = np.log1p(table.tokens.reshape(n_q, n_l, depth, len(caps))[:, :, 0, :].max(axis=2))
    xq = np.concatenate([features, top_tokens], axis=1)
    xa = action_features(space, deep.scores, table.tokens)
    return space, table, xq, xa



def action_contexts(lad, deep, space, act: np.ndarray, depth: int, max_context_tokens: int | None = None,
                    max_tokens: int | None = None) -> list[dict]:
    """Per question (in order) what its (level, k, cap) action reads: ``level``, ``level_index``,
    ``k``, ``cap``, ``action``, ``reads`` (the plan in words), ``tokens`` and ``context`` (level,
    chunk, document id, text per snippet), each level's top-k chunks from its own ranking in
    ``deep``, cut at the tightest of the cap, ``max_context_tokens`` and ``max_tokens``, and then
    back to the last sentence end before that cut (a snippet so cut says ``"cut": true``; one long
    sentence keeps the token cut)."""
    lv, kk, cp = (g[act] for g in space.grid())
    out: list[dict] = [{} for _ in range(len(act))]
    for j in np.unique(lv):  # one selection per chosen level: its own ranking, k <= depth
        rows = np.flatnonzero(lv == j)
        sel = fixed_level_select(lad, deep, int(j), depth)
        texts = sel.contexts(lad)
        for q in rows:
            cap = space.caps[cp[q]]
            lims = [x for x in (cap, max_context_tokens, max_tokens) if x is not None]
            whole = texts[q][: kk[q] + 1]
            chunks = [int(c) for c in sel.chunk[q][: kk[q] + 1] if c >= 0]
            snippets = cap_contexts([whole], min(lims))[0][0] if lims else whole
            ctx = []
            for c, t, w in zip(chunks, snippets, whole):
                t, cut = cut_at_sentence_end(t, w)
                if t.strip():
                    ctx.append({"level": lad.level_names[int(j)], "chunk": c,
                                "doc_id": lad.units.doc_ids[int(lad.chunk_doc(int(j))[c])], "text": t,
                                **({"cut": True} if cut else {})})
            out[q] = {"level": lad.level_names[int(j)], "level_index": int(j), "k": int(kk[q]) + 1, "cap": cap,
                      "action": int(act[q]), "reads": action_words(lad.level_names[int(j)], int(kk[q]) + 1, cap),
                      "tokens": int(sum(count_tokens(c["text"]) for c in ctx)), "context": ctx}
    return out


def config_stats(f1: np.ndarray, tokens: np.ndarray) -> dict:
    """Per (level, k, cap): mean F1 and tokens on the training questions ([Q, A] each), so routing
    a new set can take their best configuration among those that fit B in its own tokens (no labels
    needed: :func:`envelope_here`). A configuration without any F1: -1."""
    return {"train_f1": np.nan_to_num(np.nanmean(f1, axis=0), nan=-1.0).tolist(),
            "train_tokens": tokens.mean(axis=0).tolist()}


def envelope_here(stats: dict, tokens: np.ndarray, budget: float) -> int:
    """The training questions' best fixed (level, k, cap) (``stats``: :func:`config_stats`) among
    those whose mean tokens on these questions (``tokens`` [Q, A]) are at most ``budget`` (the
    cheapest here if none is): the training sets' envelope on a new set, chosen without its labels."""
    here = tokens.mean(axis=0)
    fits = here <= budget + 1e-9
    return int(np.argmax(np.where(fits, np.asarray(stats["train_f1"]), -np.inf))) if fits.any() else int(np.argmin(here))
