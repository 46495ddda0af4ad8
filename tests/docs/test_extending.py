"""docs/extending.md, done: a new ladder, a new router objective, a new router kind and a new
budget router kind, each written only in the files that page lists (here: this test module
stands in for the new module; the config node is what conf/ladder/<name>.yaml,
conf/router/<name>.yaml or conf/frontier/routers/<name>.yaml would hold), then trained,
evaluated, saved, loaded and routed by the unchanged spine."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import torch
from conftest import ROOT, compose
from omegaconf import OmegaConf, open_dict

from mogg.core.text import split_sentences
from mogg.ladders.base import Ladder, Units, partition_level
from mogg.ladders.builder import LadderBuilder
from mogg.routing.inputs.objectives import Objective
from mogg.routing.kinds.base import RouterKind, RouterNetwork
from mogg.run.app import evaluate, train

GENERIC = ROOT / "examples" / "generic"


class WindowsBuilder(LadderBuilder):
    """A new method in one class: sentences, windows of ``size`` sentences, whole documents."""

    method = "windows"

    def __init__(self, size: int = 3, policies=None, reports=None):
        super().__init__(policies, reports)
        self.size = int(size)

    def config(self) -> dict:
        return {"method": self.method, "size": self.size}

    def build(self, documents, show_progress: bool = False) -> Ladder:
        sents = [split_sentences(d.text) for d in documents]
        doc = np.repeat(np.arange(len(documents)), [len(s) for s in sents])
        units = Units(text=[t for s in sents for t in s], doc=doc, doc_ids=[d.id for d in documents])
        pos = np.concatenate([np.arange(len(s)) for s in sents])
        window = np.cumsum(np.r_[True, (doc[1:] != doc[:-1]) | (pos[1:] // self.size != pos[:-1] // self.size)]) - 1
        levels = [partition_level("sentence", np.arange(len(doc))), partition_level(f"{self.size}sent", window),
                  partition_level("doc", doc)]
        return Ladder(method=self.method, units=units, levels=levels, meta=self.config())


class SquaredHinge(Objective):
    """A new router objective in one class: squared hinge towards each level's utility sign."""

    name = "squared_hinge_test"

    def row_loss(self, logits, target):
        return torch.relu(1.0 - torch.sign(target) * logits).pow(2).mean(-1)


class RidgeNet(torch.nn.Module, RouterNetwork):
    """A new kind's network: standardise, then one linear map [D] -> [L] (its weights in buffers,
    so the router directory's safetensors carries them)."""

    REQUIRED = ("in_dim", "n_levels", "alpha")

    def __init__(self, in_dim: int, n_levels: int, alpha: float):
        super().__init__()
        for name, shape in (("mean", in_dim), ("std", in_dim), ("w", (in_dim, n_levels)), ("b", n_levels)):
            self.register_buffer(name, torch.zeros(shape, dtype=torch.float64))
        self.hparams = {"kind": self.kind_path(), "in_dim": in_dim, "n_levels": n_levels, "alpha": alpha}

    @classmethod
    def from_hparams(cls, net: dict) -> "RidgeNet":
        return cls(int(net["in_dim"]), int(net["n_levels"]), float(net["alpha"]))

    def logits(self, x) -> np.ndarray:
        x = torch.as_tensor(np.asarray(x), dtype=torch.float64)
        return (((x - self.mean) / self.std) @ self.w + self.b).numpy()


@dataclass
class RidgeRouter(RouterKind):
    """A new router kind in one class: ridge regression of the objective's targets on the
    standardised feature matrix, in closed form (no epochs)."""

    alpha: float = 1.0

    def kind_key(self) -> dict:
        return {"kind": "ridge", "alpha": self.alpha}

    def fit_networks(self, x, targets, fits, trainer, ckpt_dir, logger=False, names=None):
        out = []
        for f, t in zip(fits, targets):
            xt = np.asarray(x[f.train], dtype=np.float64)
            net = RidgeNet(xt.shape[1], t.shape[1], self.alpha)
            mean, std = xt.mean(0), xt.std(0)
            std[std <= 1e-9] = 1.0
            z = (xt - mean) / std
            w = np.linalg.solve(z.T @ z + self.alpha * np.eye(z.shape[1]), z.T @ (t[f.train] - t[f.train].mean(0)))
            for name, v in (("mean", mean), ("std", std), ("w", w), ("b", t[f.train].mean(0))):
                getattr(net, name).copy_(torch.from_numpy(np.ascontiguousarray(v)))
            summary = {"epochs": 0}
            if len(f.val):
                summary["best_val_loss"] = float(((net.logits(x[f.val]) - t[f.val]) ** 2).mean())
            out.append((net, summary, None))
        return out


def _cfg(tmp_path, *extra):
    return compose(["experiment=generic_example", f"paths.artifacts={tmp_path / 'a'}", f"paths.checkpoints={tmp_path / 'c'}",
                    f"paths.reports={tmp_path / 'r'}", f"questions.path={GENERIC / 'questions.jsonl'}",
                    f"corpus.sources.0.paths={GENERIC / 'corpus.jsonl'}", "trainer.max_epochs=10", *extra])


def test_a_new_ladder_runs_through_the_unchanged_spine(tmp_path):
    cfg = _cfg(tmp_path)
    with open_dict(cfg):  # what conf/ladder/windows.yaml + `ladder@ladders.mog=windows` would give
        cfg.ladders = OmegaConf.create({"windows": {"_target_": f"{__name__}.WindowsBuilder", "size": 3}})
    train(cfg)
    s = evaluate(cfg)["windows"]
    assert s["levels"] == ["sentence", "3sent", "doc"]
    assert {"fixed:sentence", "fixed:3sent", "fixed:doc", "mog_router", "oracle"} <= set(s["policies"])
    assert s["policies"]["mog_router"]["f1"]["n"] == 12


def test_a_new_objective_is_one_class(tmp_path):
    try:
        s = None
        cfg = _cfg(tmp_path, f"router.objective={SquaredHinge.name}")
        train(cfg)
        s = evaluate(cfg)["mog"]
        assert s["policies"]["mog_router"]["f1"]["n"] == 12
        router = (tmp_path / "c" / "generic_example" / "mog" / "fold0" / "router.json").read_text()
        assert SquaredHinge.name in router
    finally:
        Objective.registry.pop(SquaredHinge.name, None)  # leave the registry as the package defines it
    assert s is not None


def test_a_new_router_kind_trains_saves_loads_and_routes(tmp_path):
    """One class and one config file (here the node conf/router/ridge.yaml would hold): the
    cross-fit, the final fit, the report, the router directory and mogg-route's session take it."""
    from mogg.routing.router_dir import TrainedRouter
    from mogg.run.route import RoutingSession

    cfg = _cfg(tmp_path, "router.fit=both", "train_questions=null")
    with open_dict(cfg):  # conf/router/ridge.yaml: `defaults: [mlp, _self_]`, this _target_ and alpha
        cfg.router._target_ = f"{__name__}.RidgeRouter"
        cfg.router.alpha = 2.0
    train(cfg)
    s = evaluate(cfg)["mog"]
    assert s["policies"]["mog_router"]["f1"]["n"] == 12 and np.isfinite(s["policies"]["mog_router"]["f1"]["mean"])
    run = tmp_path / "c" / "generic_example" / "mog"
    fold = TrainedRouter.load(run / "fold0")
    assert isinstance(fold.module, RidgeNet) and fold.spec["network"]["alpha"] == 2.0
    final = TrainedRouter.load(run / "final")  # a fresh network from router.json, the weights from safetensors
    assert isinstance(final.module, RidgeNet) and final.spec["provenance"]["run"]["settings"]["kind"] == "ridge"
    session = RoutingSession.from_checkpoint(run / "final", artifacts=tmp_path / "a", corpus=[GENERIC / "corpus.jsonl"])
    import json

    questions = [json.loads(line)["question"] for line in (GENERIC / "questions.jsonl").read_text().splitlines()[:3]]
    recs = session.route(questions)
    assert len(recs) == 3 and any(r["context"] for r in recs), recs
    assert all(abs(sum(r["weights"].values()) - 1) < 1e-4 for r in recs), recs


def test_a_new_budget_router_kind_trains_evaluates_deploys_and_routes(tmp_path, capsys):
    """One package (tests/fixed_choice/, as mogg.run.budget.actions and .selector are) and one config
    file (its fixed.yaml, what conf/frontier/routers/fixed.yaml would hold, chosen by
    frontier/routers=[fixed]): the frontier stage cross-fits it, the report adds its rows,
    router.fit=all deploys it, and mogg-route finds the directory's kind and routes with it."""
    from mogg.run.route import main

    cfg = _cfg(tmp_path, "frontier=matched", "frontier.n_boot=50", "router.fit=both", "train_questions=null",
               "budgets=[]")
    with open_dict(cfg):  # what `frontier/routers=[fixed]` gives with fixed.yaml in conf/frontier/routers/
        cfg.frontier.routers = OmegaConf.load(ROOT / "tests" / "fixed_choice" / "fixed.yaml")
    out = train(cfg)
    assert out["mog"]["fixed"]["folds"] == 3 and "final" in out["mog"]["fixed"]
    fr = evaluate(cfg)["mog"]["frontier"]
    for row in fr["budgets"].values():  # at share 1 the kind is the envelope: its cells are the envelope's
        assert "router" not in row and "selector" not in row  # only the kinds frontier.routers names
        assert row["fixed choice"]["f1"] == row["envelope"]["f1"] and row["fixed choice"]["tokens"] == row["envelope"]["tokens"]
    md = (tmp_path / "r" / "generic_example" / "results.md").read_text()
    assert "| fixed choice |" in md
    d = tmp_path / "c" / "generic_example" / "mog" / "fixed" / "final"
    q = tmp_path / "q.txt"
    q.write_text("Is aspirin useful?\nDoes smoking cause cancer?\n")
    res = tmp_path / "routed.jsonl"
    assert main(["--checkpoint", str(d), "--budget", "128", "--out", str(res), str(q)]) == 0
    deploy = json.loads((d / "deploy.json").read_text())
    recs = [json.loads(line) for line in res.read_text().splitlines()]
    assert [r["config"] for r in recs] == [deploy["budgets"]["128"]] * 2
    assert main(["--checkpoint", str(d), "--budget", "128", "--max-tokens", "9", str(q)]) == 2
    assert "--max-tokens does not apply to the fixed-choice test router" in capsys.readouterr().err


def test_the_spine_names_no_budget_router_kind():
    """The frontier stage, train.py's composition and mogg-route reach the action router and the
    evidence selector only through the budget-router interface (their modules are the kinds' own)."""
    import ast

    kinds = ("mogg.run.budget.actions", "mogg.run.budget.selector")  # each kind's package
    spine = [ROOT / "src" / "mogg" / "run" / f"{m}.py" for m in ("app", "frontier_stage", "route", "route_paths")]
    spine += [ROOT / "src" / "mogg" / "run" / "budget" / f"{m}.py" for m in ("base", "registry", "shared")]
    spine += sorted((ROOT / "src" / "mogg" / "evaluation").glob("*.py"))
    for path in spine:
        tree = ast.parse(path.read_text())
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names = sorted(m for m in imported if m.startswith(kinds))
        assert not names, (path.name, names)
