# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The rank_log action plugin (logs.yml): a rank's collected log, and following it on its node through the node_log
module (the node's answers here are the real module's reads of a node log growing between questions)."""

from __future__ import annotations

import json
import os

import pytest

from unittest.mock import MagicMock

from ansible.errors import AnsibleActionFail

from ansible_collections.trainops.multinode.plugins.action.rank_log import ActionModule
from ansible_collections.trainops.multinode.plugins.module_utils import _rank_logs

from fake_task import make_action

MANIFEST = {'launched_at': '2026-01-01T00:00:00Z', 'world_size': 4,
            'nodes': [{'host': 'node0', 'ranks': [0, 1]}, {'host': 'node1', 'ranks': [2, 3]}]}


@pytest.fixture
def experiments(tmp_path):
    path = tmp_path / 'experiments' / 'run1'
    (path / 'logs').mkdir(parents=True)
    (path / 'manifest.json').write_text(json.dumps(dict(MANIFEST, outcome='succeeded')))
    (path / 'logs' / 'rank_3.txt').write_text('step=1\nstep=2\n')
    return tmp_path / 'experiments'


def action(args, host='node1'):
    plugin, dummy = make_action(ActionModule, 'trainops.multinode.rank_log', args)
    plugin._display = MagicMock()
    plugin._sleep = MagicMock()
    return plugin, {'inventory_hostname': host}


def test_a_rank_s_collected_lines_and_its_node(experiments):
    plugin, task_vars = action({'experiments_dir': str(experiments), 'rank': 3})
    result = plugin.run(task_vars=task_vars)
    assert result['lines'] == ['step=1', 'step=2'] and result['truncated'] is False
    assert [c.args[0] for c in plugin._display.display.call_args_list] == [
        'rank 3 on node1 (node rank 1): %s' % (experiments / 'run1' / 'logs' / 'rank_3.txt'), 'step=1', 'step=2']
    assert (result['node'], result['node_rank'], result['world_size'], result['run_id']) == ('node1', 1, 4, 'run1')


def test_a_rank_that_wrote_nothing_or_is_not_the_job_s_fails_saying_so(experiments):
    plugin, task_vars = action({'experiments_dir': str(experiments), 'rank': 2})
    with pytest.raises(AnsibleActionFail, match='rank 2 has no log in .*: the rank wrote no line'):
        plugin.run(task_vars=task_vars)
    (experiments / 'run1' / 'manifest.json').write_text(json.dumps(MANIFEST))
    with pytest.raises(AnsibleActionFail, match='the job has not been collected yet.*-e follow=true'):
        plugin.run(task_vars=task_vars)
    plugin, task_vars = action({'experiments_dir': str(experiments), 'rank': 9})
    with pytest.raises(AnsibleActionFail, match=r"rank 9 is not one of the job's ranks \(0 to 3\)"):
        plugin.run(task_vars=task_vars)


def test_following_prints_the_rank_s_lines_as_the_node_log_grows_until_the_run_ends(experiments, tmp_path):
    log = tmp_path / 'node.log'
    log.write_bytes(b'')
    growth = [b'[rank 3] step=1\n[rank 2] step=1\n[rank 3] st', b'ep=2\n', b'[rank 3] last', None]
    asked = []

    def node(module_name=None, module_args=None, task_vars=None):
        assert module_name == 'trainops.multinode.node_log' and module_args['run_id'] == 'run1'
        asked.append(module_args['offset'])
        more = growth.pop(0)
        if more is not None:
            with open(str(log), 'ab') as handle:
                handle.write(more)
        read = _rank_logs.read_rank_lines(str(log), module_args['rank'], module_args['offset'], final=more is None)
        return dict(read, ended=more is None)

    plugin, task_vars = action({'experiments_dir': str(experiments), 'rank': 3, 'follow': True, 'state_dir': '~/s'})
    plugin._execute_module = node
    result = plugin.run(task_vars=task_vars)
    assert [c.args[0] for c in plugin._display.display.call_args_list] == [
        'Follow the rank 3 on node1 (node rank 1), run run1, until the job ends there:', 'step=1', 'step=2', 'last']
    assert result['printed'] == 3 and result['ended'] is True
    assert asked == [0, 32, 48, 48]


def test_following_acts_on_the_rank_s_node_only_and_stops_at_its_timeout(experiments):
    plugin, task_vars = action({'experiments_dir': str(experiments), 'rank': 3, 'follow': True, 'state_dir': '~/s'},
                               host='node0')
    assert plugin.run(task_vars=task_vars)['skipped'] is True
    plugin, task_vars = action({'experiments_dir': str(experiments), 'rank': 3, 'follow': True, 'state_dir': '~/s',
                                'follow_timeout': 5})
    clock = [0.0]
    plugin._clock = lambda: clock[0]
    plugin._sleep = lambda seconds: clock.__setitem__(0, clock[0] + seconds)
    plugin._read_node = lambda *args: dict(lines=[], offset=0, size=0, missing=False, ended=False)
    result = plugin.run(task_vars=task_vars)
    assert result['ended'] is False and 5 <= clock[0] <= 7
    plugin._read_node = lambda *args: dict(lines=[], offset=0, size=None, missing=True, ended=False)
    with pytest.raises(AnsibleActionFail, match='run run1 has no log on node1'):
        plugin.run(task_vars=task_vars)
    assert os.path.isdir(str(experiments))


def test_a_rank_that_is_not_a_number_fails_saying_what_to_give(experiments):
    plugin, task_vars = action({'experiments_dir': str(experiments), 'rank': 'three'})
    with pytest.raises(AnsibleActionFail, match=r'Give the rank whose lines to print: -e rank=N .*, not three\.'):
        plugin.run(task_vars=task_vars)
    plugin, task_vars = action({'experiments_dir': str(experiments), 'rank': '3'})
    assert plugin.run(task_vars=task_vars)['node'] == 'node1'
