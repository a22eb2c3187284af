"""End-to-end: launcher=srun on the embedded local default, with a stand-in for Slurm's client commands.

The stand-in (FAKE_SLURM below, installed as srun, squeue, sacct and scancel in front of PATH) is not Slurm: it
runs the step's task script once per node with nothing but what slurmstepd would give a task of
``srun --export=NONE`` (its SLURM_* variables, CUDA_VISIBLE_DEVICES, the exported names), or plays a step whose
nodes stay busy. The lab (tests/lab/test_slurm_lab.py) runs the real one.
"""
import glob
import json
import os
import sys

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

from playbook_runner import run_playbook  # noqa: E402
from test_launch_local import Lab, processes_under  # noqa: E402

FAKE_SLURM = r'''
import json, os, pwd, signal, subprocess, sys, time
state = os.environ['FAKE_SLURM_DIR']
command = os.path.basename(sys.argv[0])
args = dict(a[2:].split('=', 1) for a in sys.argv[1:] if a.startswith('--') and '=' in a)


def path(name):
    return os.path.join(state, name)


fields = {'U': str(os.getuid()), 'u': pwd.getpwuid(os.getuid()).pw_name}  # the job's user: whoever runs the launch
if command == 'squeue':
    if os.path.exists(path('running')):
        step, name = open(path('running')).read().strip().split('|')
        fields.update(i=step if '--steps' in sys.argv else step.split('.')[0], j=name)
        fmt = sys.argv[sys.argv.index('--format') + 1]
        print('|'.join(fields.get(spec[1:], 'UNLIMITED') for spec in fmt.split('|')))
elif command == 'sacct':
    if os.path.exists(path('done')):
        if 'JobID,UID,User' in sys.argv:
            print('|'.join([open(path('done')).read().split('.')[0], fields['U'], fields['u']]))
        else:
            sys.stdout.write(open(path('done')).read())
elif command == 'scancel':
    open(path('scancel.log'), 'a').write(' '.join(sys.argv[1:]) + '\n')
elif os.environ.get('FAKE_SLURM_MODE') == 'busy':
    open(path('srun.pid'), 'w').write(str(os.getpid()))
    print('srun: Job %s step creation temporarily disabled, retrying (Requested nodes are busy)' % args['jobid'],
          flush=True)
    interrupts = []

    def on_int(signum, frame):
        interrupts.append(signum)
        if len(interrupts) > 1:
            print('srun: Cancelled pending job step with signal 2', flush=True)
            sys.exit(1)
    signal.signal(signal.SIGINT, on_int)
    while True:  # (ignores --immediate: the launch must end it)
        time.sleep(0.05)
else:
    step = '%s.0' % args['jobid']
    open(path('running'), 'w').write('%s|%s\n' % (step, args['job-name']))
    script = sys.argv[sys.argv.index('-c') + 1]
    exported = [] if args['export'] == 'NONE' else args['export'].split(',')
    tasks = []
    for index, node in enumerate(args['nodelist'].split(',')):
        env = {'SLURM_JOB_ID': args['jobid'], 'SLURM_STEP_ID': '0', 'SLURMD_NODENAME': node, 'SLURM_NODEID': str(index),
               'SLURM_PROCID': str(index), 'SLURM_CPU_BIND_TYPE': args.get('cpu-bind', ''),
               'CUDA_VISIBLE_DEVICES': str(index)}
        env.update((name, os.environ[name]) for name in exported if name in os.environ)
        tasks.append(subprocess.Popen(['/bin/sh', '-c', script, 'trainops-task'], env=env, cwd='/'))
    codes = [task.wait() for task in tasks]
    open(path('done'), 'w').write('%s|%s|%s|%d:0\n' % (step, args['job-name'], 'COMPLETED' if not any(codes) else 'FAILED',
                                                       max(codes)))
    os.unlink(path('running'))
    sys.exit(max(codes))
'''


@pytest.fixture
def slurm(tmp_path):
    """The stand-in's bin directory and state directory, as the environment of the playbook."""
    bin_dir, state = tmp_path / 'fake-slurm-bin', tmp_path / 'fake-slurm-state'
    bin_dir.mkdir()
    state.mkdir()
    for name in ('srun', 'squeue', 'sacct', 'scancel'):
        program = bin_dir / name
        program.write_text('#!%s\n%s' % (sys.executable, FAKE_SLURM))
        program.chmod(0o755)
    return {'PATH': '%s:%s' % (bin_dir, os.environ['PATH']), 'FAKE_SLURM_DIR': str(state)}, state


def launch(lab, env, extra=None, timeout=420):
    extravars = {'trainops_node_root': lab.nodes + '/{{ inventory_hostname }}', 'trainops_experiments_dir': lab.experiments,
                 'master_port': lab.port, 'launcher': 'srun', 'trainops_slurm_job_id': '42'}
    extravars.update(extra or {})
    return run_playbook('playbooks/launch.yml', lab.root, extravars, timeout=timeout, env=env)


@pytest.fixture
def lab(tmp_path):
    (tmp_path / 'lab').mkdir()
    lab = Lab(tmp_path / 'lab')
    yield lab
    lab.kill_leftovers()


def test_a_step_whose_nodes_stay_busy_times_out_ends_its_srun_and_starts_nothing(lab, slurm):
    env, state = slurm
    env = dict(env, FAKE_SLURM_MODE='busy')
    proc = launch(lab, env, {'trainops_srun_start_timeout': 1}, timeout=300)
    assert proc.returncode != 0
    text = proc.failure_text
    assert 'Slurm step trainops-' in text and 'did not start' in text, text
    assert 'Requested nodes are busy' in text and 'The srun client (pid ' in text, text
    assert 'unknown error' not in text, text  # every node names the step's failure
    pid = int((state / 'srun.pid').read_text())
    assert not os.path.exists('/proc/%d' % pid) or open('/proc/%d/stat' % pid).read().split(') ')[1][0] in 'ZX'
    assert not processes_under(str(state.parent / 'fake-slurm-bin'))
    # every node's run records the undo: a supervisor that a late step would start does not start torchrun
    for node in ('node0', 'node1'):
        runs = glob.glob(os.path.join(lab.nodes, node, 'state', '*', 'runs', '*'))
        assert len(runs) == 1, runs
        assert json.load(open(os.path.join(runs[0], 'stop.json')))['reason'] == 'undo'
        assert not os.path.exists(os.path.join(runs[0], 'pids.json'))
    manifest = json.load(open(os.path.join(lab.experiment_dirs()[0], 'manifest.json')))
    assert manifest['outcome'] == 'failed' and 'Requested nodes are busy' in manifest['outcome_detail']
    assert not lab.leftovers()


def test_the_steps_ranks_get_the_login_environment_the_steps_gpus_and_all_cpus(lab, slurm, tmp_path):
    env, state = slurm
    env = dict(env, TRAINOPS_E2E_LOGIN_MARK='from-the-login-session', LD_LIBRARY_PATH='/opt/e2e/lib')
    dumps = tmp_path / 'rank-env'
    dumps.mkdir()
    # torchrun's environment (every rank's), dumped by a wrapper in front of it
    prefix = ['/bin/sh', '-c', 'env > "%s/$SLURMD_NODENAME.env"; exec "$@"' % dumps, 'wrapper']
    proc = launch(lab, env, {'trainops_command_prefix': prefix, 'config': 'config/tiny.yaml'})
    assert proc.returncode == 0, proc.failure_text or proc.stdout[-3000:]
    for index, node in enumerate(('node0', 'node1')):
        rank_env = dict(line.split('=', 1) for line in (dumps / ('%s.env' % node)).read_text().splitlines() if '=' in line)
        assert rank_env['TRAINOPS_E2E_LOGIN_MARK'] == 'from-the-login-session'
        runs = glob.glob(os.path.join(lab.nodes, node, 'state', '*', 'runs', '*'))
        job = json.load(open(os.path.join(runs[0], 'job.json')))
        # the module's PATH on the node (the session the preflight ran in), not the task's
        assert rank_env['PATH'] == job['login_env']['PATH'] and rank_env['PATH'].endswith(env['PATH'])
        assert rank_env['LD_LIBRARY_PATH'] == '/opt/e2e/lib'
        assert rank_env['HOME'] == os.environ['HOME']
        assert rank_env['CUDA_VISIBLE_DEVICES'] == str(index) and rank_env['SLURMD_NODENAME'] == node
        assert rank_env['SLURM_CPU_BIND_TYPE'] == 'none'
        placement = json.load(open(os.path.join(runs[0], 'pids.json')))['placement']
        assert placement['cpu_count'] == len(os.sched_getaffinity(0))
        assert placement['visible_devices'] == {'CUDA_VISIBLE_DEVICES': str(index)}
    # the step is the run owner's (Slurm's job and step are this user's, as the run directories), so its end is read
    manifest = json.load(open(os.path.join(proc.summary['artifact_data']['trainops_experiment']['path'], 'manifest.json')))
    assert manifest['slurm_end']['refused'] is None and manifest['slurm_end']['step']['state'] == 'COMPLETED', \
        manifest['slurm_end']
    assert not lab.leftovers()
