"""GPU paths against their CPU results. Marked ``gpu``: ``pytest -m gpu`` runs them on a CUDA
machine and skips them cleanly elsewhere; the CPU-only checks at the bottom run everywhere."""

from __future__ import annotations

import numpy as np
import pytest
from fakes import SeededEncoder, crc32_seed

from mogg.retrieval import BM25Retriever, DenseRetriever


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


needs_cuda = pytest.mark.skipif(not _cuda(), reason="no CUDA device")

WORDS = ("insulin glucose diabetes kidney renal liver cardiac heart failure stroke aspirin warfarin bleeding "
         "anemia fever infection sepsis antibiotic asthma lung cancer tumor biopsy pain opioid").split()


def _texts(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, len(WORDS) + 1)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(3, 20)), p=p / p.sum())) for _ in range(n)]


def _FixedEncoder(dim: int = 32):
    """Seeded random unit vectors per text: a model-free encoder for index comparisons."""
    return SeededEncoder(dim, {"name": "fixed", "dim": dim}, seed_of=crc32_seed)


@pytest.mark.gpu
@needs_cuda
def test_bm25_torch_cuda_equals_cpu_kernel():
    docs, queries = _texts(3000), _texts(300, seed=1)
    cpu = BM25Retriever(backend="numba").fit(docs)
    gpu = BM25Retriever(backend="torch", device="cuda").fit(docs)
    s_c, i_c = cpu.search(queries, 10)
    s_g, i_g = gpu.search(queries, 10)
    np.testing.assert_allclose(s_g, s_c, rtol=1e-5, atol=1e-5)
    assert (i_g == i_c).mean() > 0.99  # float32 sums on the GPU may reorder exact ties
    auto = BM25Retriever(backend="auto").fit(docs)
    assert auto._resolved()[0] == "torch"  # auto takes the GPU when one is present


@pytest.mark.gpu
@needs_cuda
def test_dense_torch_cuda_equals_faiss_cpu():
    docs, queries = _texts(2000), _texts(100, seed=2)
    enc = _FixedEncoder()
    cpu = DenseRetriever(enc, backend="faiss", device="cpu").fit(docs)
    gpu = DenseRetriever(enc, backend="torch", device="cuda").fit(docs)
    s_c, i_c = cpu.search(queries, 10)
    s_g, i_g = gpu.search(queries, 10)
    np.testing.assert_allclose(s_g, s_c, atol=1e-5)
    assert np.array_equal(i_g, i_c)  # exact re-ranking of ties makes ids deterministic


@pytest.mark.gpu
@needs_cuda
def test_faiss_gpu_index_equals_cpu(tmp_path):
    faiss = pytest.importorskip("faiss")
    if not hasattr(faiss, "StandardGpuResources") or faiss.get_num_gpus() == 0:
        pytest.skip("this faiss has no GPU support")
    docs, queries = _texts(2000), _texts(100, seed=3)
    enc = _FixedEncoder()
    cpu = DenseRetriever(enc, backend="faiss", device="cpu").fit(docs)
    gpu = DenseRetriever(enc, backend="faiss", device="cuda").fit(docs)
    assert np.array_equal(gpu.search(queries, 10)[1], cpu.search(queries, 10)[1])
    gpu.save(tmp_path)  # a GPU index is written as a CPU index
    back = DenseRetriever(enc, backend="faiss", device="cpu").restore(tmp_path)
    assert np.array_equal(back.search(queries, 10)[1], cpu.search(queries, 10)[1])


@pytest.mark.gpu
@needs_cuda
def test_encoder_cuda_equals_cpu(tmp_path):
    from transformers import BertConfig, BertModel, BertTokenizerFast

    from mogg.encoders import HFEncoder

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    BertTokenizerFast(vocab_file=str(vocab)).save_pretrained(tmp_path)
    BertModel(BertConfig(vocab_size=len(WORDS) + 5, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=24, max_position_embeddings=64)).save_pretrained(tmp_path)
    texts = _texts(50)
    a = HFEncoder(str(tmp_path), max_length=32, device="cpu").encode(texts)
    b = HFEncoder(str(tmp_path), max_length=32, device="cuda").encode(texts)
    np.testing.assert_allclose(a, b, atol=1e-4)


# ---- CPU-side guarantees of the GPU path (run everywhere) ------------------------------------
def test_dense_cuda_request_without_faiss_gpu_is_a_clear_error():
    faiss = pytest.importorskip("faiss")
    if hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0:
        pytest.skip("this machine has a faiss GPU")
    r = DenseRetriever(_FixedEncoder(), backend="faiss", device="cuda").fit(_texts(20))
    with pytest.raises(RuntimeError, match="faiss has no GPU support"):
        r.search(["fever"], 3)


def test_auto_backends_fall_back_to_cpu_without_a_gpu():
    if _cuda():
        pytest.skip("a GPU is present")
    assert BM25Retriever(backend="auto")._resolved() == ("numba", None)
    r = DenseRetriever(_FixedEncoder(), backend="faiss").fit(_texts(20))
    assert r.search(["fever"], 3)[1].shape == (1, 3)  # auto device: the CPU index
