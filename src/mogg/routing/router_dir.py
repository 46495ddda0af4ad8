"""A trained router as a model you can apply: weights + everything needed to use them safely.

A router directory (an artifact: written atomically, sha256 of every file in ``manifest.json``)
holds ``router.safetensors`` (the MLP and its input standardisation), ``router.json`` (the spec:
feature recipe, level names, objective, decision rule, prior, the ladder/retriever it was trained
on, training provenance and the components' configs) and ``train_questions.json`` (hashes of the
training questions, so evaluating a router on questions it saw is caught). Loading verifies the
checksums and that every weight is finite, naming the file on any failure.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from mogg.core.artifacts import ArtifactError, artifact_lock, canonical_json, diff_fields, read_manifest, write_artifact
from mogg.core.seal import check_seal, seal_holder
from mogg.routing.inputs import objectives as obj
from mogg.routing.inputs.features import FeatureRecipe
from mogg.routing.kinds.registry import network_class
from mogg.routing.profiles import ProfileSpace
from mogg.routing.spec_check import MEANING, check_spec, meaning

log = logging.getLogger(__name__)

FORMAT = "mogg-router/2"


class RouterMismatch(ValueError):
    """A router applied to a ladder, retriever or feature setting it was not trained for."""


def question_hash(text: str) -> str:
    """Hash of a question's normalised text (case and whitespace folded), 16 hex digits."""
    return hashlib.sha256(" ".join(text.lower().split()).encode("utf-8")).hexdigest()[:16]


@dataclass
class Routing:
    """A router's decisions for a batch of questions (all arrays have Q rows).

    ``weights`` follow the router's configured decision rule; ``argmax_weights`` and
    ``fallback_weights`` are both rules, ``routed`` says where the fallback rule kept the
    router's choice; ``level`` is the level eq. 2 injects under the configured rule.
    """

    weights: np.ndarray  # float64 [Q, L]
    argmax_weights: np.ndarray  # float64 [Q, L]
    fallback_weights: np.ndarray  # float64 [Q, L]
    routed: np.ndarray  # bool [Q]
    level: np.ndarray  # int64 [Q]
    prior: np.ndarray  # float64 [Q, L]
    logits: np.ndarray  # float64 [Q, L] ([Q, A] for a router over eq. 1 actions: mogg.routing.profiles)
    fold: np.ndarray | None = None  # int64 [Q] for cross-fitted predictions
    cost_ms: dict | None = None  # routing ms per question (network; and what reading its inputs took, by the inputs)

    @classmethod
    def empty(cls, n: int, n_levels: int, n_outputs: int | None = None) -> "Routing":
        """``n_outputs``: the logits' width when it is not ``n_levels`` (a router over eq. 1 actions)."""
        z = np.zeros((n, n_levels))
        return cls(z.copy(), z.copy(), z.copy(), np.zeros(n, bool), np.full(n, -1), z.copy(),
                   np.zeros((n, n_outputs or n_levels)), np.full(n, -1, dtype=np.int64))

    def put(self, rows: np.ndarray, other: "Routing", fold: int) -> None:
        for name in ("weights", "argmax_weights", "fallback_weights", "routed", "level", "prior", "logits"):
            getattr(self, name)[rows] = getattr(other, name)
        self.fold[rows] = fold


@dataclass
class TrainedRouter:
    """A router network (a :class:`mogg.routing.kinds.base.RouterNetwork` of any kind) plus its spec (see module doc)."""

    module: object
    spec: dict
    train_question_hashes: list[str] = field(default_factory=list)

    # -- what it expects --------------------------------------------------------------------
    @property
    def recipe(self) -> FeatureRecipe:
        return FeatureRecipe.from_json(self.spec["recipe"])

    @property
    def levels(self) -> list[str]:
        return list(self.spec["levels"])

    @property
    def objective(self) -> str:
        return self.spec["objective"]

    @property
    def decision(self) -> dict:
        return self.spec["decision"]

    @property
    def source_name(self) -> str:
        return self.spec.get("provenance", {}).get("questions_name") or "?"

    def check_compatible(self, level_names: list[str], ladder_key: dict, retriever_config: dict, k_r: int) -> list[str]:
        """Raise :class:`RouterMismatch` where this router cannot route over the given ladder and
        retriever; return notes for differences it tolerates (another corpus with the same levels)."""
        where = self.spec.get("_dir", "this router")
        if list(level_names) != self.levels:
            raise RouterMismatch(
                f"{where} was trained for levels {self.levels}; this ladder has {list(level_names)}. "
                "A router only routes over the ladder it was trained with (same builder config)."
            )
        compat = self.spec["compat"]
        want_b, got_b = _builders(compat["ladder_key"]), _builders(ladder_key)
        if want_b != got_b:
            fields = diff_fields({"b": want_b}, {"b": got_b})
            raise RouterMismatch(f"{where} was trained on a ladder built differently; differing fields: {', '.join(fields)}")
        if compat["retriever"] != retriever_config:
            fields = diff_fields(compat["retriever"], retriever_config)
            raise RouterMismatch(f"{where} was trained with another retriever; differing fields: {', '.join(fields)}")
        if int(compat["k_r"]) != int(k_r):
            raise RouterMismatch(f"{where} was trained with k_r={compat['k_r']}; this run retrieves k_r={k_r}")
        notes = []
        if _corpora(compat["ladder_key"]) != _corpora(ladder_key):
            notes.append(f"{where} was trained over another corpus (same ladder builder): its retrieval features are "
                         "applied to a corpus they were not fitted on")
            log.warning(notes[-1])
        return notes

    def overlap(self, questions: list[str]) -> int:
        """How many of ``questions`` this router was trained on (by normalised text)."""
        seen = set(self.train_question_hashes)
        return sum(question_hash(q) in seen for q in questions)

    # -- applying it --------------------------------------------------------------------------
    @property
    def profile_space(self) -> ProfileSpace | None:
        """The eq. 1 actions its outputs score (:mod:`mogg.routing.profiles`), None for a level router."""
        profiles = self.spec.get("profiles")
        return ProfileSpace(tuple(profiles), len(self.levels)) if profiles else None

    def logits(self, x) -> np.ndarray:
        """z float64 [Q, L or A] for router inputs ``x`` (what :meth:`inputs` gives)."""
        return self.module.logits(x)

    def inputs(self, features, questions, contexts, artifacts: Path | None = None):
        """What this router reads for ``questions`` (its network's :meth:`route_inputs`):
        ``features()`` the feature matrix by its own recipe, ``contexts()`` each level's fixed
        top-k texts [Q][L], each computed only if the network reads it."""
        return type(self.module).route_inputs(self.spec["network"], features, questions, contexts, artifacts)

    def route_notes(self) -> list[str]:
        """Report lines on the last :meth:`route` (none for a plain router)."""
        return []

    def route(self, x, decision: str | None = None) -> Routing:
        """Decisions for router inputs ``x`` (:meth:`inputs`: a feature matrix [Q, D] by
        :attr:`recipe` for the MLP)."""
        err = self.module.input_error(x)
        if err is not None:
            raise RouterMismatch(err)
        z = self.logits(x)
        if not np.isfinite(z).all():
            rows = np.flatnonzero(~np.isfinite(z).all(axis=1))
            raise FloatingPointError(
                f"router {self.spec.get('_dir', '(in memory)')}: non-finite outputs for {len(rows)} of {len(z)} "
                f"question(s) (first row {rows[0]}); its inputs or weights are out of range: retrain it")
        return self._decide(z, decision)

    def _decide(self, z: np.ndarray, decision: str | None, keep: np.ndarray | None = None) -> Routing:
        """Routing from outputs ``z`` [Q, L or A] under ``decision`` (default: the router's rule);
        ``keep`` [Q] bool: questions the router may route at all (elsewhere its fallback, under
        either rule: a transfer router's support check, :mod:`mogg.routing.fitting.experts`)."""
        d = self.decision
        rule = decision or d["rule"]
        space = self.profile_space
        t = float(self.spec.get("temperature", 1.0))
        keep = np.ones(len(z), dtype=bool) if keep is None else np.asarray(keep, dtype=bool)
        if space is not None:  # z scores eq. 1 actions: the chosen action's vector is the weights
            _, routed = obj.decide(self.objective, z, t, "fallback", d["fallback_level"], d["margin"])
            routed = routed & keep
            a = np.where(keep, z.argmax(axis=1), d["fallback_level"])
            af = np.where(routed, a, d["fallback_level"])
            wa, wf = space.weights(a), space.weights(af)
            prior = np.broadcast_to(space.weights([int(np.argmax(self.spec["prior"]))]), wa.shape).copy()
            chosen = af if rule == "fallback" else a
            return Routing(wf if rule == "fallback" else wa, wa, wf, routed, space.level(chosen), prior, z)
        wa, _ = obj.decide(self.objective, z, t, "argmax", d["fallback_level"], d["margin"])
        _, routed = obj.decide(self.objective, z, t, "fallback", d["fallback_level"], d["margin"])
        routed = routed & keep
        fixed = np.zeros_like(wa)
        fixed[:, d["fallback_level"]] = 1.0
        wa = np.where(keep[:, None], wa, fixed)
        wf = np.where(routed[:, None], wa, fixed)  # the fallback rule: the router's weights where routed
        w = wf if rule == "fallback" else wa
        level = np.where(keep, z.argmax(axis=1), d["fallback_level"])
        level = np.where(routed, level, d["fallback_level"]) if rule == "fallback" else level
        prior = np.broadcast_to(np.asarray(self.spec["prior"], dtype=np.float64), z.shape).copy()
        return Routing(w, wa, wf, routed, level.astype(np.int64), prior, z)

    # -- persistence ----------------------------------------------------------------------------
    def save(self, directory: Path) -> Path:
        """Write the router directory atomically (with a sha256 manifest)."""
        spec = {k: v for k, v in self.spec.items() if not k.startswith("_")}
        spec["format"] = FORMAT

        def write(tmp: Path) -> None:
            self._write(tmp, spec)
            seal_holder(tmp, "router.json")  # last: the seal covers every other file

        return write_artifact(Path(directory), write, {"format": FORMAT, "fit_key": spec.get("training", {}).get("fit_key")})

    def _write(self, tmp: Path, spec: dict) -> None:
        """The router's files into ``tmp`` (no manifest: :meth:`save`, or a directory holding it).
        The weights file also carries the spec fields that give its outputs their meaning
        (:func:`mogg.routing.spec_check.meaning`): an edit of router.json that reorders or redefines them is refused on load."""
        save_file({k: v.detach().contiguous().cpu() for k, v in self.module.state_dict().items()}, tmp / "router.safetensors",
                  metadata={MEANING: canonical_json(meaning(spec))})
        self._write_spec(tmp, spec)

    def _write_spec(self, tmp: Path, spec: dict) -> None:
        """``router.json`` and ``train_questions.json`` (every router directory has both)."""
        (tmp / "router.json").write_text(json.dumps(spec, indent=1, default=str))
        (tmp / "train_questions.json").write_text(json.dumps(self.train_question_hashes))

    @classmethod
    def load(cls, directory: Path, kinds: dict | None = None) -> "TrainedRouter":
        """Load and verify a router directory (checksums, format, finite weights); a writer
        publishing it at the same moment finishes first (the artifact's shared lock). ``kinds``:
        network kind -> ``loader(directory, spec)`` for routers built of routers
        (:func:`mogg.routing.fitting.experts.load_router`)."""
        with artifact_lock(Path(directory), shared=True):
            return cls._load(Path(directory), kinds or {})

    @classmethod
    def _load(cls, directory: Path, kinds: dict | None = None) -> "TrainedRouter":
        if not (directory / "router.json").is_file():
            raise ArtifactError(f"{directory}: not a router directory (no router.json); train one with `python train.py`")
        read_manifest(directory)  # every file against its sha256: names the corrupt file
        return cls._from_files(directory, kinds)

    @classmethod
    def _from_files(cls, directory: Path, kinds: dict | None = None) -> "TrainedRouter":
        """A router from its files (checksums already verified by the caller). Before anything is
        imported or built: the seal (:mod:`mogg.core.seal`); the network kind is looked up without
        importing what the spec names (:func:`mogg.routing.kinds.registry.network_class`). The
        components it names are checked where they are built (:func:`mogg.core.trusted.build`)."""
        spec = _json_file(directory / "router.json", dict)
        check_seal(directory, "router.json", spec)
        if spec.get("format") != FORMAT:
            raise ArtifactError(f"{directory / 'router.json'}: format {spec.get('format')!r} is not {FORMAT!r}; retrain the router")
        if "network" not in spec:
            raise ArtifactError(f"{directory / 'router.json'}: missing network; not a router spec, retrain it")
        kind = spec["network"].get("kind") if isinstance(spec["network"], dict) else None
        if kind in (kinds or {}):
            return kinds[kind](directory, spec)
        if kind == "experts":
            raise ArtifactError(f"{directory} holds a source-experts router: load it with "
                                "mogg.routing.fitting.experts.load_router (evaluate.py and mogg-route do)")
        # "levels" is written by the application layer (a bare cross-fit has none); when present it
        # must be a list of level names, since check_compatible compares it with the ladder
        levels = spec.get("levels")
        if levels is not None and not (isinstance(levels, list) and all(isinstance(v, str) for v in levels)):
            raise ArtifactError(f"{directory / 'router.json'}: 'levels' must be a list of level names; retrain the router")
        net = spec["network"]
        if not isinstance(net, dict):
            raise ArtifactError(f"{directory / 'router.json'}: 'network' must hold in_dim, n_levels, hidden, dropout")
        network = network_class(net, str(directory / "router.json"))
        need = network.REQUIRED
        if any(k not in net for k in need):
            raise ArtifactError(f"{directory / 'router.json'}: 'network' must hold {', '.join(need)}")
        path = directory / "router.safetensors"
        try:
            state = load_file(path)
            with safe_open(path, framework="pt") as f:
                meta = f.metadata() or {}
        except Exception as e:  # a foreign or truncated file that somehow passed the manifest (SafetensorError)
            raise ArtifactError(f"{path}: cannot be read ({e})") from e
        check_spec(directory, spec, meta.get(MEANING))
        bad = [k for k, v in state.items() if not torch.isfinite(v).all()]
        if bad:
            raise ArtifactError(f"{path}: non-finite values in {', '.join(bad)}; the router is unusable, retrain it")
        for name, std in state.items():  # "std", or "<part>.std" in a network of networks
            if (name == "std" or name.endswith(".std")) and not (std > 0).all():
                raise ArtifactError(f"{path}: input spread '{name}' has {(std <= 0).sum().item()} value(s) <= 0; "
                                    "the router is unusable, retrain it")
        try:
            m = network.from_hparams(net)
        except (TypeError, ValueError, KeyError) as e:
            raise ArtifactError(f"{directory / 'router.json'}: network {net!r} cannot be built ({e}); retrain the router") from e
        try:
            m.load_state_dict(state)
        except RuntimeError as e:
            raise ArtifactError(f"{path}: weights do not fit the network in router.json ({e})") from e
        m.eval()
        spec["_dir"] = str(directory)
        hashes = _json_file(directory / "train_questions.json", list)
        return cls(m, spec, hashes)


def _json_file(path: Path, kind: type):
    """A router directory's JSON file, parsed and of the expected top-level type, or an
    ArtifactError naming it (its manifest may match: a writer that wrote nonsense)."""
    from mogg.core.bounded import read_json

    try:
        obj = read_json(path)  # within the depth and size any router directory has
    except ArtifactError as e:
        raise ArtifactError(f"{e}; the router directory is damaged, retrain it") from None
    if not isinstance(obj, kind):
        raise ArtifactError(f"{path}: expected a JSON {kind.__name__}, got {type(obj).__name__}")
    return obj


def _builders(ladder_key: dict):
    """The builder part(s) of a ladder key (single or multi-corpus)."""
    if "parts" in ladder_key:
        return [p["builder"] for p in ladder_key["parts"]]
    return ladder_key.get("builder")


def _corpora(ladder_key: dict) -> list[str]:
    """The content hashes of a ladder key's corpus files (paths and mtimes may differ per machine)."""
    out: list[str] = []

    def walk(o):
        if isinstance(o, dict):
            for k, v in sorted(o.items()):
                if k == "sha256":
                    out.append(str(v))
                elif k != "builder":
                    walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)

    walk(ladder_key)
    return out
