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
from test_docs import DOCS

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

    out = []
    for doc in DOCS:
        text = re.sub(r"\\\n\s*", " ", doc.read_text())
        for m in re.finditer(r"python (?:train|evaluate)\.py -m ([^`\n]*)", text):
            line = m.group(1).split(" #")[0].split("&&")[0]
            try:
                toks = shlex.split(line)
            except ValueError:  # a command cut by the prose around it
                continue
            args = [t for t in toks if "=" in t and not t.startswith("-")]
            out.append((f"{doc.name}: {line[:90]}", args))
    return out


SWEEPS = _documented_sweeps()


def test_the_docs_have_sweeps():
    assert len(SWEEPS) >= 10


# committee sweeps (router=committee router.members=...) train 10-20 routers a job: 11-13 s each, with the slow suite
@pytest.mark.parametrize("where,args", [pytest.param(w, a, marks=pytest.mark.slow)
                                        if any(x.startswith("router.members=") for x in a) else (w, a)
                                        for w, a in SWEEPS], ids=[w for w, _ in SWEEPS])
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
    """Issue 47 folded selector_pubmedqa & co. into experiment=selector data=pubmedqa; commands written
    before (issue texts, slurm scripts) keep working and their outputs land in the same run folder."""
    from conftest import compose

    from mogg.core.runconfig import RETIRED, prepare_argv

    assert len(RETIRED) == 12
    for old, (recipe, data) in RETIRED.items():
        assert (ROOT / "conf" / "experiment" / f"{recipe}.yaml").is_file() and (ROOT / "conf" / "data" / f"{data}.yaml").is_file() and not (ROOT / "conf" / "experiment" / f"{old}.yaml").exists()
    argv = prepare_argv(["train.py", "experiment=selector_pubmedqa", "seed=1"], "train.py")
    assert argv == ["train.py", "experiment=selector", "data=pubmedqa", "seed=1"]
    assert compose(argv[1:]).run_name == "selector_pubmedqa"
    assert prepare_argv(["train.py", "-m", "experiment=frontier_pubmedqa,frontier_covidqa"], "train.py")[2:] == [
        "experiment=frontier", "data=pubmedqa,covidqa"]
    for bad in (["experiment=selector_pubmedqa,frontier_medmcqa"], ["experiment=selector_pubmedqa", "data=medmcqa"]):
        with pytest.raises(SystemExit) as e:
            prepare_argv(["train.py", *bad], "train.py")
        assert e.value.code == 2
    assert "experiment=<recipe> data=<set>" in capsys.readouterr().err
