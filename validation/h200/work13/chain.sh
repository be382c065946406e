#!/usr/bin/env bash
# Session 13 (helper i13b): the regeneration chain's step checks (fidelity README, Session 9 steps 3-8, without
# --characterization), written here instead of beside the data (validation/h200/steps*/ and lease_anchor/ are the
# lead's): one `kdvfs validate-steps` per stored step set -> validation/h200/work13/checks/<set>.json.
# Run from the repository root: bash validation/h200/work13/chain.sh
set -euo pipefail
out=validation/h200/work13/checks
mkdir -p "$out"
v() { python -m kdvfs validate-steps "$1" --gpu h200 --force -o "$out/$2.json" > /dev/null; echo "$2 done"; }
v validation/h200/steps steps23
for s in steps7 steps8 steps9 steps10 steps11 steps12 steps13; do v validation/h200/$s $s; done
v validation/h200/steps11/repeat_leaseB steps11_repeat_leaseB
v validation/h200/steps11/repeat_leaseC steps11_repeat_leaseC
v validation/h200/steps12/repeat_lease2 steps12_repeat_lease2
v validation/h200/steps12/repeat_lease3 steps12_repeat_lease3
v validation/h200/steps13/repeat_lease2 steps13_repeat_lease2
for x in A B C; do v validation/h200/lease_anchor/lease$x/steps lease$x; done
