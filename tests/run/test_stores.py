"""Issue 59: every store a run reuses (the action router's cross-fit folds, the unit terms, the text
embeddings) carries a manifest and is verified before it is reused; a damaged entry, even with its
manifest re-signed, is named in a warning and rebuilt, and the run's results equal an untouched run's.
The damage is done as in ``tests/hostile_stores.py`` (whose helpers these tests use), on tiny data."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hostile_stores import (
    _action_run,
    _edit_folds_json,
    _edit_vec_rows,
    _Encoder,
    _swap_folds,
    _term_features,
    _truncate_vecs,
    _truncate_weights,
    resign_store,
)


@pytest.mark.parametrize("damage", [_swap_folds, _edit_folds_json, _truncate_weights],
                         ids=["folds swapped", "folds.json edited", "weights truncated"])
def test_a_damaged_fold_store_entry_is_named_and_retrained_to_the_same_results(tmp_path, caplog, damage):
    store = tmp_path / "artifacts"
    want = _action_run(tmp_path / "a", store)
    (entry,) = (store / "crossfits").iterdir()
    assert (entry / "manifest.json").is_file()  # the entry carries a manifest
    damage(entry)
    resign_store(entry)  # as anyone can: the checks behind the checksums are reached
    with caplog.at_level("WARNING", logger="mogg.routing.fitting.folds"):
        got = _action_run(tmp_path / "b", store)
    np.testing.assert_array_equal(got, want)
    assert f"fold store entry {entry} is damaged" in caplog.text
    caplog.clear()
    with caplog.at_level("INFO", logger="mogg.routing.fitting.folds"):
        np.testing.assert_array_equal(_action_run(tmp_path / "c", store), want)  # the rebuilt entry: reused
    assert "reused from" in caplog.text and " is damaged" not in caplog.text


def test_a_fold_swapped_in_a_run_folder_is_refused(tmp_path):
    """The run's own folder is checked too: a fold's router scored on the questions it trained on."""
    from mogg.core.artifacts import ArtifactError

    _action_run(tmp_path / "a", None)
    _swap_folds(tmp_path / "a")
    with pytest.raises(ArtifactError, match="fold0 holds fold 1's router, not fold 0's"):
        _action_run(tmp_path / "a", None)


def test_a_reordered_unit_vocabulary_is_named_and_rebuilt_to_the_same_features(tmp_path, caplog):
    store = tmp_path / "artifacts"
    want = _term_features(store)
    (entry,) = (store / "unit_terms").iterdir()
    words = json.loads((entry / "vocab.json").read_text())
    (entry / "vocab.json").write_text(json.dumps(words[1:2] + words[:1] + words[2:]))  # two words swapped
    resign_store(entry)
    with caplog.at_level("WARNING", logger="mogg.core.artifacts"):
        got = _term_features(store)
    np.testing.assert_array_equal(got, want)
    assert f"cached unit_terms {entry} is damaged" in caplog.text and "vocab.json" in caplog.text


@pytest.mark.parametrize("damage", [_truncate_vecs, _edit_vec_rows], ids=["truncated", "edited"])
def test_a_damaged_vector_shard_is_named_and_encoded_again(tmp_path, caplog, damage):
    from hostile_stores import _UNITS

    from mogg.encoders import embed_texts

    store = tmp_path / "artifacts"
    want = embed_texts(_Encoder(), _UNITS, store, show_progress=False)
    (folder,) = (store / "text_embeddings").iterdir()
    (shard,) = (p.name.split(".")[0] for p in folder.glob("*.keys.npy"))
    assert (folder / f"{shard}.manifest.json").is_file()
    damage(folder)
    enc = _Encoder()
    with caplog.at_level("WARNING", logger="mogg.core.text_store"):
        got = embed_texts(enc, _UNITS, store, show_progress=False)
    np.testing.assert_array_equal(got, want)
    assert enc.n == len(_UNITS) and f"shard {shard}" in caplog.text
    enc = _Encoder()
    np.testing.assert_array_equal(embed_texts(enc, _UNITS, store, show_progress=False), want)
    assert enc.n == 0  # the new shard is whole: nothing encoded again


def test_a_shard_written_before_manifests_is_encoded_again(tmp_path):
    from hostile_stores import _UNITS

    from mogg.encoders import embed_texts

    store = tmp_path / "artifacts"
    want = embed_texts(_Encoder(), _UNITS, store, show_progress=False)
    for p in (store / "text_embeddings").rglob("*.manifest.json"):
        p.unlink()
    enc = _Encoder()
    np.testing.assert_array_equal(embed_texts(enc, _UNITS, store, show_progress=False), want)
    assert enc.n == len(_UNITS)
