"""LLM readers for MIRAGE accuracy.

A reader (``Reader``: chat messages in, raw text out) answers prompts built from the question,
its options and the selected snippets (``prompts``: MedRAG-style RAG and the no-retrieval
chain-of-thought baseline). ``parsing.parse_answer`` extracts the option letter without guessing;
``run.answer_questions`` asks each prompt once through an append-only ``AnswerCache`` (resumable
after a kill) and ``run.accuracy_table`` scores per set with standard errors and an unparsed count.
Readers: ``HFReader`` (local causal LM) and ``OpenAIReader`` (OpenAI-compatible HTTP, e.g. vLLM).

Names are imported lazily so that importing this package loads neither torch nor transformers.
"""

from __future__ import annotations

from mogg.core.exports import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "base": ("Reader", "ReaderError"),
    "hf": ("HFReader",),
    "openai_http": ("OpenAIReader",),
    "prompts": ("rag_messages", "cot_messages", "prompt_hash"),
    "parsing": ("parse_answer",),
    "cache": ("AnswerCache",),
    "run": ("answer_questions", "accuracy_table", "accuracy_markdown", "MIRAGE_COUNTS"),
})
