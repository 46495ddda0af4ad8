"""The MedRAG corpora (Textbooks, StatPearls, PubMed, Wikipedia) as chunk jsonl under ``DATA_DIR/medrag``.

``mogg-prepare --corpus NAME`` puts ``DATA_DIR/medrag/NAME/chunk/*.jsonl`` in place and writes
``DATA_DIR/medrag/NAME/MANIFEST.json`` (size and sha256 of every file); ``--verify`` checks them.

* Textbooks, PubMed and Wikipedia come from the MedRAG datasets on the Hugging Face hub
  (``MedRAG/<name>``, folder ``chunk/``) through ``huggingface_hub``: a file is fetched only when
  missing or wrong, downloads resume, and each file is checked against the hub's sha256.
* StatPearls is not shipped as chunks (licence): the NCBI Bookshelf archive is downloaded
  (resumable) and its NXML articles chunked here (:mod:`mogg.data.statpearls`).
* ``--from-local DIR`` takes a local copy instead (the ``chunk/`` folder, its jsonl files, or for
  StatPearls the archive or its ``.nxml`` files); nothing is fetched, a ``MANIFEST.json`` beside
  the copy is checked. Every step streams files: PubMed is never held in memory.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from mogg.core.artifacts import atomic_path, sha256_file
from mogg.data.errors import DataError

log = logging.getLogger(__name__)

HUB_REPOS = {"textbooks": "MedRAG/textbooks", "pubmed": "MedRAG/pubmed", "wikipedia": "MedRAG/wikipedia"}
STATPEARLS_URL = "https://ftp.ncbi.nlm.nih.gov/pub/litarch/3d/12/statpearls_NBK430685.tar.gz"
CORPORA = ("textbooks", "statpearls", "pubmed", "wikipedia")
MANIFEST = "MANIFEST.json"


def corpus_root(data_dir: Path, name: str) -> Path:
    if name not in CORPORA:
        raise ValueError(f"unknown MedRAG corpus {name!r}; choose from {', '.join(CORPORA)}")
    return Path(data_dir) / "medrag" / name


def _entry(path: Path, source: str) -> dict:
    return {"size": path.stat().st_size, "sha256": sha256_file(path), "source": source}


def _write_manifest(root: Path, files: dict[str, dict]) -> None:
    with atomic_path(root / MANIFEST) as tmp:
        tmp.write_text(json.dumps({"files": files}, indent=1, sort_keys=True))


def _read_manifest(root: Path) -> dict[str, dict]:
    p = root / MANIFEST
    if not p.is_file():
        return {}
    try:
        return json.loads(p.read_text())["files"]
    except (ValueError, KeyError) as e:
        raise DataError(p, f"corrupt manifest ({e}); delete it and prepare the corpus again") from None


def verify_corpus(data_dir: Path, name: str) -> list[str]:
    """Problems with ``DATA_DIR/medrag/NAME`` (missing manifest or chunks, size or sha256 mismatch)."""
    root = corpus_root(data_dir, name)
    files = _read_manifest(root)
    if not files:
        return [f"{root}: no {MANIFEST}; run `mogg-prepare --corpus {name}`"]
    problems = []
    for rel, e in sorted(files.items()):
        p = root / rel
        if not p.is_file():
            problems.append(f"{p}: missing")
        elif p.stat().st_size != e["size"] or sha256_file(p) != e["sha256"]:
            problems.append(f"{p}: size or sha256 differs from {MANIFEST}")
    extra = sorted(str(p.relative_to(root)) for p in (root / "chunk").glob("*.jsonl")) if (root / "chunk").is_dir() else []
    problems += [f"{root / x}: not in {MANIFEST}" for x in extra if x not in files]
    return problems


def _git_blob_sha1(path: Path) -> str:
    h = hashlib.sha1(f"blob {path.stat().st_size}\0".encode())
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _matches(p: Path, remote) -> bool:
    """Whether a local file is the hub's file: size, then the LFS sha256 (or the git blob sha1)."""
    if not p.is_file() or p.stat().st_size != remote.size:
        return False
    lfs = getattr(remote, "lfs", None)
    return sha256_file(p) == lfs.sha256 if lfs else _git_blob_sha1(p) == remote.blob_id


def fetch_hub_corpus(data_dir: Path, name: str, revision: str | None = None, api=None,
                     download: Callable | None = None) -> list[str]:
    """Fetch ``chunk/*.jsonl`` of ``MedRAG/<name>`` from the hub, verifying every file; returns problems."""
    from huggingface_hub import HfApi, hf_hub_download
    from huggingface_hub.hf_api import RepoFile

    root = corpus_root(data_dir, name)
    repo = HUB_REPOS.get(name)
    if repo is None:
        raise ValueError(f"{name} is not on the hub as chunks; it is prepared from its source archive")
    api, download = api or HfApi(), download or hf_hub_download
    remote = [f for f in api.list_repo_tree(repo, "chunk", recursive=True, expand=True, repo_type="dataset", revision=revision)
              if isinstance(f, RepoFile) and f.path.endswith(".jsonl")]
    if not remote:
        return [f"{repo}: no chunk/*.jsonl on the hub"]
    have, files, problems = _read_manifest(root), {}, []
    for f in remote:
        dest = root / f.path
        if have.get(f.path, {}).get("sha256") and _matches(dest, f):
            files[f.path] = have[f.path]
            continue
        path = Path(download(repo, f.path, repo_type="dataset", revision=revision, local_dir=str(root)))  # resumable
        if not _matches(path, f):
            path.unlink(missing_ok=True)
            problems.append(f"{dest}: fetched from {repo} but its checksum does not match the hub's; removed")
            continue
        files[f.path] = _entry(path, f"hf://datasets/{repo}/{f.path}")
        log.info("fetched %s (%d bytes)", f.path, f.size)
    _write_manifest(root, files)
    return problems


def fetch_statpearls(data_dir: Path, url: str = STATPEARLS_URL, progress: bool = True) -> list[str]:
    """Download the NCBI StatPearls archive (resumable) and chunk its articles; returns problems."""
    import requests

    from mogg.data.download import RemoteFile, download
    from mogg.data.statpearls import chunk_statpearls

    root = corpus_root(data_dir, "statpearls")
    archive = root / Path(url).name
    if not archive.is_file():
        with requests.head(url, allow_redirects=True, timeout=60) as r:
            size = int(r.headers.get("Content-Length", 0))
        if size <= 0:
            return [f"{url}: the server gives no size; download it by hand and use --from-local"]
        download(url, archive, RemoteFile(archive.name, size, None), progress=progress)  # NCBI updates it: no pinned sha256
    return _chunked_statpearls(root, archive, f"{url} sha256 {sha256_file(archive)}", chunk_statpearls, progress)


def _chunked_statpearls(root: Path, source: Path, provenance: str, chunk, progress: bool) -> list[str]:
    tmp = root / ".chunk.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    chunk(source, tmp, progress)
    shutil.rmtree(root / "chunk", ignore_errors=True)
    os.replace(tmp, root / "chunk")
    _write_manifest(root, {str(p.relative_to(root)): _entry(p, provenance) for p in sorted((root / "chunk").glob("*.jsonl"))})
    return []


def copy_local_corpus(data_dir: Path, name: str, source: str | os.PathLike, symlink: bool = False,
                      progress: bool = True) -> list[str]:
    """Place a local copy of a MedRAG corpus (offline); returns problems."""
    from mogg.data.statpearls import chunk_statpearls

    src, root = Path(source), corpus_root(data_dir, name)
    if not src.exists():
        return [f"{src}: no such file or directory"]
    jsonl_dir = src / "chunk" if (src / "chunk").is_dir() else src
    jsonl = sorted(jsonl_dir.glob("*.jsonl")) if src.is_dir() else []
    root.mkdir(parents=True, exist_ok=True)
    if name == "statpearls" and not jsonl:  # the archive or its .nxml files: chunk them here
        return _chunked_statpearls(root, src, f"local {src.resolve()}", chunk_statpearls, progress)
    if not jsonl:
        return [f"{src}: no *.jsonl chunk files (expected {src}/chunk/*.jsonl or {src}/*.jsonl)"]
    known = _read_manifest(jsonl_dir.parent if jsonl_dir.name == "chunk" else jsonl_dir)
    files, problems = {}, []
    (root / "chunk").mkdir(exist_ok=True)
    for f in jsonl:
        rel = f"chunk/{f.name}"
        dest = root / rel
        if dest.is_symlink() or dest.exists():
            dest.unlink()
        if symlink:
            dest.symlink_to(f.resolve())
        else:
            tmp = dest.with_name(f".{dest.name}.part")
            shutil.copyfile(f, tmp)
            os.replace(tmp, dest)
        e = _entry(dest, f"local {f.resolve()}")
        if rel in known and known[rel]["sha256"] != e["sha256"]:
            dest.unlink()
            problems.append(f"{f}: sha256 differs from the {MANIFEST} beside it; not placed")
            continue
        files[rel] = e
    _write_manifest(root, files)
    log.info("%s: %d chunk files from %s", name, len(files), src)
    return problems


def prepare_corpus(data_dir: Path, name: str, from_local: str | None = None, symlink: bool = False,
                   verify_only: bool = False, progress: bool = True) -> list[str]:
    """``mogg-prepare --corpus NAME``: place and verify one MedRAG corpus; returns problems."""
    if verify_only:
        return verify_corpus(data_dir, name)
    if from_local:
        problems = copy_local_corpus(data_dir, name, from_local, symlink, progress)
    elif name == "statpearls":
        problems = fetch_statpearls(data_dir, progress=progress)
    else:
        problems = fetch_hub_corpus(data_dir, name)
    return problems or verify_corpus(data_dir, name)
