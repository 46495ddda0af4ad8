"""Hostile cases of issue 59 (two parts): values nothing bounded in a re-sealed directory, and
stores a run reused without checks.

A directory is data: anyone can write one from scratch and re-seal it (the seal is a checksum), so
every number it carries (plans, depths, token counts, evidence lengths), its JSON's depth and the
Hydra keys of its components are checked where they are read. Each case edits one of the three
deployed directories of a run (level router, action router, evidence selector) as an attacker
would, re-signs the manifest and re-seals, and routes: it must be refused in one line naming the
field.

The stores a run reuses (the action router's cross-fit folds under ``artifacts/crossfits/<run id>``,
the unit terms under ``artifacts/unit_terms/<key>``, the text embeddings under
``artifacts/text_embeddings/<encoder>``) are derived data: a damaged entry (folds swapped,
``folds.json`` edited, a truncated weights file, a reordered vocabulary, a truncated vector shard),
even with its manifest re-signed, must be named and rebuilt, and the result must equal an untouched
run's. These cases call the functions the stages call, on tiny data (a second each).
:func:`store_cases` is a group of ``hostile_cases.case_groups``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
from hostile_runs import SilentWrong
from hostile_shared import _dirs, edit_json, resign, route

ACT, SEL, LVL = "actions/final", "selector/final", "final"
B = ("--budget", "128")


# ------------------------------------------------------------------------------------------------
# numbers and keys a re-sealed directory carries


def _resealed(sub: str, holder: str, change: Callable[[dict], None], flags: tuple[str, ...] = B) -> Callable:
    """``change`` applied to ``holder``, the manifest re-signed and the seal recomputed; then routed."""
    def run(tmp: Path) -> None:
        d = _dirs(tmp) / sub
        edit_json(d, holder, change)
        resign(d, reseal=True)
        route(tmp, d, *flags)
    return run


def _deep_json(sub: str, name: str, flags: tuple[str, ...] = B) -> Callable:
    """A 200,000-deep JSON array written into ``name`` (the manifest re-signed where it lists it)."""
    def run(tmp: Path) -> None:
        d = _dirs(tmp) / sub
        text = (d / name).read_text()
        deep = "[" * 200_000 + "]" * 200_000
        (d / name).write_text(text.replace("{", '{"deep": ' + deep + ", ", 1))
        if name != "manifest.json":
            resign(d)
        route(tmp, d, *flags)
    return run


def _set(path: list, value) -> Callable[[dict], None]:
    def change(obj: dict) -> None:
        node = obj
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value
    return change


def _evidence_read(value) -> Callable:
    """``evidence_len`` edited (re-sealed): refused, or (before) what is read changes silently."""
    return _resealed(SEL, "deploy.json", _set(["evidence_len"], value))


def _directory_cases() -> dict[str, tuple[Callable, str, str]]:
    comps = ["spec", "components"]
    return {
        "selector: settings.plans=1e9 (re-sealed)": (_resealed(SEL, "deploy.json", _set(["settings", "plans"], 1e9)),
                                                     "error", "plans"),
        "selector: settings.plans=10**9 (re-sealed)": (
            _resealed(SEL, "deploy.json", _set(["settings", "plans"], 10 ** 9)), "error", "plans"),
        "selector: settings.depth=10**6 (re-sealed)": (
            _resealed(SEL, "deploy.json", _set(["settings", "depth"], 10 ** 6)), "error", "depth"),
        "selector: settings.per_chunk=-3 (re-sealed)": (
            _resealed(SEL, "deploy.json", _set(["settings", "per_chunk"], -3)), "error", "per_chunk"),
        "selector: spec.frontier.depth=10**6 (re-sealed)": (
            _resealed(SEL, "deploy.json", _set(["spec", "frontier", "depth"], 10 ** 6)), "error", "depth"),
        "action router: _partial_ on the ladder (re-sealed)": (
            _resealed(ACT, "deploy.json", lambda o: o["spec"]["components"]["ladder"].update(_partial_=True)),
            "error", "_partial_"),
        "selector: _partial_ on the corpus (re-sealed)": (
            _resealed(SEL, "deploy.json", lambda o: o["spec"]["components"]["corpus"].update(_partial_=True)),
            "error", "_partial_"),
        "action router: _recursive_ on the ladder (re-sealed)": (
            _resealed(ACT, "deploy.json", lambda o: o["spec"]["components"]["ladder"].update(_recursive_=False)),
            "error", "_recursive_"),
        "action router: ladder max_sentence_tokens=-1 (re-sealed)": (
            _resealed(ACT, "deploy.json", _set([*comps, "ladder", "max_sentence_tokens"], -1)), "error",
            "max_sentence_tokens"),
        "level router: ladder unit_size=10**9 (re-sealed)": (
            _resealed(LVL, "router.json", _set(["components", "ladder", "unit_size"], 10 ** 9), ()), "error",
            "unit_size"),
        "action router: kind names the abstract BudgetRouter (re-sealed)": (
            _resealed(ACT, "deploy.json", lambda o: o.update(kind="mogg.run.budget.base:BudgetRouter")), "error",
            "BudgetRouter"),
        "action router: a 200,000-deep array in deploy.json": (_deep_json(ACT, "deploy.json"), "error", "deploy.json"),
        "selector: a 200,000-deep array in decisions.json": (_deep_json(SEL, "decisions.json"), "error",
                                                             "decisions.json"),
        "level router: a 200,000-deep array in manifest.json": (_deep_json(LVL, "manifest.json", ()), "error",
                                                                "manifest.json"),
        "selector: evidence_len NaN (re-sealed)": (_evidence_read(float("nan")), "error", "evidence_len"),
        "selector: evidence_len inf (re-sealed)": (_evidence_read(float("inf")), "error", "evidence_len"),
        "selector: evidence_len -5 (re-sealed)": (_evidence_read(-5.0), "error", "evidence_len"),
        "selector: lambda NaN (re-sealed)": (
            _resealed(SEL, "deploy.json", lambda o: o["budgets"]["128"].update({"lambda": float("nan")})), "error",
            "lambda"),
    }


# ------------------------------------------------------------------------------------------------
# stores reused by the next run


def _action_data(n: int = 60):
    rng = np.random.default_rng(0)
    xq = rng.normal(size=(n, 5))
    xa = np.concatenate([rng.normal(size=(n, 12, 3)), np.broadcast_to(np.eye(12)[:, :4], (n, 12, 4))], axis=2)
    y = 1 / (1 + np.exp(-(xa[:, :, 0] + 0.5 * xq[:, :1])))
    return xq, xa, y


def _fit():
    """The action router's knobs for these small cross-fits (the kind object: the fit reads its fields)."""
    from mogg.run.budget.actions.kind import ActionRouterKind

    return ActionRouterKind(hidden=8, lr=1e-2, weight_decay=1e-3, batch_size=16, max_epochs=4, patience=2,
                            loss="utility")


def _action_run(out: Path, store: Path):
    """A cross-fit of the action router into ``out`` with the fold store ``store``, and its
    out-of-fold utilities (what the frontier table is computed from)."""
    from mogg.routing.plans import ActionSpace
    from mogg.run.budget.actions.folds import crossfit_actions, predict_action_folds

    xq, xa, y = _action_data()
    space = ActionSpace(["a", "b", "c"], 2, [None, 8])
    ids = [f"q{i}" for i in range(len(xq))]
    crossfit_actions(xq, xa, y, space, ids, 3, 0, _fit(), 0.2, out, "data", store)
    return predict_action_folds(xq, xa, ids, out, space).util


def _fold_store(damage: Callable[[Path], None]) -> Callable:
    """Run A fills the fold store; its entry is damaged (manifest re-signed where there is one);
    run B (another checkpoint folder, same settings) must give run A's utilities."""
    def run(tmp: Path) -> None:
        store = tmp / "artifacts"
        want = _action_run(tmp / "a", store)
        (entry,) = (store / "crossfits").iterdir()
        damage(entry)
        if (entry / "manifest.json").is_file():
            resign_store(entry)
        got = _action_run(tmp / "b", store)
        if not np.array_equal(got, want):
            raise SilentWrong(f"a damaged fold store entry ({entry.name}) changed the out-of-fold utilities "
                              f"(max |diff| {np.nanmax(np.abs(got - want)):.3g})")
    return run


def resign_store(entry: Path) -> None:
    """Recompute a store entry's manifest (every file's sha256), as anyone can."""
    from mogg.core.artifacts import sha256_file

    m = json.loads((entry / "manifest.json").read_text())
    m["files"] = {str(p.relative_to(entry)): sha256_file(p) for p in sorted(entry.rglob("*"))
                  if p.is_file() and p.name != "manifest.json"}
    (entry / "manifest.json").write_text(json.dumps(m, indent=2, sort_keys=True))


def _swap_folds(entry: Path) -> None:
    (entry / "fold0").rename(entry / "tmp")
    (entry / "fold1").rename(entry / "fold0")
    (entry / "tmp").rename(entry / "fold1")


def _edit_folds_json(entry: Path) -> None:
    info = json.loads((entry / "folds.json").read_text())
    f0, f1 = info["folds"][0], info["folds"][1]
    f0["test"], f1["test"] = f1["test"], f0["test"]
    (entry / "folds.json").write_text(json.dumps(info, indent=1))


def _truncate_weights(entry: Path) -> None:
    p = entry / "fold0" / "actions.safetensors"
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


class _Units:
    def __init__(self, text):
        self.text = list(text)

    def __len__(self) -> int:
        return len(self.text)


class _Ladder:
    """What :func:`mogg.run.budget.selector.lexicon.unit_terms` reads of a ladder: its units' text."""

    def __init__(self, text):
        self.units = _Units(text)


_UNITS = ["Aspirin inhibits platelet aggregation.", "Warfarin is reversed by vitamin K.",
          "Heparin acts on antithrombin.", "Metformin lowers hepatic glucose output.",
          "Beta blockers lower mortality in heart failure.", "Aspirin is an antiplatelet drug."]
_QUESTIONS = ["Is aspirin an antiplatelet drug?", "What reverses warfarin?", "How does metformin act?"]


def _term_features(store: Path) -> np.ndarray:
    """The selector's lexical features of every (question, unit) pair, with the unit terms from ``store``."""
    from mogg.run.budget.selector.lexicon import Lexicon, unit_terms

    lex = Lexicon(unit_terms(_Ladder(_UNITS), {"ladder": "tiny"}, store), _QUESTIONS)
    q, u = np.repeat(np.arange(len(_QUESTIONS)), len(_UNITS)), np.tile(np.arange(len(_UNITS)), len(_QUESTIONS))
    return np.stack(lex.match(q, u))


def _unit_terms_reordered(tmp: Path) -> None:
    store = tmp / "artifacts"
    want = _term_features(store)
    (entry,) = (store / "unit_terms").iterdir()
    words = json.loads((entry / "vocab.json").read_text())
    (entry / "vocab.json").write_text(json.dumps(words[::-1]))
    resign_store(entry)
    got = _term_features(store)
    if not np.array_equal(got, want):
        raise SilentWrong(f"a reordered unit_terms/{entry.name}/vocab.json (manifest re-signed) changed the "
                          "selector's lexical features")


class _Encoder:
    """A deterministic fake encoder (hashed bags of words); counts what it encodes."""

    def __init__(self):
        self.n = 0

    def config(self) -> dict:
        return {"fake": "bags", "dim": 8}

    def encode(self, texts, show_progress=False):
        self.n += len(texts)
        out = np.zeros((len(texts), 8), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().split():
                out[i, sum(map(ord, w)) % 8] += 1.0
        return out


def _embeddings(damage: Callable[[Path], None]) -> Callable:
    def run(tmp: Path) -> None:
        from mogg.encoders import embed_texts

        store = tmp / "artifacts"
        want = embed_texts(_Encoder(), _UNITS, store, show_progress=False)
        (folder,) = (store / "text_embeddings").iterdir()
        damage(folder)
        got = embed_texts(_Encoder(), _UNITS, store, show_progress=False)
        if not np.array_equal(got, want):
            raise SilentWrong(f"a damaged shard in text_embeddings/{folder.name} changed the unit embeddings")
    return run


def _truncate_vecs(folder: Path) -> None:
    (p,) = folder.glob("*.vecs.npy")
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


def _edit_vec_rows(folder: Path) -> None:
    """The vectors reversed, the manifest (where there is one) left as it was."""
    (p,) = folder.glob("*.vecs.npy")
    np.save(p, np.load(p)[::-1].copy())


def _store_cases() -> dict[str, tuple[Callable, str, str]]:
    return {
        "crossfits: fold0 and fold1 swapped (manifest re-signed)": (_fold_store(_swap_folds), "ok", ""),
        "crossfits: folds.json edited (manifest re-signed)": (_fold_store(_edit_folds_json), "ok", ""),
        "crossfits: truncated fold0/actions.safetensors (manifest re-signed)": (
            _fold_store(_truncate_weights), "ok", ""),
        "crossfits: fold1 removed": (_fold_store(lambda e: shutil.rmtree(e / "fold1")), "ok", ""),
        "unit_terms: vocab.json reordered (manifest re-signed)": (_unit_terms_reordered, "ok", ""),
        "text_embeddings: truncated vectors shard": (_embeddings(_truncate_vecs), "ok", ""),
        "text_embeddings: a shard's vectors edited (manifest stale)": (_embeddings(_edit_vec_rows), "ok", ""),
    }


def store_cases() -> list:
    """Every case above as ``hostile_cases.Case`` rows."""
    from hostile_cases import Case

    out = []
    for surface, cases in (("re-sealed directory values (59)", _directory_cases()),
                           ("reused stores (59)", _store_cases())):
        out += [Case(surface, name, run, expect, names) for name, (run, expect, names) in cases.items()]
    return out


if __name__ == "__main__":
    import collections
    import logging
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from hostile_cases import replay

    logging.disable(logging.WARNING)
    res = replay(store_cases())
    for r in res:
        print(f"{r['surface']:32} {r['case']:66} {r['outcome']:14} {r['detail'][:160]}")
    counts = collections.Counter(r["outcome"] for r in res)
    print(len(res), "cases:", dict(counts))
    print(", ".join(f"{counts.get(k, 0)} {k}" for k in ("traceback", "crash", "silent", "lost", "leaked")))
