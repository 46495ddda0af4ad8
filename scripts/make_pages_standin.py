"""A visible stand-in for the page-section evidence shape (issue 49), written in the generic format.

The shape it stands in for: a document is one consumer-health page of about five sections, and a
question's evidence is one whole section of it. Built here from MedMCQA's explained questions
(the questions and cleaned explanations of ``conf/questions/medmcqa_exp.yaml``): the explanations of
one subject are ordered by topic and by their words (the first component of their TF-IDF vectors,
so neighbours on a page are related), and every ``--sections`` consecutive explanations become one
page, each explanation a section (paragraph) of it. A question's gold evidence is its own
explanation, one section of its page; its gold document is the page. The answer options are left
out by default (``--options`` keeps them): the pages' questions are open questions.

    python scripts/make_pages_standin.py --out data/pages_standin     # then (the experiment reads that folder):
    python train.py experiment=selector_pages evaluate_after=true      # conf/experiment/selector_pages.yaml

Deterministic (``--seed``: the SVD's); the corpus holds the questions' evidence (a gold-context
setting, declared by the experiment's ``corpus.allow_gold``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def pages(items, subjects: dict[str, tuple[str, str]], sections: int, seed: int) -> list[tuple[str, list]]:
    """(page id, its items in section order) for every page: items grouped by subject, ordered by
    topic then by the first TF-IDF component of their evidence, cut into runs of ``sections``."""
    import numpy as np
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer

    by_subject = defaultdict(list)
    for it in items:
        by_subject[subjects.get(it.id, ("", ""))[0] or "other"].append(it)
    out = []
    for subject in sorted(by_subject):
        group = by_subject[subject]
        texts = [it.evidence_text for it in group]
        if len(group) > 2:
            x = TfidfVectorizer(stop_words="english", min_df=1).fit_transform(texts)
            comp = TruncatedSVD(n_components=1, random_state=seed).fit_transform(x)[:, 0]
        else:
            comp = np.zeros(len(group))
        order = sorted(range(len(group)), key=lambda i: (subjects.get(group[i].id, ("", ""))[1] or "~", comp[i], group[i].id))
        for a in range(0, len(order), sections):
            out.append((f"page-{subject.lower().replace(' ', '_')}-{a // sections}", [group[i] for i in order[a:a + sections]]))
    return out


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(ROOT / "src"))
    from mogg.core.flags import nonnegative_int, positive_int  # every flag checked before any work

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="folder for questions.jsonl and corpus.jsonl")
    ap.add_argument("--sections", type=positive_int, default=5, help="explanations per page")
    ap.add_argument("--options", action="store_true", help="keep the answer options")
    ap.add_argument("--seed", type=nonnegative_int, default=0)
    args = ap.parse_args(argv)
    if args.sections < 2:
        ap.error("--sections must be >= 2 (a page of one section is the plain MedMCQA set)")
    os.environ.setdefault("MOGG_DATA_DIR", str(ROOT.parent / "shared" / "data"))
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["data=medmcqa"])
    qs = instantiate(cfg.questions)
    items = [it for it in qs.load() if it.evidence_text.strip()]
    raw = Path(cfg.questions.raw_path)
    subjects = {}
    with raw.open() as f:
        for line in f:
            r = json.loads(line)
            subjects[r["id"]] = (r.get("subject_name") or "", r.get("topic_name") or "")
    args.out.mkdir(parents=True, exist_ok=True)
    book = pages(items, subjects, args.sections, args.seed)
    with (args.out / "corpus.jsonl").open("w") as c, (args.out / "questions.jsonl").open("w") as q:
        for pid, members in book:
            c.write(json.dumps({"id": pid, "title": "", "content": "\n\n".join(it.evidence_text for it in members)}) + "\n")
            for it in members:
                rec = {"id": it.id, "question": it.question, "gold_evidence": [it.evidence_text], "gold_doc_ids": [pid]}
                if args.options and it.options:
                    rec.update(options=dict(it.options), answer=it.answer)
                else:
                    rec["answer"] = it.answer_text
                q.write(json.dumps(rec) + "\n")
    words = sorted(sum(len(it.evidence_text.split()) for it in m) for _, m in book)
    sec = sorted(len(it.evidence_text.split()) for it in items)
    print(f"{len(book)} pages of up to {args.sections} sections from {len(items)} explained questions; median page "
          f"{words[len(words) // 2]} words, median section {sec[len(sec) // 2]} words -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
