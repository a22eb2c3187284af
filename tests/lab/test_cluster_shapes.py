"""The main flows on a lab shaped like a real cluster (docs/cluster-shapes.md):

``hack/lab.py up --nodes 4 --shared-home --user trainer --mgmt-net``: the training user's home is one
directory every node sees (an NFS home) and the default node root ``~/.trainops`` is on it, Ansible logs
in as the non-root user ``trainer`` over the management network (``eno1``), and training runs over the
training network (``ens5``, ``enp1s0f0``, ...). A token passed in trainops_secret_env is then searched
for everywhere.
"""
import glob
import importlib
import ipaddress
import json
import os
import pathlib
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import uuid

import pytest

from playbook_runner import REPO, free_port, run_playbook, wait_until

pytestmark = [pytest.mark.lab, pytest.mark.slow]

USER = 'trainer'
NODES = 4
TOKEN_VAR = 'TRAINOPS_LAB_HF_TOKEN'
SECRET_ENV = {'HF_TOKEN': "{{ lookup('ansible.builtin.env', '%s') }}" % TOKEN_VAR}


@pytest.fixture(scope='module')
def shaped(lab_session_lock, user_reaches_python, restore_lab, lab_nodes):  # pylint: disable=unused-argument
    lab = lab_nodes(NODES, shared_home=True, user=USER, mgmt_net=True)
    assert lab.shape['user'] == USER and lab.shape['shared_home'] and lab.shape['mgmt_net']
    return lab


def launch_vars(tmp_path, **extra):
    values = {'config': 'config/tiny.yaml', 'channels': 42, 'master_port': free_port(),
              'trainops_experiments_dir': str(tmp_path / 'experiments'), 'trainops_poll_interval': 1,
              'trainops_progress_interval': 10}
    values.update(extra)
    return values


def read_json(path):
    with open(path) as handle:
        return json.load(handle)


def files_containing(top, needle):
    hits = []
    for base, _dirs, files in os.walk(top):
        for name in files:
            try:
                with open(os.path.join(base, name), 'rb') as handle:
                    if needle.encode() in handle.read():
                        hits.append(os.path.join(base, name))
            except OSError:
                pass
    return hits


def user_processes(lab, node, word):
    """Command lines of the training user's processes on a node that mention ``word`` (for checking, never killing)."""
    out = lab.ssh(node, 'ps -u %s -o args= || true' % USER, user=USER).stdout
    return [line for line in out.splitlines() if word in line and 'ps -u' not in line]


def test_launch_on_a_shared_home_as_a_user_over_the_training_network_with_a_secret(shaped, tmp_path):
    lab = shaped
    secret = 'hf_lab_%s' % uuid.uuid4().hex
    env = {TOKEN_VAR: secret}
    run = run_playbook('playbooks/launch.yml', str(tmp_path), launch_vars(tmp_path, trainops_secret_env=SECRET_ENV),
                       inventory=lab.inventory, timeout=900, env=env, verbose=2)
    assert run.returncode == 0, run.stdout[-5000:] + run.failure_text
    experiment = run.summary['artifact_data']['trainops_experiment']
    assert experiment['outcome'] == 'succeeded'
    path = experiment['path']
    manifest = read_json(os.path.join(path, 'manifest.json'))
    names = lab.names
    assert manifest['world_size'] == 2 * NODES and manifest['summary']['ranks_seen'] == list(range(2 * NODES))

    # the node root is the default ~/.trainops on the shared home: per-node state below it, workspace synced once
    assert manifest['shared_dirs'] == {'node_root': [names], 'workspace': [names], 'workspace_synced_through': [names[0]]}
    home = lab.nodes[0]['home']
    assert home == '/home/%s' % USER
    state_root_on_host = os.path.join(lab.nodes[0]['home_on_host'], '.trainops', 'state')
    for node, record in zip(lab.nodes, manifest['nodes']):
        assert record['state_dir'] == os.path.join(home, '.trainops', 'state', node['name'])
        own = os.path.join(state_root_on_host, node['name'])
        info = os.stat(own)
        assert stat.S_IMODE(info.st_mode) == 0o700 and info.st_uid != 0  # the user's, private
        job = read_json(glob.glob(os.path.join(own, 'runs', os.path.basename(path), 'job.json'))[0])
        assert job['host']['hostname'] == node['name'] and job['uid'] == info.st_uid

    # training used each node's training NIC and the master's training address, not the management network
    master = lab.nodes[0]
    assert manifest['master']['addr'] == master['address'] != master['mgmt_address']
    for index, node in enumerate(lab.nodes):
        for local_rank in range(2):
            seen = read_json(os.path.join(path, 'outputs', manifest['nodes'][index]['host'],
                                          'rank_%02d_env.json' % (2 * index + local_rank)))
            assert seen['env']['GLOO_SOCKET_IFNAME'] == node['ifname'] != node['mgmt_ifname']
            assert seen['env']['NCCL_SOCKET_IFNAME'] == '=' + node['ifname']
            assert seen['master_addr'] == master['address']
            assert seen['secret_env_present'] == {'HF_TOKEN': True}
    # the secret: nowhere but in the ranks' environment
    assert secret not in run.stdout + run.stderr and secret not in json.dumps(run.summary)
    leaks = {where: files_containing(top, secret) for where, top in (
        ('experiment and ansible-runner artifacts', str(tmp_path)), ('the shared home', lab.nodes[0]['home_on_host']))}
    assert leaks == {'experiment and ansible-runner artifacts': [], 'the shared home': []}


def test_status_and_stop_as_the_user_on_the_shared_home(shaped, tmp_path):
    lab = shaped
    extravars = launch_vars(tmp_path, wait=False, overrides=['debug.sleep_per_step_s=0.3', 'training.epochs=50'])
    started = run_playbook('playbooks/launch.yml', str(tmp_path), extravars, inventory=lab.inventory, timeout=900)
    assert started.returncode == 0, started.stdout[-5000:] + started.failure_text
    run_id = started.summary['artifact_data']['trainops_experiment']['run_id'] \
        if 'trainops_experiment' in started.summary.get('artifact_data', {}) else None
    for node in lab.names:
        wait_until(lambda n=node: user_processes(lab, n, 'torch.distributed.run'), timeout=60,
                   what='torchrun of %s on %s' % (USER, node))
    plain = {'trainops_experiments_dir': extravars['trainops_experiments_dir']}
    status = run_playbook('playbooks/status.yml', str(tmp_path), plain, inventory=lab.inventory, timeout=300)
    assert status.returncode == 0, status.stdout[-3000:]
    jobs = status.summary['artifact_data']['trainops_status']
    assert sorted(jobs) == lab.names and {job['status'] for job in jobs.values()} == {'running'}, jobs
    assert len({job['run_id'] for job in jobs.values()}) == 1 and (run_id is None or jobs[lab.names[0]]['run_id'] == run_id)
    stopped = run_playbook('playbooks/stop.yml', str(tmp_path), plain, inventory=lab.inventory, timeout=300)
    assert stopped.returncode == 0, stopped.stdout[-3000:]
    for node in lab.names:
        assert user_processes(lab, node, 'torch') == [], node
    experiment = os.path.join(extravars['trainops_experiments_dir'], jobs[lab.names[0]]['run_id'])
    assert len(glob.glob(os.path.join(experiment, 'logs', 'node_*.txt'))) == NODES
    manifest = read_json(os.path.join(experiment, 'manifest.json'))
    assert manifest['outcome'] == 'stopped' and manifest['stop']['reason'] == 'user', manifest.get('outcome_detail')


@pytest.fixture()
def sudo_user(shaped):  # pylint: disable=unused-argument
    """The training user may become root (sudo, no password) on the controller and on the nodes, which share its
    /etc, as an admin's own account may: sudo is installed when missing (as the lab installs its packages), and a
    sudoers.d file grants it for this test only."""
    if not shutil.which('sudo'):
        hack = os.path.join(REPO, 'hack')
        if hack not in sys.path:
            sys.path.insert(0, hack)
        importlib.import_module('trainops_lab.core').apt_install(['sudo'])
    grant = '/etc/sudoers.d/trainops-lab-test-%s' % USER
    with open(grant, 'w') as handle:
        handle.write('%s ALL=(ALL:ALL) NOPASSWD: ALL\n' % USER)
    os.chmod(grant, 0o440)
    try:
        yield pwd.getpwnam(USER)
    finally:
        os.unlink(grant)


def owned_by_others(top, uid):
    """Paths under ``top`` (itself included) that ``uid`` does not own."""
    found = [top] if os.lstat(top).st_uid != uid else []
    for base, dirs, files in os.walk(top):
        found += [os.path.join(base, name) for name in dirs + files if os.lstat(os.path.join(base, name)).st_uid != uid]
    return found


def test_launch_with_become_as_a_user_on_the_controller_leaves_no_file_of_roots(shaped, sudo_user):
    """ansible-playbook --become run by the training user on the controller (an admin's account with sudo): the
    nodes' tasks run as root, while everything on the controller - the health check's own ansible-playbook, the
    experiment directory, the manifest, the collect - runs as that user (become: false), so no file in its
    experiments directory is root's."""
    lab = shaped
    nodes = lab.names[:2]
    work = tempfile.mkdtemp(prefix='trainops-become-', dir='/var/tmp')
    node_root = '/srv/trainops/%s' % os.path.basename(work)
    try:
        os.chown(work, sudo_user.pw_uid, sudo_user.pw_gid)
        home, experiments = os.path.join(work, 'home'), os.path.join(work, 'experiments')
        key = os.path.join(work, 'id_ed25519')  # the lab's key is root's: the user's copy
        shutil.copyfile(lab.private_key, key)
        os.mkdir(home, 0o700)
        for path in (home, key):
            os.chown(path, sudo_user.pw_uid, sudo_user.pw_gid)
        os.chmod(key, 0o600)
        # root's node root in each node's own /srv/trainops (root's ~ is the machine's /root on every node), one of
        # its own: the health check's runs are named by their step (step01_2nodes), as an earlier check's may be. The
        # nodes run the checkout's workspace in place: the sync's rsync logs in as the user and does not take become.
        # The check's measurements are small (4M, not the default 64M): this test is about who runs what
        extravars = launch_vars(pathlib.Path(work), trainops_experiments_dir=experiments, nproc=1, trainops_health_check=True,
                                trainops_node_root=node_root, ansible_ssh_private_key_file=key,
                                trainops_sync_workspace=False, trainops_workspace_dir=os.path.join(REPO, 'files', 'workspace'),
                                trainops_git_check='never', trainops_health_bytes='4M')
        varfile = os.path.join(work, 'vars.json')
        with open(varfile, 'w') as handle:
            json.dump(extravars, handle)
        os.chown(varfile, sudo_user.pw_uid, sudo_user.pw_gid)
        argv = ['runuser', '-u', USER, '--', 'env', 'HOME=' + home, 'ANSIBLE_CONFIG=' + os.path.join(REPO, 'ansible.cfg'),
                os.path.join(REPO, '.venv', 'bin', 'ansible-playbook'), '-i', lab.inventory, '--become',
                '--limit', ','.join(nodes), 'playbooks/launch.yml', '-e', '@' + varfile]
        started = time.monotonic()
        proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=900, check=False)
        print('launch --become as %s took %.1f s, rc %d' % (USER, time.monotonic() - started, proc.returncode))
        assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
        (run_id, ) = [name for name in os.listdir(experiments) if '_health_' not in name]
        (health, ) = [name for name in os.listdir(experiments) if name.startswith(run_id + '_health_')]
        # the health check ran as the user: its directory and files are the user's, and so is everything else
        assert os.path.isfile(os.path.join(experiments, health, 'health.json'))
        assert owned_by_others(experiments, sudo_user.pw_uid) == []
        assert owned_by_others(work, sudo_user.pw_uid) == []
        # while the nodes' tasks became root: the run there is root's
        manifest = read_json(os.path.join(experiments, run_id, 'manifest.json'))
        assert manifest['outcome'] == 'succeeded', manifest.get('outcome_detail')
        for record in manifest['nodes']:
            job = json.loads(lab.ssh(record['host'], 'cat %s/job.json' % record['run_dir']).stdout)
            assert job['uid'] == 0, (record['host'], job['uid'])
    finally:
        shutil.rmtree(work, ignore_errors=True)
        for name in nodes:
            lab.ssh(name, 'rm -rf %s' % node_root, check=False)


def test_a_master_address_off_the_training_network_starts_nothing(shaped, tmp_path):
    lab = shaped
    master = lab.nodes[0]
    # the usual mistake: the master address taken from ansible_host, the management address
    run = run_playbook('playbooks/launch.yml', str(tmp_path),
                       launch_vars(tmp_path, trainops_master_addr=master['mgmt_address']),
                       inventory=lab.inventory, timeout=600)
    assert run.returncode != 0
    assert ('the master address %s is not on the training network' % master['mgmt_address']) in run.failure_text, \
        run.failure_text
    assert not os.path.exists(str(tmp_path / 'experiments')) or os.listdir(str(tmp_path / 'experiments')) == []
    for node in lab.names:
        assert user_processes(lab, node, 'torch') == [], node


def test_sync_and_ssh_mesh_as_the_user_on_the_shared_home(shaped, tmp_path):
    lab = shaped
    src = tmp_path / 'src'
    (src / 'pkg').mkdir(parents=True)
    (src / 'train.py').write_text('print("train")\n')
    (src / 'pkg' / 'model.py').write_text('HIDDEN = 1024\n')
    synced = run_playbook('playbooks/sync.yml', str(tmp_path), {'src': str(src), 'dest': '~/code', 'delete': True},
                          inventory=lab.inventory, timeout=600)
    assert synced.returncode == 0, synced.stdout[-4000:] + synced.failure_text
    data = synced.summary['artifact_data']['trainops_code_sync']
    assert 'shared_with' not in data[lab.names[0]]
    assert {data[n]['shared_with'] for n in lab.names[1:]} == {lab.names[0]}
    for node in lab.names:  # every node sees the files, owned by the user
        assert lab.ssh(node, 'stat -c %U ~/code/pkg/model.py', user=USER).stdout.strip() == USER

    mesh = run_playbook('playbooks/ssh_mesh.yml', str(tmp_path), {}, inventory=lab.inventory, timeout=900)
    assert mesh.returncode == 0, mesh.stdout[-4000:] + mesh.failure_text
    # the key's one line (the shared home's ~/.ssh/authorized_keys): from= both networks of every node, restricted
    lines = [line for line in lab.ssh(1, 'cat ~/.ssh/authorized_keys', user=USER).stdout.splitlines()
             if line.endswith(' trainops-mesh-trainops_nodes')]
    assert len(lines) == 1 and lines[0].split(' ', 1)[0].endswith('",restrict'), lines
    admitted = set()
    for pattern in lines[0].split('"')[1].split(','):
        network = ipaddress.ip_network(pattern)
        admitted.update(str(a) for a in (network if network.num_addresses > 1 else [network.network_address]))
    assert admitted == {n[k] for n in lab.nodes for k in ('address', 'mgmt_address')} | {'127.0.0.1', '::1'}, lines
    # from every node, as the user, to every other node by name: host keys checked
    for node in lab.names:
        for peer in lab.names:
            out = lab.ssh(node, 'ssh -o BatchMode=yes -o StrictHostKeyChecking=yes %s hostname' % peer, user=USER).stdout
            assert out.strip() == peer
    again = run_playbook('playbooks/ssh_mesh.yml', str(tmp_path), {}, inventory=lab.inventory, timeout=900)
    assert again.returncode == 0 and {h: s['changed'] for h, s in again.summary['stats'].items()} == \
        {n: 0 for n in lab.names}, again.stdout[-3000:]
