import numpy as np
import pytest

from mogg.data.records import QAItem
from mogg.routing.inputs.labels import SoftLabeler, soft_labels, target_texts


def test_soft_labels_hand_example():
    scores = np.array([[0.1, 0.7, 0.3, 0.0], [0.5, 0.5, 0.2, 0.9], [0.0, 0.0, 0.0, 0.0]])
    assert soft_labels(scores).tolist() == [
        [0.0, 0.8, 0.2, 0.0],
        [0.2, 0.0, 0.0, 0.8],  # tie 0.5/0.5 for second place -> finer level 0
        [0.8, 0.2, 0.0, 0.0],
    ]


def test_similarity_sources_hand_example():
    items = [QAItem(id="q", question="what causes anemia", answer="iron deficiency", gold_evidence=["iron deficiency causes anemia"])]
    snippets = [["the weather is nice"], ["iron deficiency is a common cause of anemia"], ["iron"]]
    hr = SoftLabeler("hitrate").level_scores(items, snippets)
    # evidence content tokens: iron, deficiency, causes, anemia -> hits 0/4, 3/4, 1/4
    assert np.allclose(hr, [[0.0, 0.75, 0.25]])
    assert SoftLabeler("hitrate").labels(hr).tolist() == [[0.0, 0.8, 0.2]]
    tf = SoftLabeler("tfidf").level_scores(items, snippets)
    assert tf[0, 0] == 0 and tf[0, 1] > tf[0, 2] > 0


def test_metric_source_and_targets():
    items = [QAItem(id="q", question="Q?", answer="A", options={"A": "yes", "B": "no"}, label="long answer")]
    assert target_texts(items, "qa") == ["Q? yes"] and target_texts(items, "label") == ["long answer"]
    assert target_texts(items, "auto") == ["long answer"]
    with pytest.raises(ValueError, match="no gold evidence"):
        target_texts(items, "evidence")
    lab = SoftLabeler("metric")
    assert lab.labels(lab.level_scores(items, [], np.array([[0.2, 0.4, 0.3]]))).tolist() == [[0.0, 0.8, 0.2]]
    with pytest.raises(ValueError):
        lab.level_scores(items, [], np.array([[np.nan, 0.4, 0.3]]))
    with pytest.raises(ValueError, match="source"):
        SoftLabeler("bogus")


def test_reader_labels_from_a_fake_reader_with_known_answers(tmp_path):
    """labels=reader: a level scores 1 where the reader answers right with that level's context.
    The fake reader answers right exactly when its prompt holds the word 'clue'."""
    from mogg.data.records import QAItem
    from mogg.routing.inputs.labels import SoftLabeler

    class ClueReader:
        def __init__(self):
            self.asked = 0

        def config(self):
            return {"type": "clue"}

        def generate(self, prompts):
            self.asked += len(prompts)
            out = []
            for msgs in prompts:
                text = msgs[-1]["content"]
                out.append("A" if "clue" in text else "B")
            return out

    items = [QAItem(f"q{i}", f"Question {i}?", "A", options={"A": "yes", "B": "no"}) for i in range(3)]
    # fixed_snippets[level][question]: the clue sits in level 2 for q0, levels 0 and 1 for q1, nowhere for q2
    snippets = [[["noise"], ["a clue"], ["noise"]],
                [["noise"], ["clue"], ["noise"]],
                [["the clue"], ["noise"], ["noise"]]]
    reader = ClueReader()
    lab = SoftLabeler("reader", reader=reader, cache=str(tmp_path / "answers.jsonl"))
    scores = lab.level_scores(items, [[""] * 3] * 3, np.full((3, 3), np.nan), snippets)
    assert scores.tolist() == [[0, 0, 1], [1, 1, 0], [0, 0, 0]]
    assert lab.labels(scores).tolist() == [[0.2, 0, 0.8], [0.8, 0.2, 0], [0.8, 0.2, 0]]  # ties: the finer level
    assert reader.asked == 6  # distinct prompts: q0 2 (its two "noise" levels are one prompt), q1 3, q2 1
    lab.level_scores(items, [[""] * 3] * 3, None, snippets)
    assert reader.asked == 6  # the second pass is answered from the cache
    with pytest.raises(ValueError, match="labels=reader needs a reader"):
        SoftLabeler("reader")
