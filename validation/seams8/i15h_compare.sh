#!/bin/bash
# i15h: the outputs of the verbs whose computation moved out of kdvfs/cli/ (compare, demo, analyze, simulate), made
# with the checkout at BASE (default 319c58c, the branch's start) and with this checkout, then compared byte for byte.
# Only the demo's wall-clock `seconds` (summary.json, --json, the last printed line) and the output folder's name in
# printed lines may differ. Usage, from the checkout's root: bash validation/seams8/i15h_compare.sh [BASE]
set -eu
BASE=${1:-319c58c}
HERE=$(pwd)
W=$(mktemp -d /tmp/i15h-compare.XXXX)
mkdir -p "$W/base" "$W/sched"
git archive "$BASE" | tar -x -C "$W/base"
# the schedules simulate replays, made once (optimize is not among the moved verbs)
python -m kdvfs optimize --trace gpt3xl-torch-h200-bf16 --gpu h200 --slack 1 -o "$W/sched/h.json" 2>/dev/null
python -m kdvfs optimize --trace gpt3xl-llmc-rtx3080ti --slack 1 -o "$W/sched/r.json"

outputs() {  # outputs SRC DEST
  (cd "$1" && D="$2" S="$W/sched" && mkdir -p "$D" && HF=validation/h200/runtime/hf_gpt2_step.kineto.json.gz && set -x &&
   for t in gpt3xl-llmc-rtx3080ti gpt3xl-torch-h200-bf16; do
     python -m kdvfs compare --trace $t > $D/compare-$t.txt
     python -m kdvfs compare --trace $t --json > $D/compare-$t.json
     python -m kdvfs compare --trace $t --limiter off --mechanism predictive --slack 1 > $D/compare-$t-off.txt
     python -m kdvfs compare --trace $t --limiter off --mechanism predictive --slack 1 --json > $D/compare-$t-off.json
   done &&
   python -m kdvfs demo --executor serial -o $D/demo > $D/demo.txt &&
   python -m kdvfs demo --executor serial --json -o $D/demojson > $D/demo.json &&
   python -m kdvfs analyze $HF --gpu h200 --slack 1 2 5 -o $D/an-hf --json > $D/an-hf.json &&
   python -m kdvfs analyze $HF --gpu h200 --slack 1 2 5 -o $D/an-hft > $D/an-hf.txt &&
   python -m kdvfs analyze gpt3xl-torch-h200-bf16 --gpu h200 -o $D/an-h200 --json > $D/an-h200.json &&
   python -m kdvfs analyze gpt3xl-llmc-rtx3080ti --gpu rtx3080ti -o $D/an-rtx --json > $D/an-rtx.json &&
   python -m kdvfs simulate --trace gpt3xl-torch-h200-bf16 --schedule $S/h.json > $D/sim-h.txt &&
   python -m kdvfs simulate --trace gpt3xl-torch-h200-bf16 --schedule $S/h.json --json > $D/sim-h.json &&
   python -m kdvfs simulate --trace gpt3xl-torch-h200-bf16 --schedule $S/h.json --limiter off --mechanism predictive \
     --json > $D/sim-h-off.json &&
   python -m kdvfs simulate --trace gpt3xl-llmc-rtx3080ti --schedule $S/r.json --governor-lag 0.001 --json \
     > $D/sim-r-lag.json &&
   python -m kdvfs simulate --trace gpt3xl-llmc-rtx3080ti --schedule $S/r.json --gpus 2 > $D/sim-r-2.txt &&
   python -m kdvfs simulate --trace gpt3xl-llmc-rtx3080ti --schedule $S/r.json --gpus 2 --json > $D/sim-r-2.json &&
   python -m kdvfs simulate --trace gpt3xl-llmc-rtx3080ti --schedule $S/r.json > $D/sim-r.txt) 2>>"$W/commands.log"
}

# folders of equal name length: rich wraps a printed path at the same place in both
outputs "$W/base" "$W/old"
outputs "$HERE" "$W/new"
B=$W/old A=$W/new bad=0
for f in $(cd "$B" && find . -type f | sort); do
  case $f in
    */summary.json|./demo.json)  # equal once `seconds` is dropped
      python -c 'import json, sys; a, b = (json.load(open(p)) for p in sys.argv[1:]); [d.pop("seconds") for d in (a, b)]; sys.exit(a != b)' \
        "$B/$f" "$A/$f" || { echo "DIFF $f"; bad=1; } ;;
    ./demo.txt|./an-*|./sim-*)  # printed lines and documents name the output folder; the demo prints its seconds
      cmp -s <(sed -e "s#$B#D#g" -e 's/[0-9.]* s$/T s/' "$B/$f") <(sed -e "s#$A#D#g" -e 's/[0-9.]* s$/T s/' "$A/$f") \
        || { echo "DIFF $f"; bad=1; } ;;
    *) cmp -s "$B/$f" "$A/$f" || { echo "DIFF $f"; bad=1; } ;;
  esac
done
echo "$(cd "$B" && find . -type f | wc -l) files compared in $W; differences: $bad"
exit $bad
