"""A stand-in OpenAI-compatible server for smoke tests of the reader path, with no model.

    python -m mogg.readers.stub_server --port 8765 &
    python evaluate.py experiment=pubmedqa reader=openai reader.model=stub \\
        reader.base_url=http://127.0.0.1:8765/v1 questions.limit=20

It answers every ``/v1/chat/completions`` request with ``{"answer": "<letter>"}``, the letter a
hash of the prompt picks among the options the prompt lists (A-D by default): deterministic,
parseable, and as good as chance. It checks the plumbing (prompts, retries, the answer cache,
parsing, the accuracy table), never a model: accuracies it gives mean nothing. Loopback only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import re
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

log = logging.getLogger(__name__)


def stub_answer(messages: list[dict]) -> str:
    """The stub's reply to a chat: one option letter chosen by a hash of the messages."""
    text = "\n".join(str(m.get("content", "")) for m in messages)
    letters = sorted(set(re.findall(r"^\s*([A-J])[.:)]\s", text, re.M))) or ["A", "B", "C", "D"]
    pick = letters[int(hashlib.sha256(text.encode()).hexdigest(), 16) % len(letters)]
    return json.dumps({"answer": pick})


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:  # quiet: one line per request would flood the terminal
        pass

    def do_POST(self) -> None:
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self.send_error(404, "only /v1/chat/completions")
            return
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            content = stub_answer(body["messages"])
        except (ValueError, KeyError, TypeError) as e:
            self.send_error(400, f"bad request: {e}")
            return
        data = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                        "finish_reason": "stop"}], "model": body.get("model", "stub")}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mogg.readers.stub_server", description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=8765)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    server = ThreadingHTTPServer(("127.0.0.1", args.port), _Handler)
    log.info("stub reader on http://127.0.0.1:%d/v1 (answers by hash: a smoke test, not a model)", args.port)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
