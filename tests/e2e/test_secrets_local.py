"""End-to-end: secrets only by reference. A token typed literally into ansible-playbook's own -e arguments (its
command line, which any user's ps sees) makes playbooks/launch.yml fail in its validation on the controller,
before any node is touched, with a message that names the variable and shows the reference form, never the value.

ansible-playbook runs directly here: tools/trainops_run.py refuses such a command line before it starts
ansible-playbook (tests/e2e/test_trainops_run.py).
"""
import json
import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.e2e]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(os.path.abspath(sys.executable)), 'ansible-playbook')
TOKEN = 'hf_typed_in_argv_0815'
REFERENCE = "{{ lookup('ansible.builtin.env', 'TRAINOPS_E2E_B_TOKEN') }}"


def test_a_literal_secret_given_to_ansible_playbook_is_refused_before_any_node_is_touched(lab):
    varfile = os.path.join(lab.root, 'vars.json')
    with open(varfile, 'w') as handle:
        json.dump({'trainops_node_root': lab.nodes + '/{{ inventory_hostname }}',
                   'trainops_experiments_dir': lab.experiments, 'master_port': lab.port}, handle)
    literal = json.dumps({'trainops_secret_env': {'HF_TOKEN': TOKEN, 'B_TOKEN': REFERENCE}})
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, 'ansible.cfg'), TRAINOPS_E2E_B_TOKEN='by-reference',
               ANSIBLE_NOCOLOR='1')
    proc = subprocess.run([ANSIBLE_PLAYBOOK, 'playbooks/launch.yml', '-e', '@' + varfile, '-e', literal], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=180, check=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output
    flat = ' '.join(output.split())
    assert 'TASK [trainops.multinode.job : Check the launch parameters]' in output
    assert ("trainops_secret_env: HF_TOKEN is given literally on the command line (-e), where any user's ps and "
            "ansible-runner's records see it") in flat.replace("''", "'"), output
    assert "lookup('ansible.builtin.env', 'HF_TOKEN')" in flat.replace("''", "'"), output
    assert 'B_TOKEN is given' not in flat  # a reference is fine
    assert TOKEN not in output
    # nothing was created on any node, nothing started, no experiment directory
    assert not os.path.exists(lab.nodes)
    assert lab.experiment_dirs() == []
    assert not lab.leftovers()
