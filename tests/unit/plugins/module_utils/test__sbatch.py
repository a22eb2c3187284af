# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The sbatch role's settings that do not fit (_sbatch.sbatch_problems): one line per bad value, naming it."""

from __future__ import annotations

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils._sbatch import sbatch_problems

GOOD = {
    'trainops_sbatch_job_name': 'nightly-llama_7b.v2+x',
    'trainops_sbatch_options': ['--partition=gpu', '--time=02:00:00', '--gpus-per-node=8', '-p gpu', '-pgpu',
                                '--exclusive', '--nodelist=n[01-04]', '--no-kill', '--wait-all-nodes=1',
                                '--comment=a#b', '--array=0-3%1', '--export=ALL,FOO=1'],
    'trainops_sbatch_output': '/shared/sbatch/%x-%j.out',
    'trainops_sbatch_nodes': 4,
    'trainops_sbatch_stop_seconds': 120,
    'trainops_sbatch_dir': '/shared/sbatch',
    'trainops_sbatch_inventory': '/shared/a.slurm.yml',
    'trainops_sbatch_playbook': '/repo/playbooks/launch.yml',
    'trainops_sbatch_stop_playbook': '/repo/playbooks/stop.yml',
    'trainops_sbatch_ansible_playbook': '/repo/.venv/bin/ansible-playbook',
}


def problems(**changes):
    return sbatch_problems(dict(GOOD, **changes))


def test_good_settings_have_no_problem():
    assert sbatch_problems(GOOD) == []
    assert sbatch_problems({}) == []
    assert problems(trainops_sbatch_nodes='2', trainops_sbatch_stop_seconds='65535') == []


@pytest.mark.parametrize('name', ['a\nb', 'night/ly', '../x', '-x', '.hidden', 'a b', 'a;b', "a'b", 'a$(id)', '',
                                  'x' * 101, 'é', 'a\x00b', 'a\tb', 7, None])
def test_a_job_name_that_is_not_one_safe_token_is_refused_by_its_value(name):
    (line, ) = problems(trainops_sbatch_job_name=name)
    assert line.startswith('trainops_sbatch_job_name=%r: ' % (name, ))
    assert 'e.g. -e trainops_sbatch_job_name=nightly-llama' in line


def test_a_newline_shows_escaped_in_the_message():
    (line, ) = problems(trainops_sbatch_job_name='nightly\nrm -rf ~')
    assert "trainops_sbatch_job_name='nightly\\nrm -rf ~'" in line and '\n' not in line


@pytest.mark.parametrize('option, says', [
    ('--partition=gpu\n#SBATCH --nodes=9', 'without a newline or other control character'),
    ('--partition=gpu\necho hi', 'without a newline or other control character'),
    ('--time=1\x00', 'without a newline or other control character'),
    ('--partition gpu', '--name=value or -x value, with no whitespace in the value'),
    ('--comment=two words', '--name=value or -x value'),
    ('partition=gpu', '--name=value or -x value'),
    ('', '--name=value or -x value'),
    ('-p  gpu', '--name=value or -x value'),
    ('--job-name=x', '--job-name is not taken here: it is set from trainops_sbatch_job_name'),
    ('--job=x', '--job-name is not taken here'),
    ('-J x', '-J (--job-name) is not taken here'),
    ('--nodes=3', '--nodes is not taken here: it is set from trainops_sbatch_nodes'),
    ('-N3', '-N (--nodes) is not taken here'),
    ('--output=/tmp/o', '--output is not taken here: it is set from trainops_sbatch_output'),
    ('-o /tmp/o', '-o (--output) is not taken here'),
    ('--signal=B:TERM@60', '--signal is not taken here'),
    ('--requeue', '--requeue is not taken here: it is set from trainops_sbatch_requeue'),
    ('--no-requeue', '--no-requeue is not taken here'),
    ('--wrap=hostname', '--wrap is not taken here: the job would run that command instead of the batch script'),
    ('--parsable', '--parsable is not taken here'),
    ('--wait', '--wait is not taken here: it is set from trainops_sbatch_wait'),
    ('-W', '-W (--wait) is not taken here'),
    (3, 'without a newline or other control character'),
])
def test_each_bad_option_is_one_line_naming_it(option, says):
    (line, ) = problems(trainops_sbatch_options=['--partition=gpu', option])
    assert line.startswith('trainops_sbatch_options item %r: ' % (option, )), line
    assert says in line, line


def test_every_bad_value_has_its_own_line():
    lines = problems(trainops_sbatch_job_name='a/b', trainops_sbatch_options=['--nodes=2', '-p\ngpu'],
                     trainops_sbatch_output='/x/%j\n.out', trainops_sbatch_nodes=0, trainops_sbatch_stop_seconds=-1,
                     trainops_sbatch_playbook='/p/\nx.yml')
    assert [line.split(':')[0].split('=')[0] for line in lines] == [
        'trainops_sbatch_job_name', 'trainops_sbatch_nodes', 'trainops_sbatch_stop_seconds', 'trainops_sbatch_output',
        "trainops_sbatch_options item '--nodes", "trainops_sbatch_options item '-p\\ngpu'", 'trainops_sbatch_playbook']


def test_options_must_be_a_list():
    (line, ) = problems(trainops_sbatch_options='--partition=gpu')
    assert line.startswith("trainops_sbatch_options='--partition=gpu': must be a list")


@pytest.mark.parametrize('nodes', [0, -1, '0', 'two', 1.5, True, None, ''])
def test_nodes_must_be_a_positive_integer(nodes):
    (line, ) = problems(trainops_sbatch_nodes=nodes)
    assert line.startswith('trainops_sbatch_nodes=%r: ' % (nodes, ))


@pytest.mark.parametrize('seconds', [0, -5, 65536, '1m', True, None])
def test_stop_seconds_must_be_from_1_to_65535(seconds):
    (line, ) = problems(trainops_sbatch_stop_seconds=seconds)
    assert line.startswith('trainops_sbatch_stop_seconds=%r: ' % (seconds, )) and 'from 1 to 65535' in line


@pytest.mark.parametrize('checkpoint', [120, 121, -1, '1m', None, True])
def test_checkpoint_seconds_must_leave_time_before_the_limit(checkpoint):
    (line, ) = problems(trainops_sbatch_checkpoint_seconds=checkpoint)
    assert line.startswith('trainops_sbatch_checkpoint_seconds=%r: ' % (checkpoint, )) and 'less than' in line
    assert problems(trainops_sbatch_checkpoint_seconds=0) == problems(trainops_sbatch_checkpoint_seconds='119') == []


@pytest.mark.parametrize('output', ['/x/a b.out', '/x/%j\n.out', '', '/x/\x1b.out', None])
def test_the_output_path_is_one_token_on_one_line(output):
    (line, ) = problems(trainops_sbatch_output=output)
    assert line.startswith('trainops_sbatch_output=%r: ' % (output, ))


def test_slurm_patterns_in_the_output_are_fine():
    assert problems(trainops_sbatch_output='%x-%j-%N-%u-%%.out', trainops_sbatch_job_name='a') == []


@pytest.mark.parametrize('name', ['trainops_sbatch_dir', 'trainops_sbatch_inventory', 'trainops_sbatch_playbook',
                                  'trainops_sbatch_stop_playbook', 'trainops_sbatch_ansible_playbook'])
def test_a_path_the_script_names_holds_no_newline(name):
    assert problems(**{name: '/a b/c'}) == []  # quoted in the script
    (line, ) = problems(**{name: '/a\n/c'})
    assert line == "%s='/a\\n/c': the path must not hold a newline or other control character" % name
