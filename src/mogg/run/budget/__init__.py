"""Learned budget routers: the frontier stage's routers, each a kind behind one interface.

A budget router learns, per question, plans with a predicted utility and their tokens, and is
deployed at a mean-token budget B by a cost weight lambda (``argmax u - lambda * tokens``),
guarded against the fixed envelope. Each kind is one class (:mod:`mogg.run.budget.base`) and one
config file (``conf/frontier/routers/<kind>.yaml``, whose ``_target_`` names the class); the
frontier stage (:mod:`mogg.run.frontier_stage`), ``train.py``'s final and transfer fits and
``mogg-route`` call only the interface. Built in: the cost-aware action router
(:mod:`mogg.run.budget.actions`) and the evidence selector (:mod:`mogg.run.budget.selector`).
"""
