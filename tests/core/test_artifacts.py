import json

import numpy as np
import pytest

from mogg.core.artifacts import (
    ArtifactError,
    cached,
    config_hash,
    read_manifest,
    write_artifact,
)
from mogg.data.records import Document
from mogg.ladders import Ladder, MoGLadderBuilder


def _write(d, cfg):
    return write_artifact(d, lambda t: np.save(t / "x.npy", np.arange(5)), cfg, inputs={"f": 1})


def test_manifest_and_verification(tmp_path):
    d = _write(tmp_path / "a", {"k": 1, "nested": {"v": 2}})
    m = read_manifest(d, {"k": 1, "nested": {"v": 2}})
    assert m["config_hash"] == config_hash({"nested": {"v": 2}, "k": 1})  # key order does not matter
    assert set(m["files"]) == {"x.npy"} and "numpy" in m["versions"]
    with pytest.raises(ArtifactError, match="differing fields: nested.v"):
        read_manifest(d, {"k": 1, "nested": {"v": 3}})


def test_corrupt_and_partial_refused(tmp_path):
    d = _write(tmp_path / "a", {"k": 1})
    (d / "x.npy").write_bytes(b"garbage")
    with pytest.raises(ArtifactError, match="sha256"):
        read_manifest(d)
    d2 = _write(tmp_path / "b", {"k": 1})
    (d2 / "x.npy").unlink()
    with pytest.raises(ArtifactError, match="missing"):
        read_manifest(d2)
    partial = tmp_path / "c"
    partial.mkdir()
    (partial / "x.npy").write_bytes(b"half")
    with pytest.raises(ArtifactError, match="no manifest"):
        read_manifest(partial)


def test_failed_writer_leaves_nothing(tmp_path):
    def boom(t):
        (t / "half.txt").write_text("x")
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        write_artifact(tmp_path / "a", boom, {"k": 1})
    assert list(tmp_path.iterdir()) == []


def test_cached_ladder_built_once_and_rebuilt_on_change(tmp_path):
    docs = [Document("d1", "", "One. Two. Three."), Document("d2", "T", "Four. Five.")]
    calls = []

    def get(builder):
        key = {"builder": builder.config(), "corpus": [d.id for d in docs]}

        def build():
            calls.append(1)
            return builder.build(docs)

        return cached(tmp_path, "ladder", key, build, lambda lad, d: lad.save(d), Ladder.load)

    a = get(MoGLadderBuilder(n_levels=2))
    b = get(MoGLadderBuilder(n_levels=2))
    assert len(calls) == 1 and a.texts(1) == b.texts(1)
    get(MoGLadderBuilder(n_levels=3))
    assert len(calls) == 2 and len(list((tmp_path / "ladder").iterdir())) == 2
    # a corrupted cached artifact is refused, not silently used
    d = next(p for p in (tmp_path / "ladder").iterdir() if json.loads((p / "manifest.json").read_text())["config"]["builder"]["n_levels"] == 2)
    (d / "units.jsonl").write_text("[]\n")
    with pytest.raises(ArtifactError):
        get(MoGLadderBuilder(n_levels=2))


def test_a_store_without_folder_flocks_is_named_in_one_line(tmp_path, monkeypatch):
    """On NFS an exclusive flock of the store folder fails (EBADF: the client emulates flock with a
    POSIX lock, which needs a descriptor open for writing); the error names the folder and the ways
    out (docs/cluster.md). On this machine's local file system the lock is taken (every other test)."""
    import errno
    import fcntl

    from mogg.core.artifacts import ArtifactError, write_artifact

    def nfs_flock(fd, op):
        raise OSError(errno.EBADF, "Bad file descriptor")

    monkeypatch.setattr(fcntl, "flock", nfs_flock)
    with pytest.raises(ArtifactError, match=f"cannot lock the artifact store folder {tmp_path / 'kind'}.*local_lock=flock"):
        write_artifact(tmp_path / "kind" / "abc", lambda d: (d / "x.json").write_text("{}"), {"a": 1})
    assert not [p for p in (tmp_path / "kind").iterdir()]  # the staging folder is removed
