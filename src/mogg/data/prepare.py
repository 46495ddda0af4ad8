"""Fetch MIRAGE (``benchmark.json`` and the raw sets it is built from) into a data directory;
with ``--corpus``, a MedRAG corpus instead (:mod:`mogg.data.medrag`).

Run ``mogg-prepare`` (or ``python -m mogg.data.prepare``); ``--help`` lists the options.

Source: the MIRAGE GitHub repository (``DEFAULT_BASE_URL``), which holds ``benchmark.json`` at
its root and the raw PubMedQA, MedQA and MedMCQA files under ``rawdata/`` (laid out as in
``MIRAGE_FILES``). The MMLU csvs are fetched from the same ``rawdata/mmlu/data/test/`` layout,
the layout of the reference copy this table was computed from. PubMedQA's own repository is a
second source for ``test_set.json``. Every file is checked against the size and sha256 in
``MIRAGE_FILES``, whichever way it arrives (download, ``--from-local`` copy or symlink); a file
that fails is reported and removed. Downloads resume from a ``.part`` file with HTTP Range.

Length (over ~350 lines): ``mogg-prepare`` end to end: the MIRAGE file list and checksums, fetch,
copy or symlink, verification and the command line.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
from collections.abc import Iterable
from pathlib import Path

import requests

from mogg.core.artifacts import sha256_file
from mogg.core.flags import existing_path, nonnegative_int, positive_float
from mogg.data.download import DownloadError, RemoteFile, download
from mogg.data.errors import DataError

logger = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://raw.githubusercontent.com/Teddy-XiongGZ/MIRAGE/main/"
ENV_DATA_DIR = "MOGG_DATA_DIR"


_MMLU = "rawdata/mmlu/data/test/"

# Sizes and sha256 of the reference copy (shared/data/mirage), i.e. MIRAGE as the project uses it.
MIRAGE_FILES: tuple[RemoteFile, ...] = (
    RemoteFile("benchmark.json", 4296735, "6f7f08c64cd2efe02a5d0c247229813c90db345d9dd6e3a451b5d24146d0f8fa"),
    RemoteFile(
        "rawdata/pubmedqa/data/test_set.json",
        1297358,
        "f420f49d97516329d81f62d7d454055e3a063dbd0913ebaff915993bb321cbab",
        mirrors=("https://raw.githubusercontent.com/pubmedqa/pubmedqa/master/data/test_set.json",),
    ),
    RemoteFile(
        "rawdata/medmcqa/data/dev.json",
        2594517,
        "a2b5f53890f4e742b728378fb847bc5338088d48ea01218676379f587270af31",
    ),
    RemoteFile(
        "rawdata/medqa/data_clean/questions/US/4_options/phrases_no_exclude_test.jsonl",
        2075679,
        "c3b905ccfa66152dc25afbcb2c10e86c0bdb208824f0658fcdb2c040f60a2beb",
    ),
    RemoteFile(
        _MMLU + "anatomy_test.csv", 29844, "966dfd5c4579885ebdb8c05d6754ae5834f672632586d8595be3c0f9360e6f4e"
    ),
    RemoteFile(
        _MMLU + "clinical_knowledge_test.csv",
        56562,
        "06a1ea973000d5ef5d2664c4ac1c68d0423f1cab6b3b682be7942633740811f1",
    ),
    RemoteFile(
        _MMLU + "college_biology_test.csv",
        45351,
        "e1204cb9d19887ea266145f038b5d4cc1fbc33d7efce186259c4ecca1cbe3119",
    ),
    RemoteFile(
        _MMLU + "college_medicine_test.csv",
        78334,
        "9c533cfff89edaa317b2e79bbabcdd5e2e522e019679cb4a6475e5f2a1861b1e",
    ),
    RemoteFile(
        _MMLU + "medical_genetics_test.csv",
        18520,
        "cc30c698e94f12c00e610a39c62d1a1d9587fa53c005359317346081f722c5e6",
    ),
    RemoteFile(
        _MMLU + "professional_medicine_test.csv",
        211585,
        "a034bf0dda10cb0848bdd3097eb1547d61ca2dac9e9b871563691621c38d51e9",
    ),
)


# COVID-QA (deepset, release 2020-04-23; Apache 2.0): SQuAD format, 98 CORD-19 papers, 1,380 questions.
COVIDQA_BASE_URL = "https://raw.githubusercontent.com/deepset-ai/COVID-QA/master/data/question-answering/"
COVIDQA_FILES: tuple[RemoteFile, ...] = (
    RemoteFile("200423_covidQA.json", 2697757, "ab310b4e39f726e087c8fa3d1787c73771dacddc584977204ebe3cc889ee1264"),
)

# PubMedQA-L (Jin et al. 2019; MIT): the 1,000 expert-labelled questions with their abstracts' contexts,
# of which PubMedQA*'s 500 test questions are the other half (conf/questions/pubmedqa_l_snippets.yaml).
PUBMEDQA_L_BASE_URL = "https://raw.githubusercontent.com/pubmedqa/pubmedqa/master/data/"
PUBMEDQA_L_FILES: tuple[RemoteFile, ...] = (
    RemoteFile("ori_pqal.json", 2584787, "8b3276be8942ebbd77f3ddcda12c1749bf0e490045a736fd8438ee40cf37a41d"),
)

# --dataset NAME: (folder under the data directory, base URL, files, the file that marks the folder)
DATASETS: dict[str, tuple[str, str, tuple[RemoteFile, ...], str]] = {
    "mirage": ("mirage", DEFAULT_BASE_URL, MIRAGE_FILES, "benchmark.json"),
    "covidqa": ("covidqa", COVIDQA_BASE_URL, COVIDQA_FILES, "200423_covidQA.json"),
    "pubmedqa_l": ("pubmedqa_l", PUBMEDQA_L_BASE_URL, PUBMEDQA_L_FILES, "ori_pqal.json"),
}


# ---------------------------------------------------------------------------------------------
# Locations


def resolve_data_dir(data_dir: str | os.PathLike | None = None) -> Path:
    """The data directory: ``data_dir`` if given, else ``$MOGG_DATA_DIR``, else ``./data``."""
    if data_dir is not None:
        return Path(data_dir)
    return Path(os.environ.get(ENV_DATA_DIR) or "data")


def mirage_dir(data_dir: str | os.PathLike | None = None) -> Path:
    """``<data dir>/mirage``, checked to hold ``benchmark.json`` (see :func:`resolve_data_dir`)."""
    root = resolve_data_dir(data_dir) / "mirage"
    if not (root / "benchmark.json").is_file():
        raise DataError(
            root / "benchmark.json",
            "MIRAGE benchmark not found; run `mogg-prepare --data-dir "
            f"{resolve_data_dir(data_dir)}` (python -m mogg.data.prepare) to fetch it, "
            f"or set {ENV_DATA_DIR} to a data directory that holds mirage/",
        )
    return root


# ---------------------------------------------------------------------------------------------
# Checks


def check_file(path: str | os.PathLike, spec: RemoteFile) -> str | None:
    """What is wrong with ``path`` compared with ``spec`` (size, sha256), or None if it matches."""
    path = Path(path)
    if not path.is_file():
        return "missing"
    size = path.stat().st_size
    if size != spec.size:
        return f"size {size} bytes, expected {spec.size}"
    digest = sha256_file(path)
    if digest != spec.sha256:
        return f"sha256 {digest}, expected {spec.sha256}"
    return None


def _discard(path: Path) -> None:
    """Remove a file or a (possibly dangling) symlink, never its target."""
    if path.is_symlink() or path.exists():
        path.unlink()


def verify_mirage(
    data_dir: str | os.PathLike | None = None, files: Iterable[RemoteFile] = MIRAGE_FILES, subdir: str = "mirage"
) -> list[str]:
    """Check every file under ``<data dir>/<subdir>``; returns the problems (empty when all match)."""
    root = resolve_data_dir(data_dir) / subdir
    problems = []
    for spec in files:
        problem = check_file(root / spec.path, spec)
        if problem:
            problems.append(f"{root / spec.path}: {problem}")
            logger.error("%s: %s", root / spec.path, problem)
        else:
            logger.info("ok: %s", spec.path)
    return problems


def fetch_mirage(
    data_dir: str | os.PathLike | None = None,
    base_url: str = DEFAULT_BASE_URL,
    files: Iterable[RemoteFile] = MIRAGE_FILES,
    *,
    timeout: float = 60.0,
    retries: int = 5,
    backoff: float = 1.0,
    progress: bool = True,
    use_mirrors: bool = True,
    subdir: str = "mirage",
) -> list[str]:
    """Download every missing or invalid file into ``<data dir>/<subdir>``; returns the problems."""
    root = resolve_data_dir(data_dir) / subdir
    problems: list[str] = []
    with requests.Session() as session:
        for spec in files:
            dest = root / spec.path
            if dest.is_symlink() or dest.exists():
                problem = check_file(dest, spec)
                if problem is None:
                    logger.info("ok (present): %s", spec.path)
                    continue
                logger.warning("%s: %s; fetching it again", dest, problem)
                _discard(dest)
            urls = [base_url.rstrip("/") + "/" + spec.path, *(spec.mirrors if use_mirrors else ())]
            errors = []
            for url in urls:
                try:
                    download(
                        url,
                        dest,
                        spec,
                        session=session,
                        timeout=timeout,
                        retries=retries,
                        backoff=backoff,
                        progress=progress,
                    )
                except (DownloadError, DataError) as exc:
                    logger.warning("%s", exc)
                    errors.append(str(exc))
                    continue
                logger.info("fetched: %s", spec.path)
                break
            else:
                problems.append(f"{dest}: " + " | ".join(errors))
                logger.error("%s: could not fetch a valid copy", dest)
    return problems


# ---------------------------------------------------------------------------------------------
# Local copy


def copy_mirage(
    source_dir: str | os.PathLike,
    data_dir: str | os.PathLike | None = None,
    symlink: bool = False,
    files: Iterable[RemoteFile] = MIRAGE_FILES,
    subdir: str = "mirage",
    marker: str = "benchmark.json",
) -> list[str]:
    """Copy (or symlink) a dataset from a local copy, verifying every file; returns the problems.

    ``source_dir`` is the dataset's root (holding ``marker``, e.g. MIRAGE's ``benchmark.json``) or
    a data directory holding ``<subdir>/``. Files that fail their checksum are reported and not placed.
    """
    src_root = Path(source_dir)
    if not (src_root / marker).exists() and (src_root / subdir / marker).exists():
        src_root = src_root / subdir
    root = resolve_data_dir(data_dir) / subdir
    if root.exists() and src_root.resolve() == root.resolve():
        logger.info("source and destination are the same directory; verifying only")
        return verify_mirage(root.parent, files, subdir)
    problems: list[str] = []
    for spec in files:
        src, dest = src_root / spec.path, root / spec.path
        if (dest.is_symlink() or dest.exists()) and check_file(dest, spec) is None:
            logger.info("ok (present): %s", spec.path)
            continue
        _discard(dest)  # whatever is there is wrong: never leave it in place
        dest.parent.mkdir(parents=True, exist_ok=True)
        if symlink:
            problem = check_file(src, spec)
            if problem is None:
                dest.symlink_to(src.resolve())
        else:
            tmp = dest.with_name(dest.name + ".part")
            problem = "missing" if not src.is_file() else None
            if problem is None:
                shutil.copyfile(src, tmp)
                problem = check_file(tmp, spec)
                if problem is None:
                    os.replace(tmp, dest)
                else:
                    tmp.unlink()
        if problem:
            problems.append(f"{src}: {problem}")
            logger.error("%s: %s; not copied", src, problem)
        else:
            logger.info("%s: %s", "linked" if symlink else "copied", spec.path)
    return problems


# ---------------------------------------------------------------------------------------------
# CLI


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mogg-prepare",
        description="Fetch MIRAGE (benchmark.json + raw PubMedQA/MedQA/MedMCQA/MMLU files) into "
        "DATA_DIR/mirage, verifying sizes and sha256 checksums. Downloads resume from .part files.",
    )
    parser.add_argument("--data-dir", help=f"data directory (default: ${ENV_DATA_DIR}, else ./data)")
    parser.add_argument(
        "--corpus", action="append", choices=("textbooks", "statpearls", "pubmed", "wikipedia"),
        help="a MedRAG corpus to prepare under DATA_DIR/medrag/ instead of MIRAGE (repeatable); "
        "with --from-local DIR, DIR is a local copy of it (chunk jsonl; StatPearls: its archive or .nxml files)",
    )
    parser.add_argument(
        "--dataset", choices=sorted(DATASETS), default="mirage",
        help="which question set to prepare under DATA_DIR/<dataset>/ (default: %(default)s; "
        "covidqa: deepset's COVID-QA 200423_covidQA.json; pubmedqa_l: PubMedQA-L's ori_pqal.json)",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--from-local", metavar="DIR", type=existing_path, help="copy from a local MIRAGE copy instead of downloading"
    )
    mode.add_argument("--verify", action="store_true", help="only check the files already in place")
    parser.add_argument(
        "--symlink", action="store_true", help="with --from-local: symlink instead of copying"
    )
    parser.add_argument(
        "--base-url", default=None, help="base URL of the dataset's tree (default: its public repository)"
    )
    parser.add_argument("--no-mirrors", action="store_true", help="do not try the per-file fallback URLs")
    parser.add_argument("--timeout", type=positive_float, default=60.0, help="per-request timeout in seconds")
    parser.add_argument("--retries", type=nonnegative_int, default=5, help="retries per file for transient failures")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    return parser


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; returns 0 when every file is in place and verified, else 1."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.symlink and not args.from_local:
        parser.error("--symlink needs --from-local")
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(name)s: %(message)s"
    )
    from mogg.core.secrets import remember_environment, scrub_logs

    remember_environment()
    scrub_logs()  # a --base-url http://user:PW@host/... never reaches a retry warning or an error line
    data_dir = resolve_data_dir(args.data_dir)
    if args.corpus:
        from mogg.data.medrag import prepare_corpus

        problems = []
        for name in args.corpus:
            problems += prepare_corpus(data_dir, name, args.from_local, args.symlink, args.verify, not args.no_progress)
        for p in problems:
            logger.error("%s", p)
        if not problems:
            logger.info("MedRAG corpora %s ready and verified under %s", ", ".join(args.corpus), data_dir / "medrag")
        return 1 if problems else 0
    subdir, base_url, files, marker = DATASETS[args.dataset]
    if args.verify:
        problems = verify_mirage(data_dir, files, subdir)
    elif args.from_local:
        problems = copy_mirage(args.from_local, data_dir, symlink=args.symlink, files=files, subdir=subdir,
                               marker=marker)
    else:
        problems = fetch_mirage(
            data_dir,
            args.base_url or base_url,
            files,
            timeout=args.timeout,
            retries=args.retries,
            progress=not args.no_progress,
            use_mirrors=not args.no_mirrors,
            subdir=subdir,
        )
    if problems:
        logger.error("%d file(s) missing or invalid under %s", len(problems), data_dir / subdir)
        return 1
    logger.info("%s ready and verified at %s", args.dataset, data_dir / subdir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
