"""MedRAG-style prompts: RAG with numbered documents, and the no-retrieval chain-of-thought baseline.

Only the messages are built here; retrieval (question only, never the options) happens upstream.
"""

from __future__ import annotations

from mogg.core.artifacts import config_hash
from mogg.data.records import QAItem

PROMPT_VERSION = 1  # bump when the wording changes, so cached answers are not reused

_JSON_FORMAT = '{"step_by_step_thinking": "<your reasoning>", "answer_choice": "<option letter>"}'

RAG_SYSTEM = (
    "You are a medical expert. Answer the multiple-choice medical question, using the relevant "
    "documents where they help. Choose exactly one of the given options and give a definite answer."
)
COT_SYSTEM = (
    "You are a medical expert. Answer the multiple-choice medical question. Think it through step "
    "by step, then choose exactly one of the given options and give a definite answer."
)


def format_options(options: dict[str, str]) -> str:
    """One "A. text" line per option, in the item's order."""
    return "\n".join(f"{key}. {text}" for key, text in options.items())


def format_documents(snippets: list[str]) -> str:
    """Numbered "Document [i]" blocks (1-based, MedRAG's convention)."""
    return "\n".join(f"Document [{i}] {s.strip()}" for i, s in enumerate(snippets, 1))


def _instruction(options: dict[str, str], step_by_step: bool) -> str:
    letters = ", ".join(options)
    if step_by_step:
        return (
            "Think step by step, then give your output as JSON in exactly this form:\n"
            f"{_JSON_FORMAT}\nwhere the answer choice is one of {letters}."
        )
    return (
        f"Answer with the letter of the correct option only ({letters}), "
        'or as JSON: {"answer_choice": "<option letter>"}.'
    )


def _question_block(item: QAItem) -> str:
    if not item.options:
        raise ValueError(f"question {item.id!r} has no options; these prompts are for multiple choice")
    return (
        f"Here is the question:\n{item.question.strip()}\n\n"
        f"Here are the potential choices:\n{format_options(item.options)}"
    )


def rag_messages(item: QAItem, snippets: list[str], step_by_step: bool = False) -> list[dict]:
    """System + user messages: the retrieved snippets, the question, the options, the instruction."""
    docs = format_documents(snippets) if snippets else "(no documents were retrieved)"
    user = (
        f"Here are the relevant documents:\n{docs}\n\n{_question_block(item)}\n\n"
        f"{_instruction(item.options, step_by_step)}"
    )
    return [{"role": "system", "content": RAG_SYSTEM}, {"role": "user", "content": user}]


def cot_messages(item: QAItem) -> list[dict]:
    """The no-retrieval chain-of-thought baseline (always step by step, JSON answer)."""
    user = f"{_question_block(item)}\n\n{_instruction(item.options, True)}"
    return [{"role": "system", "content": COT_SYSTEM}, {"role": "user", "content": user}]


def prompt_hash(messages: list[dict], reader_config: dict) -> str:
    """The answer-cache key: the exact messages, the reader's output-relevant settings, the version."""
    return config_hash({"messages": messages, "reader": reader_config, "v": PROMPT_VERSION}, length=32)
