"""Run inside a Slurm step by tests/lab/test_slurm_lab.py: what module_utils/_gpu_visibility.py decides from the
step's own devices cgroup, next to the CUDA_VISIBLE_DEVICES Slurm set, as JSON.

    python gpu_view_probe.py <the node's stand-in GPU directory> <the job's GPU indexes, 2,3>

The lab's stand-in GPU devices are not in /dev: the probe's device list is that directory's nvidia<N> files."""
import json
import os
import sys

# the collection as tests/conftest.py makes it importable from a clone (.collections/ansible_collections/...)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                '.collections'))
from ansible_collections.trainops.multinode.plugins.module_utils import _gpu_visibility as GV  # noqa: E402


def main(directory, ids):
    devices = sorted(int(name[len('nvidia'):]) for name in os.listdir(directory)
                     if name.startswith('nvidia') and name[len('nvidia'):].isdigit())
    paths = dict((n, os.path.join(directory, 'nvidia%d' % n)) for n in devices)
    view = dict(host=devices, visible=[n for n in devices if os.access(paths[n], os.R_OK | os.W_OK)], paths=paths,
                cgroup=GV.session_cgroup('/'))
    slurm_ids = [int(i) for i in ids.split(',') if i]
    print(json.dumps({'step_env': os.environ.get('CUDA_VISIBLE_DEVICES'), 'probe': view,
                      'view': GV.rank_view(view, slurm_ids, len(slurm_ids))}))


if __name__ == '__main__':
    main(*sys.argv[1:3])
