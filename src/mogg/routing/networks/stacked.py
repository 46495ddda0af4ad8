"""Several routers trained as one: stacked weights, per-fold batches, dropout and Adam.

A cross-fit trains k routers of the same shape on k different row sets. Trained one after
another, each pays the trainer's per-step machinery for under a millisecond of arithmetic; here
their weights are stacked along a leading fold axis ``F`` and one forward pass over
``[F, B, D]`` inputs (``torch.baddbmm``) serves them all.

Every fold sees exactly what it would see trained alone (:func:`mogg.routing.networks.training.fit_router`
is this code with ``F = 1``): its own initialisation (a :class:`RouterMLP` built under its
seed), its own input standardisation, its own shuffles and dropout masks drawn from generators
seeded by ``(seed_k, epoch)``, its own loss mean over its own rows, and its own Adam step count
(a fold with no rows in a step, or one that stopped early, is left untouched: weights and
moments). Stacked and single fits agree to float rounding (``bmm`` sums in another order than
``mm``), which ``tests/routing/test_batched_folds.py`` checks.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from mogg.routing.networks.mlp import RouterMLP

_SHUFFLE = 100_003  # epoch e of seed s draws from generator seed s * _SHUFFLE + e (as a single fit always did)


def epoch_seed(seed: int, epoch: int) -> int:
    """The generator seed of one fold's shuffle and dropout in ``epoch``."""
    return seed * _SHUFFLE + epoch


def keep_mask(shape: Sequence[int], keep: float, generator: torch.Generator | None = None,
              device: torch.device | str | None = None) -> torch.Tensor:
    """Bool dropout keep mask: ``rand(float64) < keep``, one 64-bit uniform per element from
    ``generator`` (torch's global one if None).

    These are the draws and the comparison of torch's serial CPU ``bernoulli_(keep)`` (equal on
    every mask tested here), with one code path: ``bernoulli_`` also has an MKL path, compiled into
    some torch builds, that draws from MKL's global stream and ignores the generator, so a seed
    would not fix the masks there.
    """
    return torch.rand(tuple(shape), dtype=torch.float64, generator=generator, device=device) < keep


def _linears(r: RouterMLP) -> list[nn.Linear]:
    return [m for m in r.net if isinstance(m, nn.Linear)]


class StackedMLP(nn.Module):
    """``F`` :class:`RouterMLP` of one shape as stacked tensors.

    Weights ``w{i}`` [F, out, in] and biases ``b{i}`` [F, out] per linear layer, standardisation
    buffers ``mean``/``std`` [F, D]; dropout sits before the last linear layer (as in RouterMLP),
    applied as a precomputed scaled mask so every fold draws from its own generator.
    """

    def __init__(self, routers: Sequence[RouterMLP]):
        super().__init__()
        if not routers:
            raise ValueError("no routers to stack")
        shapes = {tuple(tuple(p.shape) for p in r.parameters()) for r in routers}
        if len(shapes) != 1:
            raise ValueError(f"routers to stack differ in shape: {shapes}")
        layers = [_linears(r) for r in routers]
        self.n_layers = len(layers[0])
        for i in range(self.n_layers):
            self.register_parameter(f"w{i}", nn.Parameter(torch.stack([ls[i].weight.detach() for ls in layers]).clone()))
            self.register_parameter(f"b{i}", nn.Parameter(torch.stack([ls[i].bias.detach() for ls in layers]).clone()))
        self.register_buffer("mean", torch.stack([r.mean for r in routers]).clone())
        self.register_buffer("std", torch.stack([r.std for r in routers]).clone())
        self.dropout = float(routers[0].hparams["dropout"])
        self.drop_width = self.w0.shape[2] if self.n_layers == 1 else self.w0.shape[1]  # width of the dropped layer

    @property
    def n_folds(self) -> int:
        return self.w0.shape[0]

    def forward(self, x: torch.Tensor, drop: torch.Tensor | None = None) -> torch.Tensor:
        """Logits [F, B, L] for inputs [F, B, D]; ``drop`` [F, B, drop_width]: scaled keep masks (training)."""
        h = (x - self.mean.unsqueeze(1)) / self.std.unsqueeze(1)
        for i in range(self.n_layers):
            if i == self.n_layers - 1 and drop is not None:
                h = h * drop
            w, b = getattr(self, f"w{i}"), getattr(self, f"b{i}")
            h = torch.baddbmm(b.unsqueeze(1), h, w.transpose(1, 2))
            if i < self.n_layers - 1:
                h = torch.relu(h)
        return h

    def dropout_draws(self, generators: Sequence[torch.Generator], rows: Sequence[int]) -> list[torch.Tensor] | None:
        """Each fold's scaled keep masks for its epoch, [rows[k], drop_width] from ``generators[k]``.

        One draw per fold per epoch (:func:`keep_mask`): the steps' masks are consecutive row slices
        of it, the very elements that drawing step by step gives (the stream is consumed row-major).
        """
        if self.dropout <= 0:
            return None
        keep, scale = 1.0 - self.dropout, 1.0 / (1.0 - self.dropout)
        return [keep_mask((n, self.drop_width), keep, g).to(torch.float32).mul_(scale)
                for g, n in zip(generators, rows)]  # F generators: a loop over folds, not rows

    def step_masks(self, draws: Sequence[torch.Tensor] | None, starts: Sequence[int], rows: Sequence[int],
                   width: int) -> torch.Tensor | None:
        """Masks [F, width, drop_width] of one step: rows ``starts[k]:starts[k] + rows[k]`` of fold k's
        draw, padding rows 0."""
        if draws is None:
            return None
        if all(n == width for n in rows):
            return torch.stack([d[a:a + n] for d, a, n in zip(draws, starts, rows)])
        out = torch.zeros(self.n_folds, width, self.drop_width)
        for k, (d, a, n) in enumerate(zip(draws, starts, rows)):  # F folds
            out[k, :n] = d[a:a + n]
        return out

    def copy_into(self, k: int, router: RouterMLP, state: dict | None = None) -> RouterMLP:
        """Write fold ``k``'s weights (from ``state``, a stacked state dict, or the live ones) into ``router``."""
        src = state if state is not None else dict(self.named_parameters())
        with torch.no_grad():
            for i, lin in enumerate(_linears(router)):
                lin.weight.copy_(src[f"w{i}"][k])
                lin.bias.copy_(src[f"b{i}"][k])
            router.mean.copy_(self.mean[k])
            router.std.copy_(self.std[k])
        return router


class StackedAdam(torch.optim.Optimizer):
    """Adam (torch's formula) over stacked parameters with a step count per fold.

    ``step(active=...)`` updates only the folds marked active ([F] bool): the others keep their
    weights, moments and step count, so a fold with no rows in this step, or one that stopped
    early, is exactly where training alone would have left it. Weight decay is L2 (torch's
    ``Adam``: ``wd * p`` added to the gradient) or, with ``decoupled``, torch's ``AdamW``
    (``p *= 1 - lr * wd`` before the step).
    """

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, decoupled: bool = False):
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                                  "decoupled": bool(decoupled)})

    @torch.no_grad()
    def step(self, closure=None, active: torch.Tensor | None = None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            f = params[0].shape[0]
            act = torch.ones(f, dtype=torch.bool) if active is None else active
            for p in params:
                if not self.state[p]:
                    self.state[p].update(step=torch.zeros(f, dtype=torch.float64), exp_avg=torch.zeros_like(p),
                                         exp_avg_sq=torch.zeros_like(p))
                self.state[p]["step"] += act.to(torch.float64)
            n = self.state[params[0]]["step"]  # every parameter of a fold steps together
            if bool(act.all()) and bool((n == n[0]).all()):
                self._adam_all(group, params, float(n[0]))
            else:
                self._adam_some(group, params, act, n)
        return loss

    def _adam_all(self, group: dict, params: list, t: float) -> None:
        """Every fold steps, all at step ``t``: torch's Adam verbatim (Python scalars, foreach ops)."""
        b1, b2 = group["betas"]
        grads = [p.grad for p in params]
        if group["weight_decay"] and group.get("decoupled", False):  # (absent from older checkpoints)
            torch._foreach_mul_(params, 1 - group["lr"] * group["weight_decay"])
        elif group["weight_decay"]:
            grads = torch._foreach_add(grads, params, alpha=group["weight_decay"])
        m = [self.state[p]["exp_avg"] for p in params]
        v = [self.state[p]["exp_avg_sq"] for p in params]
        torch._foreach_lerp_(m, grads, 1 - b1)
        torch._foreach_mul_(v, b2)
        torch._foreach_addcmul_(v, grads, grads, 1 - b2)
        denom = torch._foreach_sqrt(v)
        torch._foreach_div_(denom, (1 - b2 ** t) ** 0.5)
        torch._foreach_add_(denom, group["eps"])
        torch._foreach_addcdiv_(params, m, denom, -group["lr"] / (1 - b1 ** t))

    def _adam_some(self, group: dict, params: list, act: torch.Tensor, n: torch.Tensor) -> None:
        """Folds marked in ``act`` step (each at its own count ``n``); the others keep weights and moments.

        The same arithmetic as :meth:`_adam_all` with per-fold bias corrections ([F] -> broadcast
        over each parameter's fold axis), every fold computed and the inactive ones masked out.
        """
        b1, b2 = group["betas"]
        n = n.clamp_min(1.0)  # a fold never stepped yet: its update is discarded below
        # bias corrections in float64, cast once (as torch's Adam casts its Python scalars)
        neg_step = (-(group["lr"] / (1 - b1 ** n))).to(params[0].dtype)  # [F]
        bc2 = (1 - b2 ** n).sqrt().to(params[0].dtype)  # [F]
        shapes = [(p.shape[0],) + (1,) * (p.dim() - 1) for p in params]
        grads = [p.grad for p in params]
        base = params  # what the step adds to: the weights, decayed first under AdamW
        if group["weight_decay"] and group.get("decoupled", False):  # (absent from older checkpoints)
            base = torch._foreach_mul(params, 1 - group["lr"] * group["weight_decay"])
        elif group["weight_decay"]:
            grads = torch._foreach_add(grads, params, alpha=group["weight_decay"])
        m_old = [self.state[p]["exp_avg"] for p in params]
        v_old = [self.state[p]["exp_avg_sq"] for p in params]
        m = torch._foreach_lerp(m_old, grads, 1 - b1)
        v = torch._foreach_mul(v_old, b2)
        torch._foreach_addcmul_(v, grads, grads, 1 - b2)
        denom = torch._foreach_sqrt(v)
        torch._foreach_div_(denom, [bc2.view(s) for s in shapes])
        torch._foreach_add_(denom, group["eps"])
        update = torch._foreach_mul(m, [neg_step.view(s) for s in shapes])
        torch._foreach_div_(update, denom)
        stepped = torch._foreach_add(base, update)
        for p, s, mk, vk, new in zip(params, shapes, m, v, stepped):  # a few parameters, not rows
            a = act.view(s)
            self.state[p]["exp_avg"] = torch.where(a, mk, self.state[p]["exp_avg"])
            self.state[p]["exp_avg_sq"] = torch.where(a, vk, self.state[p]["exp_avg_sq"])
            p.copy_(torch.where(a, new, p))
