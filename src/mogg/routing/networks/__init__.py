"""The MLP network and its fit: every fold (and every member) as one stacked model under Lightning."""
