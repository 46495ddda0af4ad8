"""Credentials are read from where a config names them, never from the config itself (issue 59).

A component's config holds the *name* of an environment variable (``reader.api_key_env:
OPENAI_API_KEY``) or the path of a file that holds only the key (``reader.api_key_file:
~/.config/mogg/openai.key``); :func:`read_credential` reads the value when the component is built.
The value never enters the composed config, so no manifest, cache, report or log can hold it, and
it is remembered (:func:`mogg.core.secrets.remember`) so the scrubber redacts it by value from
anything the run writes or prints.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from mogg.core.secrets import remember

log = logging.getLogger(__name__)


def read_credential(env: str | None, file: str | None, what: str) -> str | None:
    """The credential named by ``env`` (an environment variable) or ``file`` (a file holding only
    it, surrounding whitespace dropped); None when neither is given. A named source that is unset,
    missing or empty is a one-line ``ValueError`` naming the source (``what``: the component), never
    the value; giving both is refused."""
    if env and file:
        raise ValueError(f"{what}: api_key_env={env!r} and api_key_file={file!r}: name one source of the key")
    if env:
        if not isinstance(env, str) or not env.replace("_", "").isalnum():
            raise ValueError(f"{what}.api_key_env: must name an environment variable (e.g. OPENAI_API_KEY), "
                             "not hold the key itself")
        value = os.environ.get(env, "").strip()
        if not value:
            raise ValueError(f"{what}.api_key_env={env}: the environment variable {env} is not set (export it, or "
                             "name the one that holds the key)")
        remember(value)
        log.info("%s: key read from the environment variable %s", what, env)
        return value
    if file:
        path = Path(os.path.expanduser(str(file)))
        try:
            value = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as e:
            raise ValueError(f"{what}.api_key_file={str(file)!r}: cannot read the key ({type(e).__name__})") from None
        if not value:
            raise ValueError(f"{what}.api_key_file={str(file)!r}: the file is empty")
        remember(value)
        log.info("%s: key read from %s", what, path)
        return value
    return None
