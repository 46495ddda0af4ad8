"""The frontier stage of ``train.py`` and ``evaluate.py`` (``frontier`` config node set).

train: the action table (every fixed (level, k, cap) with its evidence F1 and tokens) over the
deep hits, and one cross-fitted action router per ladder in ``<checkpoint>/<ladder>/actions/``.
evaluate: every family at matched mean tokens (the envelope chosen on training folds, the
router's cost weight calibrated on validation), the oracle frontier, the report section and plots.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from omegaconf import DictConfig

from mogg.core.artifacts import ArtifactError, atomic_path, strict_json
from mogg.evaluation import names as N
from mogg.evaluation.families import action_table, stream_family
from mogg.evaluation.frontier import Family, merge_families
from mogg.evaluation.frontier_guard import RouterFolds, action_learned
from mogg.evaluation.frontier_render import frontier_section, plot_frontier, plot_ladders_frontier
from mogg.evaluation.frontier_report import TRAINING_ENVELOPE, TRANSFERRED, frontier_evaluation
from mogg.prepared import Prepared
from mogg.routing.actions.deploy import TRANSFER_DIR, DeployedActions
from mogg.routing.actions.folds import action_key, crossfit_actions, predict_action_folds
from mogg.routing.actions.profiles import ProfileSpace
from mogg.routing.actions.space import ActionSpace, action_features
from mogg.routing.fitting.kfold import make_folds
from mogg.run.reading_stage import reading_policies, selector_settings, train_selector
from mogg.run.router_store import retrain_command
from mogg.selection import Selection, mog_select, topk_all_select

log = logging.getLogger(__name__)


@dataclass
class FrontierSettings:
    """``frontier`` node: depth K (k = 1..K), token caps, reported budgets, bootstrap resamples,
    whether train.py fits the action router, and the action scorer's fit knobs."""

    depth: int = 8
    caps: tuple = (None, 32, 64, 128, 256)
    budgets: tuple = (64, 128, 256, 512)
    n_boot: int = 1000
    actions: bool = True
    guard: bool = True  # the router policy keeps the envelope unless a candidate beats it on validation ...
    guard_se: float = 1.0  # ... by this many standard errors (the one-SE rule)
    fit: dict | None = None
    selector: dict | None = None  # read inside the chunk (mogg.run.reading_stage): null = off

    def __post_init__(self) -> None:
        if not _count(self.depth):
            raise ValueError(f"frontier.depth={self.depth!r}: must be an integer >= 1 (k = 1..depth)")
        if not _count(self.n_boot):
            raise ValueError(f"frontier.n_boot={self.n_boot!r}: must be an integer >= 1 (bootstrap resamples)")
        if not isinstance(self.actions, bool):
            raise ValueError(f"frontier.actions={self.actions!r}: must be true or false")
        if not isinstance(self.guard, bool):
            raise ValueError(f"frontier.guard={self.guard!r}: must be true or false")
        if isinstance(self.guard_se, bool) or not isinstance(self.guard_se, (int, float)) or not self.guard_se >= 0:
            raise ValueError(f"frontier.guard_se={self.guard_se!r}: must be a number >= 0 (standard errors)")
        if isinstance(self.caps, (str, int, float)) or not all(c is None or _count(c) for c in self.caps) \
                or len(set(self.caps)) != len(self.caps) or not self.caps:
            raise ValueError(f"frontier.caps={self.caps!r}: must be a list of distinct token counts >= 1 "
                             "(null = uncapped), e.g. frontier.caps=[null,64,128]")
        self.caps = tuple(self.caps)
        if isinstance(self.budgets, (str, int, float)) or not self.budgets or not all(_count(b) for b in self.budgets):
            raise ValueError(f"frontier.budgets={self.budgets!r}: must be a list of token counts >= 1, "
                             "e.g. frontier.budgets=[64,128]")
        self.budgets = tuple(sorted(int(b) for b in self.budgets))
        self.fit = dict(self.fit or {})
        from mogg.routing.actions.space import check_fit_knobs

        check_fit_knobs(self.fit)
        if self.selector is not None:
            self.selector = selector_settings(self.selector)


def _count(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


def frontier_settings(cfg: DictConfig) -> FrontierSettings | None:
    node = cfg.get("frontier")
    if not node:
        return None
    import dataclasses

    from omegaconf import OmegaConf

    values = OmegaConf.to_container(node, resolve=True)
    if not isinstance(values, dict):
        raise ValueError(f"frontier={values!r}: choose a frontier config (frontier=matched) or null")
    known = {f.name for f in dataclasses.fields(FrontierSettings)}
    extra = sorted(set(values) - known)
    if extra:
        raise ValueError(f"frontier.{extra[0]} is not a frontier knob ({', '.join(sorted(known))})")
    return FrontierSettings(**values)


def _evidence(prep: Prepared) -> list[str]:
    return [it.evidence_text for it in prep.items]


def save_per_question(pq: dict, query_ids: list[str], path: Path) -> None:
    """``<ladder>_frontier_questions.npz``: question ids, the table's budgets and, per policy, F1 and
    tokens per budget and question ([n_budgets, 2, n]: row 0 F1, row 1 tokens); numpy arrays only
    (no pickle), keys ``policy:<name>``."""
    arrays = {"ids": np.array([query_ids[i] for i in pq["rows"]], dtype=str), "budgets": pq["budgets"]}
    arrays.update({f"policy:{k}": v for k, v in pq.items() if k not in ("rows", "budgets")})
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            np.savez_compressed(f, **arrays)


def actions_of(prep: Prepared, fs: FrontierSettings) -> tuple[ActionSpace, Family, np.ndarray, np.ndarray]:
    """The action space, its table (labels = F1, costs = tokens) and the router's inputs:
    query inputs [Q, D + L] (the level router's features and each level's log top-chunk tokens)
    and action features [Q, A, F]."""
    if prep.deep is None:
        raise ValueError("the frontier needs deep hits: prepare with depth=frontier.depth")
    return action_inputs(prep.ladder, prep.deep, prep.features, _evidence(prep), fs.depth, fs.caps,
                         prep.max_context_tokens)


def action_inputs(ladder, deep, features: np.ndarray, evidence: list[str], depth: int, caps, max_tokens
                  ) -> tuple[ActionSpace, Family, np.ndarray, np.ndarray]:
    """:func:`actions_of` from its parts (``mogg-route --budget`` calls it on questions without
    labels: ``evidence`` empty strings, the table's tokens only)."""
    space, table = action_table(ladder, deep, evidence, depth, caps, max_tokens)
    n_q, n_l = len(features), ladder.n_levels
    # each level's top chunk at its largest cap (uncapped when null is a cap): [Q, L]
    top_tokens = np.log1p(table.tokens.reshape(n_q, n_l, depth, len(caps))[:, :, 0, :].max(axis=2))
    xq = np.concatenate([features, top_tokens], axis=1)
    xa = action_features(space, deep.scores, table.tokens)
    return space, table, xq, xa


def train_actions(cfg: DictConfig, settings, prep: Prepared, out_dir: Path, fs: FrontierSettings) -> dict:
    """Cross-fit the action router for one ladder into ``out_dir`` (``settings``: the router's)."""
    space, table, xq, xa = actions_of(prep, fs)
    val_fraction = float(cfg.trainer.val_fraction)
    info = crossfit_actions(xq, xa, table.f1, space, prep.query_ids, cfg.n_folds, cfg.seed, action_fit_knobs(fs),
                            val_fraction, out_dir, prep.data_key)
    if fs.selector is not None:  # the evidence selector beside the action router: <checkpoint>/<ladder>/selector
        train_selector(cfg, prep, fs.selector, Path(out_dir).parent / "selector")
    return info


def action_fit_knobs(fs: FrontierSettings) -> dict:
    """The action router's fit knobs, all of them in ``frontier.fit`` (its objective too: utility
    unless set there; the level router's ``router.objective`` does not reach it)."""
    return {"objective": "utility", **fs.fit}


def vote_envelope(prep: Prepared, fs: FrontierSettings, fixed: Family) -> Family:
    """With ``router.profiles``: the fixed configurations (profile, level, k, cap), i.e. the
    envelope's (level, k, cap) plus every other eq. 1 profile's ranking along k and the caps
    (:mod:`mogg.routing.actions.profiles`), as one family: its training-fold choice per budget says whether
    a fixed vote, no router, pays at matched cost."""
    space = ProfileSpace(prep.profiles, prep.ladder.n_levels)
    names, n_q, ev = space.names(prep.ladder.level_names), len(prep.items), _evidence(prep)
    fams = [fixed]
    for a, w in enumerate(space.matrix()):
        if space.profiles[a // space.n_levels] != "own":  # own = the fixed levels, already in ``fixed``
            sel = mog_select(prep.ladder, prep.deep, np.broadcast_to(w, (n_q, len(w))), fs.depth)
            fams.append(stream_family(names[a], prep.ladder, sel, ev, fs.depth, fs.caps, prep.max_context_tokens))
    return merge_families(N.VOTE_ENVELOPE, fams, fixed=False)


def other_families(prep: Prepared, fs: FrontierSettings, weights: dict[str, np.ndarray],
                   ladder_policies: dict[str, Selection], fixed: Family | None = None) -> list[Family]:
    """Top-k over all levels, eq. 1-2 under each router's weights, and the ladder's own policies
    (``ladder_policies``: selected on the deep hits at k = depth), each along k = 1..depth and the
    caps; with ``router.profiles`` and the fixed table ``fixed``, the envelope with eq. 1 votes."""
    lad, deep, ev = prep.ladder, prep.deep, _evidence(prep)
    sels = {N.TOPK_ALL: topk_all_select(deep, fs.depth)}
    for name in (N.ROUTER, N.PRIOR):
        if name in weights:
            sels[f"{name} (eq. 1-2)"] = mog_select(lad, deep, weights[name], fs.depth)
    sels.update(ladder_policies)
    fams = [stream_family(n, lad, s, ev, fs.depth, fs.caps, prep.max_context_tokens) for n, s in sels.items()]
    for fam in fams:  # eq. 1-2 under the trained router's weights: a candidate of the router policy
        fam.routed = fam.name == f"{N.ROUTER} (eq. 1-2)"
    if prep.profiles and fixed is not None:
        fams.append(vote_envelope(prep, fs, fixed))
    return fams


def evaluate_frontier(cfg: DictConfig, settings, name: str, prep: Prepared, fs: FrontierSettings, weights: dict,
                      ladder_policies: dict[str, Selection], ckpt: Path, report_dir: Path) -> tuple[dict, list[str]]:
    """The frontier of one ladder: matched-cost table, plot, section (``settings``: the router's;
    ``ladder_policies``: the ladder's own policies selected on the deep hits)."""
    space, table, xq, xa = actions_of(prep, fs)
    router = None
    if fs.actions and cfg.get("use_router", True):
        expected = action_key(xq, xa, table.f1, space, cfg.n_folds, cfg.seed, action_fit_knobs(fs),
                              float(cfg.trainer.val_fraction), prep.data_key)
        af = predict_action_folds(xq, xa, prep.query_ids, ckpt / "actions", space, expected, retrain_command(cfg))
        router = RouterFolds(af.util, af.fold, af.val, guard=fs.guard, guard_se=fs.guard_se)
        folds = af.fold
    else:
        folds = make_folds(len(prep.items), cfg.n_folds, cfg.seed)
    reading = None
    if fs.selector is not None and cfg.get("use_router", True):
        reading = reading_policies(cfg, prep, fs.selector, ckpt / "selector",
                                   action_learned(router, table) if router is not None else None, space, fs.budgets,
                                   retrain_command(cfg))
    fr = frontier_evaluation(table, other_families(prep, fs, weights, ladder_policies, table), folds, list(fs.budgets), router,
                             fs.n_boot, cfg.seed, reading, fs.guard_se, transferred_actions(cfg, ckpt, space, table, xq, xa))
    fr["actions"] = space.to_json()
    save_per_question(fr.pop("per_question"), prep.query_ids, report_dir / f"{name}_frontier_questions.npz")
    plot_frontier(name, fr, report_dir / f"{name}_frontier.png")
    return fr, frontier_section(name, fr, list(fs.budgets))


def transferred_actions(cfg: DictConfig, ckpt: Path, space: ActionSpace, table: Family, xq: np.ndarray,
                        xa: np.ndarray):
    """With ``train_sources`` and their action router (``<ckpt>/actions/transfer``,
    :func:`mogg.run.action_final.fit_transfer_actions`): budget -> the transferred router's and the
    training sets' envelope's F1 and tokens per question on this set (None otherwise). Both read this
    set's token counts, which need no labels: the envelope is the training sets' best configuration
    among those reading <= B mean tokens here, and the router's lambda is recalibrated to B on this
    set's questions; where the training sets' guard kept the envelope, the router deploys it."""
    d = Path(ckpt) / "actions" / TRANSFER_DIR
    if not cfg.get("train_sources") or not cfg.get("use_router", True):
        return None
    if not d.is_dir():
        raise FileNotFoundError(f"no transfer action router in {d}: run `{retrain_command(cfg)}` (train.py with "
                                "router.fit=all or both)")
    dep = DeployedActions.load(d)
    if dep.space != space:
        raise ArtifactError(f"{d}: trained on actions {dep.space.to_json()}, this set's are {space.to_json()}; retrain")
    rows = np.arange(len(xq))

    def at(b: float) -> dict:
        if int(b) not in dep.budgets:
            return {}
        # label-free on this set (DeployedActions.decide with here=True): the training sets' best
        # configuration among those reading <= B here where their guard kept the envelope, else the
        # router with lambda recalibrated to B on this set's tokens
        p = dep.plan(int(b), here=True)
        a, _ = dep.decide(xq, xa, table.tokens, p)
        env = dep.envelope_here(table.tokens, b)
        return {TRANSFERRED: (table.f1[rows, a], table.tokens[rows, a], f"{p['deploy']} deployed"),
                TRAINING_ENVELOPE: (table.f1[:, env], table.tokens[:, env], space.names()[env])}
    return at


# The all-ladders router: one action space over every ladder's (level, k, cap), so the router
# picks the ladder too. Its checkpoints live beside the ladders' as <run>/<ALL_LADDERS>/actions.
ALL_LADDERS = "all_ladders"


def all_ladders_actions(preps: dict[str, Prepared], fs: FrontierSettings
                         ) -> tuple[ActionSpace, Family, np.ndarray, np.ndarray, dict[str, Family]]:
    """:func:`actions_of` over every ladder at once: levels named ``<ladder>/<level>`` (ladder-major,
    so the merged table keeps :class:`ActionSpace`'s order), query inputs of all ladders side by
    side, action features from the ladders' deep scores stacked along the level axis; and each
    ladder's own action table (its fixed envelope's candidates)."""
    ids = next(iter(preps.values())).query_ids
    if any(p.query_ids != ids for p in preps.values()):
        raise ValueError("the all-ladders router needs every ladder prepared on the same questions")
    parts = {name: actions_of(p, fs) for name, p in preps.items()}
    names = [f"{n}/{lv}" for n, p in preps.items() for lv in p.ladder.level_names]
    space = ActionSpace(names, fs.depth, list(fs.caps))
    tables = []
    for n, (_, t, _, _) in parts.items():
        tables.append(Family(t.name, t.f1, t.tokens, [f"{n}/{c}" for c in t.configs], True, {}))
    table = merge_families("fixed envelope (all ladders)", tables)
    xq = np.concatenate([x for _, _, x, _ in parts.values()], axis=1)
    scores = np.concatenate([p.deep.scores[:, :, : fs.depth] for p in preps.values()], axis=1)
    xa = action_features(space, scores, table.tokens)
    return space, table, xq, xa, {n: t for n, (_, t, _, _) in parts.items()}


def train_all_ladders(cfg: DictConfig, settings, preps: dict[str, Prepared], out_dir: Path,
                       fs: FrontierSettings) -> dict:
    """Cross-fit the all-ladders action router into ``out_dir`` (same folds as every ladder's)."""
    space, table, xq, xa, _ = all_ladders_actions(preps, fs)
    key = "+".join(p.data_key for p in preps.values())
    return crossfit_actions(xq, xa, table.f1, space, next(iter(preps.values())).query_ids, cfg.n_folds, cfg.seed,
                            action_fit_knobs(fs), float(cfg.trainer.val_fraction), out_dir, key)


def evaluate_all_ladders(cfg: DictConfig, settings, preps: dict[str, Prepared], fs: FrontierSettings, ckpt: Path,
                          report_dir: Path) -> tuple[dict, list[str]]:
    """The frontier across ladders: the envelope over every ladder's fixed configurations, each
    ladder's own envelope as a family, the all-ladders router, the oracle over all actions."""
    space, table, xq, xa, per_ladder = all_ladders_actions(preps, fs)
    ids = next(iter(preps.values())).query_ids
    expected = action_key(xq, xa, table.f1, space, cfg.n_folds, cfg.seed, action_fit_knobs(fs),
                          float(cfg.trainer.val_fraction), "+".join(p.data_key for p in preps.values()))
    af = predict_action_folds(xq, xa, ids, ckpt / "actions", space, expected, retrain_command(cfg))
    router = RouterFolds(af.util, af.fold, af.val, guard=fs.guard, guard_se=fs.guard_se)
    own = [Family(f"{n} envelope", t.f1, t.tokens, t.configs, False, {}) for n, t in per_ladder.items()]
    fr = frontier_evaluation(table, own, af.fold, list(fs.budgets), router, fs.n_boot, cfg.seed)
    fr.pop("per_question")
    fr["actions"] = space.to_json()
    plot_frontier(ALL_LADDERS, fr, report_dir / f"{ALL_LADDERS}_frontier.png")
    return fr, frontier_section(ALL_LADDERS, fr, list(fs.budgets))


def ladders_section(cfg: DictConfig, settings, preps: dict[str, Prepared], frontiers: dict[str, dict],
                    ckpt: Path, report_dir: Path) -> list[str]:
    """The report's "ladders at matched reading cost" head: every ladder's frontier in one plot and,
    with action routers, the all-ladders router (its frontier also written as json)."""
    head = ["## Ladders at matched reading cost", "", "![ladders](ladders_frontier.png)", ""]
    fs = frontier_settings(cfg)
    if fs.actions and cfg.get("use_router", True):  # one router choosing the ladder too
        joint, md = evaluate_all_ladders(cfg, settings, preps, fs, ckpt, report_dir)
        frontiers = {**frontiers, ALL_LADDERS: joint}
        head += md
        report_dir.mkdir(parents=True, exist_ok=True)
        with atomic_path(report_dir / f"{ALL_LADDERS}_frontier.json") as tmp:
            tmp.write_text(strict_json(joint, indent=1))
    plot_ladders_frontier(frontiers, report_dir / "ladders_frontier.png")
    return head
