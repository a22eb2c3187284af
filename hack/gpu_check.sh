#!/usr/bin/env bash
# The GPU checks of docs/gpu.md, in one run on a machine with one NVIDIA GPU, from the checkout's root:
#
#     OUT=/tmp/gpu-out bash hack/gpu_check.sh [STAGE ...]
#
# STAGE: machine, facts, probe, matmul, workload, compile, allreduce, launch (default: all, in that order).
# The machine needs python3 with a CUDA build of torch. Ansible need not be installed: wheels in .whl/ (ansible-core
# and its needs, for that python) and .dev/collections.tgz (ansible.posix) are installed under /tmp first when present.
# .dev/train_before.py, when present, is the train.py to compare with (the "before" of a change to the workload).
# Writes into $OUT: log.txt (everything below), node_tree.json (hack/gpu_record_tree.py), nvidia-smi-q.txt (UUIDs and
# serial numbers blanked), experiment.tgz (the launch's experiment directory).
set -u
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
REPO=$(pwd)
PY=$(command -v python3)
step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }

step "ansible from carried wheels"
if ls .whl/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH
fi
mkdir -p /tmp/coll/ansible_collections
[ -f .dev/collections.tgz ] && tar -xzf .dev/collections.tgz -C /tmp/coll/ansible_collections
export ANSIBLE_COLLECTIONS_PATH=$REPO/.collections:/tmp/coll ANSIBLE_CONFIG=$REPO/ansible.cfg LC_ALL=C.UTF-8 LANG=C.UTF-8
export ANSIBLE_LOCAL_TEMP=/tmp/ansible-local ANSIBLE_FORCE_COLOR=0 PYTHONUNBUFFERED=1
ansible-playbook --version | head -3

stage_machine() {
step "the machine"
uname -r
nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,memory.total,compute_cap --format=csv
nvidia-smi topo -m
nvidia-smi nvlink -s
nvidia-smi -q | sed -E 's/^(\s*(GPU UUID|Serial Number|Board Serial|GPU Part Number|Module ID|Board ID)\s*:).*/\1 (blanked)/' > "$OUT/nvidia-smi-q.txt"
cat /proc/driver/nvidia/version
ls -l /proc/driver/nvidia/gpus/ /dev/nvidia* 2>&1
for f in /proc/driver/nvidia/gpus/*/information; do sed -E 's/^(GPU UUID:).*/\1 (blanked)/' "$f"; done
"$PY" - <<'PY'
import torch
print('torch', torch.__version__, 'cuda', torch.version.cuda, 'devices', torch.cuda.device_count(),
      'name', torch.cuda.get_device_name(0), 'capability', torch.cuda.get_device_capability(0),
      'bf16', torch.cuda.is_bf16_supported(), 'nccl (compile time)', torch.cuda.nccl.version())
PY
"$PY" -c 'import torch, torch.distributed; print(open("/proc/self/maps").read().count("nccl"), "nccl mappings after import torch")'

}

stage_facts() {
step "node facts: the files the detection reads (hack/gpu_record_tree.py)"
"$PY" hack/gpu_record_tree.py "$OUT/node_tree.json"
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps(d["facts"]["gpu"], indent=1)); print("warnings:", d["warnings"])' "$OUT/node_tree.json"

step "node facts: the module, ad hoc on a local connection"
timeout 120 ansible -i localhost, -c local localhost -m trainops.multinode.node_facts \
  -a "master_addr=127.0.0.1 python=$PY" -e ansible_python_interpreter="$PY"

}

stage_probe() {
step "the NCCL the ranks load: the probe, run as the ranks' python"
probe=plugins/module_utils/_torch_probe.py
[ -f .dev/_torch_probe_i42.py ] && probe=.dev/_torch_probe_i42.py
timeout 60 "$PY" "$probe" --library nvidia | "$PY" -c 'import json,sys; d=json.load(sys.stdin)["library"]; print(json.dumps({k: d.get(k) for k in ("runtime", "reported", "wheels", "version", "source")}, indent=1))'
"$PY" -m pip show nvidia-nccl-cu13 nvidia-nccl-cu12 2>/dev/null | grep -E "^(Name|Version|Location)"
}

stage_matmul() {
step "the bf16 matrix product"
timeout 60 "$PY" bench/gpu/matmul.py --seconds 10
}

run_variant() {  # label, train.py, extra overrides...
  local label=$1 script=$2; shift 2
  rm -rf /dev/shm/variant
  timeout 180 "$PY" "$script" --config files/workspace/config/gpu.yaml --override training.output_dir=/dev/shm/variant \
    training.max_steps=40 "$@" > /tmp/variant.log 2>&1
  local rc=$?
  "$PY" - "$label" "$rc" <<'PY'
import json, sys
label, rc = sys.argv[1], sys.argv[2]
try:
    rows = [json.loads(l) for l in open('/dev/shm/variant/rank_00_metrics.jsonl')]
    env = json.load(open('/dev/shm/variant/rank_00_env.json'))
    last = rows[-1]
    print('variant %-28s rc=%s params=%.3gB step_time=%.4fs compute=%.4fs tflops=%.1f (windows: %s) bf16=%s'
          % (label, rc, env['model_params'] / 1e9, last['step_time_s'], last['compute_time_s'], last['tflops'],
             ' '.join('%.1f' % r['tflops'] for r in rows), env['bf16_autocast']))
except Exception as exc:
    print('variant %s rc=%s: no metrics (%s)' % (label, rc, exc)); print(open('/tmp/variant.log').read()[-3000:])
PY
  rm -rf /dev/shm/variant
}
stage_workload() {
step "train.py's TFLOP/s, standalone (one process, NCCL)"
if [ -f .dev/train_before.py ]; then
  cp .dev/train_before.py files/workspace/train_before.py
  run_variant "before: gpu.yaml" files/workspace/train_before.py
  rm -f files/workspace/train_before.py
fi
run_variant "after: gpu.yaml" files/workspace/train.py
step "where a step's GPU time goes (torch.profiler, 5 steps)"
rm -f /dev/shm/trace.json
TRAINOPS_PROFILE_TRACE=/dev/shm/trace.json run_variant "after: gpu.yaml, profiled" files/workspace/train.py
"$PY" bench/gpu/trace_summary.py /dev/shm/trace.json
rm -f /dev/shm/trace.json
}

stage_compile() {
step "train.py's TFLOP/s with and without training.compile (standalone)"
run_variant "gpu.yaml" files/workspace/train.py
run_variant "gpu.yaml, compile=true" files/workspace/train.py training.compile=true
}

stage_allreduce() {
step "all-reduce benchmark, NCCL, world size 1"
timeout 120 "$PY" -m torch.distributed.run --nproc-per-node 1 files/workspace/allreduce_bench.py -b 1M -e 1G -f 4 \
  --output-dir /tmp/allreduce
}

stage_launch() {
cat > /tmp/gpu-inventory.yml <<'YAML'
# one node: this machine, its GPU found by detection (no trainops_gpu_vendor)
trainops_nodes:
  hosts:
    gpu0:
      trainops_master: true
  vars:
    ansible_connection: ansible.builtin.local
    ansible_python_interpreter: "{{ ansible_playbook_python }}"
    trainops_python: "{{ ansible_playbook_python }}"
    trainops_node_root: /tmp/trainops/gpu0
    trainops_master_addr: 127.0.0.1
YAML
step "launch.yml, nproc=2 on a 1-GPU node: refused before anything starts"
timeout 180 ansible-playbook -i /tmp/gpu-inventory.yml playbooks/launch.yml -e nproc=2 -e config=config/gpu.yaml
echo "rc=$?"

step "launch.yml, nproc=1, config/gpu.yaml, NCCL_DEBUG=VERSION"
timeout 400 ansible-playbook -i /tmp/gpu-inventory.yml playbooks/launch.yml -e nproc=1 -e config=config/gpu.yaml \
  -e trainops_nccl_debug=VERSION -e '{"overrides": ["training.max_steps=40"]}'
echo "rc=$?"
exp=$(find experiments -mindepth 1 -maxdepth 1 -type d -printf "%T@ %p\n" 2>/dev/null | sort -rn | head -1 | cut -d" " -f2-)
if [ -n "$exp" ]; then
  cat "$exp/summary.txt"
  grep -h "NCCL version" "$exp"/logs/* | head -3
  "$PY" - "$exp" <<'PY'
import json, sys
manifest = json.load(open(sys.argv[1] + '/manifest.json'))
for node in manifest.get('nodes') or []:
    print(json.dumps({k: node.get(k) for k in ('host', 'hostname', 'gpu_vendor', 'network', 'torch', 'ranks')})[:4000])
print('world_size', manifest.get('world_size'), 'outcome', manifest.get('outcome'))
import glob
for path in sorted(glob.glob(sys.argv[1] + '/outputs/*/rank_*_env.json')):
    env = json.load(open(path))
    print(path.split('/outputs/')[1], {k: env.get(k) for k in ('backend', 'device', 'device_name', 'accelerator',
                                                                'bf16_autocast', 'nccl_version', 'torch_version')})
PY
  tar -czf "$OUT/experiment.tgz" --exclude='*.pt' "$exp"
fi
}

stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(machine facts probe matmul workload compile allreduce launch)
for stage in "${stages[@]}"; do
  "stage_$stage"
done
step "done"
