"""The cross router (``router=cross``): a transformer that reads each (question, level context)
pair and regresses that level's utility. Experimental: measured in ``docs/routers.md`` ("The cross
router"), level with the MLP router at ~200 ms a question on CPU; ``router=cross_ft`` (its top
block fine-tuned) below it.

The MLP router decides from retrieval scores and lengths; it never reads what a level would hand
the reader. The cross router does: the pair's frozen-layer states (:mod:`mogg.routing.experimental.pairs`) go
through the encoder's top ``train_layers`` blocks (fine-tuned), are mean-pooled, and a head over
[pooled, one-hot level] gives one output per level, so ``z`` [B, L] is what every objective of
:mod:`mogg.routing.inputs.objectives` trains and decides on (utility regression by default). Folds train
one after another (each has its own copy of the top blocks), each with Lightning: seeded
per-epoch shuffles, early stopping on the validation loss with the best weights kept, and
``trainer.checkpoint_every`` checkpoints a preempted job resumes from.
"""

from __future__ import annotations

import copy
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from mogg.routing.experimental.pairs import PairStates, encoder_layers, frozen_layers, pair_states, router_pair_states
from mogg.routing.kinds.base import RouterKind
from mogg.routing.networks.base import RouterNetwork
from mogg.routing.networks.mlp import standardisation

log = logging.getLogger(__name__)


@dataclass
class CrossRouterKind(RouterKind):
    """The cross router's knobs (``router=cross``, ``router=cross_ft``): ``base`` its encoder by
    name or path, the top ``train_layers`` blocks fine-tuned at ``encoder_lr``, the head at ``lr``,
    the head also reading the MLP's ``inputs`` with ``features``; ``epochs``, ``patience`` and
    ``batch_size`` (questions, each with its L pairs) are its own (the MLP's are the trainer's)."""

    base: str = "minilm"
    max_length: int = 256
    train_layers: int = 1
    features: bool = True
    encoder_lr: float = 5e-5
    epochs: int = 20
    patience: int = 3
    batch_size: int = 16

    experts_ok = False  # the experts' gate reads the feature matrix
    profiles_ok = False  # one pair per level, one output per level

    def __post_init__(self) -> None:
        super().__post_init__()
        if (self.train_layers < 0 or self.max_length < 8 or self.epochs < 1 or self.patience < 0 or self.batch_size < 1
                or not 0 < self.encoder_lr <= 1):
            raise ValueError("router=cross: train_layers >= 0, max_length >= 8, epochs >= 1, patience >= 0, "
                             f"batch_size >= 1 and 0 < encoder_lr <= 1 required; got {self}")

    def kind_key(self) -> dict:
        return {"model": "cross", "base": self.base, "max_length": self.max_length, "train_layers": self.train_layers,
                "features": self.features, "encoder_lr": self.encoder_lr, "epochs": self.epochs,
                "patience": self.patience, "batch_size": self.batch_size}

    def encoder(self):
        """The pair encoder (:class:`mogg.encoders.HFEncoder`, loaded on first use)."""
        from mogg.encoders import HFEncoder

        if "_encoder" not in self.__dict__:  # one model load per run (not a dataclass field: not in key())
            self.__dict__["_encoder"] = HFEncoder(self.base, max_length=self.max_length, normalize=False)
        return self.__dict__["_encoder"]

    def router_inputs(self, prep, artifacts: Path | None) -> PairStates:
        """Each (question, level context) pair of ``prep`` through the frozen layers (the contexts
        are the levels' fixed top-k selections), with the MLP's inputs when ``features``."""
        from mogg.selection import level_contexts

        states = pair_states(self.encoder(), prep.questions, level_contexts(prep.ladder, prep.fixed), self.train_layers,
                             artifacts)
        return states.with_extra(prep.features) if self.features else states

    def fit_networks(self, x, targets, fits, trainer, ckpt_dir, logger=False, names=None) -> list[tuple]:
        rows = [f.train for f in fits], [f.val for f in fits], [f.seed for f in fits]
        trained = fit_cross_routers(x, targets, *rows, self, trainer, self.encoder(), ckpt_dir, logger)
        return [(net, summary, None) for net, summary in trained]


class CrossRouter(nn.Module, RouterNetwork):
    """Top transformer blocks + mean pooling + a head over [pooled, one-hot level, question inputs]
    -> z [B, L]. ``extra_dim`` > 0: the head also reads the MLP's inputs (standardised on the
    training rows, as the MLP does), so it starts from what the MLP sees and adds what it reads."""

    def __init__(self, top: Sequence[nn.Module], width: int, n_levels: int, hidden: int = 64, dropout: float = 0.1,
                 hparams: dict | None = None, extra_dim: int = 0):
        super().__init__()
        self.top = nn.ModuleList(top)
        self.n_levels, self.extra_dim = int(n_levels), int(extra_dim)
        self.register_buffer("x_mean", torch.zeros(self.extra_dim))
        self.register_buffer("x_std", torch.ones(self.extra_dim))
        self.head = nn.Sequential(nn.Linear(width + n_levels + self.extra_dim, hidden), nn.ReLU(), nn.Dropout(dropout),
                                  nn.Linear(hidden, 1))
        self.hparams = {**(hparams or {}), "kind": "cross", "width": int(width), "n_levels": int(n_levels),
                        "hidden": int(hidden), "dropout": float(dropout), "extra_dim": self.extra_dim}

    def set_normalization(self, x: torch.Tensor) -> None:
        """Standardise the head's question inputs by their training rows [N, D] (flat columns: unit spread)."""
        mean, std, _ = standardisation(x)
        self.x_mean.copy_(mean)
        self.x_std.copy_(std)

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor, extra: torch.Tensor | None = None) -> torch.Tensor:
        """``hidden`` [B, L, T, H] (any float dtype), ``mask`` bool [B, L, T], ``extra`` [B, D] -> z [B, L]."""
        b, n_l, t, h = hidden.shape
        if n_l != self.n_levels:
            raise ValueError(f"pair states have {n_l} levels; the router has {self.n_levels}")
        x = hidden.reshape(b * n_l, t, h).float()
        m = mask.reshape(b * n_l, t)
        if len(self.top):
            # the additive [B*L, 1, 1, T] mask BERT-style blocks take (0 keep, dtype min masked)
            ext = torch.zeros(m.shape, dtype=x.dtype, device=x.device).masked_fill(~m, torch.finfo(x.dtype).min)[:, None, None, :]
            for block in self.top:
                x = block(x, attention_mask=ext)
                x = x[0] if isinstance(x, tuple) else x  # transformers < 5 returns tuples
        pooled = (x * m[..., None]).sum(1) / m.sum(1, keepdim=True).clamp_min(1)  # [B*L, H]
        parts = [pooled, torch.eye(n_l, dtype=x.dtype, device=x.device).repeat(b, 1)]  # + one-hot level [B*L, L]
        if self.extra_dim:
            if extra is None or extra.shape != (b, self.extra_dim):
                raise ValueError(f"this cross router's head reads {self.extra_dim} question inputs; got "
                                 f"{None if extra is None else tuple(extra.shape)}")
            parts.append(((extra.float() - self.x_mean) / self.x_std).repeat_interleave(n_l, dim=0))
        return self.head(torch.cat(parts, dim=1)).view(b, n_l)

    REQUIRED = ("width", "n_levels", "hidden", "dropout", "base", "max_length", "train_layers")

    @classmethod
    def from_hparams(cls, net: dict) -> "CrossRouter":
        """An untrained cross router shaped as ``net`` says (its top blocks from the named encoder)."""
        from mogg.encoders import HFEncoder

        enc = HFEncoder(net["base"], max_length=int(net["max_length"]), normalize=False)
        extra = {k: net[k] for k in ("base", "max_length", "train_layers", "encoder") if k in net}
        return cls(top_blocks(enc, int(net["train_layers"])), int(net["width"]), int(net["n_levels"]),
                   int(net["hidden"]), float(net["dropout"]), extra, int(net.get("extra_dim", 0)))

    def input_error(self, x) -> str | None:
        h = self.hparams
        if not isinstance(x, PairStates) or x.n_levels != h["n_levels"] or x.width != h["width"]:
            return f"a cross router over {h['n_levels']} levels needs pair states of width {h['width']}; got {type(x).__name__}"
        return None

    @classmethod
    def route_inputs(cls, net, features, questions, contexts, artifacts) -> PairStates:
        """The pairs of ``questions`` with each level's fixed top-k context, through the saved
        router's encoder; with the MLP's inputs (by the router's own recipe) when its head reads them."""
        x = router_pair_states(net, questions, contexts(), artifacts)
        return x.with_extra(features()) if int(net.get("extra_dim", 0)) else x

    @torch.inference_mode()
    def logits(self, states: PairStates, batch_size: int = 64) -> np.ndarray:
        """z float64 [Q, L] for all of ``states``, in batches of questions."""
        self.eval()
        dev = next(self.parameters()).device
        ex = states.extra
        out = [self(states.hidden[a:a + batch_size].to(dev), states.mask[a:a + batch_size].to(dev),
                    None if ex is None else ex[a:a + batch_size].to(dev)).cpu()
               for a in range(0, len(states), batch_size)]
        return torch.cat(out).double().numpy() if out else np.zeros((0, self.n_levels))


def top_blocks(encoder, train_layers: int) -> list[nn.Module]:
    """Fresh copies of the encoder's top ``train_layers`` blocks (its pretrained weights)."""
    layers = encoder_layers(encoder.model)
    n_frozen = frozen_layers(len(layers), train_layers)
    return [copy.deepcopy(b).float().cpu().train() for b in layers[n_frozen:]]


def build_router(encoder, train_layers: int, n_levels: int, hidden: int, dropout: float, seed: int,
                 spec: dict | None = None, extra_dim: int = 0) -> CrossRouter:
    """A cross router initialised from ``encoder``'s top blocks, its head seeded by ``seed``."""
    torch.manual_seed(seed)
    return CrossRouter(top_blocks(encoder, train_layers), encoder.model.config.hidden_size, n_levels, hidden, dropout,
                       spec, extra_dim)


def fit_cross_routers(states: PairStates, targets: Sequence[np.ndarray], train: Sequence[np.ndarray],
                      val: Sequence[np.ndarray], seeds: Sequence[int], settings, trainer, encoder,
                      ckpt_dir: Path | None = None, logger=False) -> list[tuple[CrossRouter, dict]]:
    """Train one cross router per (targets, train, val, seed), one after another; returns each at
    its best validation loss (its last weights without validation rows) and a summary."""
    import lightning as L

    from mogg.routing.experimental.cross_module import CrossModule
    from mogg.routing.networks.training import lightning_noise_off, lightning_trainer
    spec = {"base": settings.base, "max_length": int(encoder.max_length), "train_layers": int(settings.train_layers),
            "encoder": encoder.config()}
    out = []
    for k, (t, tr, va, seed) in enumerate(zip(targets, train, val, seeds)):
        extra_dim = 0 if states.extra is None else int(states.extra.shape[1])
        router = build_router(encoder, settings.train_layers, states.n_levels, settings.hidden, settings.dropout, seed,
                              spec, extra_dim)
        if extra_dim:
            router.set_normalization(states.extra[torch.as_tensor(np.asarray(tr, dtype=np.int64))])
        L.seed_everything(seed, workers=True, verbose=False)
        module = CrossModule(router, states, t, tr, va, seed, objective=settings.objective, lr=settings.lr,
                             encoder_lr=settings.encoder_lr, weight_decay=settings.weight_decay,
                             batch_size=settings.batch_size, patience=settings.patience)
        fold_dir = Path(ckpt_dir) / f"router{k}" if ckpt_dir else None
        t_, resume = lightning_trainer(trainer, settings.epochs, fold_dir, logger)
        if resume:
            log.info("resuming cross router %d from %s", k, resume)
        t0 = time.perf_counter()
        with lightning_noise_off(resuming=resume is not None):  # a resumed fit's directory holds its last.ckpt
            t_.fit(module, module.epoch_loader(), ckpt_path=resume)
        summary = {"epochs": int(module.stop_epoch or t_.current_epoch)}
        if len(va):
            if not math.isfinite(module.best_loss):
                from mogg.routing.networks.training import FitError

                raise FitError(k, f"the cross router's validation loss was never finite; lower router.lr ({settings.lr})")
            router.load_state_dict(module.best_state)
            summary["best_val_loss"] = float(module.best_loss)
        log.info("cross router %d of %d: %d epochs in %.1f s (best validation loss %s)", k + 1, len(train),
                 summary["epochs"], time.perf_counter() - t0, summary.get("best_val_loss"))
        out.append((router.eval(), summary))
    return out
