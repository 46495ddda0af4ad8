"""Issue 35: a sweep's jobs never share a run folder, and Hydra's files hold no secret.

Before: every job of `python train.py -m labels=metric,tfidf router.objective=utility,bce seed=0,1,2`
ran as `run_name=default` and replaced the previous job's report (exit 0); a secret in a config file
or in a URL's user-info reached `.hydra/config.yaml`, `hydra.yaml` and `overrides.yaml`.
"""

from __future__ import annotations

import re

import pytest
import yaml
from conftest import ROOT
from omegaconf import OmegaConf
from test_docs import DOCS, _expand_glob, _split_top

from mogg.core.secrets import REDACTED, redact_config, redact_in_place, scrub_argv, secret_values
from mogg.run.sweep import SweepError, derive_run_names, sweep_run_names


def test_jobs_sharing_a_name_get_the_swept_values_that_differ_seed_last():
    jobs = [["seed=0", "labels=metric"], ["seed=1", "labels=metric"], ["seed=0", "labels=tfidf"], ["seed=1", "labels=tfidf"]]
    names = derive_run_names(jobs, ["default"] * 4, ["seed", "labels"])
    assert names == ["default_labels=metric_s0", "default_labels=metric_s1", "default_labels=tfidf_s0",
                     "default_labels=tfidf_s1"]
    # names already distinct per job (an experiment's own run name, or run_name=x_${seed}) are kept
    assert derive_run_names(jobs, ["a_s0", "a_s1", "b_s0", "b_s1"], ["seed", "labels"]) == ["a_s0", "a_s1", "b_s0", "b_s1"]
    # only what differs inside a colliding group is appended; where things go never names a run
    jobs = [["experiment=x", "seed=0", "paths.reports=/r"], ["experiment=x", "seed=1", "paths.reports=/r"],
            ["experiment=y", "seed=0", "paths.reports=/r"]]
    assert derive_run_names(jobs, ["x", "x", "y"], ["experiment", "seed", "paths.reports"]) == ["x_s0", "x_s1", "y"]
    assert derive_run_names([["questions.path=/a/b c.jsonl"], ["questions.path=/d.jsonl"]], ["r", "r"],
                            ["questions.path"]) == ["r_questions.path=a-b-c.jsonl", "r_questions.path=d.jsonl"]


def test_a_sweep_repeating_a_job_is_refused_before_it_starts():
    with pytest.raises(SweepError, match="would both write run 'r'"):
        derive_run_names([["seed=0"], ["seed=0"]], ["r", "r"], ["seed"])


def _documented_sweeps() -> list[tuple[str, list[str]]]:
    """Every `python train.py -m ...` / `evaluate.py -m` command in the docs, as its overrides."""
    import shlex

    out, seen = [], set()
    for doc in DOCS:
        text = re.sub(r"\\\n\s*", " ", doc.read_text())
        for m in re.finditer(r"python (?:train|evaluate)\.py -m ([^`\n]*)", text):
            line = m.group(1).split(" #")[0].split("&&")[0]
            try:
                toks = shlex.split(line)
            except ValueError:  # a command cut by the prose around it
                continue
            args = [t for t in toks if "=" in t and not t.startswith("-")]
            if tuple(args) in seen:  # the same sweep documented twice (a run-times row repeats its page's command)
                continue
            seen.add(tuple(args))
            out.append((f"{doc.name}: {line[:90]}", args))
    return out


SWEEPS = _documented_sweeps()


def test_the_docs_have_sweeps():
    assert len(SWEEPS) >= 10


def _first_and_last(args: list[str]) -> list[str]:
    """The sweep with each comma list (and each glob(), as the experiments it matches) cut to its first and
    last value: the same keys swept, so the same naming decisions (every value of every key composes in
    test_docs.py)."""
    out = []
    for a in args:
        k, _, v = a.partition("=")
        vals = _expand_glob(v) if v.startswith("glob(") else _split_top(v)
        out.append(f"{k}={vals[0]},{vals[-1]}" if len(vals) > 2 and not v.startswith(("[", "{")) else a)
    return out


def _sweep_params():
    """Each documented sweep cut to first and last values (default suite: 916 compositions -> 280), and
    whole (slow suite). Committee sweeps (router=committee router.members=...) train 10-20 routers a job:
    11-13 s each, slow only."""
    for w, a in SWEEPS:
        committee = any(x.startswith("router.members=") for x in a)
        cut = _first_and_last(a)
        if cut != a:
            yield pytest.param(w, cut, id=f"{w} (first and last)", marks=[pytest.mark.slow] if committee else [])
        yield pytest.param(w, a, id=w, marks=[pytest.mark.slow] if committee or cut != a else [])


@pytest.mark.parametrize("where,args", list(_sweep_params()))
def test_every_documented_sweep_gives_each_job_its_own_run(where, args):
    """The sweep as documented, and with debug=tiny (which names every job `debug`): one run per job."""
    from hydra import initialize_config_dir

    for extra in ([], ["debug=tiny"]):
        master = OmegaConf.create({"hydra": {"overrides": {"task": args + extra, "hydra": []},
                                             "job": {"config_name": "config"}}})
        with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
            names = sweep_run_names(master)
        assert len(names) >= 2 and len(set(names.values())) == len(names), names


def test_secrets_in_config_files_and_urls_are_redacted():
    cfg = OmegaConf.create({"reader": {"api_key": "sk-FILE", "base_url": "http://bob:PASS@host:8000/v1",
                                       "model": "m"}, "hydra": {"x": "kept"}, "token": "${oc.env:T}"})
    raw = OmegaConf.to_container(cfg, resolve=False)
    red = redact_config(raw)
    assert red["reader"]["api_key"] == REDACTED and red["reader"]["base_url"] == f"http://{REDACTED}@host:8000/v1"
    assert red["token"] == "${oc.env:T}"  # an interpolation holds no secret
    assert redact_config(["reader.api_key=sk-CLI", "k=2"]) == [f"reader.api_key={REDACTED}", "k=2"]
    assert set(secret_values(cfg)) >= {"sk-FILE", "bob:PASS"}
    redact_in_place(cfg)
    text = yaml.safe_dump(OmegaConf.to_container(cfg, resolve=False))
    assert "sk-FILE" not in text and "PASS" not in text and "kept" in text
    env: dict = {}
    argv = scrub_argv(["reader.base_url=http://ann:PW@h/v1", "k=2"], env)
    assert "PW" not in " ".join(argv) and env["MOGG_SECRET_READER_BASE_URL"] == "http://ann:PW@h/v1"


def test_a_retired_experiment_name_composes_as_its_recipe_and_data_with_the_same_run_name(capsys):
    """Issue 47 folded selector_pubmedqa & co. into experiment=selector data=pubmedqa (issue 61 the
    loso_* files into experiment=loso heldout_set=pubmedqa & co.); commands written before (issue
    texts, slurm scripts) keep working and their outputs land in the same run folder."""
    from conftest import compose

    from mogg.core.runconfig import RETIRED, prepare_argv

    assert len(RETIRED) == 21
    for old, (recipe, group, choice) in RETIRED.items():
        assert (ROOT / "conf" / "experiment" / f"{recipe}.yaml").is_file() and (ROOT / "conf" / group / f"{choice}.yaml").is_file() and not (ROOT / "conf" / "experiment" / f"{old}.yaml").exists()
    argv = prepare_argv(["train.py", "experiment=selector_pubmedqa", "seed=1"], "train.py")
    assert argv == ["train.py", "experiment=selector", "data=pubmedqa", "seed=1"]
    assert compose(argv[1:]).run_name == "selector_pubmedqa"
    assert prepare_argv(["train.py", "-m", "experiment=frontier_pubmedqa,frontier_covidqa"], "train.py")[2:] == [
        "experiment=frontier", "data=pubmedqa,covidqa"]
    assert prepare_argv(["train.py", "-m", "experiment=loso_selector_pubmedqa,loso_selector_covidqa"], "train.py")[2:] == [
        "experiment=loso_selector", "heldout_set=pubmedqa,covidqa"]
    for bad in (["experiment=selector_pubmedqa,frontier_medmcqa"], ["experiment=selector_pubmedqa", "data=medmcqa"],
                ["experiment=loso_pubmedqa,loso_frontier_medmcqa"], ["experiment=loso_medmcqa", "heldout_set=covidqa"],
                ["experiment=loso_medmcqa,frontier_medmcqa"]):
        with pytest.raises(SystemExit) as e:
            prepare_argv(["train.py", *bad], "train.py")
        assert e.value.code == 2
    err = capsys.readouterr().err
    assert "experiment=<recipe> <group>=<set>" in err and "loso_frontier_medmcqa -> loso_frontier heldout_set=medmcqa" in err
    assert "names its heldout_set choice" in err


# The nine loso_* experiment files as they were before issue 61 folded them into three recipes and
# the heldout_set group (their comments left out): each retired name must compose as it did
_LOSO_SOURCES = {"pubmedqa": ("pubmedqa", "pubmedqa_gold"), "medmcqa": ("medmcqa_exp", "pubmedqa_gold"),
                 "covidqa": ("covidqa", "covidqa")}


def _retired_loso_files() -> dict[str, str]:
    files = {}
    for held in _LOSO_SOURCES:
        others = [s for s in _LOSO_SOURCES if s != held]
        lines = ["# @package _global_", "defaults:"]
        for s in others:
            q, c = _LOSO_SOURCES[s]
            lines += [f"  - /questions@train_sources.{s}.questions: {q}", f"  - /corpus@train_sources.{s}.corpus: {c}"]
        if held != "pubmedqa":  # PubMedQA* is the root config's questions and corpus
            lines.append(f"  - override /questions: {_LOSO_SOURCES[held][0]}")
        if held == "covidqa":  # MedMCQA's explanations are read over the root's corpus
            lines.append("  - override /corpus: covidqa")
        lines += ["train_sources:", *(f"  {s}: {{weight: 1.0}}" for s in others),
                  "router:", "  fit: both", "  transfer: experts", f"run_name: loso_{held}"]
        files[f"loso_{held}"] = "\n".join(lines) + "\n"
        files[f"loso_frontier_{held}"] = (f"# @package _global_\ndefaults:\n  - loso_{held}\n  - override /frontier: matched\n"
                                          f"run_name: loso_frontier_{held}\nbudgets: []\n")
        files[f"loso_selector_{held}"] = (f"# @package _global_\ndefaults:\n  - loso_frontier_{held}\n"
                                          "  - override /frontier/routers: [actions, selector]\n"
                                          f"run_name: loso_selector_{held}\n")
    return files


def test_a_retired_loso_name_composes_to_the_config_its_file_gave(tmp_path):
    """Issue 61: experiment=loso_frontier_covidqa & co. (nine files) are experiment=<recipe>
    heldout_set=<set>. Each old name, rewritten, composes to the config its file composed to: the same
    questions, corpora, training sources, router, frontier and budgets; the same run name once
    resolved (``loso_frontier_${heldout_name}``); one key more, ``heldout_name``, which names the set."""
    import shutil

    from hydra import compose, initialize_config_dir

    from mogg.core.runconfig import RETIRED, prepare_argv

    conf = tmp_path / "conf"
    shutil.copytree(ROOT / "conf", conf)
    old_files = _retired_loso_files()
    assert sorted(old_files) == sorted(n for n in RETIRED if n.startswith("loso"))
    for name, text in old_files.items():
        (conf / "experiment" / f"{name}.yaml").write_text(text)
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        for name in old_files:
            old = compose(config_name="config", overrides=[f"experiment={name}"])
            new_argv = prepare_argv(["train.py", f"experiment={name}"], "train.py")[1:]
            new = compose(config_name="config", overrides=new_argv)
            a, b = OmegaConf.to_container(old, resolve=False), OmegaConf.to_container(new, resolve=False)
            assert b.pop("heldout_name") == RETIRED[name][2] and new.run_name == old.run_name == name
            assert b.pop("run_name") == f"{RETIRED[name][0]}_${{heldout_name}}"
            a.pop("run_name")
            assert a == b, name


def test_a_loso_recipe_swept_over_its_held_out_sets_keeps_the_old_run_names():
    """``experiment=loso_selector heldout_set=pubmedqa,medmcqa,covidqa seed=0,1``: the runs the sweep
    of the three retired names gave (``loso_selector_<set>``, the seed appended)."""
    from hydra import initialize_config_dir

    task = ["experiment=loso_selector", "heldout_set=pubmedqa,medmcqa,covidqa", "seed=0,1"]
    master = OmegaConf.create({"hydra": {"overrides": {"task": task, "hydra": []}, "job": {"config_name": "config"}}})
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        names = sweep_run_names(master)
    assert sorted(names.values()) == sorted(f"loso_selector_{s}_s{seed}" for s in ("pubmedqa", "medmcqa", "covidqa")
                                            for seed in (0, 1))
