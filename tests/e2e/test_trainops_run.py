# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests for tools/trainops_run.py, the ansible-runner entry.

The ``e2e`` tests run real (tiny, local-only) playbooks through the entry as a subprocess.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENTRY = os.path.join(REPO, 'tools', 'trainops_run.py')

pytest.importorskip('ansible_runner')


def _load_entry():
    spec = importlib.util.spec_from_file_location('trainops_run', ENTRY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tr = _load_entry()

LOCAL_INVENTORY = textwrap.dedent("""\
    all:
      hosts:
        {host}:
          ansible_connection: local
          ansible_python_interpreter: "{{{{ ansible_playbook_python }}}}"
    """)

OK_PLAYBOOK = textwrap.dedent("""\
    - name: Good play
      hosts: all
      gather_facts: false
      tasks:
        - name: Say hello through an action plugin
          say:
            msg: "hello {{ who }} from {{ team }}"
        - name: Publish the experiment
          ansible.builtin.set_stats:
            data:
              trainops_experiment:
                path: /experiments/run_1
                who: "{{ who }}"
                nodes: "{{ nodes }}"
    """)

FAIL_PLAYBOOK = textwrap.dedent("""\
    - name: Bad play
      hosts: all
      gather_facts: false
      tasks:
        - name: Ignored failure
          ansible.builtin.fail:
            msg: this one is ignored
          ignore_errors: true
        - name: Recovered
          block:
            - name: Rescued failure
              ansible.builtin.fail:
                msg: this one is rescued
          rescue:
            - name: Rescue
              ansible.builtin.debug:
                msg: rescued
        - name: Boom
          ansible.builtin.fail:
            msg: boom went the task
        - name: Never reached
          ansible.builtin.debug:
            msg: unreachable code
    """)

SAY_ACTION = textwrap.dedent("""\
    from ansible.plugins.action import ActionBase
    from ansible.utils.display import Display

    display = Display()


    class ActionModule(ActionBase):
        def run(self, tmp=None, task_vars=None):
            result = super().run(tmp, task_vars)
            display.display('SAY: %s' % self._task.args.get('msg'))
            return result
    """)


def run_entry(args, cwd, timeout=120):
    env = dict(os.environ)
    env.pop('ANSIBLE_CONFIG', None)
    proc = subprocess.run([sys.executable, ENTRY] + list(args), cwd=str(cwd), env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=timeout, check=False)
    return proc


@pytest.fixture
def project(tmp_path):
    """A throw-away project directory with its own ansible.cfg (whose inventory names host 'cfghost')."""
    proj = tmp_path / 'project'
    proj.mkdir()
    (proj / 'ansible.cfg').write_text('[defaults]\ninventory = ./hosts.yml\nretry_files_enabled = false\n')
    (proj / 'hosts.yml').write_text(LOCAL_INVENTORY.format(host='cfghost'))
    (proj / 'action_plugins').mkdir()
    (proj / 'action_plugins' / 'say.py').write_text(SAY_ACTION)
    (proj / 'ok.yml').write_text(OK_PLAYBOOK)
    (proj / 'fail.yml').write_text(FAIL_PLAYBOOK)
    (proj / 'vars.yml').write_text('team: platform\nnodes: [a, b]\n')
    return proj


# ---------------------------------------------------------------------------
# Pure functions
# ---------------------------------------------------------------------------

def test_parse_extra_vars(tmp_path):
    varfile = tmp_path / 'v.yml'
    varfile.write_text('a: 1\nb: [x, y]\n')
    merged, args = tr.parse_extra_vars(['who=me n="two words"', '@' + str(varfile), '{"a": 2}'], str(tmp_path))
    assert merged == {'who': 'me', 'n': 'two words', 'a': 2, 'b': ['x', 'y']}
    assert args == ['-e', 'who=me n="two words"', '-e', '@' + str(varfile), '-e', '{"a": 2}']


def test_parse_extra_vars_errors(tmp_path):
    with pytest.raises(tr.UsageError):
        tr.parse_extra_vars(['@missing.yml'], str(tmp_path))
    with pytest.raises(tr.UsageError):
        tr.parse_extra_vars(['justaword'], str(tmp_path))


def test_fatal_failures_drop_rescued():
    failures = [
        {'host': 'a', 'task': 'rescued', 'msg': 'x'},
        {'host': 'b', 'task': 'gone', 'msg': 'y', 'unreachable': True},
        {'host': 'a', 'task': 'fatal', 'msg': 'z'},
        {'host': 'c', 'task': 'recovered', 'msg': 'w'},
    ]
    per_host = {
        'a': dict(ok=1, changed=0, failures=1, unreachable=0, skipped=0, rescued=1, ignored=0),
        'b': dict(ok=0, changed=0, failures=0, unreachable=1, skipped=0, rescued=0, ignored=0),
        'c': dict(ok=2, changed=0, failures=0, unreachable=0, skipped=0, rescued=1, ignored=0),
    }
    assert [f['task'] for f in tr.fatal_failures(failures, per_host)] == ['gone', 'fatal']
    assert tr.fatal_failures(failures, {}) == failures


def test_failure_message_loop_and_module_failure():
    msg = tr.failure_message({'msg': 'One or more items failed', 'results': [
        {'failed': True, 'item': 'n1', 'msg': 'bad n1'}, {'failed': False, 'item': 'n2'}]})
    assert 'One or more items failed' in msg and 'item "n1": bad n1' in msg and 'n2' not in msg
    msg = tr.failure_message({'msg': 'MODULE FAILURE', 'module_stderr': 'Traceback: boom'})
    assert 'Traceback: boom' in msg


def test_host_key_checking_follows_config(tmp_path, monkeypatch):
    monkeypatch.delenv('ANSIBLE_HOST_KEY_CHECKING', raising=False)
    cfg = tmp_path / 'ansible.cfg'
    cfg.write_text('[defaults]\nhost_key_checking = false  # lab only\n')
    assert tr.host_key_checking_default(str(cfg)) == 'false'
    assert tr.host_key_checking_default(None) == 'True'
    monkeypatch.setenv('ANSIBLE_HOST_KEY_CHECKING', '0')
    assert tr.host_key_checking_default(str(cfg)) == '0'


def test_rotate_artifacts_only_touches_own_runs(tmp_path):
    names = ['20261122T08000%d_launch_abcde%d' % (i, i) for i in range(5)]
    for name in names:
        (tmp_path / name).mkdir()
    (tmp_path / 'unrelated').mkdir()
    (tmp_path / 'notes.txt').write_text('keep me')
    assert tr.rotate_artifacts(str(tmp_path), 2) == names[:3]
    assert sorted(os.listdir(str(tmp_path))) == sorted(names[3:] + ['unrelated', 'notes.txt'])
    assert tr.rotate_artifacts(str(tmp_path), 0) == []


def test_strip_ansi():
    assert tr.strip_ansi('\x1b[0;31mred\x1b[0m\r') == 'red'


# ---------------------------------------------------------------------------
# End to end
# ---------------------------------------------------------------------------

@pytest.mark.e2e
def test_success_with_set_stats(project, tmp_path):
    summary_path = tmp_path / 'out' / 'summary.json'
    junit_path = tmp_path / 'out' / 'junit.xml'
    elsewhere = tmp_path / 'elsewhere'
    elsewhere.mkdir()
    proc = run_entry(['ok.yml', '--project-dir', str(project), '-e', 'who=world', '-e', '@vars.yml',
                      '--summary', str(summary_path), '--junit', str(junit_path), '--artifacts', str(tmp_path / 'art')],
                     cwd=elsewhere)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert 'PLAY Good play' in lines
    assert 'TASK Say hello through an action plugin' in lines
    assert 'TASK Publish the experiment' in lines
    assert 'SAY: hello world from platform' in lines  # display.display() from the action plugin
    assert not any(line.startswith('{') for line in lines)  # no raw JSON events

    summary = json.loads(summary_path.read_text())
    assert summary['status'] == 'successful'
    assert summary['rc'] == 0
    assert summary['ok'] is True
    assert summary['playbook'] == 'ok.yml'
    assert summary['playbook_path'] == str(project / 'ok.yml')
    assert summary['ansible_config'] == str(project / 'ansible.cfg')
    assert summary['inventory'] is None
    assert summary['extravars'] == {'who': 'world', 'team': 'platform', 'nodes': ['a', 'b']}
    assert summary['duration_s'] > 0
    # the inventory came from the project's ansible.cfg, so ANSIBLE_CONFIG was honoured
    assert summary['stats'] == {'cfghost': dict(ok=2, changed=0, failures=0, unreachable=0, skipped=0, rescued=0, ignored=0)}
    assert summary['failures'] == []
    assert summary['artifact_data'] == {'trainops_experiment': {'path': '/experiments/run_1', 'who': 'world', 'nodes': ['a', 'b']}}
    assert os.path.isdir(summary['artifact_dir'])
    assert summary['artifact_dir'].startswith(str(tmp_path / 'art'))

    root = ET.parse(str(junit_path)).getroot()
    suite = root.find('testsuite')
    assert suite.get('tests') == '1'
    assert suite.get('failures') == '0'
    cases = suite.findall('testcase')
    assert [c.get('name') for c in cases] == ['cfghost']
    assert cases[0].find('failure') is None


@pytest.mark.e2e
def test_failure(project, tmp_path):
    summary_path = tmp_path / 'summary.json'
    junit_path = tmp_path / 'junit.xml'
    inventory = tmp_path / 'inv.yml'
    inventory.write_text(LOCAL_INVENTORY.format(host='node1'))
    proc = run_entry([str(project / 'fail.yml'), '-i', str(inventory), '--project-dir', str(project),
                      '--summary', str(summary_path), '--junit', str(junit_path), '--artifacts', str(tmp_path / 'art')],
                     cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert 'TASK Boom' in proc.stdout
    assert 'FAILED [node1] Boom: boom went the task' in proc.stdout
    assert 'TASK Never reached' not in proc.stdout

    summary = json.loads(summary_path.read_text())
    assert summary['status'] == 'failed'
    assert summary['rc'] == 2
    assert summary['ok'] is False
    assert summary['inventory'] == [str(inventory)]
    assert summary['stats']['node1'] == dict(ok=2, changed=0, failures=1, unreachable=0, skipped=0, rescued=1, ignored=1)
    assert summary['failed_hosts'] == ['node1']
    # the ignored and the rescued failure are not in the list
    assert summary['failures'] == [{'host': 'node1', 'task': 'Boom', 'msg': 'boom went the task'}]
    assert summary['artifact_data'] == {}

    suite = ET.parse(str(junit_path)).getroot().find('testsuite')
    assert suite.get('failures') == '1'
    failure = suite.find('testcase').find('failure')
    assert failure is not None
    assert 'boom went the task' in failure.text
    assert 'rescued' not in failure.text


@pytest.mark.e2e
def test_unreachable_host(project, tmp_path):
    if not shutil.which('ssh'):
        pytest.skip('needs an ssh client')
    inventory = tmp_path / 'inv.yml'
    inventory.write_text(textwrap.dedent("""\
        all:
          hosts:
            deadhost:
              ansible_host: 127.0.0.1
              ansible_port: 1
              ansible_connection: ssh
              ansible_ssh_common_args: -o ConnectTimeout=5 -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null
            node1:
              ansible_connection: local
              ansible_python_interpreter: "{{ ansible_playbook_python }}"
        """))
    (project / 'ping.yml').write_text('- hosts: all\n  gather_facts: false\n  tasks:\n    - name: Ping\n      ansible.builtin.ping:\n')
    junit_path = tmp_path / 'junit.xml'
    summary_path = tmp_path / 'summary.json'
    proc = run_entry(['ping.yml', '-i', str(inventory), '--project-dir', str(project), '--junit', str(junit_path),
                      '--summary', str(summary_path), '--artifacts', str(tmp_path / 'art')], cwd=tmp_path)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert 'UNREACHABLE [deadhost] Ping' in proc.stdout
    summary = json.loads(summary_path.read_text())
    assert summary['failed_hosts'] == ['deadhost']
    assert summary['stats']['node1']['ok'] == 1
    assert summary['failures'][0]['host'] == 'deadhost' and summary['failures'][0]['unreachable'] is True
    suite = ET.parse(str(junit_path)).getroot().find('testsuite')
    assert suite.get('tests') == '2' and suite.get('failures') == '1'
    cases = dict((c.get('name'), c) for c in suite.findall('testcase'))
    assert cases['deadhost'].find('failure').get('type') == 'unreachable'
    assert cases['node1'].find('failure') is None


@pytest.mark.e2e
def test_playbook_error_without_hosts(project, tmp_path):
    (project / 'broken.yml').write_text('- hosts: all\n  tasks:\n    - ansible.builtin.debug: msg=x\n      bogus_keyword: 1\n')
    junit_path = tmp_path / 'junit.xml'
    summary_path = tmp_path / 'summary.json'
    proc = run_entry(['broken.yml', '--project-dir', str(project), '--junit', str(junit_path), '--summary', str(summary_path),
                      '--artifacts', str(tmp_path / 'art')], cwd=tmp_path)
    assert proc.returncode not in (0, 2)
    assert 'bogus_keyword' in proc.stdout
    summary = json.loads(summary_path.read_text())
    assert summary['ok'] is False and summary['stats'] == {}
    assert summary['failures'][0]['host'] is None and 'bogus_keyword' in summary['failures'][0]['msg']
    suite = ET.parse(str(junit_path)).getroot().find('testsuite')
    assert suite.get('failures') == '1'


@pytest.mark.e2e
def test_usage_errors(tmp_path):
    proc = run_entry(['does/not/exist.yml', '--project-dir', str(tmp_path)], cwd=tmp_path)
    assert proc.returncode == 2
    assert 'not found' in proc.stderr
    proc = run_entry(['--help'], cwd=tmp_path)
    assert proc.returncode == 0 and '--summary' in proc.stdout


@pytest.mark.e2e
def test_default_project_dir_is_repo(tmp_path):
    """Without --project-dir the repository root (and its ansible.cfg, when present) is used."""
    playbook = tmp_path / 'hello.yml'
    playbook.write_text('- hosts: all\n  gather_facts: false\n  tasks:\n    - name: Hello\n      ansible.builtin.debug:\n        msg: hi\n')
    inventory = tmp_path / 'inv.yml'
    inventory.write_text(LOCAL_INVENTORY.format(host='node1'))
    summary_path = tmp_path / 'summary.json'
    proc = run_entry([str(playbook), '-i', str(inventory), '--summary', str(summary_path), '--artifacts', str(tmp_path / 'art')],
                     cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads(summary_path.read_text())
    assert summary['project_dir'] == REPO
    if os.path.isfile(os.path.join(REPO, 'ansible.cfg')):
        assert summary['ansible_config'] == os.path.join(REPO, 'ansible.cfg')
    assert summary['stats']['node1']['ok'] == 1


# --- secrets --------------------------------------------------------------------------------------

def test_the_runner_record_of_the_environment_loses_secret_values(tmp_path):
    record = {'command': ['ansible-playbook', 'x.yml'], 'cwd': '/', 'env': {
        'HF_TOKEN': 'hf_1', 'WANDB_API_KEY': 'w', 'AWS_SECRET_ACCESS_KEY': 's', 'DB_PASSWORD': 'p', 'MY_CRED': 'c',
        'PATH': '/usr/bin', 'HOME': '/root'}}
    (tmp_path / 'command').write_text(json.dumps(record))
    assert tr.redact_command_record(str(tmp_path), extra_names=('MY_CRED', )) is True
    env = json.loads((tmp_path / 'command').read_text())['env']
    assert env == {'HF_TOKEN': '<redacted>', 'WANDB_API_KEY': '<redacted>', 'AWS_SECRET_ACCESS_KEY': '<redacted>',
                   'DB_PASSWORD': '<redacted>', 'MY_CRED': '<redacted>', 'PATH': '/usr/bin', 'HOME': '/root'}
    assert oct(os.stat(str(tmp_path / 'command')).st_mode & 0o777) == '0o600'
    assert tr.redact_command_record(str(tmp_path)) is False  # nothing left to redact
    assert tr.redact_command_record(str(tmp_path / 'missing')) is False


def test_the_summary_never_shows_secret_env_values():
    given = {'channels': 42, 'trainops_secret_env': {'HF_TOKEN': 'hf_1'}}
    assert tr.redact_extravars(given) == {'channels': 42, 'trainops_secret_env': {'HF_TOKEN': '<redacted>'}}
    assert given['trainops_secret_env'] == {'HF_TOKEN': 'hf_1'}  # the run itself still gets it
    assert tr.redact_extravars({'trainops_secret_env': 'oops'}) == {'trainops_secret_env': '<redacted>'}
    assert tr.redact_extravars({'a': 1}) == {'a': 1}


def test_the_summary_never_shows_the_credentials_of_a_url():
    given = {'repo': 'https://oauth2:glpat-1@gitlab.example.com/o/r.git?access_token=t&ref=main',
             'sweep': {'sources': ['https://tok@host/a.git', 'file:///srv/b.git']}, 'channels': 4, 'note': 'a://b@c',
             'why': 'from https://u:p@host/c.git?sig=s now'}
    assert tr.redact_extravars(given) == {
        'repo': 'https://gitlab.example.com/o/r.git?ref=main',
        'sweep': {'sources': ['https://host/a.git', 'file:///srv/b.git']}, 'channels': 4, 'note': 'a://b@c',
        'why': 'from https://host/c.git now'}


def test_the_runner_record_of_the_command_line_loses_secret_values(tmp_path):
    given = '{"trainops_secret_env": {"HF_TOKEN": "{{ lookup(\'ansible.builtin.env\', \'HF_TOKEN\') }}"}, "run_name": "r1"}'
    record = {'command': ['ansible-playbook', '-e', given, '-e', 'who=hf_1_from_env', 'x.yml'], 'cwd': '/',
              'env': {'HF_TOKEN': 'hf_1_from_env', 'PATH': '/usr/bin'}}
    (tmp_path / 'command').write_text(json.dumps(record))
    assert tr.redact_command_record(str(tmp_path)) is True
    saved = json.loads((tmp_path / 'command').read_text())
    assert saved['command'] == ['ansible-playbook', '-e', json.dumps(
        {'run_name': 'r1', 'trainops_secret_env': {'HF_TOKEN': '<redacted>'}}, sort_keys=True), '-e', 'who=<redacted>', 'x.yml']
    assert saved['env'] == {'HF_TOKEN': '<redacted>', 'PATH': '/usr/bin'}
    assert tr.redact_command_record(str(tmp_path)) is False  # the same rule again changes nothing


def test_every_runner_record_loses_the_secrets_it_holds(tmp_path):
    # what ansible-runner leaves: an event whose command line (the health check's nested ansible-playbook) types a
    # secret into -e and whose display shows it as JSON text; the stdout file; a link, which is neither followed
    # nor changed
    nested = ['ansible-playbook', 'health.yml', '--extra-vars', '{"trainops_secret_env": {"K": "typed \\"in\\" 42"}}',
              '-e', 'repo=https://u:pw_in_url_77@h/r.git']
    event = {'event': 'runner_on_ok', 'stdout': 'ok: %s' % json.dumps({'cmd': nested}),
             'event_data': {'res': {'cmd': nested, 'stdout': 'env_secret_value_1 and more'}}}
    (tmp_path / 'run' / 'job_events').mkdir(parents=True)
    (tmp_path / 'run' / 'job_events' / '1-a.json').write_text(json.dumps(event))
    (tmp_path / 'run' / 'stdout').write_text('ok: %s\nenv_secret_value_1\n' % json.dumps(nested))
    outside = tmp_path / 'outside.txt'
    outside.write_text('env_secret_value_1')
    os.symlink(str(outside), str(tmp_path / 'run' / 'link'))
    redactor = tr.Redactor(tr.secret_values({}, environ={'HF_TOKEN': 'env_secret_value_1', 'HOME': '/root', 'API_KEY': 'x'}))
    changed = tr.redact_artifacts(str(tmp_path / 'run'), redactor)
    assert sorted(changed) == ['job_events/1-a.json', 'stdout']
    for path in changed:
        text = (tmp_path / 'run' / path).read_text()
        for value in ('typed', 'pw_in_url_77', 'env_secret_value_1'):
            assert value not in text, (path, text)
    saved = json.loads((tmp_path / 'run' / 'job_events' / '1-a.json').read_text())
    assert saved['event_data']['res']['cmd'][3] == '{"trainops_secret_env": {"K": "<redacted>"}}'
    assert saved['event_data']['res']['cmd'][5] == 'repo=https://h/r.git'
    assert outside.read_text() == 'env_secret_value_1'
    assert tr.redact_artifacts(str(tmp_path / 'run'), redactor) == []  # nothing left


def test_the_secret_values_a_run_knows():
    extravars = {'trainops_secret_env': {'A': 'from_a_vars_file', 'B': "{{ lookup('ansible.builtin.env', 'PLAIN') }}",
                                         'C': 'abc'}}
    environ = {'PLAIN': 'read_by_reference', 'MY_TOKEN': 'token_value', 'OTHER': 'other_value', 'NAMED': 'named_value'}
    assert sorted(tr.secret_values(extravars, ('NAMED', ), environ)) == [
        'from_a_vars_file', 'named_value', 'read_by_reference', 'token_value']  # 'abc': too short to look for


SECRET_PLAYBOOK = textwrap.dedent("""\
    - name: Secret play
      hosts: all
      gather_facts: false
      tasks:
        - name: The token reached the play by reference
          ansible.builtin.assert:
            quiet: true
            that:
              - trainops_secret_env.HF_TOKEN == lookup('ansible.builtin.env', 'HUB_T')
              - trainops_secret_env.HF_TOKEN | length > 8
        # as the health check's nested ansible-playbook: a command line that carries the launch's -e arguments,
        # whose result (and, with -vvv, its arguments) ansible-runner records in job_events/ and stdout
        - name: A command line with the secrets in it
          ansible.builtin.command:
            argv: [echo, "{{ trainops_secret_env.HF_TOKEN }}", "{{ trainops_secret_env.FILE_KEY }}", --extra-vars,
                   '{"trainops_secret_env": {"X_TOKEN": "typed_in_nested_0042"}}', "{{ repo_url }}"]
          changed_when: false
        - name: Show them
          ansible.builtin.debug:
            msg: "{{ trainops_secret_env.HF_TOKEN }} {{ trainops_secret_env.FILE_KEY }} {{ repo_url }}"
    """)
TOKEN = 'hf_e2e_token_value_4711'
HIDDEN = (TOKEN, 'file_secret_value_0815', 'typed_in_nested_0042', 'url_password_0099')


@pytest.mark.e2e
def test_a_literal_secret_on_the_command_line_is_refused_before_anything_runs(project, tmp_path):
    (project / 'secret.yml').write_text(SECRET_PLAYBOOK)
    summary_path = tmp_path / 'summary.json'
    proc = run_entry(['secret.yml', '--project-dir', str(project), '--artifacts', str(tmp_path / 'art'),
                      '--summary', str(summary_path), '-e', 'who=x',
                      '-e', '{"trainops_secret_env": {"HF_TOKEN": "%s", "B_KEY": "{{ lookup(\'ansible.builtin.env\', \'B\') }}"}}'
                      % TOKEN], cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert ("trainops_secret_env: HF_TOKEN is given literally on the command line (-e), where any user's ps and "
            "ansible-runner's records see it: export it in the controller's environment and pass it by reference, "
            "-e \"{trainops_secret_env: {HF_TOKEN: \\\"{{ lookup('ansible.builtin.env', 'HF_TOKEN') }}\\\"}}\" "
            "(or put it in a vars file: -e @secrets.yml)") in proc.stderr
    assert 'B_KEY' not in proc.stderr  # a reference is fine
    assert TOKEN not in proc.stdout + proc.stderr
    assert not (tmp_path / 'art').exists() and not summary_path.exists()  # ansible-runner never started


@pytest.mark.e2e
def test_a_secret_by_reference_reaches_the_play_and_no_runner_record(project, tmp_path):
    (project / 'secret.yml').write_text(SECRET_PLAYBOOK)
    summary_path = tmp_path / 'summary.json'
    # the token by reference, from an environment variable whose name does not look secret; another in a vars file
    (tmp_path / 'secrets.yml').write_text('trainops_secret_env:\n  FILE_KEY: file_secret_value_0815\n'
                                          '  HF_TOKEN: "{{ lookup(\'ansible.builtin.env\', \'HUB_T\') }}"\n')
    env = dict(os.environ, HUB_T=TOKEN)
    env.pop('ANSIBLE_CONFIG', None)
    proc = subprocess.run([sys.executable, ENTRY, 'secret.yml', '--project-dir', str(project), '--artifacts',
                           str(tmp_path / 'art'), '--summary', str(summary_path), '-e', '@' + str(tmp_path / 'secrets.yml'),
                           '-e', 'repo_url=https://ci:url_password_0099@git.example.com/r.git', '-vvv'],
                          cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads(summary_path.read_text())
    assert summary['extravars']['trainops_secret_env'] == {'HF_TOKEN': '<redacted>', 'FILE_KEY': '<redacted>'}
    record = json.loads((tmp_path / 'art' / os.path.basename(summary['artifact_dir']) / 'command').read_text())
    assert record['env']['HUB_T'] == '<redacted>'
    seen = []
    for folder, _dirs, files in os.walk(str(tmp_path / 'art')):
        for name in files:
            with open(os.path.join(folder, name), encoding='utf-8', errors='replace') as handle:
                text = handle.read()
            seen.append(os.path.relpath(os.path.join(folder, name), str(tmp_path / 'art')))
            for value in HIDDEN:
                assert value not in text, (value, os.path.join(folder, name))
            if 'typed_in_nested' in text.replace('<redacted>', ''):
                raise AssertionError(name)
    assert any('/job_events/' in path for path in seen) and any(path.endswith('/stdout') for path in seen), seen
    events = ''.join(open(os.path.join(str(tmp_path / 'art'), path)).read() for path in seen if '/job_events/' in path)
    assert 'A command line with the secrets in it' in events and '<redacted>' in events  # the events are there, redacted
    for value in HIDDEN:
        assert value not in proc.stdout + proc.stderr + summary_path.read_text()
