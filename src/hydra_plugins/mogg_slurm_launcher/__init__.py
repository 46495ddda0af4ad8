"""mogg's SLURM launcher for Hydra (``hydra/launcher=slurm``, ``conf/hydra/launcher/slurm.yaml``).

hydra-submitit-launcher's SLURM launcher (same config, same job array, same requeue on a time
limit) whose wait reports a failed task when it fails (:mod:`mogg.run.slurm_launcher`). It lives
here because Hydra instantiates launchers only from the ``hydra_plugins`` namespace.
"""

try:
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher as _SubmititSlurm
except ImportError:  # without the [slurm] extra, hydra/launcher=slurm names the missing plugin itself
    _SubmititSlurm = None

if _SubmititSlurm is not None:

    class SlurmLauncher(_SubmititSlurm):
        """Submits a sweep as one SLURM job array; logs each failed task as it fails."""

        def launch(self, job_overrides, initial_job_idx):
            """Submit the sweep's jobs, then wait for all of them (:func:`mogg.run.slurm_launcher.launch`)."""
            from mogg.run.slurm_launcher import launch

            return launch(self, job_overrides, initial_job_idx)
