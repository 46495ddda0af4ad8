"""The cross router (router=cross): a transformer reading (question, level context) pairs.

A toy set where the right level is readable only from the candidate text (the retrieval-style
inputs are noise): the cross router must find it, the MLP cannot. Plus the pair states' frozen
split (equal to the whole encoder's output), saving and loading, and the config.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

WORDS = ["good", "bad", *(f"w{i}" for i in range(30))]


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    """A tiny random BERT with a word-level vocabulary (from_pretrained files)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    path = tmp_path_factory.mktemp("tiny_cross")
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS])}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tk.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                            sep_token="[SEP]", mask_token="[MASK]").save_pretrained(path)
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=32, max_position_embeddings=64)).save_pretrained(path)
    return path


def _toy(n: int = 150, n_levels: int = 3, seed: int = 0):
    """Questions, per-level contexts, utilities: the level whose context says "good" has utility 1."""
    rng = np.random.default_rng(seed)
    right = rng.integers(0, n_levels, n)
    fill = lambda k: " ".join(rng.choice(WORDS[2:], k))  # noqa: E731
    questions = [fill(4) for _ in range(n)]
    contexts = [[f"{fill(3)} {'good' if j == r else 'bad'} {fill(3)}" for j in range(n_levels)] for r in right]
    util = np.eye(n_levels)[right]
    return questions, contexts, util, right


def _settings(**kw):
    from mogg.routing.experimental.cross import CrossRouterKind

    return CrossRouterKind(**{"hidden": 16, "dropout": 0.0, **kw})


def _encoder(path):
    from mogg.encoders import HFEncoder

    return HFEncoder(str(path), max_length=32, normalize=False)


def test_the_frozen_split_gives_the_whole_encoders_output(tiny_bert):
    """Frozen blocks then the router's copies of the top blocks == the encoder run whole."""
    from mogg.routing.experimental.cross import top_blocks
    from mogg.routing.experimental.pairs import encode_pairs

    enc = _encoder(tiny_bert)
    q, c, _, _ = _toy(6)
    s = encode_pairs(enc, q, c, train_layers=1)
    whole = encode_pairs(enc, q, c, train_layers=2)  # only the embeddings frozen
    assert s.hidden.shape[:2] == (6, 3) and s.mask.shape == s.hidden.shape[:3]
    x, m = s.hidden.reshape(18, -1, 16).float(), s.mask.reshape(18, -1)
    ext = torch.zeros(m.shape).masked_fill(~m, torch.finfo(torch.float32).min)[:, None, None, :]
    top = top_blocks(enc, 1)[0].eval()
    with torch.no_grad():
        y = top(x, attention_mask=ext)
        y = y[0] if isinstance(y, tuple) else y
        b = enc.tokenizer([a for a in q for _ in range(3)], [t for row in c for t in row], padding=True,
                          return_tensors="pt")
        ref = enc.model(**b).last_hidden_state
    t = ref.shape[1]
    assert torch.allclose(y[:, :t][m[:, :t]], ref[m[:, :t]], atol=2e-2)  # float16 states
    x2 = whole.hidden.reshape(18, -1, 16)
    assert x2.shape[1] == x.shape[1] and (whole.mask == s.mask).all()


def test_a_cross_router_reads_the_level_the_mlp_cannot_see(tiny_bert):
    from mogg.routing.experimental.pairs import encode_pairs
    from mogg.routing.fitting.kfold import Fit, train_routers
    from mogg.routing.kinds.mlp import MLPRouter
    from mogg.routing.networks.training import TrainerConfig

    q, c, util, right = _toy(150)
    labels = 0.8 * util + 0.2 * (1 - util) / 2
    train, val, test = np.arange(0, 90), np.arange(90, 110), np.arange(110, 150)
    trainer = TrainerConfig(max_epochs=300, patience=30)
    noise = np.random.default_rng(1).normal(size=(150, 6)).astype(np.float32)  # scores uninformative
    mlp = train_routers(noise, labels, util, q, [Fit(train, val, 0, {})], MLPRouter(hidden=16, dropout=0.0), trainer)[0]
    mlp_acc = (mlp.route(noise[test]).level == right[test]).mean()

    settings = _settings(base=str(tiny_bert), max_length=32, train_layers=2, epochs=40, patience=8,
                         batch_size=16, lr=3e-3, encoder_lr=3e-3)
    states = encode_pairs(settings.encoder(), q, c, train_layers=2)
    states.key = "toy"
    cross = train_routers(states, labels, util, q, [Fit(train, val, 0, {})], settings, trainer)[0]
    cross_acc = (cross.route(states[test]).level == right[test]).mean()
    assert cross_acc >= 0.9 and cross_acc >= mlp_acc + 0.4, (cross_acc, mlp_acc)
    assert cross.spec["network"]["kind"] == "cross" and cross.spec["training"]["epochs"] >= 1


def test_a_saved_cross_router_loads_with_the_same_outputs(tiny_bert, tmp_path):
    from mogg.routing.experimental.pairs import pair_states
    from mogg.routing.fitting.kfold import Fit, train_routers
    from mogg.routing.networks.training import TrainerConfig
    from mogg.routing.router_dir import RouterMismatch, TrainedRouter

    q, c, util, _ = _toy(40)
    settings = _settings(base=str(tiny_bert), max_length=32, train_layers=1, epochs=2, patience=0)
    states = pair_states(settings.encoder(), q, c, 1, tmp_path / "art")
    again = pair_states(settings.encoder(), q, c, 1, tmp_path / "art")  # the cached artifact
    assert again.key == states.key and torch.equal(again.hidden, states.hidden) and again.encode_s == states.encode_s
    r = train_routers(states, util, util, q, [Fit(np.arange(30), np.arange(30, 40), 3, {})], settings,
                      TrainerConfig())[0]
    r.save(tmp_path / "router")
    back = TrainedRouter.load(tmp_path / "router")
    assert type(back.module).__name__ == "CrossRouter" and np.array_equal(back.logits(states), r.logits(states))
    with pytest.raises(RouterMismatch, match="pair states"):
        back.route(np.zeros((3, 5)))


def test_the_cross_config_composes_and_bad_knobs_are_refused():
    from conftest import compose
    from hydra.utils import instantiate

    s = instantiate(compose(["router=cross"]).router)
    assert type(s).__name__ == "CrossRouterKind" and s.train_layers == 0 and s.key()["model"] == "cross"
    ft = instantiate(compose(["router=cross_ft"]).router)
    assert type(ft).__name__ == "CrossRouterKind" and ft.train_layers == 1 and ft.key() != s.key()
    assert "model" not in instantiate(compose([]).router).key()  # MLP run ids unchanged
    with pytest.raises(ValueError, match="router.transfer=experts"):
        _settings(transfer="experts")
    with pytest.raises(ValueError, match="train_layers >= 0"):
        _settings(train_layers=-1)


def test_router_cross_trains_evaluates_and_applies_through_the_real_configs(tmp_path, mirage, tiny_bert, caplog):
    """train -> evaluate (in-set cross-fit, its routing cost logged) -> a final cross router
    applied by router.checkpoint, all through the composed configs."""
    from conftest import compose

    from mogg.run.app import evaluate, train

    base = [f"paths.data_dir={mirage.parent}", f"paths.artifacts={tmp_path / 'artifacts'}",
            f"paths.checkpoints={tmp_path / 'ckpt'}", f"paths.reports={tmp_path / 'reports'}", "questions.limit=40",
            "corpus.sources.1.min_chars=400", "n_folds=2", "budgets=[]", "router=cross", f"router.base={tiny_bert}",
            "router.max_length=48", "router.epochs=2", "router.patience=0"]
    cfg = compose([*base, "run_name=cross", "router.fit=both"])
    out = train(cfg)
    assert (tmp_path / "ckpt" / "cross" / "mog" / "final" / "router.json").is_file() and out["mog"]["epochs"] == [2, 2]
    with caplog.at_level("INFO", logger="mogg.run.router_store"):
        pols = evaluate(cfg)["mog"]["policies"]
    assert "mog_router" in pols and np.isfinite(pols["mog_router"]["f1"]["mean"])
    assert "mog_router routing cost" in caplog.text and "ms reading its inputs (pairs)" in caplog.text
    applied = compose([*base, "run_name=applied", f"router.checkpoint={tmp_path / 'ckpt' / 'cross'}",
                       "router.allow_overlap=true", "router.fit=all"])
    assert "mog_transfer" in evaluate(applied)["mog"]["policies"]
    from mogg.run.route import RoutingSession  # mogg-route: new questions through the saved cross router

    session = RoutingSession.from_checkpoint(tmp_path / "ckpt" / "cross" / "mog" / "final", tmp_path / "artifacts",
                                             data_dir=mirage.parent)
    rec = session.route(["Does aspirin lower the risk of a second stroke?"])[0]
    assert rec["level_name"] in session.index.ladder.level_names and rec["context"]


def test_a_cross_fit_resumed_from_its_checkpoint_reaches_the_same_weights(tiny_bert, tmp_path, caplog):
    """Two epochs, stop, two more from Lightning's last.ckpt == four epochs in one go."""
    from mogg.routing.experimental.cross import fit_cross_routers
    from mogg.routing.experimental.pairs import encode_pairs
    from mogg.routing.networks.training import TrainerConfig

    q, c, util, _ = _toy(48)
    settings = _settings(base=str(tiny_bert), max_length=32, train_layers=1, patience=0, dropout=0.1,
                         lr=3e-3, encoder_lr=3e-3)
    states = encode_pairs(settings.encoder(), q, c, train_layers=1)
    args = (states, [util.astype(np.float32)], [np.arange(48)], [np.arange(0)], [5])  # no validation: last weights
    trainer = TrainerConfig(checkpoint_every=1)

    def fit(epochs, ckpt):
        settings.epochs = epochs
        return fit_cross_routers(*args, settings, trainer, settings.encoder(), ckpt)[0]

    whole, _ = fit(4, tmp_path / "whole")
    cut, _ = fit(2, tmp_path / "cut")  # killed after epoch 2: its last.ckpt stays
    assert (tmp_path / "cut" / "router0" / "last.ckpt").is_file()
    assert not torch.equal(cut.head[0].weight, whole.head[0].weight)
    with caplog.at_level("INFO", logger="mogg.routing.experimental.cross"):
        resumed, summary = fit(4, tmp_path / "cut")
    assert "resuming cross router 0 from" in caplog.text and summary["epochs"] == 4
    for (k, a), b in zip(whole.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), k


def test_many_sources_one_cross_router(tiny_bert, tmp_path):
    """Two question sets whose pairs have different lengths stack (padded) into one cross router."""
    from mogg.routing.experimental.pairs import encode_pairs
    from mogg.routing.fitting.sources import Source, fit_sources, stack_sources
    from mogg.routing.networks.training import TrainerConfig

    settings = _settings(base=str(tiny_bert), max_length=32, train_layers=1, epochs=2, patience=0)
    enc = settings.encoder()
    qa, ca, ua, _ = _toy(30, seed=1)
    qb, cb, ub, _ = _toy(20, seed=2)
    cb = [[f"{t} w1 w2 w3 w4 w5" for t in row] for row in cb]  # longer contexts: a longer T
    sa, sb = encode_pairs(enc, qa, ca, 1), encode_pairs(enc, qb, cb, 1)
    sa.key, sb.key = "a", "b"
    assert sb.hidden.shape[2] > sa.hidden.shape[2]
    srcs = [Source("a", sa, ua, ua, qa), Source("b", sb, ub, ub, qb, weight=2.0)]
    st = stack_sources(srcs, 0.2, 0)
    assert len(st["x"]) == 50 and st["x"].hidden.shape[2] == sb.hidden.shape[2]
    assert not st["x"].mask[:30, :, sa.hidden.shape[2]:].any()  # padding is masked out
    r = fit_sources(srcs, 0, settings, TrainerConfig(), tmp_path / "multi", {})
    assert type(r.module).__name__ == "CrossRouter" and r.route(sb).level.shape == (20,)
