"""End-to-end: a script of the user's own on the local default's two nodes, one rank each.

The script lives outside the checkout (pytest's tmp_path), knows nothing of trainops (its own argparse, which
rejects unknown arguments such as --config; plain torch.distributed with gloo; no metrics, no ``step=`` lines) and
is launched with the short knobs a user types: ``-e src=... -e script=... -e 'args=...'``, then as a module
(``-e module=...``). Each rank writes the arguments it got to its output directory (TRAINOPS_OUTPUT_DIR, collected
into the experiment); the test reads them back, the progress line (the script's last log line) and the summary's
world size (torchrun's nnodes x nproc, not our metrics).
"""
import glob
import json
import os
import re
import textwrap

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

USER_MAIN = textwrap.dedent('''\
    import argparse
    import json
    import os
    import sys
    import time

    import torch
    import torch.distributed as dist


    def main():
        parser = argparse.ArgumentParser()
        parser.add_argument('--lr', type=float, required=True)
        parser.add_argument('--name', required=True)
        args = parser.parse_args()  # an unknown argument (--config ...) ends the rank with status 2
        dist.init_process_group('gloo')
        rank, world = dist.get_rank(), dist.get_world_size()
        total = torch.ones(1) * (rank + 1)
        dist.all_reduce(total)
        out = os.environ['TRAINOPS_OUTPUT_DIR']
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, 'argv_rank%d.json' % rank), 'w') as handle:
            json.dump({'argv': sys.argv[1:], 'world': world, 'sum': total.item()}, handle)
        for epoch in range(3):
            print('own script: epoch %d of %s lr=%s' % (epoch, args.name, args.lr), flush=True)
            time.sleep(1)
        dist.destroy_process_group()


    if __name__ == '__main__':
        main()
    ''')

ARGS = "--lr 0.5 --name 'run one'"
EXPECTED = ['--lr', '0.5', '--name', 'run one']


def user_code(root):
    """The user's directory: a script, and the same code as a package (python -m mypkg.train)."""
    src = os.path.join(str(root), 'mycode')
    os.makedirs(os.path.join(src, 'mypkg'))
    for path in ('my_train.py', os.path.join('mypkg', 'train.py')):
        with open(os.path.join(src, path), 'w') as handle:
            handle.write(USER_MAIN)
    open(os.path.join(src, 'mypkg', '__init__.py'), 'w').close()
    # what the sync leaves out: git's data, environments, what .gitignore and sync_exclude list
    for path in ('.git/HEAD', '.venv/bin/python', 'env311/pyvenv.cfg', 'data/big.bin', 'scratch/notes.txt'):
        os.makedirs(os.path.dirname(os.path.join(src, path)), exist_ok=True)
        open(os.path.join(src, path), 'w').close()
    with open(os.path.join(src, '.gitignore'), 'w') as handle:
        handle.write('/data/\n')
    return src


def played(proc):
    with open(os.path.join(proc.summary['artifact_dir'], 'stdout')) as handle:
        return proc.stdout + proc.stderr + handle.read()


def check_launch(lab, proc, before):
    output = played(proc)
    assert proc.returncode == 0, output[-4000:]
    (path,) = sorted(set(lab.experiment_dirs()) - set(before))
    written = sorted(glob.glob(os.path.join(path, 'outputs', '*', 'argv_rank*.json')))
    assert [os.path.basename(f) for f in written] == ['argv_rank0.json', 'argv_rank1.json'], written
    for name in written:
        with open(name) as handle:
            got = json.load(handle)
        assert got == {'argv': EXPECTED, 'world': 2, 'sum': 3.0}, got
    # the progress line is the script's last log line: it prints no step= line of ours
    # the node log's last line, with the prefix of the rank that wrote it (logs.yml's per-rank logs)
    assert re.search(r'running  log: \[rank \d+\] own script: epoch', output), output[-4000:]
    with open(os.path.join(path, 'summary.txt')) as handle:
        summary = handle.read()
    with open(os.path.join(lab.root, 'summary-%s.txt' % os.path.basename(path)), 'w') as handle:  # kept for reading
        handle.write(summary)
    lines = dict((part.strip() for part in line.split(' : ', 1)) for line in summary.splitlines() if ' : ' in line)
    assert lines['nodes'] == '2', summary
    assert lines['world size'].startswith('2 (torchrun: 2 nodes x 1 rank)'), summary
    assert lines['ranks'].startswith('2 ran (node0: 0 exit 0; node1: 1 exit 0)'), summary
    with open(os.path.join(path, 'manifest.json')) as handle:
        manifest = json.load(handle)
    return manifest


def test_a_script_of_the_users_own_gets_exactly_its_arguments_as_a_file_and_as_a_module(lab, tmp_path):
    src = user_code(tmp_path)
    knobs = {'src': src, 'args': ARGS, 'nproc': 1, 'trainops_poll_interval': 1, 'trainops_progress_interval': 1,
             'sync_exclude': ['scratch/']}
    proc = lab.run('playbooks/launch.yml', dict(knobs, script='my_train.py'), timeout=300)
    manifest = check_launch(lab, proc, [])
    assert manifest['parameters']['script'] == 'my_train.py' and manifest['parameters']['script_args'] == EXPECTED
    for node in ('node0', 'node1'):
        synced = sorted(os.listdir(os.path.join(lab.nodes, node, 'workspace')))
        assert [name for name in synced if not name.startswith('.trainops')] == ['.gitignore', 'my_train.py', 'mypkg'], synced

    before = lab.experiment_dirs()
    proc = lab.run('playbooks/launch.yml', dict(knobs, module='mypkg.train'), timeout=300)
    manifest = check_launch(lab, proc, before)
    assert manifest['parameters']['module'] == 'mypkg.train'
    assert not lab.leftovers()

    # the shipped workspace (no src) is never synced over the user's code without being told to
    refused = lab.run('playbooks/launch.yml', {'nproc': 1}, timeout=300)
    assert refused.returncode != 0
    workspace = os.path.join(lab.nodes, 'node0', 'workspace')
    assert ('the directory %s on node0 holds the code of %s (its .trainops-source); this sync would put %s over it'
            % (workspace, os.path.realpath(src), os.path.join(REPO, 'files', 'workspace'))) in refused.failure_text, \
        refused.failure_text
    assert sorted(os.listdir(workspace)) == ['.gitignore', '.trainops-dir-id', '.trainops-source', 'my_train.py', 'mypkg']
    assert not lab.leftovers()
