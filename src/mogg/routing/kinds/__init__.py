"""Router kinds: the interface (:mod:`~mogg.routing.kinds.base`), the default MLP kind
(:mod:`~mogg.routing.kinds.mlp`) and the registry that finds a saved router's network
(:mod:`~mogg.routing.kinds.registry`). Experimental kinds live in :mod:`mogg.routing.experimental`."""
