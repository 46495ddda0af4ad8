"""mogg's knob defaults in Hydra's ConfigStore, registered as Hydra starts.

Hydra imports every module under the ``hydra_plugins`` namespace when it starts (its plugin scan),
in ``train.py``, ``evaluate.py``, ``build.py`` and the compose API alike: importing this one stores
the defaults of the frontier's and each budget-router kind's knobs, read from the dataclass fields
that declare them (:func:`mogg.run.frontier_settings.register_configs`), so the config files hold
only ``_target_`` and deliberate overrides (issue 61).
"""

from mogg.run.frontier_settings import register_configs

register_configs()
