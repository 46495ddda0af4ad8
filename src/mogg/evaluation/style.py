"""One colour and line style per policy, in every plot (policies, budgets, frontier, collect).

Families keep their hue wherever they appear: fixed levels are greys (darker = coarser), the
fixed envelope blue, eq. 1-2 under the level router purple, the prior brown, a transferred router
teal, top-k over all levels olive, the random level pink, ceilings (oracle, labels, action oracle)
black or green; a learned budget router's rows look as its policy says (``BudgetPolicy.STYLES``:
e.g. the router policy red, a policy's own ceiling green). A
policy no family claims (a ladder's own: collapsed tree, cumulative softmax, ...) gets a colour
from its name, the same in every plot.
"""

from __future__ import annotations

import hashlib

from mogg.evaluation import names as N

_FAMILIES: tuple[tuple[str, dict], ...] = (
    # (name or prefix, style); the first match wins, so longer names come first
    ("envelope (hindsight)", {"color": "#7f7f7f", "ls": "--", "lw": 1.0}),
    (N.VOTE_ENVELOPE, {"color": "#17becf", "ls": "--", "lw": 1.4}),
    ("envelope", {"color": "#1f77b4", "ls": "--", "lw": 2.0}),
    (f"{N.ROUTER}[", {"color": "#c5b0d5", "ls": "-", "lw": 1.2}),
    (N.ROUTER, {"color": "#9467bd", "ls": "-", "lw": 1.6}),
    (N.PRIOR, {"color": "#8c564b", "ls": "-", "lw": 1.2}),
    (N.SOURCE_BEST_FIXED, {"color": "#0b6e78", "ls": "--", "lw": 1.2}),
    (N.TRANSFER, {"color": "#17becf", "ls": "-", "lw": 1.6}),
    (N.TOPK_ALL, {"color": "#bcbd22", "ls": "-", "lw": 1.0}),
    (N.RANDOM, {"color": "#e377c2", "ls": "-", "lw": 1.0}),
    (N.ACTION_ORACLE, {"color": "#98df8a", "ls": ":", "lw": 1.6}),
    (N.BEST_ACTION, {"color": "#2ca02c", "ls": "--", "lw": 1.2}),
    (N.LABELS, {"color": "#2ca02c", "ls": ":", "lw": 1.4}),
    ("oracle", {"color": "#000000", "ls": ":", "lw": 2.0}),
)
_SPARE = ("#ff7f0e", "#aec7e8", "#ffbb78", "#f7b6d2", "#dbdb8d", "#9edae5", "#c49c94", "#393b79", "#637939", "#8c6d31")


def policy_style(name: str, n_fixed: int = 5, level: int | None = None, own: dict | None = None) -> dict:
    """Matplotlib kwargs (color, ls, lw) of a policy; a fixed level's grey darkens with ``level``
    of ``n_fixed`` levels (parsed from ``fixed:L<j>...`` when not given). ``own``: the styles a
    learned budget router gives its rows (``BudgetPolicy.STYLES``), which come first."""
    if own and name in own:
        return dict(own[name])
    if N.is_fixed(name):
        if level is None:
            tail = name[len(N.FIXED_PREFIX):]
            level = int(tail[1:].split(":")[0]) if tail[:1] == "L" and tail[1:].split(":")[0].isdigit() else n_fixed - 1
        shade = 0.75 - 0.6 * min(level, n_fixed - 1) / max(n_fixed - 1, 1)
        return {"color": str(round(shade, 3)), "ls": "--", "lw": 1.0}
    for key, style in _FAMILIES:
        if name == key or (name.startswith(key) and not key.endswith(")")):
            return dict(style)
    return {"color": _SPARE[int(hashlib.sha256(name.encode()).hexdigest(), 16) % len(_SPARE)], "ls": "-", "lw": 1.0}
