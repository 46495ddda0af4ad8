"""Issue 59: a directory is data, so every number it carries is bounded where it is read, its JSON is
parsed within depth and size limits, and its components may steer nothing but their ``_target_``
(``_partial_`` only where mogg builds a factory). The same refusals through ``mogg-route`` on
re-sealed directories are cases of ``tests/hostile_stores.py``."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT

from mogg.core.artifacts import ArtifactError


def test_directory_json_is_parsed_within_depth_and_size(tmp_path):
    from mogg.core.bounded import json_depth, read_json

    p = tmp_path / "deploy.json"
    p.write_text('{"a": "[[[[", "b": [[1], {"c": [2]}]}')
    assert read_json(p) == {"a": "[[[[", "b": [[1], {"c": [2]}]} and json_depth(p.read_bytes()) == 4
    p.write_text("[" * 200_000 + "]" * 200_000)  # a RecursionError in json.loads
    with pytest.raises(ArtifactError, match=r"deploy\.json: JSON nested 200000 deep"):
        read_json(p)
    p.write_text(json.dumps({"x": "y" * 100}))
    with pytest.raises(ArtifactError, match=r"deploy\.json: \d+ bytes, more than"):
        read_json(p, max_bytes=50)
    p.write_bytes(b'{"x": "\xff"}')
    with pytest.raises(ArtifactError, match=r"deploy\.json: not JSON"):
        read_json(p)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -5.0, 0.0, True, "56"])
def test_an_evidence_length_that_is_not_finite_and_positive_is_refused(value):
    from mogg.run.budget.bounds import check_deploy

    deploy = {"spec": {"frontier": {"depth": 8, "caps": [None, 64]}}, "settings": {"depth": 8, "per_chunk": 24,
              "plans": 48}, "evidence_len": 56.3, "n_features": 30}
    check_deploy(deploy, ROOT)
    with pytest.raises(ArtifactError, match="evidence_len"):
        check_deploy({**deploy, "evidence_len": value}, ROOT)


@pytest.mark.parametrize("field,value", [("plans", 1e9), ("plans", 10 ** 9), ("plans", 0), ("depth", 10 ** 6),
                                         ("per_chunk", -3), ("plans", True)])
def test_a_selector_setting_out_of_bounds_is_refused(field, value):
    from mogg.run.budget.bounds import check_deploy

    deploy = {"spec": {}, "settings": {"depth": 8, "per_chunk": 24, "plans": 48, field: value}, "evidence_len": 5.0,
              "n_features": 3}
    with pytest.raises(ArtifactError, match=f"settings.{field}"):
        check_deploy(deploy, ROOT)


@pytest.mark.parametrize("node,match", [
    ({"_target_": "mogg.ladders.MoGLadderBuilder", "_partial_": True}, "_partial_"),
    ({"_target_": "mogg.data.corpus.Corpus", "_partial_": False}, "_partial_"),
    ({"_target_": "mogg.retrieval.BM25Retriever", "_partial_": "yes"}, "_partial_"),
    ({"_partial_": True, "k1": 1.2}, "_partial_"),
    ({"_target_": "mogg.ladders.MoGLadderBuilder", "_recursive_": False}, "_recursive_"),
    ({"_target_": "mogg.ladders.MoGLadderBuilder", "_convert_": "all"}, "_convert_"),
    ({"_target_": "mogg.ladders.MoGLadderBuilder", "max_sentence_tokens": -1}, "max_sentence_tokens"),
    ({"_target_": "mogg.ladders.MoGLadderBuilder", "unit_size": 10 ** 9}, "unit_size"),
    ({"_target_": "mogg.ladders.MoGLadderBuilder", "n_levels": 2.5}, "n_levels"),
])
def test_hydra_keys_and_component_numbers_a_directory_may_not_carry(node, match):
    from mogg.core.trusted import check_node

    with pytest.raises(ArtifactError, match=match):
        check_node(node, "d/deploy.json", "spec.components.ladder")


def test_every_shipped_retriever_is_built_as_a_factory_and_routes():
    """A saved ``_partial_: true`` is accepted where the shipped configs write it (retrievers)."""
    import yaml

    from mogg.core.trusted import FACTORIES, check_node

    def walk(node):
        if isinstance(node, dict):
            if node.get("_partial_") is True:
                yield node["_target_"]
            for v in node.values():
                yield from walk(v)
        elif isinstance(node, list):
            for v in node:
                yield from walk(v)

    found = {t for f in (ROOT / "conf").rglob("*.yaml") for t in walk(yaml.safe_load(f.read_text()))}
    assert found and found <= FACTORIES, sorted(found - FACTORIES)
    check_node({"_target_": "mogg.retrieval.hybrid.HybridRetriever", "_partial_": True, "rrf_k": 60.0, "depth": 100,
                "members": [{"_target_": "mogg.retrieval.BM25Retriever", "_partial_": True, "k1": 1.5}]},
               "d/deploy.json", "spec.components.retriever")


def test_a_kind_naming_the_abstract_interface_is_refused():
    from mogg.run.registry import kind_class

    with pytest.raises(ArtifactError, match="abstract kind"):
        kind_class("mogg.run.budget.base:BudgetRouter", "d/deploy.json")
    assert kind_class("mogg.run.budget.actions:ActionRouterKind").__name__ == "ActionRouterKind"
