"""An OpenAI-compatible chat endpoint as a reader (what vLLM, TGI and llama.cpp serve)."""

from __future__ import annotations

import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import requests

from mogg.core.credentials import read_credential
from mogg.core.secrets import remember, scrub_text, scrub_url
from mogg.readers.base import ReaderError

logger = logging.getLogger(__name__)

_RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
_MAX_SLEEP = 60.0


def _server_message(resp: requests.Response) -> str:
    """The error text the server sent (OpenAI style ``{"error": {"message": ...}}`` or raw body)."""
    try:
        body = resp.json()
    except ValueError:
        return resp.text[:500]
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            return str(err.get("message") or err)[:500]
        return str(err)[:500]
    return str(body)[:500]


class OpenAIReader:
    """POSTs each prompt to ``{base_url}/chat/completions`` from a thread pool.

    429, 5xx, connection errors and timeouts are retried ``retries`` times with exponential
    backoff (``backoff * 2**attempt`` seconds, or the server's ``Retry-After``); any other 4xx
    raises ``ReaderError`` with the server's message at once. The key is read from where the config
    names it, never written in it: ``api_key_env`` (an environment variable's name) or
    ``api_key_file`` (a file holding only the key); else ``api_key`` (on the command line it is moved
    into the environment before Hydra starts), else ``MOGG_READER_API_KEY``, else ``OPENAI_API_KEY``.
    It is never part of ``config()``, and it is redacted by value from every message and log line
    (a server that echoes it in its 401 reply included).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        max_tokens: int = 256,
        temperature: float = 0.0,
        concurrency: int = 8,
        retries: int = 5,
        backoff: float = 1.0,
        timeout: float = 60,
        api_key_env: str | None = None,
        api_key_file: str | None = None,
    ) -> None:
        if concurrency < 1 or retries < 0 or backoff < 0 or timeout <= 0:
            raise ValueError("need concurrency >= 1, retries >= 0, backoff >= 0, timeout > 0")
        self.base_url = str(base_url).rstrip("/")
        self.model = str(model)
        self.api_key = read_credential(api_key_env, api_key_file, "reader") or api_key \
            or os.environ.get("MOGG_READER_API_KEY") or os.environ.get("OPENAI_API_KEY")
        remember(self.api_key)  # redacted by value wherever it turns up (a server echoing it, a log line)
        self.max_tokens = int(max_tokens)
        self.temperature = float(temperature)
        self.concurrency = int(concurrency)
        self.retries = int(retries)
        self.backoff = float(backoff)
        self.timeout = float(timeout)
        self._local = threading.local()

    def config(self) -> dict:
        # The URL is left out on purpose: the same model behind another host answers the same.
        return {
            "type": "openai",
            "model": self.model,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
        }

    def _session(self) -> requests.Session:
        # requests.Session is not documented as thread-safe: one per worker thread.
        s = getattr(self._local, "session", None)
        if s is None:
            s = requests.Session()
            if self.api_key:
                s.headers["Authorization"] = f"Bearer {self.api_key}"
            self._local.session = s
        return s

    def _sleep_for(self, attempt: int, resp: requests.Response | None) -> float:
        if resp is not None:
            retry_after = resp.headers.get("Retry-After")
            try:
                if retry_after is not None:
                    return min(max(float(retry_after), 0.0), _MAX_SLEEP)
            except ValueError:
                pass
        return min(self.backoff * (2**attempt), _MAX_SLEEP)

    def _one(self, messages: list[dict], max_tokens: int | None = None) -> str:
        url = f"{self.base_url}/chat/completions"
        payload = {
            "model": self.model,
            "messages": messages,
            "max_tokens": int(max_tokens or self.max_tokens),
            "temperature": self.temperature,
        }
        last = ""
        for attempt in range(self.retries + 1):
            resp = None
            try:
                resp = self._session().post(url, json=payload, timeout=self.timeout)
            except (requests.ConnectionError, requests.Timeout) as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                if resp.status_code == 200:
                    return self._content(resp)
                last = f"HTTP {resp.status_code}: {_server_message(resp)}"
                if resp.status_code not in _RETRY_STATUS:
                    raise ReaderError(scrub_text(f"{url} refused the request ({last})"))
            if attempt < self.retries:
                delay = self._sleep_for(attempt, resp)
                logger.warning("%s: %s; retry %d/%d in %.1fs", scrub_url(url), scrub_text(last), attempt + 1,
                               self.retries, delay)
                time.sleep(delay)
        raise ReaderError(scrub_text(f"{url}: giving up after {self.retries + 1} attempts ({last})"))

    def _content(self, resp: requests.Response) -> str:
        try:
            choice = resp.json()["choices"][0]
            content = choice["message"].get("content")
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise ReaderError(scrub_text(f"unexpected response from {self.base_url}: {resp.text[:300]}")) from exc
        # Reasoning servers may send content=None with the text elsewhere; keep what is there.
        return content if isinstance(content, str) else ""

    def generate(self, prompts: list[list[dict]], max_tokens: int | None = None) -> list[str]:
        """One raw answer per prompt, in order; ``max_tokens`` overrides the configured limit for this batch."""
        if not prompts:
            return []
        pool = ThreadPoolExecutor(max_workers=min(self.concurrency, len(prompts)))
        futures = [pool.submit(self._one, p, max_tokens) for p in prompts]
        try:
            return [f.result() for f in futures]
        finally:
            # On a failure, prompts not yet sent are dropped instead of hitting a failing server.
            pool.shutdown(wait=True, cancel_futures=True)

    def __repr__(self) -> str:
        return f"OpenAIReader({scrub_url(self.base_url)!r}, model={self.model!r})"
