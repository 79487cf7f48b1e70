#!/bin/bash
# Superword training against ordinary training at 2 to 16 workers on a lent machine
# (bench/many-cores/README.md): with `carry` naming .whl (tokenmill's wheel and polars')
# and .devcorpus (bench.tar.xz and polars-runtime.tar.xz, the unpacked polars-runtime-32
# wheel, xz'd to fit), writes $OUT/superword.json.
REPO=$(pwd)
START=$(date +%s)
OUT=${OUT:-/tmp/devout}; mkdir -p "$OUT"
PY=$(command -v python3)
$PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
xz -d -T0 -c .devcorpus/polars-runtime.tar.xz | tar xf - -C /tmp/site || exit 1
export PYTHONPATH=/tmp/site
mkdir -p /tmp/c && xz -d -T0 -c .devcorpus/bench.tar.xz | tar xf - -C /tmp/c || exit 1
$PY bench/many-cores/pack_corpus.py unpack /tmp/c/bench ${CORPUS:-/tmp/corpus} || exit 1
echo "ready after $(( $(date +%s) - START )) s"
timeout ${BUDGET_S:-400} $PY bench/many-cores/superword_train.py ${CORPUS:-/tmp/corpus} "$OUT/superword.json" \
  ${WORKERS:-2,4,8,16} ${ROUNDS:-3} > "$OUT/superword.log" 2>&1
echo "exit $? after $(( $(date +%s) - START )) s"; grep "^workers" "$OUT/superword.log"; tail -3 "$OUT/superword.log"
