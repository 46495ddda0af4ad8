"""Selection policies: per-level hits -> the snippets a reader gets.

* :mod:`mogg.selection.mog`: MoG eq. 1-2 and the policies that are eq. 1-2 with fixed weights
  (fixed level, oracle, random level, prior), plus top-k over all levels;
* :mod:`mogg.selection.tree`: RAPTOR's collapsed tree and tree traversal.
"""

from mogg.selection.mog import (
    Selection,
    cap_contexts,
    fixed_level_select,
    level_contexts,
    mog_select,
    one_hot,
    random_level_select,
    topk_all_select,
    unit_scores,
)

__all__ = ["Selection", "cap_contexts", "fixed_level_select", "level_contexts", "mog_select", "one_hot", "random_level_select",
           "topk_all_select", "unit_scores"]
