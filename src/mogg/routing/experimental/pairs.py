"""(question, level context) pairs, read by the frozen part of the cross router's transformer.

The cross router (``router=cross``, :mod:`mogg.routing.experimental.cross`) reads, for every level, the
question together with the context that level would hand the reader (its fixed top-k snippets),
and regresses the level's utility. Only the top ``train_layers`` of a pretrained encoder are
fine-tuned; the layers below are frozen, so their output for every pair is computed once per
question set (an artifact, keyed by the encoder and the pair texts) and sliced per fold, instead of
being recomputed every epoch of every fold. ``train_layers=0`` keeps the whole encoder frozen: the
pair's mean-pooled output is the cached state and only the head is trained.

Shapes: ``hidden`` float16 [Q, L, T, H] (T: the longest pair's tokens, at most ``max_length``; with
``train_layers=0`` T = 1, the pooled vector), ``mask`` bool [Q, L, T] (real tokens).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

log = logging.getLogger(__name__)

PAIR_VERSION = 1


@dataclass
class PairStates:
    """The frozen layers' output for every (question, level) pair; rows index questions."""

    hidden: torch.Tensor  # float16 [Q, L, T, H]
    mask: torch.Tensor  # bool [Q, L, T]
    key: str  # what produced them (encoder, layers, texts): fit keys and run ids read it
    encode_s: float = 0.0  # seconds the frozen pass took for all Q questions (routing cost)
    extra: torch.Tensor | None = None  # float32 [Q, D]: the MLP's inputs, when the head reads them too

    def with_extra(self, x: np.ndarray) -> "PairStates":
        """These states plus per-question inputs ``x`` [Q, D] for the head (named into the key)."""
        x = np.ascontiguousarray(x, dtype=np.float32)
        if len(x) != len(self):
            raise ValueError(f"{len(x)} rows of router inputs for {len(self)} questions")
        digest = hashlib.sha256(x.tobytes()).hexdigest()[:16]
        return PairStates(self.hidden, self.mask, f"{self.key}+x{digest}", self.encode_s, torch.from_numpy(x))

    def __len__(self) -> int:
        return int(self.hidden.shape[0])

    def __getitem__(self, rows) -> "PairStates":
        idx = torch.as_tensor(np.asarray(rows, dtype=np.int64))
        digest = hashlib.sha256(np.ascontiguousarray(idx.numpy()).tobytes()).hexdigest()[:16]
        share = len(idx) / max(len(self), 1)
        return PairStates(self.hidden[idx], self.mask[idx], f"{self.key}[{digest}]", self.encode_s * share,
                          None if self.extra is None else self.extra[idx])

    def fingerprint(self) -> str:
        """What fit keys hash for these inputs: their key (encoder, pair texts, rows)."""
        return self.key

    def cost_ms(self, n: int) -> dict:
        """ms per question the frozen pair encoding took (routing cost)."""
        return {"pairs_ms": round(1000 * self.encode_s / max(n, 1), 3)}

    @classmethod
    def concat(cls, parts: Sequence["PairStates"]) -> "PairStates":
        return concat_states(parts)

    @property
    def shape(self) -> tuple[int, ...]:
        """(Q, inputs per question) as a feature matrix's shape reads: the pair width plus the head's extra inputs."""
        return (len(self), self.width + (0 if self.extra is None else int(self.extra.shape[1])))

    @property
    def n_levels(self) -> int:
        return int(self.hidden.shape[1])

    @property
    def width(self) -> int:
        return int(self.hidden.shape[3])


def concat_states(parts: Sequence[PairStates]) -> PairStates:
    """Question sets' states stacked along questions (tokens padded to the longest set's T)."""
    if not parts:
        raise ValueError("no pair states to stack")
    if len({(p.n_levels, p.width, p.extra is None) for p in parts}) > 1:
        raise ValueError("pair states of different levels, widths or inputs cannot be stacked")
    t = max(p.hidden.shape[2] for p in parts)

    def pad(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.pad(x, (0, 0, 0, t - x.shape[2])) if x.dim() == 4 else \
            torch.nn.functional.pad(x, (0, t - x.shape[2]))

    extra = None if parts[0].extra is None else torch.cat([p.extra for p in parts])
    return PairStates(torch.cat([pad(p.hidden) for p in parts]), torch.cat([pad(p.mask) for p in parts]),
                      "+".join(p.key for p in parts), sum(p.encode_s for p in parts), extra)


def frozen_layers(n_layers: int, train_layers: int) -> int:
    """How many of the encoder's ``n_layers`` stay frozen (checked)."""
    if not 0 <= train_layers <= n_layers:
        raise ValueError(f"router.train_layers={train_layers}: the encoder has {n_layers} layers (0 = train only the head)")
    return n_layers - train_layers


def encoder_layers(model):
    """The transformer blocks of a BERT/RoBERTa-style model (``model.encoder.layer``)."""
    enc = getattr(model, "encoder", None)
    layers = getattr(enc, "layer", None)
    if layers is None:
        raise ValueError(f"{type(model).__name__} has no encoder.layer blocks: the cross router needs a BERT-style encoder")
    return layers


@torch.no_grad()  # not inference_mode: the states are the inputs of the top blocks' training
def encode_pairs(encoder, questions: Sequence[str], contexts: Sequence[Sequence[str]], train_layers: int,
                 batch_size: int = 32) -> PairStates:
    """The frozen layers' output for pairs (questions[q], contexts[q][l]) (see module doc).

    ``encoder``: an :class:`mogg.encoders.HFEncoder` (tokenizer, model, ``max_length``). Pairs are
    run longest first in batches padded to their own longest pair (sorted lengths: little padding).
    """
    if len(questions) != len(contexts) or not len(questions):
        raise ValueError(f"{len(questions)} questions for {len(contexts)} rows of contexts")
    n_l = len(contexts[0])
    if any(len(c) != n_l for c in contexts):
        raise ValueError("every question needs one context per level")
    tok, model = encoder.tokenizer, encoder.model
    layers = encoder_layers(model)
    n_frozen = frozen_layers(len(layers), train_layers)
    t0 = time.perf_counter()
    qs = [q for q in questions for _ in range(n_l)]
    cs = [c for row in contexts for c in row]
    enc = tok(qs, cs, truncation="longest_first", max_length=encoder.max_length)
    ids = enc["input_ids"]
    lens = np.array([len(i) for i in ids])
    t_max = 1 if train_layers == 0 else int(lens.max())
    h_dim = model.config.hidden_size
    hidden = torch.zeros(len(qs), t_max, h_dim, dtype=torch.float16)
    mask = torch.zeros(len(qs), t_max, dtype=torch.bool)
    device = next(model.parameters()).device
    order = np.argsort(-lens, kind="stable")
    full = layers
    try:
        if train_layers > 0:  # run only the frozen blocks: the top ones are the router's
            model.encoder.layer = layers[:n_frozen]
        for a in range(0, len(order), batch_size):
            rows = order[a:a + batch_size]
            batch = tok.pad({k: [enc[k][i] for i in rows] for k in enc.keys()}, return_tensors="pt")
            batch = {k: v.to(device) for k, v in batch.items()}
            out = model(**batch).last_hidden_state  # [B, T_b, H]
            m = batch["attention_mask"].bool()
            r = torch.as_tensor(rows)
            if train_layers == 0:  # the frozen pair's mean-pooled output is the state
                pooled = (out * m[..., None]).sum(1) / m.sum(1, keepdim=True).clamp_min(1)
                hidden[r, 0] = pooled.to("cpu", torch.float16)
                mask[r, 0] = True
            else:
                hidden[r, : out.shape[1]] = out.to("cpu", torch.float16)
                mask[r, : out.shape[1]] = m.cpu()
    finally:
        model.encoder.layer = full
    if not torch.isfinite(hidden).all():
        raise FloatingPointError("the frozen encoder's pair states overflow float16; use a float16-safe encoder")
    dt = time.perf_counter() - t0
    log.info("cross router: %d (question, level) pairs through %d frozen layer(s) in %.1f s (%.1f ms per question)",
             len(qs), n_frozen, dt, 1000 * dt / len(questions))
    return PairStates(hidden.view(len(questions), n_l, t_max, h_dim), mask.view(len(questions), n_l, t_max), "", dt)


def pair_states(encoder, questions: Sequence[str], contexts: Sequence[Sequence[str]], train_layers: int,
                artifacts: Path | None = None) -> PairStates:
    """:func:`encode_pairs`, cached as an artifact under ``artifacts`` (keyed by the encoder's
    config, the frozen layers and every pair's text)."""
    from mogg.core.artifacts import cached, config_hash

    key = {"encoder": encoder.config(), "train_layers": int(train_layers), "version": PAIR_VERSION,
           "pairs": config_hash([[q, list(c)] for q, c in zip(questions, contexts)])}
    name = config_hash(key)

    def build() -> PairStates:
        return encode_pairs(encoder, questions, contexts, train_layers)

    def save(s: PairStates, d: Path) -> None:
        from safetensors.torch import save_file

        save_file({"hidden": s.hidden.contiguous(), "mask": s.mask.contiguous()}, d / "pairs.safetensors",
                  metadata={"encode_s": repr(s.encode_s)})

    def load(d: Path) -> PairStates:
        from safetensors import safe_open

        with safe_open(d / "pairs.safetensors", framework="pt") as f:
            return PairStates(f.get_tensor("hidden"), f.get_tensor("mask"), "", float(f.metadata()["encode_s"]))

    s = build() if artifacts is None else cached(artifacts, "pair_states", key, build=build, save=save, load=load)
    s.key = name
    return s


def router_pair_states(net: dict, questions: Sequence[str], contexts: Sequence[Sequence[str]],
                       artifacts: Path | None = None) -> PairStates:
    """The pair states a saved cross router reads (its encoder and frozen layers, from its
    ``network`` spec)."""
    from mogg.encoders import HFEncoder

    enc = HFEncoder(net["base"], max_length=int(net["max_length"]), normalize=False)
    return pair_states(enc, questions, contexts, int(net["train_layers"]), artifacts)
