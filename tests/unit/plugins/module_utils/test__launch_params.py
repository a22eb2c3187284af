# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The launch parameters that do not fit: one line per bad value, nothing about the good ones."""

from __future__ import annotations

import os

import pytest

from ansible.errors import AnsibleFilterError
from ansible.parsing.splitter import parse_kv

from ansible_collections.trainops.multinode.plugins.module_utils._launch_params import config_args_passed, launch_problems, merge_problems
from ansible_collections.trainops.multinode.plugins.filter import launch_problems as launch_filter
from ansible_collections.trainops.multinode.plugins.filter import merge_problems as merge_filter


@pytest.fixture
def good(tmp_path):
    """The role's defaults, with a workspace that has the script and the config."""
    (tmp_path / 'config').mkdir()
    (tmp_path / 'train.py').write_text('')
    (tmp_path / 'config' / 'default.yaml').write_text('')
    return {
        'channels': None, 'min_channels': None, 'threads': None, 'nproc_per_node': 8, 'master_port': 29500,
        'max_restarts': 0, 'rdzv_timeout': 300, 'collective_timeout': 300, 'rdzv_backend': 'static',
        'runtime': 'host', 'git_check': 'auto', 'git_reference': 'controller', 'allow_dirty': False,
        'gpu_vendor': 'auto', 'run_name': 'multinode', 'wait': True, 'replace': False, 'script': 'train.py',
        'config': 'config/default.yaml', 'overrides': [], 'env': {}, 'secret_env': {}, 'node_id': '',
        'script_args': [], 'command_prefix': [], 'training_network': '', 'workspace_src': str(tmp_path),
        'sync_workspace': True, 'pass_config_args': True, 'wait_timeout': 0, 'unreachable_grace': 300,
        'stall_timeout': 900, 'straggler_threshold': 0.15, 'node': 'node0', 'connection': 'local', 'retries': 0,
        'retries_without_progress': 2, 'exclude_after': 0,
        'sync_rsync_opts': ['--exclude=__pycache__', '--exclude=*.pyc'], 'sync_exclude': [], 'replace_source': False,
    }


def test_the_defaults_fit(good):
    assert launch_problems(good) == []


@pytest.mark.parametrize('values', [
    {'channels': 42, 'threads': 256, 'min_channels': 4},
    {'channels': '64', 'threads': '1024', 'min_channels': '64'},
    {'channels': '', 'threads': 'None', 'min_channels': None},
    {'min_channels': 8},
    {'nproc_per_node': '256', 'master_port': '65535', 'max_restarts': '3', 'rdzv_timeout': '1'},
    {'allow_dirty': 'yes', 'wait': 'False', 'replace': '1', 'runtime': 'container', 'rdzv_backend': 'c10d'},
    {'run_name': 'sweep-1.a_b', 'node_id': 'node-07', 'training_network': '10.0.0.0/16'},
    {'training_network': 'fd00::/64'},
    {'overrides': ['training.epochs=1', 'a_b.c=x=y'], 'script_args': ['--seed', '1'], 'command_prefix': ['nsys']},
    {'env': {'NCCL_DEBUG': 'INFO'}, 'secret_env': {'HF_TOKEN': 'hunter2'}},
    {'script': 'missing.py', 'config': 'missing.yaml', 'sync_workspace': False},
    {'config': 'missing.yaml', 'pass_config_args': False},
    {'script_args': '--lr 0.1 --name "run 1"', 'module': 'torchtitan.train', 'progress_pattern': r'loss=(\S+)'},
])
def test_good_values_give_no_line(good, values):
    assert launch_problems(dict(good, **values)) == []


# Each knob alone bad: exactly one line, naming that value (and no other knob of the defaults).
ONE_BAD = [
    ({'channels': 0}, 'channels=0: '),
    ({'channels': 'abc'}, 'channels=abc: '),
    ({'channels': -4}, 'channels=-4: '),
    ({'min_channels': 0}, 'min_channels=0: '),
    ({'channels': 8, 'min_channels': 9}, 'min_channels=9: '),
    ({'threads': 100}, 'threads=100: '),
    ({'threads': 2048}, 'threads=2048: '),
    ({'threads': 'x'}, 'threads=x: '),
    ({'nproc_per_node': 0}, 'nproc=0: '),
    ({'nproc_per_node': 'eight'}, 'nproc=eight: '),
    ({'nproc_per_node': 257}, 'nproc=257: '),
    ({'nproc_per_node': 2.5}, 'nproc=2.5: '),
    ({'master_port': 80}, 'master_port=80: '),
    ({'master_port': 70000}, 'master_port=70000: '),
    ({'master_port': 'http'}, 'master_port=http: '),
    ({'max_restarts': -1}, 'trainops_max_restarts=-1: '),
    ({'rdzv_timeout': 0}, 'trainops_rdzv_timeout=0: '),
    ({'collective_timeout': 'soon'}, 'trainops_collective_timeout=soon: '),
    ({'rdzv_backend': 'etcd'}, 'trainops_rdzv_backend=etcd: '),
    ({'runtime': 'vm'}, 'runtime=vm: '),
    ({'git_check': 'sometimes'}, 'trainops_git_check=sometimes: '),
    ({'git_reference': 'node0'}, 'trainops_git_reference=node0: '),
    ({'allow_dirty': 'maybe'}, 'allow_dirty=maybe: '),
    ({'gpu_vendor': 'intel'}, 'trainops_gpu_vendor=intel: '),
    ({'run_name': 'a b'}, 'run_name=a b: '),
    ({'run_name': '-x'}, 'run_name=-x: '),
    ({'wait': 'later'}, 'wait=later: '),
    ({'replace': 2}, 'replace=2: '),
    ({'script': ''}, 'script=: '),
    ({'script': '/abs/train.py'}, 'script=/abs/train.py: '),
    ({'script': '../train.py'}, 'script=../train.py: '),
    ({'script': 'nope.py'}, 'script=nope.py: no such file under the workspace '),
    ({'config': '/etc/c.yaml'}, 'config=/etc/c.yaml: '),
    ({'config': 'config/nope.yaml'}, 'config=config/nope.yaml: no such file under the workspace '),
    ({'overrides': ['no-equals-sign']}, 'overrides=no-equals-sign: '),
    ({'overrides': 'a=b'}, 'overrides=a=b: '),
    ({'env': ['A=1']}, 'trainops_env: '),
    ({'secret_env': 'hunter2'}, 'trainops_secret_env: '),
    ({'secret_env': {'1BAD': 'x'}}, 'trainops_secret_env: 1BAD: '),
    ({'secret_env': {'HF_TOKEN': 'x'}, 'env': {'HF_TOKEN': 'y'}}, 'trainops_secret_env: HF_TOKEN also in trainops_env'),
    ({'node_id': 'a/b'}, 'trainops_node_id=a/b: '),
    ({'node': '../up'}, "node name '../up' cannot name its directory in the experiment: "),
    ({'node': 'gpu 1'}, "node name 'gpu 1' cannot name its directory in the experiment: "),
    ({'script_args': '--name "run 1'}, 'args=--name "run 1: the entrypoint\'s arguments cannot be split as a shell would (No closing quotation)'),
    ({'script_args': ['--seed', 1]}, "args=['--seed', 1]: the entrypoint's arguments must be a string, split as a shell would, or a list of strings"),
    ({'module': 'torchtitan/train.py'}, 'module=torchtitan/train.py: the entrypoint module must be a dotted Python name'),
    ({'progress_pattern': '(step'}, 'progress_pattern=(step: not a Python regular expression'),
    ({'pass_config_args': 'sometimes'}, 'trainops_pass_config_args=sometimes: must be auto, true or false'),
    ({'command_prefix': 'nsys profile'}, 'trainops_command_prefix=nsys profile: '),
    ({'training_network': '10.1.0.0/33'}, 'trainops_training_network=10.1.0.0/33: '),
    ({'training_network': 'mgmt'}, 'trainops_training_network=mgmt: '),
    ({'unreachable_grace': -1}, 'trainops_unreachable_grace=-1: '),
    ({'stall_timeout': '15m'}, 'trainops_stall_timeout=15m: '),
    ({'retries': -1}, 'retries=-1: times a failed job is relaunched from its latest checkpoint (trainops_retries) must be '
                      'an integer >= 0 (e.g. -e retries=1)'),
    ({'retries': 'two'}, 'retries=two: '),
    ({'retries': '2', 'wait': 'false'}, 'retries=2: a job that is not waited for (wait=false) is not retried'),
    ({'retries_without_progress': -1}, 'trainops_retries_without_progress=-1: '),
    ({'retry_policy': {'fatal_patterns': ['(']}}, "trainops_retry_policy.fatal_patterns: '(' is not a regular expression"),
    ({'retry_policy': ['x']}, "trainops_retry_policy=['x']: give a mapping"),
    ({'wait_timeout': 1.5}, 'trainops_wait_timeout=1.5: '),
    ({'straggler_threshold': 0}, 'trainops_straggler_threshold=0: '),
    ({'straggler_threshold': -0.1}, 'trainops_straggler_threshold=-0.1: '),
    ({'straggler_threshold': '15%'}, 'trainops_straggler_threshold=15%: '),
    ({'straggler_threshold': 11}, 'trainops_straggler_threshold=11: '),
    ({'straggler_threshold': 'nan'}, 'trainops_straggler_threshold=nan: '),
    ({'straggler_threshold': True}, 'trainops_straggler_threshold=True: '),
    ({'straggler_threshold': None}, 'trainops_straggler_threshold=None: '),
]


@pytest.mark.parametrize('values, start', ONE_BAD, ids=[start.rstrip(': ') for _v, start in ONE_BAD])
def test_each_bad_value_alone_gives_exactly_one_line_naming_it(good, values, start):
    lines = launch_problems(dict(good, **values))
    assert len(lines) == 1, lines
    assert lines[0].startswith(start), lines
    assert '(e.g. ' in lines[0] or 'give each variable once' in lines[0], lines
    # nothing about the values that fit
    for fine in ('channels=', 'threads=', 'nproc=', 'master_port=', 'run_name=', 'script=', 'config='):
        if not start.startswith(fine) and not (fine == 'channels=' and start.startswith('min_channels=')):
            assert fine not in lines[0].replace('-e ' + start.split('=')[0], ''), lines


def test_the_example_lines_read_as_documented(good, tmp_path):
    assert launch_problems(dict(good, nproc_per_node=0)) == [
        'nproc=0: ranks per node (trainops_nproc_per_node) must be an integer from 1 to 256 (e.g. -e nproc=8)']
    assert launch_problems(dict(good, script='nope.py')) == [
        'script=nope.py: no such file under the workspace %s (trainops_workspace_src) on the controller; the training '
        'entrypoint is given relative to that directory (e.g. -e script=train.py)' % tmp_path]


def test_a_missing_script_and_config_are_told_apart(good):
    lines = launch_problems(dict(good, script='nope.py', config='nope.yaml'))
    assert [line.split(':')[0] for line in lines] == ['script=nope.py', 'config=nope.yaml']
    assert all('no such file under the workspace' in line for line in lines)


def test_two_bad_values_give_two_lines(good):
    lines = launch_problems(dict(good, nproc_per_node=0, master_port=80))
    assert [line.split(':')[0] for line in lines] == ['nproc=0', 'master_port=80']


def test_every_bad_value_at_once_gives_one_line_each(good):
    bad = {}
    for values, _start in ONE_BAD:
        if len(values) == 1 and not set(values) & set(bad):
            bad.update(values)
    lines = launch_problems(dict(good, **bad))
    assert len(lines) == len(bad), lines


def test_min_channels_is_not_blamed_for_a_bad_channels(good):
    lines = launch_problems(dict(good, channels='abc', min_channels=4))
    assert [line.split(':')[0] for line in lines] == ['channels=abc']


def test_a_secret_value_never_appears(good):
    for secret in ({'HF_TOKEN': 'hunter2'}, {'1BAD': 'hunter2'}):
        lines = launch_problems(dict(good, secret_env=secret, env={'HF_TOKEN': 'x'}))
        assert lines and not any('hunter2' in line for line in lines), lines


def test_merge_shows_a_common_line_once_and_names_the_nodes_of_the_others():
    assert merge_problems({'n0': ['a', 'b'], 'n1': ['a'], 'n2': ['a', 'b', 'c']}) == ['a', 'b (on n0, n2)', 'c (on n2)']
    assert merge_problems({'n0': ['a'], 'n1': ['a']}) == ['a']
    assert merge_problems({'n0': [], 'n1': None}) == []
    assert merge_problems({}) == []


def test_the_filters_wrap_the_rules(good):
    assert launch_filter.FilterModule().filters()['launch_problems'](dict(good, nproc_per_node=0))[0].startswith('nproc=0')
    assert merge_filter.FilterModule().filters()['merge_problems']({'n0': ['a']}) == ['a']
    with pytest.raises(AnsibleFilterError, match='mapping of knob to value'):
        launch_filter.launch_problems(['nproc=0'])
    with pytest.raises(AnsibleFilterError, match='mapping of node name'):
        merge_filter.merge_problems(['a'])


def test_a_controller_without_rsync_is_told_how_to_install_it(good):
    good = dict(good, connection='ssh')
    lines = launch_problems(good, which=lambda name: None)
    assert len(lines) == 1 and lines[0].startswith('rsync: not found on the controller')
    assert 'sudo apt-get install rsync' in lines[0] and 'trainops_sync_workspace=false' in lines[0]
    # no sync, no rsync needed
    assert launch_problems(dict(good, sync_workspace=False), which=lambda name: None) == []
    assert launch_problems(good, which=lambda name: '/usr/bin/rsync') == []


@pytest.mark.parametrize('connection', ['local', 'ansible.builtin.local'])
def test_a_local_node_needs_no_rsync_unless_an_option_only_rsync_has(good, connection):
    local = dict(good, connection=connection)  # the role's sync_rsync_opts
    assert launch_problems(local, which=lambda name: None) == []
    lines = launch_problems(dict(local, sync_rsync_opts=['--bwlimit=10m']), which=lambda name: None)
    assert len(lines) == 1 and lines[0].startswith('rsync: not found on the controller')
    # a node whose connection is not known is treated as remote
    assert len(launch_problems(dict(good, connection=None), which=lambda name: None)) == 1


@pytest.mark.parametrize('values', [
    {'profile': 'torch'},
    {'profile': 'nsys', 'profile_ranks': 'all', 'profile_stats': True, 'profile_args': ['--trace=cuda']},
    {'profile': 'rocprof', 'profile_ranks': [0, 3], 'profile_stats': 'false', 'profile_args': []},
    {'profile': 'torch', 'profile_ranks': '0,3'},
    {'profile': '', 'profile_ranks': 'nonsense'},  # profiling off: its other knobs are not looked at
])
def test_profile_values_that_fit(good, values):
    good.update({'profile_ranks': 'first', 'profile_stats': False, 'profile_args': []})
    good.update(values)
    assert launch_problems(good) == []


@pytest.mark.parametrize('values, starts', [
    ({'profile': 'perf'}, 'profile=perf: the per-rank profiler must be one of nsys, rocprof, torch'),
    ({'profile': 'torch', 'profile_ranks': 'some'}, 'profile_ranks=some: '),
    ({'profile': 'torch', 'profile_ranks': [0, -1]}, 'profile_ranks=[0, -1]: '),
    ({'profile': 'torch', 'profile_ranks': []}, 'profile_ranks=[]: '),
    ({'profile': 'nsys', 'profile_stats': 'maybe'}, 'profile_stats=maybe: '),
    ({'profile': 'nsys', 'profile_args': '--trace=cuda'}, 'profile_args=--trace=cuda: '),
])
def test_profile_values_that_do_not_fit(good, values, starts):
    good.update({'profile_ranks': 'first', 'profile_stats': False, 'profile_args': []})
    good.update(values)
    problems = launch_problems(good)
    assert len(problems) == 1 and problems[0].startswith(starts), problems


@pytest.mark.parametrize('values', [{'launcher': 'ssh'}, {'launcher': 'srun', 'slurm_job_id': '42'},
                                    {'launcher': 'srun', 'slurm_job_id': '42', 'srun_start_timeout': '60'},
                                    {'launcher': 'ssh', 'srun_start_timeout': 'ignored without srun'},
                                    {'resume_from': 'multinode_autoch_autoth_20261126_084333'}, {'resume_from': ''}])
def test_launcher_values_that_fit(good, values):
    assert launch_problems(dict(good, **values)) == []


@pytest.mark.parametrize('values, line', [
    ({'launcher': 'mpirun'}, 'launcher=mpirun: how torchrun is started must be ssh or srun'),
    ({'launcher': 'srun', 'slurm_job_id': ''}, 'launcher=srun: not inside a Slurm allocation (SLURM_JOB_ID is not set'),
    ({'launcher': 'srun', 'slurm_job_id': '42', 'runtime': 'container'},
     'launcher=srun with runtime=container: a Slurm step cannot start the ranks'),
    ({'launcher': 'srun', 'slurm_job_id': '42', 'srun_start_timeout': 0},
     'trainops_srun_start_timeout=0: seconds Slurm has to create the step must be an integer >= 1'),
    ({'launcher': 'srun', 'slurm_job_id': '42', 'srun_start_timeout': '30s'},
     'trainops_srun_start_timeout=30s: seconds Slurm has to create the step must be an integer >= 1'),
    ({'resume_from': '../other_run'}, 'trainops_resume_from=../other_run: must be the run id of an earlier launch'),
    ({'resume_from': 'run\nid'}, 'trainops_resume_from=run\nid: must be the run id of an earlier launch'),
    ({'slurm_problem': 'cannot read the GPUs of job 16: job 16 is COMPLETING, not RUNNING'},
     'cannot read the GPUs of job 16: job 16 is COMPLETING, not RUNNING (trainops_slurm_problem, from the slurm inventory)'),
])
def test_launcher_values_that_do_not_fit_give_one_line(good, values, line):
    problems = launch_problems(dict(good, **values))
    assert len(problems) == 1 and problems[0].startswith(line), problems


@pytest.mark.parametrize('values', [
    {}, {'checkpoint_signal': 'USR1', 'checkpoint_signal_seconds': 0}, {'checkpoint_signal': 'USR2',
                                                                        'checkpoint_signal_seconds': 90},
    {'checkpoint_signal': '', 'checkpoint_signal_seconds': 0}, {'checkpoint_signal': None, 'checkpoint_signal_seconds': '0'},
])
def test_checkpoint_signal_values_that_fit(good, values):
    assert launch_problems(dict(good, **values)) == []


@pytest.mark.parametrize('values, line', [
    ({'checkpoint_signal': 'TERM'}, 'trainops_checkpoint_signal=TERM: the checkpoint signal must be USR1, USR2, or empty'),
    ({'checkpoint_signal': 'SIGUSR1'}, 'trainops_checkpoint_signal=SIGUSR1: the checkpoint signal must be USR1, USR2'),
    ({'checkpoint_signal': 'USR1', 'checkpoint_signal_seconds': -1},
     'trainops_checkpoint_signal_seconds=-1: seconds before the step\'s time limit'),
    ({'checkpoint_signal': 'USR1', 'checkpoint_signal_seconds': 'soon'}, 'trainops_checkpoint_signal_seconds=soon: '),
    ({'checkpoint_signal': '', 'checkpoint_signal_seconds': 90},
     'trainops_checkpoint_signal_seconds=90: there is no checkpoint signal to send'),
])
def test_checkpoint_signal_values_that_do_not_fit_give_one_line(good, values, line):
    problems = launch_problems(dict(good, **values))
    assert len(problems) == 1 and problems[0].startswith(line), problems


@pytest.mark.parametrize('values, fragments', [
    # salloc --gres=gpu:2 --cpus-per-task=1: 1 CPU for 2 ranks
    ({'nproc_per_node': 2, 'slurm_cpus': 1}, ['holds 1 CPU for 2 ranks on this node', '--cpus-per-gpu=N',
                                              'trainops_allow_few_cpus=true']),
    ({'nproc_per_node': 2, 'slurm_cpus': 1, 'allow_few_cpus': True}, []),
    ({'nproc_per_node': 8, 'slurm_cpus': 64}, []),
    ({'nproc_per_node': 8, 'slurm_cpus': None}, []),
    # --exclusive without --gpus*: the step would get no GPU
    ({'nproc_per_node': 4, 'launcher': 'srun', 'slurm_gpus_implicit': True, 'slurm_job_id': '13', 'slurm_cpus': 4},
     ['launcher=srun: Slurm job 13 holds the GPUs of its nodes only because it holds the whole nodes',
      'add --gpus-per-node=4 (or --gres=gpu:4)']),
    ({'nproc_per_node': 4, 'launcher': 'ssh', 'slurm_gpus_implicit': True, 'slurm_cpus': 4}, []),
    ({'mem_per_node': '64G', 'slurm_mem_mb': 16000, 'slurm_cpus': 8},
     ['holds 16000 MB of memory on this node (Mem=), the workload needs 64G (trainops_mem_per_node, 65536 MB)',
      '--mem=64G']),
    ({'mem_per_node': '64G', 'slurm_mem_mb': 65536, 'slurm_cpus': 8}, []),
    ({'mem_per_node': '64G', 'slurm_mem_mb': None, 'slurm_cpus': 8}, []),   # Mem=0: Slurm does not track memory
    ({'mem_per_node': 'lots'}, ['trainops_mem_per_node=lots: the memory the workload needs']),
])
def test_what_the_slurm_allocation_holds_on_the_node(good, values, fragments):
    lines = launch_problems(dict(good, **values), which=lambda name: '/usr/bin/' + name)
    assert len(lines) == (1 if fragments else 0), lines
    for fragment in fragments:
        assert fragment in lines[0], lines


def test_a_workspace_that_is_no_directory_is_named_once(good, tmp_path):
    assert launch_problems(dict(good, workspace_src=str(tmp_path / 'nope'))) == [
        'src=%s: the workspace (trainops_workspace_src) is no directory on the controller; give the directory of your '
        'code (e.g. -e src=~/src/myproject)' % (tmp_path / 'nope')]


def test_a_module_is_no_script_file_and_takes_no_profiler(good):
    assert launch_problems(dict(good, module='pkg.train', script='mine.py')) == [
        'module=pkg.train and script=mine.py: give one entrypoint, a script file or a module']
    assert launch_problems(dict(good, module='pkg.train', script_given=True)) == [
        'module=pkg.train and script=train.py: give one entrypoint, a script file or a module']
    lines = launch_problems(dict(good, module='pkg.train', profile='torch', profile_ranks='first', profile_stats=False,
                                 profile_args=[]))
    assert lines == ['module=pkg.train with profile=torch: per-rank profiling runs a script file; give script= instead of '
                     'module=, or leave profile out']


@pytest.mark.parametrize('values, passed', [
    ({}, True),                                            # the shipped train.py with its config
    ({'pass_config_args': 'auto'}, True),
    ({'pass_config_args': 'auto', 'script': 'mine.py'}, False),   # a script of the user's own gets its args only
    ({'pass_config_args': 'auto', 'module': 'pkg.train'}, False),
    ({'pass_config_args': 'auto', 'config': 'other.yaml'}, True),   # a config asked for by name
    ({'pass_config_args': 'auto', 'overrides': ['a.b=1'], 'script': 'mine.py'}, False),
    ({'pass_config_args': 'true', 'script': 'mine.py'}, True),
    ({'pass_config_args': False}, False),
])
def test_config_arguments_go_only_to_the_shipped_script_unless_asked(good, values, passed):
    assert config_args_passed(dict(good, **values)) is passed


def test_a_train_py_of_the_users_own_gets_no_config_and_overrides_for_it_are_refused(good, tmp_path):
    os.remove(str(tmp_path / 'config' / 'default.yaml'))
    assert config_args_passed(dict(good, pass_config_args='auto')) is False
    # overrides ask for the config arguments: the config must then exist
    assert [line.split(':')[0] for line in launch_problems(dict(good, pass_config_args='auto', overrides=['a.b=1']))] == [
        'config=config/default.yaml']
    (tmp_path / 'mine.py').write_text('')
    assert launch_problems(dict(good, pass_config_args='auto', script='mine.py', overrides=['a.b=1'])) == [
        'overrides=a.b=1: config overrides go only to the shipped train.py, with --config; give your script\'s own '
        'arguments in args (e.g. -e \'args=--lr 0.1\')']


def test_words_of_an_e_that_set_no_variable_are_refused_with_the_quoting_that_works(good):
    # -e 'args=--lr 3e-4 --epochs 2': ansible-playbook sets args=--lr and keeps the rest as _raw_params
    assert parse_kv('args=--lr 3e-4 --epochs 2') == {'args': '--lr', '_raw_params': '3e-4 --epochs 2'}
    assert parse_kv('args="--lr 3e-4 --epochs 2"') == {'args': '--lr 3e-4 --epochs 2'}
    lines = launch_problems(dict(good, script_args=['--lr'], raw_params='3e-4 --epochs 2'))
    assert lines == ['-e was given words that set no variable: 3e-4 --epochs 2. A value with spaces needs quotes '
                     'inside the -e (-e \'args="--lr 3e-4 --epochs 2"\') or JSON (-e \'{"args": ["--lr", "3e-4"]}\'); '
                     'give each variable its own -e.']
    assert launch_problems(dict(good, raw_params=None)) == launch_problems(dict(good, raw_params='')) == []
