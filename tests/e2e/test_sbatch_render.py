# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""playbooks/sbatch.yml without a Slurm: the batch script it renders (trainops_sbatch_submit=false), its
input checks, and the script's exit code. The submitted jobs run on the lab's real Slurm in
tests/lab/test_slurm_lab.py."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.real, pytest.mark.slow]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)


def sbatch_play(tmp_path, **extravars):
    """ansible-playbook playbooks/sbatch.yml with these variables (as a JSON -e), from the repository."""
    source = tmp_path / 'allocation.slurm.yml'
    source.write_text('plugin: trainops.multinode.slurm\n')
    variables = {'trainops_sbatch_inventory': str(source), 'trainops_sbatch_submit': False,
                 'trainops_sbatch_dir': str(tmp_path / 'batch')}
    variables.update(extravars)
    env = {k: v for k, v in os.environ.items() if not k.startswith(('SLURM_', 'ANSIBLE_'))}
    env.update(ANSIBLE_CONFIG=os.path.join(REPO, 'ansible.cfg'), ANSIBLE_NOCOLOR='1')
    return subprocess.run([os.path.join(BIN, 'ansible-playbook'), 'playbooks/sbatch.yml', '-e', json.dumps(variables)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)


def rendered(tmp_path):
    batch = tmp_path / 'batch'
    (script,) = sorted(batch.glob('*.sbatch'))
    (variables,) = sorted(batch.glob('*.vars.json'))
    return script, variables


def test_renders_a_batch_script_and_its_private_variables(tmp_path):
    proc = sbatch_play(tmp_path, trainops_sbatch_nodes=3, trainops_sbatch_job_name='nightly',
                       trainops_sbatch_options=['--partition=gpu', '--time=01:00:00'],
                       trainops_sbatch_extra_vars={'channels': 42, 'config': 'config/tiny.yaml'})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    script, variables = rendered(tmp_path)
    assert script.name.startswith('nightly-') and variables.name == script.name.replace('.sbatch', '.vars.json')
    assert stat.S_IMODE(script.stat().st_mode) == 0o700
    assert stat.S_IMODE(variables.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / 'batch').stat().st_mode) == 0o700
    assert json.loads(variables.read_text()) == {'channels': 42, 'config': 'config/tiny.yaml'}
    text = script.read_text()
    sbatch_lines = [line for line in text.splitlines() if line.startswith('#SBATCH')]
    assert sbatch_lines == ['#SBATCH --job-name=nightly', '#SBATCH --nodes=3',
                            '#SBATCH --output=%s/%%x-%%j.out' % (tmp_path / 'batch'), '#SBATCH --signal=B:TERM@120',
                            '#SBATCH --partition=gpu', '#SBATCH --time=01:00:00']
    assert '-i %s -e @%s' % (tmp_path / 'allocation.slurm.yml', variables) in text
    assert '%s/playbooks/launch.yml &' % REPO in text and '%s/playbooks/stop.yml' % REPO in text
    assert subprocess.run(['bash', '-n', str(script)], check=False).returncode == 0
    assert 'Rendered %s (submit it with sbatch)' % script in ' '.join(proc.stdout.split()), proc.stdout


@pytest.mark.parametrize('playbook, code', [('/bin/true', 0), ('/bin/false', 1)])
def test_the_script_exits_with_the_playbooks_code(tmp_path, playbook, code):
    proc = sbatch_play(tmp_path, trainops_sbatch_ansible_playbook=playbook)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    script, _variables = rendered(tmp_path)
    env = dict(os.environ, SLURM_JOB_ID='7', SLURM_JOB_NODELIST='n[1-2]')
    run = subprocess.run(['bash', str(script)], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == code, run.stdout + run.stderr
    assert 'trainops: launch.yml exited with %d' % code in run.stdout


@pytest.mark.parametrize('extravars, message', [
    ({'trainops_sbatch_extra_vars': {'wait': False}}, 'sets wait (trainops_wait) to false'),
    ({'trainops_sbatch_extra_vars': {'trainops_wait': 'no'}}, 'sets wait (trainops_wait) to false'),
    ({'trainops_sbatch_inventory': '/etc/hosts'}, "not '/etc/hosts'"),
    ({'trainops_sbatch_inventory': '/nowhere/x.slurm.yml'}, 'Not found: trainops_sbatch_inventory /nowhere/x.slurm.yml.'),
])
def test_bad_input_fails_before_anything_is_written(tmp_path, extravars, message):
    proc = sbatch_play(tmp_path, **extravars)
    assert proc.returncode != 0
    assert message in proc.stdout, proc.stdout[-3000:]
    assert not (tmp_path / 'batch').exists()
