#!/bin/bash
# Session 5 on the lent nvidia-h200-x2, observe-only (nothing is set on either card; NVML and nvidia-smi only read).
#
#   bash scripts/h200x2_session5.sh WHEEL_DIR OUT [STAGE ...]      (from the kdvfs tree copied to the device)
#
# WHEEL_DIR holds the Ray wheel repacked for a headless worker (scripts/repack_ray_wheel.py) and the packages the
# device lacks (jsonschema, referencing, rpds-py, jsonschema-specifications, simpy). Stages, in this order unless
# named: ray (the observe-only sweep at the cards' own clocks over both GPUs on a `ray start --head` cluster,
# interrupted once and resumed), ddp01 (DDP step, rank 0 on the first card, with the idle and collective-alone
# windows), ddp10 (the same with rank 0 on the second card). Everything goes to OUT (log.txt, ddp01/, ddp10/, the sweep CSV).
# DRY=1: a CPU rehearsal (the DDP script's --dry-run, the sweep on the fake backend; PY names a Python 3.12).
set -u
W=$1
O=$2
shift 2
STAGES=${*:-ray ddp01 ddp10}
PY=${PY:-python3}
DRY=${DRY:-0}
SITE=${SITE:-/tmp/site}
if [ "$DRY" = 1 ]; then XDDP=--dry-run; BACKEND=fake; else XDDP=; BACKEND=nvml; fi
# NVLink multicast off everywhere (torchrun passes these to its ranks; the Ray head and its workers inherit them and
# the sweep also sets them in each worker's runtime_env)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 CUDA_DEVICE_ORDER=PCI_BUS_ID OMP_NUM_THREADS=4 RAY_AUTH_MODE=disabled
Q=index,name,pci.bus_id,power.limit,clocks.sm,clocks.mem,temperature.gpu,power.draw
echo "== nvidia-smi before (read-only)"; nvidia-smi --query-gpu=$Q --format=csv
nvidia-smi topo -m
$PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$W"/*.whl \
    || exit 1
export PYTHONPATH=$SITE:$PWD PATH=$SITE/bin:$PATH
$PY -c 'import ray; print("ray", ray.__version__)'
[ "$DRY" = 1 ] || python3 -c 'import torch; print("torch", torch.__version__, "gpus", torch.cuda.device_count())'
for s in $STAGES; do
  echo "== stage $s $(date -u +%T)"
  case $s in
    ddp01) timeout 170 torchrun --standalone --nproc_per_node 2 scripts/h200x2_ddp.py --out "$O/ddp01" --window 10 \
             --windows 1 --warmup 10 --extra $XDDP ;;
    ddp10) CUDA_VISIBLE_DEVICES=1,0 timeout 170 torchrun --standalone --nproc_per_node 2 scripts/h200x2_ddp.py \
             --out "$O/ddp10" --window 10 --windows 1 --warmup 10 --extra $XDDP ;;
    ray)
      rm -rf /tmp/rs /tmp/rayh; mkdir -p /tmp/rs
      setsid ray start --head --block --port 6380 --num-cpus 4 --num-gpus 2 --include-dashboard=false \
          --disable-usage-stats --temp-dir /tmp/rayh > /tmp/rayhead.log 2>&1 &
      RP=$!
      for i in $(seq 30); do ray status --address 127.0.0.1:6380 > /dev/null 2>&1 && break; sleep 1; done
      ray status --address 127.0.0.1:6380 | grep -E "GPU|CPU"
      SW="$PY -m kdvfs sweep --backend $BACKEND --trace gpt3xl-torch-h200-bf16 --gpu h200 --settings auto:auto \
          --window 5 --warmup 1 --gpus 2 --ray-address 127.0.0.1:6380 --json -o /tmp/rs/ray_sweep_auto.csv"
      echo "-- first run, interrupted after 45 s"; timeout -s INT 45 $SW; echo "rc=$?"
      wc -l /tmp/rs/* ; head -1 /tmp/rs/*.part.csv 2>/dev/null
      echo "-- the same command again: resumes"; timeout 240 $SW; echo "rc=$?"
      ls -la /tmp/rs
      cp /tmp/rs/ray_sweep_auto.csv "$O/" 2>/dev/null || tar czf "$O/ray_parts.tgz" -C /tmp rs
      kill -TERM -- -$RP; sleep 3; kill -KILL -- -$RP 2>/dev/null
      tail -3 /tmp/rayhead.log ;;
  esac
done
echo "== nvidia-smi after (read-only) $(date -u +%T)"; nvidia-smi --query-gpu=$Q --format=csv
