"""Evaluate every selection policy (router, fixed levels, oracle, ...): python evaluate.py [overrides...]"""

import hydra
from omegaconf import DictConfig


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    from mogg.core.gcpolicy import configure_gc
    from mogg.core.runconfig import cli_errors
    from mogg.core.slots import job_slot
    from mogg.core.threads import configure_threads
    from mogg.run.sweep import job_run_name

    configure_gc()  # ~4,000 modules load: fewer full collections, none at exit (mogg.core.gcpolicy)
    # a bad knob, file or artifact: one line and exit 2, not a traceback; with slots=N, wait for one
    # of N machine-wide job slots before anything heavy loads (mogg.core.slots)
    with cli_errors("evaluate.py"), job_slot(cfg.get("slots"), cfg.get("slots_dir")):
        configure_threads(cfg.get("threads"))  # before torch/numba/BLAS start their pools
        job_run_name(cfg)  # a sweep's jobs each write their own run (mogg.run.sweep)
        from mogg.run.app import evaluate

        evaluate(cfg)


if __name__ == "__main__":
    import sys

    from mogg.core.runconfig import prepare_argv

    # a secret on the command line goes to the environment, not to .hydra/; a bad run_name is refused
    # before Hydra creates its output folder
    sys.argv = prepare_argv(sys.argv, "evaluate.py")
    main()
