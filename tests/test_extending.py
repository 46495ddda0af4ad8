"""docs/extending.md, done: a new ladder and a new router objective, each written only in the
files that page lists (here: this test module stands in for the new module; the config node is
what conf/ladder/<name>.yaml would hold), then trained and evaluated by the unchanged spine."""

from __future__ import annotations

import numpy as np
import torch
from conftest import ROOT, compose
from omegaconf import OmegaConf, open_dict

from mogg.core.text import split_sentences
from mogg.ladders.base import Ladder, Units, partition_level
from mogg.ladders.builder import LadderBuilder
from mogg.routing.objectives import Objective
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
