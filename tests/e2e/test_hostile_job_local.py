"""End-to-end: a hostile job on the lowest ansible-core the collection supports (meta/runtime.yml).

What a job writes (its file names, its metrics, its log) reaches facts on the controller: the collect's plan and its
refusal lines, the summary, the wait's progress. ansible-core 2.19's data tagging never renders a template again
inside such a value; 2.17 and 2.18 do, which is why the collection requires 2.19 (requirements.txt). The launch here
runs on the lowest 2.19 release, installed once for the tests (``pip install --no-deps --target``, cached in
``TRAINOPS_LOWEST_CORE_DIR``, by default ``<venv>/lowest-core``) and put first on ansible-playbook's PYTHONPATH; its
job writes a file named with a pipe lookup and absurd metrics, and must never make the controller run the command,
while the outcome, the summary and the manifest are still written and what was not read is named by node and file.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import uuid

import pytest
import yaml

from playbook_runner import REPO
from test_launch_local import _git

pytestmark = [pytest.mark.e2e, pytest.mark.real, pytest.mark.slow]

PIPE = "{{ lookup('ansible.builtin.pipe', 'touch $TRAINOPS_E2E_PWNED') }}"

# one rank per node: files named with the lookup (one the collect plans, one with a newline that it refuses and names),
# a progress line and the records' host name with it, and metrics records that are absurd (world_size 1e12, a 400-digit
# step, nesting 200k deep (a line too long) and 100 deep, a NaN) beside one good record; checkpoint.json 200k deep
HOSTILE = r'''
import json, os
out = os.environ["TRAINOPS_OUTPUT_DIR"]
os.makedirs(out, exist_ok=True)
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
pipe = %r
print("[trainops] node=%%s rank=%%d/%%d epoch=0 step=1/1 %%s" %% (os.environ.get("TRAINOPS_NODE"), rank, world, pipe), flush=True)
for name in (pipe + ".txt", pipe + "\n.txt"):
    with open(os.path.join(out, name), "w") as handle:
        handle.write("x")
good = {"rank": rank, "world_size": world, "global_step": 1, "loss": 1.0, "step_time_s": 0.1, "node": pipe}
with open(os.path.join(out, "rank_%%02d_metrics.jsonl" %% rank), "w") as handle:
    handle.write(json.dumps(good) + "\n")
    handle.write('{"rank": %%d, "world_size": 1e12, "global_step": 2}\n' %% rank)
    handle.write('{"rank": %%d, "world_size": %%d, "global_step": %%s}\n' %% (rank, world, "9" * 400))
    handle.write('{"rank": %%d, "x": %%s}\n' %% (rank, "[" * 200000 + "]" * 200000))
    handle.write('{"rank": %%d, "x": %%s}\n' %% (rank, "[" * 100 + "]" * 100))
    handle.write('{"rank": %%d, "world_size": %%d, "global_step": 3, "loss": NaN}\n' %% (rank, world))
with open(os.path.join(out, "checkpoint.json"), "w") as handle:
    handle.write('{"global_step": ' + "[" * 200000 + "]" * 200000 + "}")
''' % PIPE


def lowest_core():
    """The lowest ansible-core release the collection supports: meta/runtime.yml's ``requires_ansible`` (>=X.Y.Z)."""
    with open(os.path.join(REPO, 'meta', 'runtime.yml')) as handle:
        return re.fullmatch(r'>=(\d+\.\d+\.\d+)', yaml.safe_load(handle)['requires_ansible']).group(1)


def core_path(version):
    """A directory holding ansible-core ``version`` alone, for PYTHONPATH; installed once (no dependencies: this
    venv's serve), then cached."""
    cache = os.environ.get('TRAINOPS_LOWEST_CORE_DIR') or os.path.join(sys.prefix, 'lowest-core')
    path = os.path.join(cache, version)
    if not os.path.isfile(os.path.join(path, 'ansible', 'release.py')):
        partial = '%s.partial-%d' % (path, os.getpid())
        subprocess.run([sys.executable, '-m', 'pip', 'install', '--quiet', '--no-deps', '--no-compile', '--target',
                        partial, 'ansible-core==%s' % version], check=True, capture_output=True, timeout=300)
        shutil.rmtree(path, ignore_errors=True)
        os.rename(partial, path)
    return path


def core_env(version, marker):
    return {'PYTHONPATH': os.pathsep.join([core_path(version)] + [p for p in [os.environ.get('PYTHONPATH')] if p]),
            'TRAINOPS_E2E_PWNED': marker, 'ANSIBLE_NOCOLOR': '1'}


def hostile_workspace(root):
    """The workspace as a git repository with the hostile script beside the training one."""
    workspace = os.path.join(root, 'code')
    shutil.copytree(os.path.join(REPO, 'files', 'workspace'), workspace)
    with open(os.path.join(workspace, 'hostile.py'), 'w') as handle:
        handle.write(HOSTILE)
    _git(root, 'init', '-q', '-b', 'main', workspace)
    _git(workspace, 'add', '-A')
    _git(workspace, 'commit', '-q', '-m', 'hostile')
    return workspace


def test_a_hostile_job_runs_no_command_on_the_lowest_core_and_is_still_judged(lab):
    version = lowest_core()
    marker = os.path.join(lab.root, 'PWNED-%s' % uuid.uuid4().hex[:8])
    proc = lab.run('playbooks/launch.yml', {
        'trainops_workspace_src': hostile_workspace(lab.root), 'script': 'hostile.py', 'trainops_pass_config_args': False,
        'nproc': 1, 'trainops_poll_interval': 1}, env=core_env(version, marker), timeout=300)
    # the entry's own lines (OUTCOME ...) and the playbook's output as ansible-runner recorded it
    with open(os.path.join(proc.summary['artifact_dir'], 'stdout')) as handle:
        played = handle.read()
    output = proc.stdout + proc.stderr + played
    with open(os.path.join(lab.root, 'launch-output.txt'), 'w') as handle:  # kept with pytest's temporary directory
        handle.write(output)
    flat = ' '.join(played.split())
    # the command in the names, the records and the log never ran on the controller
    assert not os.path.exists(marker), output[-4000:]
    (path,) = lab.experiment_dirs()
    with open(os.path.join(path, 'manifest.json')) as handle:
        manifest = json.load(handle)
    assert manifest['ansible_version'] == version
    # the job is judged (it succeeded), the outcome printed, the summary and the manifest written
    assert manifest['outcome'] == 'succeeded', manifest.get('outcome_detail')
    assert 'OUTCOME succeeded: succeeded (%s)' % path in proc.stdout, proc.stdout[-3000:]
    assert "- 'outcome : succeeded'" in flat, played[-4000:]
    with open(os.path.join(path, 'summary.txt')) as handle:
        summary = handle.read()
    assert summary.startswith('outcome    : succeeded\n')
    assert manifest['summary']['world_size'] == 2 and manifest['summary']['ranks_seen'] == [0, 1]
    assert manifest['summary']['steps'] == 1 and manifest['summary']['missing_ranks'] == []
    # what was not read, named by node and file, in the manifest, the summary and the launch's output
    for node, rank in (('node0', 0), ('node1', 1)):
        name = '%s: rank_%02d_metrics.jsonl' % (node, rank)
        expected = [name + ' line 3 refused: a number beyond +-2**53 (400 digits)',
                    name + ' line 4 refused: a record longer than 65536 bytes',
                    name + ' line 5 refused: nesting deeper than 32 levels',
                    name + ' line 6 refused: a number that is not finite (NaN)',
                    name + " refused: 1 record(s), the first: world_size 1000000000000 is not the job's 2",
                    node + ': checkpoint.json refused: nesting deeper than 32 levels']
        for line in expected:
            assert line in manifest['read_refused'], manifest['read_refused']
            assert 'not read   : ' + line in summary
            assert "- 'not read : %s'" % line.replace("'", "''") in flat, line
    # the collect refused the name with a newline, naming the node, and failed the play after the summary (the name
    # without one was planned and fetched; ansible's path type expands its $TRAINOPS_E2E_PWNED, so no file was there)
    assert proc.returncode != 0
    for node in ('node0', 'node1'):
        assert [line for line in manifest['collect_refused'] if line.startswith(node + ': refused output ')
                and PIPE in line and 'a control character' in line], manifest['collect_refused']
    assert 'the collect refused 2 file(s)' in proc.failure_text, proc.failure_text
    assert not lab.leftovers()
