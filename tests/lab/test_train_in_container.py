"""A 2-node job trained inside each node's training container (trainops_runtime: container).

Each lab node runs its own Docker daemon and the container role's `trainops-train` container (host
PID/network/IPC, the node's /srv/trainops at the same path), from the registry-free test image; see
tests/lab/container_support.py and docs/containers.md. The environment is passed to every rank
explicitly (never lost on `docker exec`), and status/stop see the processes in the container.
"""
import json
import os
import platform

import pytest

from container_support import CONTAINER
from container_support import container_lab, image_archive  # noqa: F401  # pylint: disable=unused-import
from playbook_runner import free_port, run_playbook, wait_until

pytestmark = [pytest.mark.lab, pytest.mark.slow]


def launch_vars(tmp_path, **extra):
    values = {
        'runtime': 'container',
        'trainops_python': 'python3',  # the image's interpreter
        'config': 'config/tiny.yaml',
        'trainops_experiments_dir': str(tmp_path / 'experiments'),
        'master_port': free_port(),
        'trainops_poll_interval': 1,
        'trainops_progress_interval': 5,
    }
    values.update(extra)
    return values


def container_processes(clab, node):
    """Command lines of the processes in the node's training container (`docker top`)."""
    out = clab.docker(node, "top %s -eo pid,args" % CONTAINER).stdout
    return [line for line in out.splitlines()[1:] if line.strip()]


def test_two_nodes_train_inside_their_containers_with_each_hosts_settings(container_lab, tmp_path):
    clab = container_lab
    lab = clab.lab
    proc = run_playbook('playbooks/launch.yml', str(tmp_path), launch_vars(tmp_path, channels=12),
                        inventory=lab.inventory, timeout=600)
    assert proc.returncode == 0, proc.stdout[-5000:]
    experiment = proc.summary['artifact_data']['trainops_experiment']
    assert experiment['outcome'] == 'succeeded'
    path = experiment['path']
    manifest = json.load(open(os.path.join(path, 'manifest.json')))
    assert manifest['world_size'] == 4 and manifest['summary']['ranks_seen'] == [0, 1, 2, 3]
    for index, node in enumerate(lab.nodes):
        for local_rank in range(2):
            rank = 2 * index + local_rank
            seen = json.load(open(os.path.join(path, 'outputs', manifest['nodes'][index]['host'], 'rank_%02d_env.json' % rank)))
            env = seen['env']
            # the host's own settings reached the rank inside the container
            assert env['TRAINOPS_NODE'] == node['name']
            assert env['GLOO_SOCKET_IFNAME'] == node['ifname'] and env['NCCL_SOCKET_IFNAME'] == '=' + node['ifname']
            assert env['NCCL_MAX_NCHANNELS'] == '12' and env['NCCL_IB_DISABLE'] == '1'
            # ... and it ran in the image's Python (the one the preflight found in the container), not the node's
            record = [n for n in manifest['nodes'] if n['host'] == node['name']][0]
            assert record['argv'][0] == 'python3'
            assert seen['python_version'] == record['python'], (seen['python_version'], record['python'])
    # the image's interpreter is Debian's, not this machine's (the nodes' own)
    assert manifest['nodes'][0]['python'] != platform.python_version()


def test_status_and_stop_reach_the_job_inside_the_containers(container_lab, tmp_path):
    clab = container_lab
    lab = clab.lab
    extravars = launch_vars(tmp_path, wait=False, overrides=['debug.sleep_per_step_s=0.3', 'training.epochs=50'])
    started = run_playbook('playbooks/launch.yml', str(tmp_path), extravars, inventory=lab.inventory, timeout=600)
    assert started.returncode == 0, started.stdout[-5000:]
    for node in clab.names:
        procs = wait_until(lambda n=node: [p for p in container_processes(clab, n) if 'torch.distributed.run' in p],
                           timeout=60, what='torchrun in the container of %s' % node)
        assert procs
    status = run_playbook('playbooks/status.yml', str(tmp_path), {'trainops_experiments_dir': extravars['trainops_experiments_dir']},
                          inventory=lab.inventory, timeout=300)
    assert status.returncode == 0, status.stdout[-3000:]
    jobs = status.summary['artifact_data']['trainops_status']
    assert {job['status'] for job in jobs.values()} == {'running'}, jobs
    stopped = run_playbook('playbooks/stop.yml', str(tmp_path), {'trainops_experiments_dir': extravars['trainops_experiments_dir']},
                           inventory=lab.inventory, timeout=300)
    assert stopped.returncode == 0, stopped.stdout[-3000:]
    for node in clab.names:
        left = [p for p in container_processes(clab, node) if 'torch' in p or 'supervisor.py' in p]
        assert left == [], (node, left)
