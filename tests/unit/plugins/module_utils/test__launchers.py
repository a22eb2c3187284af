# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The launchers behind one interface (module_utils/_launchers.py): the registry, and each launcher's problems,
records, view and judgment; and the generic code, which names no launcher."""

from __future__ import annotations

import io
import os
import re
import tokenize

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils import _knobs, _launchers, _srun
from ansible_collections.trainops.multinode.plugins.module_utils._launch_params import _integer_rule

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..', '..'))

DEFINITIONS = {
    'plugins/module_utils/_launchers.py': 'the launchers, their names and capabilities',
    'plugins/module_utils/_srun.py': "the srun launcher's own code",
    'plugins/modules/srun_step.py': "the srun launcher's module (its srun executable)",
}
"""Where a launcher is defined: the only Python that may name one."""

OTHER_MEANINGS = {
    'plugins/module_utils/_rsync.py': 'the ssh program rsync runs',
    'plugins/action/rsync.py': "Ansible's ssh connection plugin",
    'plugins/module_utils/_resume.py': 'the ssh program a node pulls the checkpoint from another node with',
    'plugins/module_utils/_launch_plan.py': "Ansible's ssh connection plugin, a node's connection when none is set",
}
"""Python where ``ssh`` names something other than a launcher."""

CONNECTION = re.compile(r"""ansible_connection\s*\|\s*default\((['"])ssh\1\)""")
"""``ssh`` as Ansible's connection, not a launcher."""


def generic_python():
    """Every Python file of plugins/ that is not a launcher's definition."""
    for base, dirs, files in os.walk(os.path.join(ROOT, 'plugins')):
        dirs.sort()
        for name in sorted(files):
            path = os.path.relpath(os.path.join(base, name), ROOT)
            if name.endswith('.py') and path not in DEFINITIONS:
                yield path


def generic_yaml():
    """Every YAML file of roles/ and playbooks/: no launcher has task files of its own (roles/job's generic tasks run its
    steps through the launcher action, module_utils/_launcher_steps.py)."""
    for top in ('roles', 'playbooks'):
        for base, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs.sort()
            for name in sorted(files):
                if name.endswith(('.yml', '.yaml', '.j2')):
                    yield os.path.relpath(os.path.join(base, name), ROOT)


def python_naming_launchers(path, source):
    named = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.STRING and token.string.strip('\'"') in _launchers.NAMES:
            if path not in OTHER_MEANINGS or token.string.strip('\'"') != 'ssh':
                named.append('%s:%d %s' % (path, token.start[0], token.string))
        if token.type == tokenize.NAME and token.string == '_srun':
            named.append('%s:%d imports _srun' % (path, token.start[0]))
    return named


def yaml_naming_launchers(path, source):
    named = []
    quoted = re.compile(r"""(['"])(%s)\1""" % '|'.join(_launchers.NAMES))
    for number, line in enumerate(source.splitlines(), 1):
        if line.lstrip().startswith('#'):
            continue
        for match in quoted.finditer(CONNECTION.sub('', line)):
            named.append('%s:%d %s' % (path, number, match.group(0)))
    return named


def srun_job(exit_code=None, status='exited', signals=(), stop=None, step=('7', '2')):
    job_id, step_id = step
    return {'run_id': 'r1', 'status': status, 'exit_code': exit_code, 'stop': stop, 'supervisor_signals': list(signals),
            'owner_uid': 1001,
            'launcher': {'name': 'srun', 'job_id': job_id, 'step_id': step_id, 'step': '%s.%s' % step if job_id and step_id else None}}


def ssh_job(exit_code=None, status='exited', signals=(), stop=None):
    return {'run_id': 'r1', 'status': status, 'exit_code': exit_code, 'stop': stop, 'supervisor_signals': list(signals),
            'launcher': {'name': 'ssh'}}


# --- the registry --------------------------------------------------------------------------------

def test_the_registry_names_every_launcher_once_and_the_knob_offers_those():
    assert _launchers.NAMES == ('ssh', 'srun')
    assert all(launcher.name == name for name, launcher in _launchers.LAUNCHERS.items())
    assert all(isinstance(launcher, _launchers.Launcher) for launcher in _launchers.LAUNCHERS.values())
    assert _knobs.BY_KEY['launcher'].choices == _launchers.NAMES
    assert _launchers.DEFAULT in _launchers.NAMES
    assert not _launchers.LAUNCHERS[_launchers.DEFAULT].deferred_start
    assert _launchers.SPARE_NAMES == ('ssh', )


def test_capabilities_replace_the_names():
    ssh, srun = _launchers.LAUNCHERS['ssh'], _launchers.LAUNCHERS['srun']
    assert ssh.supports_spares and not srun.supports_spares and srun.no_spares_why
    assert ssh.inventory_gpu_ids and not srun.inventory_gpu_ids
    assert _launchers.capability('ssh', 'inventory_gpu_ids') is True
    assert _launchers.capability('srun', 'deferred_start') is True and _launchers.capability('ssh', 'deferred_start') is False
    with pytest.raises(ValueError, match="'mpirun'"):
        _launchers.capability('mpirun', 'deferred_start')
    with pytest.raises(ValueError, match="'name' is not a launcher capability"):
        _launchers.capability('ssh', 'name')


def test_lookups_by_name_by_record_and_by_state():
    assert _launchers.get(None).name == 'ssh' and _launchers.get('').name == 'ssh' and _launchers.get('srun').name == 'srun'
    assert _launchers.get('mpirun') is None
    assert _launchers.for_state('started').name == 'ssh' and _launchers.for_state('prepared').name == 'srun'
    # the torchrun module's launcher option: a launcher writes runs of the state it starts them with, no other
    assert _launchers.for_state('started', 'ssh').name == 'ssh' and _launchers.for_state('prepared', 'srun').name == 'srun'
    assert _launchers.for_state('prepared', 'ssh') is None and _launchers.for_state('started', 'srun') is None
    assert _launchers.for_state('started', 'mpirun') is None
    # job.json without launcher is a run over SSH; an unknown name in the records is not trusted
    assert _launchers.of_spec({}).name == 'ssh' and _launchers.of_spec(None).name == 'ssh'
    assert _launchers.of_spec({'launcher': 'srun'}).name == 'srun'
    assert _launchers.of_spec({'launcher': 'nosuch'}).name == 'ssh'
    assert _launchers.of_job(srun_job()).name == 'srun' and _launchers.of_job(ssh_job()).name == 'ssh'
    assert _launchers.of_job({}).name == 'ssh' and _launchers.of_job(None).name == 'ssh'
    assert _launchers.of_results({'n0': ssh_job(), 'n1': srun_job()}).name == 'srun'
    assert _launchers.of_results({'n0': ssh_job()}).name == 'ssh' and _launchers.of_results({}).name == 'ssh'


# --- what each launcher checks -------------------------------------------------------------------

def test_problems_ssh_needs_nothing_and_an_unknown_launcher_is_named():
    assert _launchers.problems({'launcher': 'ssh'}, _integer_rule) == []
    assert _launchers.problems({}, _integer_rule) == []
    assert _launchers.problems({'launcher': None}, _integer_rule) == []
    assert _launchers.problems({'launcher': 'mpirun'}, _integer_rule) == [
        'launcher=mpirun: how torchrun is started must be ssh or srun (trainops_launcher, e.g. -e launcher=srun)']


def test_problems_srun_needs_an_allocation_the_host_runtime_and_a_start_timeout():
    good = {'launcher': 'srun', 'slurm_job_id': '42', 'runtime': 'host', 'srun_start_timeout': 30}
    assert _launchers.problems(good, _integer_rule) == []
    # the start timeout has a default when it is not given at all (a null one is not a number of seconds)
    assert _launchers.problems({'launcher': 'srun', 'slurm_job_id': '42'}, _integer_rule) == []
    assert _launchers.problems(dict(good, srun_start_timeout=None), _integer_rule) != []
    lines = _launchers.problems(dict(good, slurm_job_id='', runtime='container', srun_start_timeout=0), _integer_rule)
    assert len(lines) == 3
    assert lines[0].startswith('launcher=srun: not inside a Slurm allocation')
    assert lines[1].startswith('launcher=srun with runtime=container')
    assert lines[2].startswith('trainops_srun_start_timeout=0')


# --- what each launcher records and shows --------------------------------------------------------

def test_spec_fields_ssh_records_nothing_srun_the_login_environment_and_where_its_task_runs():
    assert _launchers.LAUNCHERS['ssh'].spec_fields({'PATH': '/usr/bin'}, []) == {}
    environ = {'PATH': '/usr/bin', 'HF_TOKEN': 's', 'MY_KEY': 'k', 'SLURM_JOB_ID': '3', 'SSH_CLIENT': 'x'}
    fields = _launchers.LAUNCHERS['srun'].spec_fields(environ, ['HF_TOKEN'])
    assert fields == {'launcher': 'srun', 'step_linger': _srun.STEP_LINGER, 'login_env': {'PATH': '/usr/bin'},
                      'login_env_omitted': ['MY_KEY'], 'task_env': _srun.TASK_ENV, 'launcher_pids': _srun.PIDS_RECORD}


def test_view_ssh_names_itself_srun_the_step_its_supervisor_recorded():
    step = {'slurm': {'job_id': '7', 'step_id': '2', 'node': 'n1', 'task': '0'}}
    assert _launchers.launcher_view({}, step) == {'name': 'ssh'}
    srun = {'name': 'srun', 'job_id': '7', 'step_id': '2', 'step': '7.2'}
    assert _launchers.launcher_view({'launcher': 'srun'}, step) == srun
    # prepared: the step has not run the supervisor yet (no pids.json), or it ran outside a step
    none = {'name': 'srun', 'job_id': None, 'step_id': None, 'step': None}
    assert _launchers.launcher_view({'launcher': 'srun'}, None) == none
    assert _launchers.launcher_view({'launcher': 'srun'}, {'slurm': None}) == none


def test_run_record_says_whether_the_launcher_has_its_own_task_files_for_the_run():
    ssh = _launchers.run_launcher([ssh_job(), ssh_job()])
    assert ssh['name'] == 'ssh' and ssh['run_id'] == 'r1' and ssh['own_tasks'] is False
    srun = _launchers.run_launcher([{}, srun_job(), srun_job(step=(None, None))])
    assert srun['name'] == 'srun' and srun['step'] == '7.2' and srun['own_tasks'] is True
    assert _launchers.run_launcher([srun_job(step=(None, None))])['own_tasks'] is False
    # contradicting records are refused, never raised: a stop still stops the nodes' own torchrun
    refused = _launchers.run_launcher([srun_job(), srun_job(step=('7', '3'))])
    assert 'different Slurm steps' in refused['refused'] and refused['step'] is None and refused['own_tasks'] is True


# --- how a run the launcher ended is judged ------------------------------------------------------

def test_judgment_ssh_ends_nothing_itself():
    ssh = _launchers.LAUNCHERS['ssh']
    assert not ssh.peer_failure_ends_node and ssh.stop_by is None
    assert ssh.ended_it(ssh_job(status='lost')) is False
    assert ssh.ended_it(ssh_job(143, signals=['SIGTERM'])) is False
    assert ssh.time_limit({'job_id': '14', 'step_id': '0', 'step': {'state': 'TIMEOUT', 'source': 'sacct'}},
                          {'n0': ssh_job(143)}) is None
    assert ssh.end_record({'job_id': '14'}, None) == {}


def test_judgment_ssh_under_sbatch_the_batch_script_says_the_job_reached_its_time_limit():
    ssh = _launchers.LAUNCHERS['ssh']
    end = {'batch': {'job_id': '41', 'stop_seconds': 120}}
    limit = ssh.time_limit(end, {'n0': ssh_job(143, signals=['SIGTERM'])})
    assert limit == {'by': 'job', 'source': 'sbatch', 'detail': 'batch job 41 reached its time limit (Slurm warned it '
                                                                '120 s before: sbatch --signal=B:USR1@120)'}
    assert ssh.end_record(end, limit) == {'slurm_end': dict(end, time_limit=limit)}
    for bad in ({'batch': {'job_id': '41; rm', 'stop_seconds': 120}}, {'batch': {'job_id': 41, 'stop_seconds': 120}},
                {'batch': {'job_id': '41', 'stop_seconds': '-1'}}, {'batch': 'x'}, {}, None):
        assert ssh.time_limit(bad, {}) is None, bad


def test_judgment_srun_the_step_ends_the_other_nodes_and_may_end_at_a_time_limit():
    srun = _launchers.LAUNCHERS['srun']
    assert srun.peer_failure_ends_node and srun.stop_by == 'slurm'
    assert srun.ended_it(srun_job(status='lost')) and srun.ended_it(srun_job(143, signals=['SIGTERM']))
    # its own failure, a success, or a stop asked for: not ended by the step
    assert not srun.ended_it(srun_job(1)) and not srun.ended_it(srun_job(0, signals=['SIGTERM']))
    assert not srun.ended_it(srun_job(status='lost', stop={'reason': 'user'}))
    assert srun.ended_detail(srun_job(status='lost'), 'n2 failed (exit code 1)') == (
        'ended by Slurm with step 7.2 (srun --kill-on-bad-exit) because n2 failed (exit code 1)')
    end = {'job_id': '14', 'step_id': '0', 'step': {'state': 'TIMEOUT', 'source': 'sacct'},
           'job': {'state': 'RUNNING', 'source': 'sacct'}}
    limit = srun.time_limit(end, {'n0': srun_job(143, signals=['SIGTERM'])})
    assert limit == {'by': 'step', 'source': 'sacct', 'detail': 'Slurm ended step 14.0 at its time limit (sacct: TIMEOUT)'}
    assert srun.end_record(end, limit) == {'slurm_end': dict(end, time_limit=limit)}


# --- the generic code names no launcher ----------------------------------------------------------

def test_the_scans_find_a_launcher_named():
    assert python_naming_launchers('x.py', "if launcher != 'ssh':\n    pass\n") == ["x.py:1 'ssh'"]
    assert python_naming_launchers('x.py', "from m import _srun\n") == ['x.py:1 imports _srun']
    assert python_naming_launchers('plugins/module_utils/_rsync.py', "argv = ['ssh']\n") == []
    assert yaml_naming_launchers('x.yml', "  gpu_ids: \"{{ ids if trainops_launcher == 'ssh' else [] }}\"") == ["x.yml:1 'ssh'"]
    assert yaml_naming_launchers('x.yml', "  x: \"{{ ansible_connection | default('ssh') }}\"") == []
    assert yaml_naming_launchers('x.yml', "# launcher == 'srun' in a comment") == []
    assert not any(name.startswith(('start_', 'stop_', 'status_', 'end_', 'undo_'))
                   for name in os.listdir(os.path.join(ROOT, 'roles', 'job', 'tasks'))), 'a launcher has task files'


def test_the_generic_code_names_no_launcher():
    """Generic code asks the run's launcher (module_utils/_launchers.py) and never names one: every Python file of
    plugins/ but the launchers' definitions, every YAML file of roles/ and playbooks/."""
    named = []
    for path in generic_python():
        with open(os.path.join(ROOT, path), encoding='utf-8') as handle:
            named += python_naming_launchers(path, handle.read())
    for path in generic_yaml():
        with open(os.path.join(ROOT, path), encoding='utf-8') as handle:
            named += yaml_naming_launchers(path, handle.read())
    assert named == []


def test_a_node_record_whose_launcher_is_not_a_mapping_counts_as_the_default_launcher():
    from ansible_collections.trainops.multinode.plugins.module_utils import _launchers
    assert _launchers.of_job({'launcher': 'srun'}).name == 'ssh'
    assert _launchers.of_job({'launcher': {'name': ['srun']}}).name == 'ssh'
    assert _launchers.run_launcher([{'run_id': 'r1', 'launcher': 'srun'}])['name'] == 'ssh'
