"""Fitting router kinds: folds, k-fold fits and the final fit, several question sets (pooled, experts)."""
