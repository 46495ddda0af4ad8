"""The error every artifact check raises, in a module of its own: :mod:`mogg.core.bounded` (which
:mod:`mogg.core.artifacts` reads directories' JSON with) raises it too, without importing the
artifacts module back."""

from __future__ import annotations


class ArtifactError(RuntimeError):
    """An artifact is missing, partial, corrupt or was built from a different config."""
