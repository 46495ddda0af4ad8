"""Build ladders + retriever state ahead of training, optionally sharded (cluster scale).

    python build.py                                    # single machine: ladders + BM25 state
    python build.py -m shard.index=0,1,2 shard.count=3 [hydra/launcher=submitit_slurm]   # map
    python build.py shard.count=3 shard.merge=true     # reduce: the same artifacts as one build

MoGG graphs link nodes across shards and run the same two commands twice, ``shard.stage=nodes``
(nodes + one node index) then ``shard.stage=knn`` (each shard's nodes against the full index).
"""

import hydra
from omegaconf import DictConfig


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    from mogg.core.gcpolicy import configure_gc
    from mogg.core.runconfig import cli_errors
    from mogg.core.slots import job_slot
    from mogg.core.threads import configure_threads

    configure_gc()  # ~4,000 modules load: fewer full collections, none at exit (mogg.core.gcpolicy)
    # a bad knob, file or artifact: one line and exit 2, not a traceback; with slots=N, wait for one
    # of N machine-wide job slots before anything heavy loads (mogg.core.slots)
    with cli_errors("build.py"), job_slot(cfg.get("slots"), cfg.get("slots_dir")):
        configure_threads(cfg.get("threads"))  # before torch/numba/BLAS start their pools
        from mogg.run.app import build

        build(cfg)


if __name__ == "__main__":
    import sys

    from mogg.core.runconfig import prepare_argv

    # a secret on the command line goes to the environment, not to .hydra/; a bad run_name is refused
    # before Hydra creates its output folder
    sys.argv = prepare_argv(sys.argv, "build.py")
    main()
