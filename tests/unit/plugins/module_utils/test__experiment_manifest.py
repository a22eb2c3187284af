# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The launch's manifest built from the run's variables, and read back within bounds (module_utils/_experiment_manifest.py)."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils import _experiment_manifest as em

_MISSING = object()


@pytest.fixture
def exp(tmp_path):
    """An experiment directory below the test's own, never beside other tests' (their experiments are scanned)."""
    path = tmp_path / 'exp'
    path.mkdir()
    return path


def getter(variables):
    """``var(name[, default])`` over a dict, failing on a name it lacks without a default (as the action does)."""
    def var(name, default=_MISSING):
        if name in variables:
            return variables[name]
        if default is _MISSING:
            raise KeyError(name)
        return default
    return var


def run_vars(**overrides):
    """The variables of a launch of two nodes x 2 ranks, as the job role has them after the start."""
    variables = {
        '__trainops_run_id': 'run1', '__trainops_experiment_dir': '/exp/run1',
        '__trainops_parameters': {'channels': 42}, '__trainops_nnodes': 2, '__trainops_nodes': ['node0', 'node1'],
        '__trainops_order': {'nodes': ['node0', 'node1'], 'ranks': {'node0': 0, 'node1': 1}},
        '__trainops_master_host': 'node0', '__trainops_master_addr': '10.0.0.1', 'trainops_master_port': '29500',
        'trainops_nproc_per_node': '2', 'trainops_workspace_src': '/src', 'trainops_git_check': 'auto',
        'trainops_sync_workspace': 'true', 'trainops_training_network': '',
        '__trainops_git_ref': {'git': {'is_repo': True, 'commit': 'abc', 'branch': 'main', 'dirty': False}},
        '__trainops_root_shares': {'groups': [['node0'], ['node1']]},
        '__trainops_workspace_shares': {'groups': [['node0', 'node1']], 'primary': {'node0': 'node0', 'node1': 'node0'}},
        'trainops_launcher': 'ssh',
        '__trainops_attempt': {'number': '1', 'first': 'run1', 'previous': None, 'replaced': [], 'spares': ['node2']},
        '__trainops_resumed_from': None,
        'trainops_progress_interval': 10, 'trainops_unreachable_grace': 120, 'trainops_stall_timeout': 0,
        'ansible_inventory_sources': ['/inv/a.yml', '/inv/b.yml'], '__trainops_pb': '/c/playbooks/',
        '__trainops_ext': '.yml', '__trainops_spares_arg': '',
        'trainops_run_name': 'multinode', 'trainops_channels': '42', 'trainops_threads': None,
    }
    variables.update(overrides)
    return variables


def node_vars(hostname, pid):
    return {'__trainops_preflight': {'host': {'hostname': hostname}, 'paths': {'state_dir': '/s/' + hostname},
                                     'torch': {'version': '2.13.0', 'python': '3.11'}},
            '__trainops_nccl': {'vendor': 'nvidia', 'env': {'NCCL_SOCKET_IFNAME': 'eth0'}, 'transport': 'socket'},
            '__trainops_started': {'job': {'pid': pid, 'argv': ['python3'], 'env': {'A': '1'},
                                           'secret_env_names': ['TOKEN'], 'env_file': '/s/env.sh'}}}


HOSTVARS = {'node0': node_vars('gpu-a', 11), 'node1': node_vars('gpu-b', 12)}


# --- read_manifest: the one reader of manifest.json, within bounds -------------------------------------------

def test_read_manifest_reads_the_object_and_says_when_there_is_none(exp):
    assert em.read_manifest(str(exp)) == (None, [])
    (exp / 'manifest.json').write_text(json.dumps({'run_id': 'r', 'outcome': 'running'}))
    assert em.read_manifest(str(exp)) == ({'run_id': 'r', 'outcome': 'running'}, [])
    assert em.recorded_manifest(str(exp))['run_id'] == 'r'


@pytest.mark.parametrize('text, why', [
    ('[1, 2]', 'not a JSON object'),
    ('{"a": NaN}', 'not finite'),
    ('{"a": ' * 40 + '1' + '}' * 40, 'nesting deeper'),
    ('{"a": ', 'not JSON'),
])
def test_read_manifest_refuses_what_breaks_a_bound_naming_the_file(exp, text, why):
    (exp / 'manifest.json').write_text(text)
    manifest, refused = em.read_manifest(str(exp))
    assert manifest is None and len(refused) == 1 and why in refused[0] and str(exp / 'manifest.json') in refused[0]
    with pytest.raises(em.ManifestError, match=why):
        em.recorded_manifest(str(exp))


def test_read_manifest_follows_no_symbolic_link_and_reads_no_more_than_its_bound(exp, monkeypatch):
    (exp / 'elsewhere.json').write_text('{"run_id": "other"}')
    (exp / 'link').mkdir()
    os.symlink(str(exp / 'elsewhere.json'), str(exp / 'link' / 'manifest.json'))
    assert 'symbolic link' in em.read_manifest(str(exp / 'link'))[1][0]
    (exp / 'manifest.json').write_text('{"run_id": "%s"}' % ('x' * 100))
    monkeypatch.setattr(em, 'MAX_MANIFEST_BYTES', 50)
    assert 'more than the 50 read' in em.read_manifest(str(exp))[1][0]
    with pytest.raises(em.ManifestError, match='holds no manifest'):
        em.recorded_manifest(str(exp / 'none'))


# --- the experiment's name -------------------------------------------------------------------------------------

@pytest.mark.parametrize('channels, threads, expect', [
    ('42', '256', 'multinode_42ch_256th_'), (None, '', 'multinode_autoch_autoth_'), ('None', 8.0, 'multinode_autoch_8th_'),
])
def test_experiment_name_names_a_knob_left_to_the_library_auto(channels, threads, expect):
    name = em.experiment_name(getter(run_vars(trainops_channels=channels, trainops_threads=threads)), when=0)
    assert name.startswith(expect) and len(name) == len(expect) + len('19700101_000000')


# --- the launch's manifest -------------------------------------------------------------------------------------

def test_launch_manifest_records_the_run_its_nodes_and_the_attempt():
    manifest = em.launch_manifest(getter(run_vars()), HOSTVARS, '2.19.14', when=0)
    assert manifest['launched_at'] == '1970-01-01T00:00:00Z' and manifest['ansible_version'] == '2.19.14'
    assert (manifest['nnodes'], manifest['world_size'], manifest['attempt']) == (2, 4, 1)
    assert manifest['master'] == {'host': 'node0', 'addr': '10.0.0.1', 'port': 29500}
    assert manifest['code'] == {'source': '/src', 'commit': 'abc', 'branch': 'main', 'dirty': False, 'checked_on_nodes': False}
    assert [node['ranks'] for node in manifest['nodes']] == [[0, 1], [2, 3]]
    assert manifest['nodes'][1]['hostname'] == 'gpu-b' and manifest['nodes'][1]['secret_env'] == {'TOKEN': '<redacted>'}
    assert manifest['shared_dirs']['workspace_synced_through'] == ['node0']
    assert manifest['training_network'] is None and manifest['launcher'] == {'name': 'ssh'}
    assert (manifest['first'], manifest['previous'], manifest['spares'], manifest['outcome']) == ('run1', None, ['node2'], 'running')


def test_launch_manifest_without_git_or_sync_and_with_a_launcher_record():
    manifest = em.launch_manifest(getter(run_vars(
        __trainops_git_ref={'skipped': True}, trainops_sync_workspace=False, trainops_git_check='auto',
        trainops_training_network='10.1.0.0/16')), HOSTVARS, '2.19.14', launcher={'name': 'srun', 'job_id': '7'})
    assert manifest['code'] == {'source': '/src', 'commit': None, 'branch': None, 'dirty': None, 'checked_on_nodes': True}
    assert manifest['shared_dirs']['workspace_synced_through'] == []
    assert manifest['training_network'] == '10.1.0.0/16' and manifest['launcher'] == {'name': 'srun', 'job_id': '7'}
    git = {'git': {'is_repo': False, 'dirty': True}}
    assert em.launch_manifest(getter(run_vars(__trainops_git_ref=git, trainops_git_check='always')),
                              HOSTVARS, 'v')['code']['dirty'] is None


def test_failed_manifest_merges_this_batch_over_what_an_earlier_one_recorded():
    recorded = {'launched_at': '2026-01-01T00:00:00Z', 'launch_errors': {'node0': 'first batch'}, 'kept': 1}
    manifest = em.failed_manifest(recorded, getter(run_vars()), {'node1': 'x ' * 200, 'node0': 'again'}, 'v', when=0)
    assert manifest['launched_at'] == '2026-01-01T00:00:00Z' and manifest['kept'] == 1
    assert manifest['launch_errors'] == {'node0': 'again', 'node1': 'x ' * 200}
    assert (manifest['outcome'], manifest['outcome_detail']) == ('failed', 'not started: again')
    assert manifest['node_names'] == ['node0', 'node1'] and manifest['attempt'] == 1
    fresh = em.failed_manifest({}, getter(run_vars()), {'node1': 'word ' * 100}, 'v', when=0)
    assert fresh['launched_at'] == '1970-01-01T00:00:00Z'
    assert fresh['outcome_detail'].endswith('...') and len(fresh['outcome_detail']) <= len('not started: ') + 300
    hostvars = {'node0': {'__trainops_launch_error': ''}, 'node1': {'__trainops_launch_error': 'why'}}
    assert em.launch_errors(['node0', 'node1', 'node2'], hostvars) == {'node1': 'why'}


# --- the collect ------------------------------------------------------------------------------------------------

def collect_vars(**overrides):
    variables = {'trainops_collect_nodes': ['node0', 'node1', 'node2'], 'ansible_play_hosts': ['node0', 'node1'],
                 'trainops_collect_run_id': 'run1', 'trainops_collect_experiment_dir': '/exp/run1',
                 'trainops_straggler_threshold': '0.2'}
    variables.update(overrides)
    return getter(variables)


COLLECT_HOSTVARS = {
    'node0': {'__trainops_final': {'job': {'exit_code': 0}, 'log_tail': [], 'collected': [{'refused': []}]}},
    'node1': {'__trainops_final': {'job': {'exit_code': 1}, 'log_tail': ['line %d' % n for n in range(20)],
                                   'collected': [{'refused': ['node1: refused output x']},
                                                 {'refused': ['node1: refused profile y']}]},
              '__trainops_waited': {'verdict': {'state': 'failed'}}, '__trainops_run_error': 'exit 1; more'},
    'node2': {},
    'spare': {'__trainops_final': {'collected': [{'refused': ['spare: refused output z']}]}},
}


def test_collect_inputs_reads_what_each_node_registered():
    # a spare of the play outside the job's nodes keeps an earlier collect's answer: not this job's
    found = em.collect_inputs(collect_vars(ansible_play_hosts=['node0', 'node1', 'spare']), COLLECT_HOSTVARS)
    assert found['results'] == {'node0': {'exit_code': 0}, 'node1': {'exit_code': 1}}
    assert found['verdicts'] == {'node0': {}, 'node1': {'state': 'failed'}, 'node2': {}}
    assert found['missing_nodes'] == ['node2']
    assert found['refused'] == ['node1: refused output x', 'node1: refused profile y']
    assert (found['launcher_end'], found['straggler_threshold'], found['attempt']) == (None, 0.2, None)


def test_collect_inputs_takes_the_launchers_end_or_the_batch_scripts_word():
    batch = collect_vars(trainops_collect_batch_end={'time_limit': True})
    assert em.collect_inputs(batch, COLLECT_HOSTVARS, {'own_tasks': True}, {'job_id': '7'})['launcher_end'] == {'job_id': '7'}
    ssh = collect_vars(trainops_collect_batch_end={'time_limit': True}, trainops_collect_attempt={'number': 2})
    found = em.collect_inputs(ssh, COLLECT_HOSTVARS, {'own_tasks': False}, {'job_id': '7'})
    assert found['launcher_end'] == {'time_limit': True} and found['attempt'] == {'number': 2}
    assert em.collect_inputs(collect_vars(trainops_straggler_threshold='many'), {})['straggler_threshold'] == 'many'


def test_collect_failure_names_the_refused_files_first():
    report = {'collect_refused': ['node1: refused output x'], 'outcome': 'failed'}
    assert em.collect_failure(report, collect_vars(), COLLECT_HOSTVARS) == (
        "Job run1: the collect refused 1 file(s) that would have\nlanded outside their node's place in /exp/run1 "
        "(nothing was written for them; the\nrest was collected). Look at what the job wrote on the node(s):\n"
        "  node1: refused output x\n")


def test_collect_failure_names_the_failed_nodes_with_their_logs_last_lines():
    report = {'outcome': 'failed', 'outcome_detail': 'failed on node1', 'failed_nodes': ['node1', 'node2']}
    text = em.collect_failure(report, collect_vars(), COLLECT_HOSTVARS)
    assert text.splitlines() == (['Job run1 failed on node1.', 'Logs and outputs of every node: /exp/run1',
                                  '--- node1 (node rank 1): exit 1']
                                 + ['    line %d' % n for n in range(5, 20)]
                                 + ['--- node2 (node rank 2): unreachable at the end of the job'])
    hostvars = dict(COLLECT_HOSTVARS, node1=dict(COLLECT_HOSTVARS['node1'], __trainops_run_error=''))
    assert '--- node1 (node rank 1): exit code 1\n' in em.collect_failure(report, collect_vars(), hostvars)


def test_collect_failure_says_the_retries_and_nothing_when_the_play_goes_on():
    report = {'outcome': 'failed', 'outcome_detail': 'failed on node1', 'failed_nodes': ['node1'],
              'retry': {'decision': 'stop', 'reason': 'no retries left'}, 'attempts': [{'run_id': 'a'}, {'run_id': 'b'}]}
    text = em.collect_failure(report, collect_vars(trainops_collect_attempt={'retries': 1}), COLLECT_HOSTVARS)
    assert text.splitlines()[2] == 'Retries: no retries left (2 attempt(s): a, b)'
    assert 'Retries' not in em.collect_failure(report, collect_vars(), COLLECT_HOSTVARS)
    assert em.collect_failure(dict(report, retry={'decision': 'retry'}), collect_vars(), COLLECT_HOSTVARS) == ''
    assert em.collect_failure(report, collect_vars(trainops_collect_fail='false'), COLLECT_HOSTVARS) == ''
    assert em.collect_failure({'outcome': 'succeeded'}, collect_vars(), COLLECT_HOSTVARS) == ''


# --- what the launch prints and publishes -----------------------------------------------------------------------

def test_follow_lines_give_the_commands_that_come_back_to_the_job():
    lines = em.follow_lines(getter(run_vars(__trainops_spares_arg=' -e trainops_spare_nodes=spares')))
    assert lines[0] == 'Job run1 runs on 2 node(s) x 2 rank(s); progress every 10 s. Outputs: /exp/run1'
    assert lines[1] == ('Unreachable nodes get 120 s (trainops_unreachable_grace); a node without new output for '
                        '(off) stalls the job (trainops_stall_timeout).')
    assert lines[2] == 'Ctrl-C ends only this wait; the job keeps running. Come back to it with:'
    assert lines[3] == ('  status (collects it once it has ended): ansible-playbook -i /inv/a.yml -i /inv/b.yml '
                        '/c/playbooks/status.yml -e run_id=run1 -e trainops_spare_nodes=spares')
    assert lines[5].endswith('/c/playbooks/logs.yml -e run_id=run1 -e trainops_spare_nodes=spares -e rank=0 -e follow=true')
    assert 'output for 300 s stalls' in em.follow_lines(getter(run_vars(trainops_stall_timeout='300')))[1]


def test_follow_lines_of_a_job_not_waited_for_give_its_status_stop_and_logs():
    lines = em.follow_lines(getter(run_vars(trainops_wait='false', __trainops_spares_arg=' -e trainops_spare_nodes=s')))
    assert lines == [
        'Job run1 started on node0, node1; not waiting (wait=false).',
        'Status (collects when finished): ansible-playbook playbooks/status.yml -e run_id=run1 -e trainops_spare_nodes=s',
        'Stop:  ansible-playbook playbooks/stop.yml -e run_id=run1 -e trainops_spare_nodes=s',
        "Follow rank 0's lines: ansible-playbook playbooks/logs.yml -e run_id=run1 -e trainops_spare_nodes=s -e rank=0 "
        "-e follow=true"]


def test_stats_give_the_experiment_as_ci_reads_it():
    assert em.stats('/e', 'r', 'failed', 'd', {'node1': 'why'}) == {
        'path': '/e', 'run_id': 'r', 'outcome': 'failed', 'outcome_detail': 'd', 'failed_nodes': ['node1']}
    data = em.stats('/e', 'r', 'succeeded', 'd', [], {'summary': {'steps': 3}})
    assert (data['summary'], data['attempts'], data['retry']) == ({'steps': 3}, [], None)
