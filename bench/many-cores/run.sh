#!/bin/bash
# The many-core encode rows on a lent machine (bench/many-cores/README.md): install the
# carried wheels, unpack the carried corpora, run bench/run.py's whole-process encode phases at
# 1..16 workers, each phase its own run, so that one that runs out of time leaves the others'
# tables in $OUT.
REPO=$(pwd)
START=$(date +%s)
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/devout}; mkdir -p "$OUT"
PY=$(command -v python3)
echo "python: $PY $($PY --version)"; nproc; grep -m1 "model name" /proc/cpuinfo; free -g | head -2
if [ -z "$SKIP_INSTALL" ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
  cp /tmp/site/bin/tokenmill "$(dirname "$PY")/tokenmill" || exit 1
fi
$PY -c "import tokenmill, gigatoken, fastokens, awkward, tiktoken, pyarrow; print('imports ok', pyarrow.__version__, tiktoken.__version__)" || exit 1
C=${CDIR:-/tmp/c}; mkdir -p $C && cd $C || exit 1
for f in "$REPO"/.devcorpus/*.tar.xz; do xz -d -T0 -c "$f" | tar xf - || exit 1; done
$PY "$REPO/bench/many-cores/pack_corpus.py" unpack $C/bench ${CORPUS:-/tmp/corpus} || exit 1
$PY "$REPO/bench/many-cores/pack_corpus.py" unpack $C/linux4 ${BIG:-/tmp/corpus-linux} || exit 1
$PY "$REPO/bench/many-cores/pack_corpus.py" unpack $C/multi28 ${MULTI:-/tmp/corpus-multilingual} || exit 1
cd "$REPO" || exit 1
echo "ready after $(( $(date +%s) - START )) s"
for phase in ${PHASES:-real code multilingual}; do
  left=$(( ${BUDGET_S:-540} - ($(date +%s) - START) ))
  if [ $left -lt 60 ]; then echo "no time left for $phase"; break; fi
  echo "== $phase (at most $left s)"
  timeout $left $PY bench/run.py ${CORPUS:-/tmp/corpus} --only $phase --workers-list ${WORKERS:-1,2,4,8,16} \
    --repeat 1 --big ${BIG:-/tmp/corpus-linux} --multilingual ${MULTI:-/tmp/corpus-multilingual} \
    --markdown "$OUT/$phase.md" --json "$OUT/$phase.json" > "$OUT/$phase.log" 2>&1
  echo "$phase exit $? after $(( $(date +%s) - START )) s"; tail -3 "$OUT/$phase.log"
done
