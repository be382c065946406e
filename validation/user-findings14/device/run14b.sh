#!/bin/bash
# Session 14, device call C (observe-only): anchors, a new user's own steps (ELECTRA-base, BEiT-base; .dev/user14.py),
# anchors. Nothing is set.
cd "$(dirname "$0")/dev14" || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site ../../.whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
Q="timestamp,name,uuid,power.limit,power.draw,clocks.sm,clocks.mem,temperature.gpu,persistence_mode,compute_mode"
mkdir -p $OUT/u
nvidia-smi --query-gpu=$Q --format=csv > $OUT/u/smi_before.csv
python3 -m kdvfs characterize --set anchor --no-steps -o $OUT/u/anchor1.json.gz > $OUT/u/anchor1.log 2>&1; echo "anchor1 rc=$?"
python3 ../user14.py $OUT/u > $OUT/u/user14.log 2>&1; echo "user14 rc=$?"; tail -1 $OUT/u/user14.log
python3 -m kdvfs characterize --set anchor --no-steps -o $OUT/u/anchor2.json.gz > $OUT/u/anchor2.log 2>&1; echo "anchor2 rc=$?"
nvidia-smi --query-gpu=$Q --format=csv > $OUT/u/smi_after.csv
cat $OUT/u/smi_before.csv $OUT/u/smi_after.csv | grep -v timestamp | cut -d, -f3-4,7,9,10
python3 --version; python3 -c "import torch,transformers;print(torch.__version__,transformers.__version__)"
cd $OUT && tar czf user14c.tgz u && rm -rf u && ls -la
