"""The frontier's routers over actions: the cost-aware action router (space, folds, fit, scorer,
deploy), eq. 1 profiles, and the evidence selector."""
