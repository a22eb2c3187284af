"""The collection against a real Slurm: the lab's `up --slurm` cluster (root only, docs/contributing/slurm-lab.md; the user side: docs/slurm.md).

munged and slurmctld run on the controller, a slurmd in every node's namespaces; jobs run on the nodes
(their hostname, /tmp, /srv/trainops). The tests take real allocations (`salloc`, `sbatch`), read them
with the `slurm` inventory plugin and launch over SSH into them, as a user on a login node would; and with
launcher=srun, where the ranks run as one Slurm step of a held allocation (its own section at the end, in this
module so that it shares the module's Slurm: bringing Slurm up costs minutes of CI).
"""
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

import pytest
from ansible_collections.trainops.multinode.plugins.module_utils._hostlist import expand_hostlist

from playbook_runner import REPO, entry_argv, finish, free_port, wait_until
from lab_processes import no_job_left, node_processes

pytestmark = [pytest.mark.lab, pytest.mark.slow, pytest.mark.usefixtures('lab_session_lock')]

VENV_BIN = os.path.join(REPO, '.venv', 'bin')


class Slurm:
    """The lab's Slurm as its clients on the controller see it (SLURM_CONF from lab.json)."""

    def __init__(self, lab):
        self.lab = lab
        self.conf = lab.data['slurm']['conf']
        self.source = lab.data['slurm']['source']
        self.jobs = []  # every job this module ran: their sacct/scontrol lines are printed at the end

    def env(self, **extra):
        env = {k: v for k, v in os.environ.items() if not k.startswith('SLURM_')}
        env.update(SLURM_CONF=self.conf, ANSIBLE_CONFIG=os.path.join(REPO, 'ansible.cfg'),
                   PATH=VENV_BIN + os.pathsep + os.environ.get('PATH', ''))
        env.update(extra)
        return env

    def run(self, *argv, timeout=120, check=True, **kwargs):
        proc = subprocess.run(list(argv), capture_output=True, text=True, env=self.env(), timeout=timeout,
                              check=False, cwd=REPO, **kwargs)
        if check and proc.returncode != 0:
            raise AssertionError('%s failed (rc %d):\n%s\n%s' % (' '.join(argv), proc.returncode, proc.stdout,
                                                                 proc.stderr))
        return proc

    def hostnames(self, expression):
        return self.run('scontrol', 'show', 'hostnames', expression).stdout.split()

    def hold(self, *names):
        """Occupy these nodes, all their CPUs and GPUs, with a sleeping job (so an allocation gets the
        others); its job id."""
        job = self.run('sbatch', '--parsable', '--job-name', 'hold', '--exclusive', '--nodes', str(len(names)),
                       '--nodelist', ','.join(names), '--output', '/dev/null', '--wrap', 'sleep 600').stdout.strip()
        self.jobs.append(job)
        deadline = time.monotonic() + 60
        while self.job_state(job) != 'RUNNING':
            assert time.monotonic() < deadline, 'hold job %s never ran: %s' % (job, self.job_state(job))
            time.sleep(0.3)
        return job

    def job_state(self, job):
        return self.run('squeue', '--noheader', '--jobs', job, '--format', '%T', check=False).stdout.strip()

    def cancel(self, job):
        self.run('scancel', job, check=False)

    def salloc(self, nodes, argv, timeout=600):
        """``salloc -N nodes ARGV``: ARGV runs on the controller inside a new allocation."""
        proc = self.run('salloc', '--nodes', str(nodes), '--job-name', 'salloc-test', *argv, timeout=timeout,
                        check=False)
        job = next((line.split()[-1] for line in proc.stderr.splitlines() if 'Granted job allocation' in line), None)
        if job:
            self.jobs.append(job)
        return proc


@pytest.fixture(scope='module')
def slurm(lab_manager, restore_lab):  # pylint: disable=unused-argument
    """A 4-node lab with Slurm (built when the running lab lacks it); Slurm goes again afterwards."""
    status = lab_manager.status()
    if not (status.get('healthy') and status.get('slurm') and len(status.get('nodes', [])) == 4
            and status.get('shape', {}).get('user') == 'root' and not status.get('shape', {}).get('mgmt_net')
            and not status.get('shape', {}).get('shared_home')):
        lab_manager.up(4, slurm=True)
    from conftest import Lab  # pylint: disable=import-outside-toplevel
    handle = Slurm(Lab.load())
    yield handle
    report_jobs(handle)
    lab_manager.up(4)  # the plain lab again: an up without --slurm stops and removes Slurm


@pytest.fixture(autouse=True)
def each_test_ends_its_jobs(slurm):  # pylint: disable=redefined-outer-name
    """A job a test left running (a batch script killed before its stop.yml stopped the ranks) would make every later
    launch on those nodes refuse to start: killed, and that test's error (lab_processes.no_job_left)."""
    yield
    no_job_left(slurm.lab)


def report_jobs(handle):
    """Print what Slurm recorded about the module's jobs (pytest -s shows it; CI keeps it in the log)."""
    if not handle.jobs:
        return
    proc = handle.run('sacct', '--jobs', ','.join(handle.jobs), '--format',
                      'JobID,JobName,NodeList,State,ExitCode,Elapsed', '--parsable2', check=False)
    print('\nsacct of this module\'s jobs (rc %d):\n%s%s' % (proc.returncode, proc.stdout, proc.stderr))


def unsafe_text(value):
    """A string as `ansible-inventory --list` prints it ({"__ansible_unsafe": ...} for values from the environment)."""
    return value['__ansible_unsafe'] if isinstance(value, dict) else value


def inventory_in(handle, proc):
    """The JSON `ansible-inventory --list` printed inside an allocation (after the marker line)."""
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.split('=== inventory\n', 1)[1])


@pytest.mark.parametrize('busy, expected', [
    ((), 'lab-node[01-04]'),
    (('lab-node02',), 'lab-node[01,03-04]'),
    (('lab-node01', 'lab-node02'), 'lab-node[03-04]'),
])
def test_hostlist_expansion_matches_scontrol_show_hostnames_on_real_allocations(slurm, busy, expected):
    hold = slurm.hold(*busy) if busy else None
    try:
        proc = slurm.salloc(4 - len(busy), ['/bin/sh', '-c', 'echo "$SLURM_JOB_NODELIST"; scontrol show hostnames'])
    finally:
        if hold:
            slurm.cancel(hold)
    assert proc.returncode == 0, proc.stderr
    nodelist, *shown = proc.stdout.split()
    assert nodelist == expected
    assert expand_hostlist(nodelist) == shown
    assert shown == [name for name in slurm.lab.names if name not in busy]


def test_inventory_inside_real_allocations_in_allocation_order(slurm):
    # nodes 1 and 3 busy: the allocation is the non-contiguous lab-node[02,04]
    hold = slurm.hold('lab-node01', 'lab-node03')
    try:
        script = ('scontrol show hostnames "$SLURM_JOB_NODELIST"; echo "=== list $SLURM_JOB_NODELIST";'
                  ' echo "=== inventory"; ansible-inventory -i %s --list' % slurm.source)
        proc = slurm.salloc(2, ['--gres=gpu:2', '--cpus-per-task=1', '/bin/sh', '-c', script])
    finally:
        slurm.cancel(hold)
    inventory = inventory_in(slurm, proc)
    # 1 CPU a node (CPU_IDs=0) for 2 ranks: a warning naming both nodes (the launch refuses it without
    # trainops_allow_few_cpus), the CPUs per node as host variables
    warning = ' '.join(proc.stderr.split())
    assert '1 CPU for 2 ranks on lab-node02, 1 CPU for 2 ranks on lab-node04' in warning, proc.stderr
    shown = proc.stdout.split('=== list')[0].split()
    nodelist = proc.stdout.split('=== list ', 1)[1].split('\n', 1)[0]
    assert nodelist == 'lab-node[02,04]', proc.stdout
    assert shown == ['lab-node02', 'lab-node04'] == expand_hostlist(nodelist)
    assert inventory['trainops_nodes']['hosts'] == shown
    hostvars = inventory['_meta']['hostvars']
    assert [hostvars[h]['trainops_node_rank'] for h in shown] == [0, 1]
    assert hostvars['lab-node02']['trainops_master'] is True and 'trainops_master' not in hostvars['lab-node04']
    assert [hostvars[h]['ansible_host'] for h in shown] == [slurm.lab.node(h)['ssh_address'] for h in shown]
    # ranks per node from the GPUs Slurm allocated (scontrol show job -d: gpu:labgpu:2(IDX:0-1)), the job id on the group
    assert [hostvars[h]['trainops_nproc_per_node'] for h in shown] == [2, 2]
    assert [hostvars[h]['trainops_slurm_gpu_ids'] for h in shown] == [[0, 1], [0, 1]]
    assert [hostvars[h]['trainops_slurm_cpus'] for h in shown] == [1, 1]
    group_vars = hostvars['lab-node04']  # (--list shows the group's variables on every host)
    assert 'trainops_slurm_gpus_implicit' not in group_vars
    assert unsafe_text(group_vars['trainops_slurm_nodelist']) == 'lab-node[02,04]'
    assert unsafe_text(group_vars['trainops_slurm_job_id']) == slurm.jobs[-1]


def test_inventory_ranks_per_node_are_the_gpus_slurm_allocated_never_the_cpus(slurm):
    """--gres=gpu:4 fills no SLURM_GPUS* variable on the login node, and SLURM_TASKS_PER_NODE holds CPUs: the ranks
    come from the job's GRES; an allocation without GPUs is refused, naming the option to give."""
    script = 'echo "=== inventory"; ansible-inventory -i %s --list' % slurm.source
    proc = slurm.salloc(2, ['--gres=gpu:4', '/bin/sh', '-c', 'env | grep -c "^SLURM_GPUS" ; ' + script])
    print('salloc -N2 --gres=gpu:4:\n' + proc.stdout.split('=== inventory')[0] + proc.stderr)
    assert proc.stdout.startswith('0\n'), proc.stdout[:200]  # no SLURM_GPUS* in the allocation's shell
    inventory = inventory_in(slurm, proc)
    hostvars = inventory['_meta']['hostvars']
    hosts = inventory['trainops_nodes']['hosts']
    assert len(hosts) == 2 and [hostvars[h]['trainops_nproc_per_node'] for h in hosts] == [4, 4], hostvars
    assert [hostvars[h]['trainops_slurm_gpu_ids'] for h in hosts] == [[0, 1, 2, 3]] * 2
    proc = slurm.salloc(2, ['/bin/sh', '-c', script])  # no GPUs asked for: 1 CPU a node, which is not a rank count
    assert proc.returncode != 0, proc.stdout
    assert 'holds no GPUs' in proc.stdout + proc.stderr and 'gpus_per_node' in proc.stdout + proc.stderr, proc.stderr
    # --exclusive without --gpus*: the job holds every GPU of its nodes, its steps get none (launcher=srun refuses it)
    proc = slurm.salloc(2, ['--exclusive', '/bin/sh', '-c', r'srun -N2 sh -c "echo step=[\$CUDA_VISIBLE_DEVICES]"; '
                            + script])
    inventory = inventory_in(slurm, proc)
    hosts = inventory['trainops_nodes']['hosts']
    assert proc.stdout.split('=== inventory')[0].split() == ['step=[]', 'step=[]'], proc.stdout
    assert inventory['_meta']['hostvars'][hosts[0]]['trainops_slurm_gpus_implicit'] is True


def test_inventory_outside_an_allocation_says_so(slurm):
    proc = slurm.run('ansible-inventory', '-i', slurm.source, '--list', check=False)
    assert proc.returncode != 0
    assert 'not inside a Slurm allocation' in proc.stdout + proc.stderr, proc.stderr


def test_salloc_then_launch_over_ssh_trains_on_the_allocated_nodes_in_allocation_order(slurm, tmp_path):
    hold = slurm.hold('lab-node01')  # the allocation is lab-node[02-04]: node 2 is the master, not node 1
    # another job holds lab-node02's CPU 0 and GPUs 0-1 (a shared node): this job gets its GPUs 2-3
    share = slurm.run('sbatch', '--parsable', '--job-name', 'share', '--nodelist', 'lab-node02', '--nodes', '1',
                      '--cpus-per-task', '1', '--gres=gpu:2', '--output', '/dev/null', '--wrap', 'sleep 600').stdout.strip()
    slurm.jobs.append(share)
    wait_until(lambda: slurm.job_state(share) == 'RUNNING', 60, what='the job sharing lab-node02')
    extravars = {'trainops_experiments_dir': str(tmp_path / 'experiments'), 'master_port': free_port(),
                 'trainops_progress_interval': 10, 'trainops_poll_interval': 1, 'config': 'config/tiny.yaml',
                 # the job holds 1 CPU a node for 2 ranks (the launch refuses that without it)
                 'trainops_allow_few_cpus': True}
    argv = entry_argv('playbooks/launch.yml', str(tmp_path), extravars, inventory=slurm.source)
    # first a step on lab-node02, where this job holds GPUs 2-3: with ConstrainDevices Slurm gives it local indexes,
    # and module_utils/_gpu_visibility.py, from what the step's devices cgroup lets it access, numbers them the same
    view_out = tmp_path / 'view.json'
    step = ('srun -N1 -w lab-node02 %s %s %s %s > %s' % (
        sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'gpu_view_probe.py'),
        os.path.join(slurm.lab.data['slurm']['gpu_dir'], 'lab-node02'), '2,3', view_out))
    started = time.monotonic()
    try:
        proc = finish(slurm.salloc(3, ['--gres=gpu:2', '/bin/sh', '-c', step + ' && exec "$@"', 'sh'] + argv), argv,
                      started)
    finally:
        slurm.cancel(hold)
        slurm.cancel(share)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-3000:]
    experiment = proc.summary['artifact_data']['trainops_experiment']
    assert experiment['outcome'] == 'succeeded'
    manifest = json.load(open(os.path.join(experiment['path'], 'manifest.json')))
    allocated = [slurm.lab.node(name) for name in ('lab-node02', 'lab-node03', 'lab-node04')]
    assert manifest['world_size'] == 6 and manifest['summary']['ranks_seen'] == list(range(6))
    assert manifest['master']['addr'] == allocated[0]['address']
    for index, node in enumerate(allocated):
        for local_rank in range(2):
            rank = 2 * index + local_rank
            seen = json.load(open(os.path.join(experiment['path'], 'outputs', manifest['nodes'][index]['host'],
                                               'rank_%02d_env.json' % rank)))
            assert seen['hostname'] == node['hostname'], (rank, seen['hostname'])
            assert seen['env']['GLOO_SOCKET_IFNAME'] == node['ifname']
            # the GPUs Slurm gave this job on the node (IDX of scontrol show job -d), not the node's first ones
            assert seen['env']['CUDA_VISIBLE_DEVICES'] == ('2,3' if index == 0 else '0,1'), (rank, seen['env'])
            # the node's one allocated CPU shared by its 2 ranks (trainops_slurm_cpus / ranks, at least 1)
            assert seen['env']['OMP_NUM_THREADS'] == '1', (rank, seen['env'])
    assert 'lab-node01' not in {n['host'] for n in manifest['nodes']}
    view = json.loads(view_out.read_text())
    print('step on lab-node02 holding GPUs 2-3: %s' % view)
    if slurm.lab.data['slurm']['constrain_devices']:
        # (the SSH sessions above are not in the job's cgroup, the lab has no pam_slurm_adopt: they keep 2,3)
        assert view['step_env'] == '0,1' and view['view']['constrained'] is True and view['view']['ids'] == [0, 1], view
    else:
        assert view['step_env'] == '2,3' and view['view']['constrained'] is False and view['view']['ids'] == [2, 3], view


def submit_launch(slurm, workdir, job_name, extra_vars, wait=True):
    """playbooks/sbatch.yml (through the ansible-runner entry), started in the background; with ``wait`` it
    waits for the job (trainops_sbatch_wait)."""
    extravars = {'trainops_sbatch_inventory': slurm.source, 'trainops_sbatch_nodes': 2, 'trainops_sbatch_wait': wait,
                 # whole nodes (as two jobs at once must not share one), and GPUs to count the ranks from
                 'trainops_sbatch_options': ['--exclusive', '--gres=gpu:2'],
                 'trainops_sbatch_job_name': job_name, 'trainops_sbatch_dir': workdir,
                 'trainops_sbatch_extra_vars': dict({'config': 'config/tiny.yaml', 'master_port': free_port(),
                                                     'trainops_experiments_dir': os.path.join(workdir, 'experiments'),
                                                     'trainops_poll_interval': 1}, **extra_vars)}
    argv = entry_argv('playbooks/sbatch.yml', workdir, extravars)
    proc = subprocess.Popen(argv, cwd=REPO, env=slurm.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    proc.argv, proc.started = argv, time.monotonic()
    return proc


def wait_submitted(slurm, proc, timeout=480):
    out, _err = proc.communicate(timeout=timeout)
    done = finish(subprocess.CompletedProcess(proc.argv, proc.returncode, out, ''), proc.argv, proc.started)
    record = done.summary.get('artifact_data', {}).get('trainops_sbatch', {})
    if record.get('job_id'):
        slurm.jobs.append(record['job_id'])
    return done, record


def accounted(slurm, job, timeout=30):
    """``State|ExitCode`` of a job as the accounting (sacct, slurmdbd) has it once the job is recorded ended."""
    deadline = time.monotonic() + timeout
    while True:
        line = slurm.run('sacct', '--jobs', job, '--allocations', '--noheader', '--parsable2',
                         '--format', 'State,ExitCode').stdout.strip()
        if line and not line.startswith(('RUNNING', 'PENDING', 'COMPLETING')) or time.monotonic() > deadline:
            return line
        time.sleep(0.5)


def job_record(slurm, job):
    """`scontrol show job` of a finished job as a dict (JobState, ExitCode, NodeList, ...)."""
    text = slurm.run('scontrol', 'show', 'job', '--oneliner', job).stdout
    return dict(field.split('=', 1) for field in text.split() if '=' in field)


@pytest.fixture()
def batch_dir():
    """A directory the controller and the nodes see alike (/tmp and /srv/trainops are each node's own)."""
    path = tempfile.mkdtemp(prefix='trainops-sbatch-test-', dir='/var/tmp')
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_sbatch_exit_code_is_the_launch_outcome(slurm, batch_dir):
    # two batch jobs at once, two nodes each: one trains, one has rank 3 fail at step 2
    good_dir, bad_dir = os.path.join(batch_dir, 'good'), os.path.join(batch_dir, 'bad')
    os.makedirs(good_dir)
    os.makedirs(bad_dir)
    good = submit_launch(slurm, good_dir, 'sbatch-ok', {})
    bad = submit_launch(slurm, bad_dir, 'sbatch-fail', {'overrides': ['debug.fail_rank=3', 'debug.fail_step=2']})
    good_run, good_job = wait_submitted(slurm, good)
    bad_run, bad_job = wait_submitted(slurm, bad)

    assert good_run.returncode == 0, good_run.stdout[-5000:]
    assert good_job['exit_code'] == 0
    record = job_record(slurm, good_job['job_id'])
    assert record['JobState'] == 'COMPLETED' and record['ExitCode'] == '0:0', record
    assert accounted(slurm, good_job['job_id']) == 'COMPLETED|0:0'
    experiments = os.path.join(good_dir, 'experiments')
    (name,) = os.listdir(experiments)
    manifest = json.load(open(os.path.join(experiments, name, 'manifest.json')))
    assert manifest['world_size'] == 4 and manifest['summary']['ranks_seen'] == list(range(4))
    # the launch ran on the job's own allocation, in its order
    assert [n['host'] for n in manifest['nodes']] == expand_hostlist(record['NodeList'])
    output = open(os.path.join(good_dir, 'sbatch-ok-%s.out' % good_job['job_id'])).read()
    assert 'trainops: launch.yml exited with 0' in output

    assert bad_run.returncode != 0
    assert bad_job['exit_code'] == 2, bad_job
    assert 'Batch job %s failed with exit code 2' % bad_job['job_id'] in bad_run.failure_text, bad_run.failure_text
    record = job_record(slurm, bad_job['job_id'])
    assert record['JobState'] == 'FAILED' and record['ExitCode'] == '2:0', record
    assert accounted(slurm, bad_job['job_id']) == 'FAILED|2:0'
    output = open(os.path.join(bad_dir, 'sbatch-fail-%s.out' % bad_job['job_id'])).read()
    assert 'trainops: launch.yml exited with 2' in output


def training_processes(lab):
    """{node name: [pid, ...]} of the training ranks (train.py) running on the lab's nodes."""
    found = {}
    for node in lab.nodes:
        pids = [pid for pid, cmdline in node_processes(lab, node) if 'train.py' in cmdline]
        if pids:
            found[node['name']] = pids
    return found


def test_a_cancelled_batch_job_stops_its_ranks_on_every_node(slurm, batch_dir):
    # the ranks run over SSH, outside the job (no pam_slurm_adopt): the batch script's TERM trap stops them
    submit = submit_launch(slurm, batch_dir, 'sbatch-cancel',
                           {'overrides': ['debug.sleep_per_step_s=0.5', 'training.epochs=50']}, wait=False)
    proc, record = wait_submitted(slurm, submit)
    assert proc.returncode == 0, proc.stdout[-3000:]
    job = record['job_id']
    deadline = time.monotonic() + 300
    while len(training_processes(slurm.lab)) < 2:
        assert time.monotonic() < deadline and slurm.job_state(job) in ('PENDING', 'RUNNING', 'CONFIGURING'), \
            'the batch job %s never trained on 2 nodes (%s)' % (job, slurm.job_state(job))
        time.sleep(1)
    nodes = expand_hostlist(job_record(slurm, job)['NodeList'])
    assert sorted(training_processes(slurm.lab)) == nodes
    slurm.run('scancel', job)
    output_file = os.path.join(batch_dir, 'sbatch-cancel-%s.out' % job)
    deadline = time.monotonic() + 60
    while slurm.job_state(job) or training_processes(slurm.lab):
        assert time.monotonic() < deadline, (slurm.job_state(job), training_processes(slurm.lab),
                                             open(output_file).read()[-4000:])
        time.sleep(1)
    output = open(output_file).read()
    assert 'ends early (cancelled or out of time): stopping the ranks on every node' in output
    assert 'trainops: stop.yml exited with 0' in output, output[-3000:]
    assert accounted(slurm, job).startswith('CANCELLED'), accounted(slurm, job)


FORGE_STEP = """
import json, sys
run_dir, job_id, step_id, node = sys.argv[1:]
for name, change in (('job.json', {'launcher': 'srun'}),
                     ('pids.json', {'slurm': {'job_id': job_id, 'step_id': step_id, 'node': node, 'task': '0'}})):
    with open('%s/%s' % (run_dir, name)) as handle:
        record = json.load(handle)
    record.update(change)
    with open('%s/%s' % (run_dir, name), 'w') as handle:
        json.dump(record, handle)
"""


def test_stop_with_become_refuses_another_users_step_and_still_stops_the_nodes_torchrun(slurm, tmp_path):
    """A job rewrote its records (job.json: launcher srun; pids.json: a step) to point at another user's running step
    that it named after its run: an admin's `stop.yml --become` neither signals nor cancels that step, fails naming
    both users, and still stops the run's own torchrun on every node by its verified pids (issue 37). The run is
    root's, started over SSH on 2 nodes; the other user's job runs as nobody on a third node."""
    lab = slurm.lab
    nodes = lab.names[:2]
    extravars = {'trainops_experiments_dir': str(tmp_path / 'experiments'), 'master_port': free_port(),
                 'trainops_poll_interval': 1, 'config': 'config/tiny.yaml', 'wait': False, 'nproc': 1,
                 'overrides': ['debug.sleep_per_step_s=0.5', 'training.epochs=50']}
    argv = entry_argv('playbooks/launch.yml', str(tmp_path), extravars, inventory=lab.inventory) + ['-l', ','.join(nodes)]
    started = time.monotonic()
    proc = finish(subprocess.run(argv, cwd=REPO, env=slurm.env(), capture_output=True, text=True, timeout=600,
                                 check=False), argv, started)
    assert proc.returncode == 0, proc.stdout[-5000:]
    (run_id, ) = os.listdir(extravars['trainops_experiments_dir'])
    wait_until(lambda: sorted(training_processes(lab)) == nodes, 120, what='ranks on %s' % ', '.join(nodes))
    other = slurm.run('sbatch', '--parsable', '--uid=nobody', '--gid=nogroup', '--chdir=/tmp', '--output=/dev/null',
                      '--nodes=1', '--nodelist', lab.names[2], '--job-name', 'other-user',
                      '--wrap', 'exec srun --job-name=trainops-%s sleep 300' % run_id).stdout.strip()
    slurm.jobs.append(other)
    try:
        def other_step():
            # the srun step's id, once squeue lists it: the batch step ('<job>.batch|batch') comes first
            listed = slurm.run('squeue', '--steps', '--jobs', other, '--noheader', '--format', '%i|%j', check=False).stdout
            for line in listed.splitlines():
                step_id, _sep, name = line.strip().partition('|')
                if name == 'trainops-%s' % run_id:
                    return step_id.split('.', 1)[-1]
            return None
        step = wait_until(other_step, 60, what="the other user's step")
        with open(os.path.join(extravars['trainops_experiments_dir'], run_id, 'manifest.json')) as handle:
            run_dirs = {node['host']: node['run_dir'] for node in json.load(handle)['nodes']}
        for name in nodes:
            lab.ssh(name, shlex.join([os.path.join(VENV_BIN, 'python'), '-c', FORGE_STEP, run_dirs[name], other, step,
                                      name]))
        started = time.monotonic()
        stop = subprocess.run([os.path.join(VENV_BIN, 'ansible-playbook'), '-i', lab.inventory, '--become',
                               'playbooks/stop.yml', '-e', 'trainops_experiments_dir=%s' % extravars['trainops_experiments_dir']],
                              cwd=REPO, env=slurm.env(), capture_output=True, text=True, timeout=300, check=False)
        print('stop.yml --become took %.1f s, rc %d' % (time.monotonic() - started, stop.returncode))
        refusal = ("Step %s.%s is not run %s's: Slurm job %s belongs to uid 65534 (nobody), but run %s belongs to uid 0 "
                   "(root) (the owner of its run directory on the nodes)." % (other, step, run_id, other, run_id))
        shown = [line.strip() for line in stop.stdout.splitlines() if 'is not run %s' % run_id in line]
        print('the refused stop:\n  ' + '\n  '.join(shown))
        assert stop.returncode != 0 and refusal in stop.stdout, stop.stdout[-6000:]
        assert ("The run's own processes on %s were stopped by their verified pids instead." % ', '.join(nodes)) in \
            ' '.join(stop.stdout.split()), stop.stdout[-3000:]
        # the nodes' own torchrun is stopped; the other user's step runs on, neither signalled nor cancelled
        assert training_processes(lab) == {}
        assert slurm.run('squeue', '--steps', '%s.%s' % (other, step), '--noheader', '--format', '%i|%u').stdout.strip() \
            == '%s.%s|nobody' % (other, step)
    finally:
        slurm.cancel(other)


# ---------------------------------------------------------------------------------------------
# launcher=srun: the ranks run as one step of the allocation (in this module to share its Slurm)

class Allocation:
    """A held allocation of every lab node and the playbooks run inside it."""

    def __init__(self, slurm_handle, job):  # pylint: disable=redefined-outer-name
        self.slurm = slurm_handle
        self.job = job
        record = job_record(slurm_handle, job)
        self.nodelist = record['NodeList']
        self.nodes = expand_hostlist(self.nodelist)
        self.env = slurm_handle.env(SLURM_JOB_ID=job, SLURM_JOBID=job, SLURM_JOB_NODELIST=self.nodelist,
                                    SLURM_NODELIST=self.nodelist, SLURM_JOB_NUM_NODES=str(len(self.nodes)),
                                    SLURM_NNODES=str(len(self.nodes)),
                                    SLURM_TASKS_PER_NODE='2(x%d)' % len(self.nodes))

    def argv(self, playbook, workdir, extravars):
        return entry_argv(playbook, str(workdir), extravars, inventory=self.slurm.source)

    def run(self, playbook, workdir, extravars, timeout=420):
        argv = self.argv(playbook, workdir, extravars)
        started = time.monotonic()
        proc = subprocess.run(argv, cwd=REPO, env=self.env, capture_output=True, text=True, timeout=timeout,
                              check=False)
        return finish(proc, argv, started)

    def steps(self):
        """{step name: (step id, State, ExitCode)} of the allocation, from sacct."""
        out = self.slurm.run('sacct', '--jobs', self.job, '--parsable2', '--noheader',
                             '--format', 'JobID,JobName,State,ExitCode').stdout
        found = {}
        for line in out.splitlines():
            job_step, name, state, code = line.split('|')[:4]
            if '.' in job_step:
                found[name] = (job_step.split('.', 1)[1], state.split()[0], code)
        return found


@pytest.fixture(scope='module')
def allocation(slurm):  # pylint: disable=redefined-outer-name
    # whole nodes (all their CPUs), 2 GPUs a node for the steps (lab-node04 has 2 of them)
    granted = [line.split()[-1] for line in slurm.run('salloc', '--no-shell', '--nodes', '4', '--exclusive',
                                                      '--gres=gpu:2', '--job-name', 'srun-tests').stderr.splitlines()
               if 'Granted job allocation' in line]
    assert granted, 'salloc --no-shell granted no allocation'
    job_id = granted[0]
    slurm.jobs.append(job_id)
    try:
        yield Allocation(slurm, job_id)
    finally:
        slurm.cancel(job_id)


def srun_vars(tmp_path, **extra):
    extravars = {'trainops_experiments_dir': str(tmp_path / 'experiments'), 'master_port': free_port(),
                 'trainops_progress_interval': 10, 'trainops_poll_interval': 1, 'config': 'config/tiny.yaml',
                 'launcher': 'srun', 'nproc': 2}
    extravars.update(extra)
    return extravars


def prepared_job(allocation, name, manifest):
    """The node's job.json of the manifest's run (read over SSH on the node)."""
    run_dir = next(n['run_dir'] for n in manifest['nodes'] if n['host'] == name)
    return json.loads(allocation.slurm.lab.ssh(name, 'cat %s/job.json' % run_dir).stdout)


def manifest_of(proc):
    experiment = proc.summary.get('artifact_data', {}).get('trainops_experiment', {})
    with open(os.path.join(experiment['path'], 'manifest.json')) as handle:
        return experiment, json.load(handle)


def test_srun_trains_4_nodes_x_2_ranks_as_one_step_in_allocation_order(allocation, tmp_path):
    proc = allocation.run('playbooks/launch.yml', tmp_path, srun_vars(tmp_path))
    assert proc.returncode == 0, proc.stdout[-6000:]
    experiment, manifest = manifest_of(proc)
    assert experiment['outcome'] == 'succeeded'
    assert manifest['world_size'] == 8 and manifest['summary']['ranks_seen'] == list(range(8))
    launcher = manifest['launcher']
    assert launcher['name'] == 'srun' and launcher['job_id'] == allocation.job
    assert launcher['step_name'] == 'trainops-' + manifest['run_id']
    assert [n['host'] for n in manifest['nodes']] == allocation.nodes
    for index, name in enumerate(allocation.nodes):
        node = allocation.slurm.lab.node(name)
        for local_rank in range(2):
            rank = 2 * index + local_rank
            with open(os.path.join(experiment['path'], 'outputs', name, 'rank_%02d_env.json' % rank)) as handle:
                seen = json.load(handle)
            # each rank on its node, with that node's own interface, started by Slurm (inside the step)
            assert seen['hostname'] == node['hostname'], (rank, seen['hostname'])
            assert seen['env']['GLOO_SOCKET_IFNAME'] == node['ifname']
            # every CPU the (exclusive) job holds on the node, not the one CPU of a default task binding, and the
            # 2 GPUs a node the job asked for, as Slurm set them for the step
            assert seen['cpu_affinity'] == [0, 1], (rank, seen['cpu_affinity'])
            assert seen['env']['CUDA_VISIBLE_DEVICES'] == '0,1', (rank, seen['env'])
            # the environment the preflight saw over SSH, not srun --export=NONE's bare one
            login = prepared_job(allocation, name, manifest)['login_env']
            for variable in ('PATH', 'HOME', 'USER'):
                assert seen['process_env'][variable] == login.get(variable), (rank, variable, seen['process_env'])
            print('rank %d on %s: cpus %s, CUDA_VISIBLE_DEVICES=%s, PATH=%s' % (
                rank, name, seen['cpu_affinity'], seen['env']['CUDA_VISIBLE_DEVICES'], seen['process_env']['PATH']))
    step_id, state, code = wait_until(lambda: allocation.steps().get(launcher['step_name']), 30, what='the step in sacct')
    assert step_id == launcher['step_id']
    assert wait_until(lambda: allocation.steps()[launcher['step_name']][1] == 'COMPLETED', 30), allocation.steps()
    assert code == '0:0' or allocation.steps()[launcher['step_name']][2] == '0:0'


def test_srun_a_failed_rank_ends_the_step_and_the_failure_names_its_node(allocation, tmp_path):
    # global rank 5 = local rank 1 of the third node in allocation order
    proc = allocation.run('playbooks/launch.yml', tmp_path, srun_vars(
        tmp_path, overrides=['debug.fail_rank=5', 'debug.fail_step=3', 'training.epochs=20']))
    assert proc.returncode != 0
    culprit = allocation.nodes[2]
    experiment, manifest = manifest_of(proc)
    assert experiment['outcome'] == 'failed', experiment
    # the culprit alone failed; Slurm ended the others because of it (--kill-on-bad-exit): stopped, not failures
    others = [node for node in allocation.nodes if node != culprit]
    detail = manifest['outcome_detail']
    assert detail.startswith('failed on %s (node rank 2: ' % culprit), detail
    assert 'then failed' not in detail and detail.endswith('; stopped: ' + ', '.join(sorted(others))), detail
    assert manifest['failed_nodes'] == [culprit] and manifest['also_failed'] == [], manifest
    assert sorted(manifest['stopped_nodes']) == sorted(others), manifest
    step = manifest['launcher']['step']
    for node in others:
        stop = manifest['results'][node]['stop']
        assert stop['reason'] == 'peer' and stop['by'] == 'slurm', (node, manifest['results'][node])
        assert stop['detail'].startswith('ended by Slurm with step %s (srun --kill-on-bad-exit) because %s' % (
            step, culprit)), stop
    assert manifest['results'][culprit].get('stop') is None, manifest['results'][culprit]
    assert culprit in proc.failure_text, proc.failure_text
    assert not any(node in proc.failure_text.split('Logs and outputs')[-1] for node in others), proc.failure_text
    name = manifest['launcher']['step_name']
    assert wait_until(lambda: allocation.steps().get(name, (None, 'RUNNING'))[1] not in ('RUNNING', 'COMPLETING'),
                      60), allocation.steps()
    assert allocation.steps()[name][1] == 'FAILED', allocation.steps()
    assert not training_processes(allocation.slurm.lab)


def start_a_long_srun_job(allocation, tmp_path):
    """``(extravars, run_id, experiment path)`` of a launcher=srun job started with wait=false, its ranks running on all
    4 nodes."""
    extravars = srun_vars(tmp_path, wait=False, overrides=['debug.sleep_per_step_s=0.5', 'training.epochs=50'])
    proc = allocation.run('playbooks/launch.yml', tmp_path, extravars)
    assert proc.returncode == 0, proc.stdout[-6000:]
    (run_id, ) = os.listdir(extravars['trainops_experiments_dir'])
    wait_until(lambda: len(training_processes(allocation.slurm.lab)) == 4, 120, what='ranks on all 4 nodes')
    return extravars, run_id, os.path.join(extravars['trainops_experiments_dir'], run_id)


def stopped_by_the_user(allocation, path):
    """The manifest of a job stop.yml ended: nothing runs, the outcome is stopped by the user, no node failed."""
    assert not training_processes(allocation.slurm.lab)
    with open(os.path.join(path, 'manifest.json')) as handle:
        manifest = json.load(handle)
    assert manifest['outcome'] == 'stopped', manifest.get('outcome_detail')
    assert manifest['stop']['reason'] == 'user' and manifest['failed_nodes'] == [], manifest.get('stop')
    return manifest


def test_srun_status_and_stop_find_the_step_with_and_without_run_id_and_cancel_it(allocation, tmp_path):
    # one running step serves status with the run id (squeue) and without it (the nodes' records), then stop without
    # the run id (one long srun job less for CI than a job for each: the stop with a run id differs only in where
    # the run id comes from, which status checks here and the SSH launcher's e2e tests check for stop)
    extravars, run_id, path = start_a_long_srun_job(allocation, tmp_path)
    with open(os.path.join(path, 'manifest.json')) as handle:
        launcher = json.load(handle)['launcher']
    status = allocation.run('playbooks/status.yml', tmp_path, dict(extravars, run_id=run_id))
    assert status.returncode == 0, status.stdout[-4000:]
    step = status.summary['artifact_data']['trainops_slurm_step']
    assert step['state'] == 'RUNNING' and step['source'] == 'squeue' and step['job_id'] == allocation.job, step
    assert {job['status'] for job in status.summary['artifact_data']['trainops_status'].values()} == {'running'}
    # neither run_id nor the experiments directory: the nodes' records name the run and its step
    bare = {key: value for key, value in extravars.items() if key != 'trainops_experiments_dir'}
    status = allocation.run('playbooks/status.yml', tmp_path, dict(bare, collect=False))
    assert status.returncode == 0, status.stdout[-4000:]
    step = status.summary['artifact_data']['trainops_slurm_step']
    assert step['state'] == 'RUNNING' and (step['job_id'], step['step_id']) == (launcher['job_id'], launcher['step_id']), step
    stop = allocation.run('playbooks/stop.yml', tmp_path, extravars)
    assert stop.returncode == 0, stop.stdout[-6000:]
    assert 'scancel' not in stop.failure_text
    manifest = stopped_by_the_user(allocation, path)
    assert sorted(n for n in os.listdir(os.path.join(path, 'logs')) if n.startswith('node_')) == ['node_%d.txt' % r for r in range(4)]
    # each node's supervisor stopped torchrun on the step's SIGTERM and recorded its end before the cancel (the SSH
    # stop, pids signalled, would have left torchrun's SIGTERM exit)
    assert {r['status'] for r in manifest['results'].values()} == {'exited'}, manifest['results']
    # stop_srun.yml recorded the stop (its detail names the scancel), not the SSH stop
    assert all('(scancel %s)' % launcher['step'] in r['stop']['detail'] for r in manifest['results'].values()), \
        manifest['results']
    name = manifest['launcher']['step_name']
    assert wait_until(lambda: allocation.steps().get(name, (None, ''))[1] == 'CANCELLED', 60), allocation.steps()


def test_srun_checkpoint_signal_before_the_steps_time_limit_then_timed_out(allocation, tmp_path):
    """srun --time=1 and USR1 30 s before it: the launch's timer sends the step USR1 (~30 s in) through Slurm, every
    process of the step gets it, supervisor and torchrun live on, every rank logs the checkpoint at one global step,
    rank 0 writes checkpoint.pt; Slurm ends the step at its limit (60-90 s in: slurmctld checks limits every 30 s),
    sacct says TIMEOUT and the outcome is timed_out with that checkpoint. About 2.5 minutes."""
    # one epoch of 400 steps (51200 samples / 8 ranks / batch 16) of >= 0.5 s: no epoch end before the limit
    extravars = srun_vars(tmp_path, trainops_srun_args=['--time=1'], trainops_checkpoint_signal='USR1',
                          trainops_checkpoint_signal_seconds=30,
                          overrides=['debug.sleep_per_step_s=0.5', 'training.epochs=1', 'data.num_samples=51200'])
    proc = allocation.run('playbooks/launch.yml', tmp_path, extravars, timeout=420)
    assert proc.returncode != 0, proc.stdout[-6000:]  # a job that did not finish fails the play, as the wait's limit does
    experiment, manifest = manifest_of(proc)
    assert experiment['outcome'] == 'timed_out', experiment
    step = manifest['launcher']['step']
    timer = manifest['launcher']['checkpoint_timer']
    assert timer['signal'] == 'USR1' and timer['pid'] and 20 <= timer['fires_in'] <= 30, timer
    assert manifest['slurm_end']['time_limit'] == {
        'by': 'step', 'source': 'sacct', 'detail': 'Slurm ended step %s at its time limit (sacct: TIMEOUT)' % step}
    assert manifest['failed_nodes'] == [] and sorted(manifest['stopped_nodes']) == sorted(allocation.nodes), manifest
    # what every node's ranks logged (node.log, collected as logs/node_<rank>.txt)
    logged = {}
    for index, name in enumerate(allocation.nodes):
        with open(os.path.join(experiment['path'], 'logs', 'node_%d.txt' % index)) as handle:
            # each rank's line starts with torchrun's [rank N] prefix (roles/job/README.md, Per-rank logs)
            lines = [line.split('] ', 1)[1].strip() for line in handle
                     if line.startswith('[rank ') and line.split('] ', 1)[1].startswith('[trainops] checkpoint at global step ')]
        print('%s logged:\n  %s' % (name, '\n  '.join(lines)))
        assert sorted(int(line.split('rank=')[1].split('/')[0]) for line in lines) == [2 * index, 2 * index + 1], lines
        assert all(line.endswith('/8') and ' on SIGUSR1 node=' in line for line in lines), lines
        logged[name] = set(int(line.split()[5]) for line in lines)
    steps = set.union(*logged.values())
    assert len(steps) == 1, logged  # all ranks agreed on one step boundary
    (signal_step, ) = steps
    checkpoint = manifest['checkpoint']
    assert checkpoint['node'] == allocation.nodes[0], checkpoint
    assert checkpoint['last_signal_checkpoint']['global_step'] == signal_step, checkpoint
    assert checkpoint['global_step'] == signal_step and checkpoint['signal'] == 'SIGUSR1', checkpoint
    assert manifest['outcome_detail'] == (
        'timed out: Slurm ended step %s at its time limit (sacct: TIMEOUT); last checkpoint: global step %d (SIGUSR1) '
        'on %s: %s' % (step, signal_step, allocation.nodes[0], checkpoint['path'])), manifest['outcome_detail']
    # checkpoint.pt on rank 0's node holds that step (the controller's venv is visible in the node's namespace)
    loaded = allocation.slurm.lab.ssh(allocation.nodes[0], '%s -c "import sys, torch; print(torch.load(sys.argv[1], '
                                      'map_location=\'cpu\', weights_only=True)[\'global_step\'])" %s' % (
                                          os.path.join(VENV_BIN, 'python'), checkpoint['path']))
    assert int(loaded.stdout.strip()) == signal_step, loaded.stdout + loaded.stderr
    # every node's results: ended by Slurm at the limit, supervisor alive until then (it got SIGTERM, not USR1's death)
    for name in allocation.nodes:
        result = manifest['results'][name]
        assert result['stop']['reason'] == 'timeout' and result['stop']['by'] == 'slurm', (name, result)
        # (SIGTERM once or twice: Slurm's time-limit kill, then the step's end, may both reach a supervisor in KillWait)
        assert set(result['supervisor_signals']) == {'SIGTERM'}, (name, result)
    name = manifest['launcher']['step_name']
    assert allocation.steps()[name][1] == 'TIMEOUT', allocation.steps()
    assert not training_processes(allocation.slurm.lab)


def srun_clients(name):
    """PIDs of srun clients on the controller whose command line names step ``name``."""
    found = []
    for entry in os.listdir('/proc'):
        if entry.isdigit():
            try:
                with open('/proc/%s/cmdline' % entry, 'rb') as handle:
                    argv = handle.read().split(b'\0')
            except OSError:
                continue
            if argv and argv[0].endswith(b'srun') and ('--job-name=%s' % name).encode() in argv:
                found.append(int(entry))
    return found


def test_srun_a_step_that_cannot_start_is_given_up_and_never_starts_later(allocation, tmp_path):
    """Another step holds every CPU and GPU of the allocation: the launch's step cannot be created; after
    trainops_srun_start_timeout the launch fails saying why, its srun client is gone, and once the nodes are free
    again no step of the run and no rank starts (Slurm would have started a waiting client's step then)."""
    blocker = subprocess.Popen(['srun', '--jobid', allocation.job, '--nodes', '4', '--ntasks-per-node', '1',
                                '--job-name', 'blocker', 'sleep', '300'], env=allocation.env, cwd=REPO,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_until(lambda: 'blocker' in allocation.steps(), 60, what='the blocking step')
        extravars = srun_vars(tmp_path, trainops_srun_start_timeout=10)
        started = time.monotonic()
        proc = allocation.run('playbooks/launch.yml', tmp_path, extravars, timeout=300)
        took = time.monotonic() - started
        assert proc.returncode != 0, proc.stdout[-6000:]
        (run_id, ) = os.listdir(extravars['trainops_experiments_dir'])
        name = 'trainops-' + run_id
        print('launch failed after %.0f s: %s' % (took, proc.failure_text[:600]))
        # (srun --immediate gives up by itself: "Unable to create step for job N: Requested nodes are busy")
        assert 'did not start' in proc.failure_text and 'trainops_srun_start_timeout' in proc.failure_text, \
            proc.failure_text
        assert 'Requested nodes are busy' in proc.failure_text, proc.failure_text
        assert srun_clients(name) == []
    finally:
        held = allocation.steps().get('blocker')
        if held:
            allocation.slurm.run('scancel', '%s.%s' % (allocation.job, held[0]), check=False)
        else:
            blocker.terminate()
        blocker.wait(timeout=90)
    # the nodes are free: a client left waiting would start the step now
    time.sleep(10)
    assert srun_clients(name) == [] and not training_processes(allocation.slurm.lab)
    assert name not in allocation.steps(), allocation.steps()
    print('steps of the allocation after the blocker ended: %s' % sorted(allocation.steps()))
