"""Routers trained on other question sets: the transfer stage of ``train.py`` and ``evaluate.py``.

Three ways a run gets a final router (``router.fit=all|both``), each saved in
``checkpoints/<run>/<ladder>/final``:

* neither ``train_questions`` nor ``train_sources``: the run's own questions (to apply elsewhere);
* ``train_questions`` (one question set over the run's corpus): the transfer protocol A -> B;
* ``train_sources`` (name -> {questions, corpus, weight}): one router over several sets, each over
  its own corpus (:mod:`mogg.routing.fitting.sources`); with two or more, also one router per source in
  ``final@<source>`` so the report shows each single-source transfer beside the multi-source one.
  ``router.transfer=experts``: the final router is the single-source routers with a gate and a
  support check instead (:mod:`mogg.routing.fitting.experts`).
  ``experiment=loso heldout_set=<set>`` trains on the two other gold-evidence sets and routes the held-out one.
"""

from __future__ import annotations

import logging

from omegaconf import DictConfig

from mogg.prepared import Prepared
from mogg.routing.fitting.kfold import fit_all
from mogg.routing.fitting.sources import Source, fit_experts, fit_sources
from mogg.routing.kinds.base import RouterKind
from mogg.run.router_store import FINAL, checkpoint_dir, router_inputs, router_spec, source_dir, source_nodes

log = logging.getLogger(__name__)

def train_final(cfg: DictConfig, settings: RouterKind, trainer, preps: dict[str, Prepared],
                source_preps: dict[str, dict[str, Prepared]] | None, train_questions_preps: dict[str, Prepared] | None) -> dict:
    """Fit each ladder's final router(s); returns ladder -> {"final": dir, "sources": {name: dir}}."""
    nodes = source_nodes(cfg)
    out = {}
    for name in preps:
        d = checkpoint_dir(cfg, name)
        res: dict = {"final": str(d / FINAL)}
        if source_preps:
            srcs = [Source(s, router_inputs(cfg, settings, p[name]), *p[name].router_targets(), p[name].questions, nodes[s]["weight"])
                    for s, p in source_preps.items()]
            first = next(iter(source_preps))
            spec = router_spec(cfg, name, source_preps[first][name], transfer=True)
            experts = settings.transfer == "experts" and len(srcs) > 1
            if not experts:
                fit_sources(srcs, cfg.seed, settings, trainer, d / FINAL, spec)
            if len(srcs) > 1:
                res["sources"], members = {}, {}
                for s in srcs:
                    one = router_spec(cfg, name, source_preps[s.name][name], transfer=True)
                    members[s.name] = fit_sources([s], cfg.seed, settings, trainer, d / source_dir(s.name), one)
                    res["sources"][s.name] = str(d / source_dir(s.name))
                if experts:
                    fit_experts(srcs, members, cfg.seed, settings, trainer, d / FINAL, spec)
            log.info("final %s router trained on %s in %s", name, " + ".join(s.name for s in srcs), d / FINAL)
        else:
            src = (train_questions_preps or preps)[name]
            router = fit_all(router_inputs(cfg, settings, src), *src.router_targets(), src.questions, cfg.seed, settings, trainer,
                             d / FINAL, router_spec(cfg, name, src))
            log.info("final %s router (trained on %s, %d questions) in %s", name, router.source_name, len(src.items), d / FINAL)
        out[name] = res
    return out
