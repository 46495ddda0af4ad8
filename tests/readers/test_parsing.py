"""parse_answer on real-looking reader outputs: each row states the expected letter or None."""

from __future__ import annotations

import pytest

from mogg.readers.parsing import parse_answer

MCQ = {
    "A": "paralysis of the facial muscles.",
    "B": "paralysis of the facial muscles and loss of taste.",
    "C": "paralysis of the facial muscles, loss of taste and lacrimation.",
    "D": "Cortisol",
}
YNM = {"A": "yes", "B": "no", "C": "maybe"}
YN = {"A": "yes", "B": "no"}

CASES = [
    # plain letters
    ("B", MCQ, "B"),
    ("C.", MCQ, "C"),
    ("  (D)  ", MCQ, "D"),
    ("b", MCQ, "B"),
    ("d) Cortisol", MCQ, "D"),
    ("**A**", MCQ, "A"),
    ("Option C: it also affects lacrimation.", MCQ, "C"),
    # stated answers
    ("Answer: (B)", MCQ, "B"),
    ("The answer is C because the lesion is proximal.", MCQ, "C"),
    ("After considering each option, the correct answer is option A.", MCQ, "A"),
    ("Final answer: d", MCQ, "D"),
    ("the answer is b.", MCQ, "B"),
    ("Answer:\nC", MCQ, "C"),
    ("A is the correct answer, since taste fibres leave earlier.", MCQ, "A"),
    ("**Answer: B**", MCQ, "B"),
    # JSON, with and without fences, with trailing text, truncated
    ('{"step_by_step_thinking": "The nerve exits ...", "answer_choice": "C"}', MCQ, "C"),
    ('```json\n{"step_by_step_thinking": "x {y}", "answer_choice": "D"}\n```\nHope this helps!', MCQ, "D"),
    ('Here is my output: {"answer": "b"} and nothing else', MCQ, "B"),
    ('{"step_by_step_thinking": "The answer is A at first sight, but", "answer_choice": "B"}', MCQ, "B"),
    ('{"step_by_step_thinking": "long reasoning cut by max tokens", "answer_choice": "A"', MCQ, "A"),
    ('{"step_by_step_thinking": "reasoning cut by max tokens before the answer', MCQ, None),
    ('{"answer_choice": "C. paralysis of the facial muscles, loss of taste and lacrimation."}', MCQ, "C"),
    ('{"answer_choice": "A/B/C/..."}', MCQ, None),
    ('{"answer_choice": "E"}', MCQ, None),
    ('{"answer_choice": ["A", "C"]}', MCQ, None),
    # option text instead of a letter
    ("paralysis of the facial muscles, loss of taste and lacrimation.", MCQ, "C"),
    ("Cortisol", MCQ, "D"),
    ("The lesion gives paralysis of the facial muscles and loss of taste.", MCQ, "B"),
    ("The answer is cortisol.", MCQ, "D"),
    # yes / no / maybe sets
    ("Yes", YNM, "A"),
    ("no.", YNM, "B"),
    ("Maybe, the evidence is mixed.", YNM, "C"),
    ('{"answer_choice": "maybe"}', YNM, "C"),
    ("Based on the abstract, the answer is no.", YNM, "B"),
    ("B", YN, "B"),
    ("There is no evidence that losartan helps.", YN, None),
    ("No evidence suggests a benefit in these patients", YN, None),
    ("The answer is C", YN, None),
    # two letters, hedging, contradictions
    ("I think A or maybe C", MCQ, None),
    ("A and C", MCQ, None),
    ("The answer is A or C.", MCQ, None),
    ("The answer is A/B", MCQ, None),
    ("B. Actually, the answer is C.", MCQ, None),
    ("Yes. On reflection the answer is no.", YNM, None),
    # letters not among the options, articles, nothing
    ("E", MCQ, None),
    ("The answer is E.", MCQ, None),
    ("A patient with this lesion would have trouble closing the eye.", MCQ, None),
    ("The answer is a rare complication.", MCQ, None),
    ("I cannot determine the answer from the information given.", MCQ, None),
    ("", MCQ, None),
    ("   \n ", MCQ, None),
    # reasoning models: only the text after </think> counts
    ("<think>maybe A? no, the answer is C</think>\nAnswer: B", MCQ, "B"),
    ("<think>the answer is probably A but let me check", MCQ, None),
]


@pytest.mark.parametrize("raw,options,expected", CASES, ids=[f"{i}:{c[0][:30]!r}" for i, c in enumerate(CASES)])
def test_parse_answer_table(raw, options, expected):
    assert parse_answer(raw, options) == expected


def test_no_options_gives_none():
    assert parse_answer("A", {}) is None


def test_parsed_letter_is_always_an_option():
    for raw, options, _ in CASES:
        got = parse_answer(raw, options)
        assert got is None or got in options
