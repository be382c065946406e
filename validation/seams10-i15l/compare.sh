#!/bin/bash
# i15l: the outputs of the H200 fit's verbs and functions made with the checkout at BASE (default 6f40807, the
# branch's start) and with this checkout's code, then compared byte for byte: the fit (the bundled structure and gap
# model, a variant, other files), the stored fit checked against files in and out of it, and the bundled H200
# profiles rebuilt (build_h200_profiles, which rewrites traces/ in place: run in copies, never in the checkout).
# Usage, from the checkout's root: bash validation/seams10-i15l/compare.sh [BASE]
set -eu
BASE=${1:-6f40807}
W=$(mktemp -d /tmp/i15l-compare.XXXX)
mkdir -p "$W/base" "$W/here"
git archive "$BASE" | tar -x -C "$W/base"
git archive "$BASE" | tar -x -C "$W/here" && cp -r kdvfs simulator hw_backend "$W/here/"  # this checkout's code

outputs() {  # outputs SRC DEST
  (cd "$1" && D="$2" && C=validation/h200/characterization && mkdir -p "$D" && set -x &&
   python -m kdvfs calibrate-h200 --no-bundle --command "kdvfs calibrate-h200" -o $D/fit.json --json > $D/fit.out &&
   python -m kdvfs calibrate-h200 --no-bundle --command x --structure none --gap-model median -o $D/fit-none.json \
     > $D/fit-none.txt &&
   python -m kdvfs calibrate-h200 --no-bundle --command x --data $C/characterization4.json.gz \
     --data $C/characterization13.json.gz -o $D/fit-4-13.json > $D/fit-4-13.txt &&
   for f in characterization7 characterization9 characterization12 characterization13 characterization; do
     python -m kdvfs calibrate-h200 --check $C/fit.json --data $C/$f.json.gz --command x -o $D/check-$f.json \
       > $D/check-$f.txt
   done &&
   python -m kdvfs calibrate-h200 --check $C/fit.json $(for i in "" 2 3 4 5 6 8 10 11; do
     echo --data $C/characterization$i.json.gz; done) --command x --json > $D/check-all.json &&
   python -c "import json; from kdvfs.calibrate_h200 import build_h200_profiles as b; print(json.dumps(b('.')))" \
     > $D/profiles.json && cp traces/gpt3xl-torch-h200-*.profile.csv.gz traces/gpt3xl-torch-h200-*.trace.json $D/
  ) 2>>"$W/commands.log"
}

outputs "$W/base" "$W/before"
outputs "$W/here" "$W/after"
sed -i "s#$W/before#OUT#g" "$W"/before/*.out "$W"/before/*.txt
sed -i "s#$W/after#OUT#g" "$W"/after/*.out "$W"/after/*.txt
n=0
for f in "$W"/before/*; do
  b=$(basename "$f")
  if cmp -s "$f" "$W/after/$b"; then echo "identical  $b"; else echo "DIFFERENT  $b"; n=$((n + 1)); fi
done
cmp validation/h200/characterization/fit.json "$W/after/fit.json" && echo "identical  fit.json = validation/h200/characterization/fit.json"
echo "$n different; outputs under $W"
