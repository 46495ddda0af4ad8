"""The run's components and each ladder's hooks, built from config: the stage ``train`` and
``evaluate`` (and the frontier and transfer stages) share.

Components are instantiated from their own config nodes (``_target_``) and passed explicitly to
:func:`mogg.run.pipeline.prepare`; a ladder's own policies and report sections come from its
builder's hooks.
"""

from __future__ import annotations

import logging
from pathlib import Path

from hydra.utils import instantiate
from omegaconf import DictConfig

from mogg.prepared import Prepared
from mogg.routing.inputs.features import NEEDS_ENCODER
from mogg.run.frontier_stage import frontier_settings
from mogg.run.pipeline import prepare
from mogg.run.router_store import portable_config, retriever_node, router_settings
from mogg.selection.policy import PolicyInputs, SelectionPolicy

log = logging.getLogger(__name__)


def make_reader(cfg: DictConfig):
    """The run's LLM reader (None with ``reader=none``)."""
    return instantiate(cfg.reader) if cfg.get("reader") else None


def make_labeler(cfg: DictConfig, encoder=None, reader=None):
    """The soft labeler, given the encoder or reader its source needs."""
    source = cfg.labels.get("source")
    if source == "encoder":
        return instantiate(cfg.labels, encoder=encoder)
    if source == "reader":
        reader = reader if reader is not None else make_reader(cfg)
        if reader is None:
            raise ValueError("labels=reader needs a reader: add reader=hf (a local model) or reader=openai (a server)")
        return instantiate(cfg.labels, reader=reader)
    return instantiate(cfg.labels)


def prepare_all(cfg: DictConfig, questions_cfg: DictConfig | None = None, reader=None,
                corpus_cfg: DictConfig | None = None) -> dict[str, Prepared]:
    """Instantiate corpus, questions, encoder, labeler and each ladder; run the shared stages.

    ``questions_cfg`` and ``corpus_cfg`` replace ``cfg.questions`` and ``cfg.corpus`` (a transfer
    source set: ``train_questions``, ``train_sources``); ``reader`` is the run's reader when the
    caller already holds one (``labels=reader``).
    """
    corpus = instantiate(corpus_cfg if corpus_cfg is not None else cfg.corpus)
    questions = instantiate(questions_cfg if questions_cfg is not None else cfg.questions)
    settings = router_settings(cfg)
    fs = frontier_settings(cfg)  # checked before anything is built
    needs_encoder = any(g in settings.inputs for g in NEEDS_ENCODER) or cfg.labels.get("source") == "encoder"
    encoder = instantiate(cfg.encoder) if needs_encoder else None
    labeler = make_labeler(cfg, encoder, reader)
    artifacts = Path(cfg.paths.artifacts) if cfg.paths.get("artifacts") else None
    encoder_node = portable_config(cfg.encoder) if cfg.get("encoder") else None
    builders = {name: instantiate(ladder_cfg) for name, ladder_cfg in cfg.ladders.items()}  # every knob checked first
    out = {}
    for name, builder in builders.items():
        out[name] = prepare(
            name, corpus, questions, builder, instantiate(retriever_node(cfg, name)), labeler, inputs=settings.inputs,
            normalise=settings.normalise, k_r=cfg.k_r, k=cfg.k, encoder=encoder, artifacts=artifacts, encoder_node=encoder_node,
            max_context_tokens=cfg.get("max_context_tokens"),
            depth=fs.depth if fs is not None else None, profiles=settings.profiles,
        )
        out[name].builder = builder
        out[name].questions_fingerprint = questions.fingerprint()
    return out


def ladder_policies(cfg: DictConfig, prep: Prepared, k: int | None = None, fill_budget: int | None = None) -> dict:
    """Selections of the policies only this ladder has (its builder's ``policies`` hook: a tree's
    collapsed tree, MAL's cumulative softmax), under the same k, scored like every other policy.
    ``fill_budget``: an equal-budget comparison's token budget, replacing each policy's own."""
    artifacts = Path(cfg.paths.artifacts) if cfg.paths.get("artifacts") else None
    inputs = PolicyInputs(ladder=prep.ladder, hits=prep.hits, questions=prep.questions, k=k or cfg.k,
                          builder=prep.builder, artifacts=artifacts, fill_budget=fill_budget)
    out = {}
    for name, pol in prep.builder.policies.items():
        if not isinstance(pol, SelectionPolicy):
            raise TypeError(f"ladder policy {name!r} ({type(pol).__name__}) has no select(inputs)")
        out[name] = pol.select(inputs)
    return out


def ladder_reports(name: str, prep: Prepared, out_dir: Path) -> tuple[dict, list[str]]:
    """Statistics and report sections only this ladder has (its builder's ``reports`` hook)."""
    stats, md = {}, []
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    for hook in prep.builder.reports:
        st, lines = hook(name, prep.ladder, Path(out_dir))
        stats.update(st)
        md.extend(lines)
    return stats, md
