"""Wall seconds per stage of one ``train.py`` or ``evaluate.py`` run of a checkout (any commit
with these stage functions: the table of docs/benchmarks.md, "The frontier, profiled").

The stage functions are wrapped where the run calls them (``mogg.run.app``,
``mogg.run.frontier_stage``) with a wall clock (no profiler overhead); "rest" is the run's wall
time minus the stages: starting Python, importing torch / Lightning, Hydra, writing, exiting.

    python scripts/frontier_stages.py --checkout ../ref train.py experiment=frontier data=pubmedqa run_name=x
"""

from __future__ import annotations

import argparse
import atexit
import functools
import json
import os
import runpy
import sys
import time
from pathlib import Path

T0 = time.perf_counter()

STAGES = {  # (module, function): stage name
    ("mogg.run.app", "prepare_all"): "prepare (ladders, retrieval, features: cached artifacts)",
    ("mogg.run.app", "crossfit"): "level routers: 5 folds (Lightning)",
    ("mogg.run.app", "router_weights"): "level routers: weights",
    ("mogg.run.app", "run_policies"): "policies at equal k",
    ("mogg.run.app", "write_report"): "report writing",
    ("mogg.run.frontier_stage", "actions_of"): "action table and features",
    ("mogg.run.frontier_stage", "crossfit_actions"): "action router: 5 folds",
    ("mogg.run.frontier_stage", "predict_action_folds"): "action router: predictions",
    ("mogg.run.frontier_stage", "other_families"): "other families (top-k, eq. 1-2)",
    ("mogg.run.frontier_stage", "frontier_evaluation"): "matched-cost evaluation (envelope, guard, oracle, bootstrap)",
    ("mogg.run.frontier_stage", "plot_frontier"): "frontier plot",
    ("mogg.run.frontier_stage", "train_selector"): "evidence selector: candidates, features, folds (train)",
    ("mogg.run.frontier_stage", "reading_policies"): "evidence selector: candidates, features, plans (evaluate)",
    # since the budget-router kinds (issue 39) the kinds' modules call them
    ("mogg.run.budget.actions", "crossfit_actions"): "action router: 5 folds",
    ("mogg.run.budget.actions", "predict_action_folds"): "action router: predictions",
    ("mogg.run.budget.selector", "train_selector"): "evidence selector: candidates, features, folds (train)",
    ("mogg.run.budget.selector", "reading_policies"): "evidence selector: candidates, features, plans (evaluate)",
    # since each kind is a package (issue 47)
    ("mogg.run.budget.shared", "actions_of"): "action table and features",
    ("mogg.run.budget.actions.kind", "crossfit_actions"): "action router: 5 folds",
    ("mogg.run.budget.actions.kind", "predict_action_folds"): "action router: predictions",
    ("mogg.run.budget.selector.kind", "train_selector"): "evidence selector: candidates, features, folds (train)",
    ("mogg.run.budget.selector.kind", "reading_policies"): "evidence selector: candidates, features, plans (evaluate)",
    # since the kinds import these where they call them (issue 61: a kind module stays light for
    # Hydra's ConfigStore), the modules that define them
    ("mogg.run.budget.actions.folds", "crossfit_actions"): "action router: 5 folds",
    ("mogg.run.budget.actions.folds", "predict_action_folds"): "action router: predictions",
    ("mogg.run.budget.selector.stage", "train_selector"): "evidence selector: candidates, features, folds (train)",
    ("mogg.run.budget.selector.stage", "reading_policies"): "evidence selector: candidates, features, plans (evaluate)",
    # since one name per concept (issue 61: the action table; the level routers' cross-fit out of app)
    ("mogg.run.budget.shared", "action_table_of"): "action table and features",
    ("mogg.run.crossfit_stage", "crossfit"): "level routers: 5 folds (Lightning)",
}


def _wrap(seconds: dict, name: str, fn):
    @functools.wraps(fn)
    def timed(*args, **kwargs):
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - t
    return timed


def main() -> None:
    from mogg.core.flags import existing_dir  # every flag checked before any work

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkout", type=existing_dir, default=str(Path(__file__).resolve().parents[1]))
    ap.add_argument("--json", type=Path, default=None, help="also write the seconds here")
    ap.add_argument("script", choices=("train.py", "evaluate.py"))
    ap.add_argument("overrides", nargs="*")
    args = ap.parse_args()
    root = args.checkout.resolve()
    sys.path.insert(0, str(root / "src"))
    os.chdir(root)
    from mogg.core.threads import configure_threads

    configure_threads(None)  # as the entry points do, before the stage modules load torch
    import importlib

    seconds: dict[str, float] = {}
    for (mod, fn), name in STAGES.items():
        try:
            m = importlib.import_module(mod)
        except ModuleNotFoundError:  # a checkout from before that module
            continue
        if hasattr(m, fn):
            setattr(m, fn, _wrap(seconds, name, getattr(m, fn)))

    def report() -> None:
        total = time.perf_counter() - T0
        out = {**seconds, "rest (Python, imports, Hydra, writing)": total - sum(seconds.values()), "total": total}
        print(json.dumps(out, indent=1), file=sys.stderr)
        if args.json:
            args.json.write_text(json.dumps(out, indent=1))

    atexit.register(report)
    sys.argv = [str(root / args.script), *args.overrides]
    runpy.run_path(str(root / args.script), run_name="__main__")


if __name__ == "__main__":
    main()
