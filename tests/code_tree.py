# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The source tree the code_sync tests sync (local e2e and lab), and checksums to compare trees with."""

import hashlib
import os

# src tree: path -> content. Everything under KEPT reaches the nodes, nothing under EXCLUDED does.
KEPT = {
    'train.py': 'print("train")\n',
    'pkg/__init__.py': '',
    'pkg/model.py': 'HIDDEN = 1024\n',
    'configs/experiments/ablation.yaml': 'lr: 0.1\n',   # only the top-level experiments/ is excluded
    'dir with space/it\'s here.txt': 'quoted\n',
    'data/blob.bin': os.urandom(64 * 1024),
    '.gitignore': '*.log\n/scratch/\n',
}
EXCLUDED = {
    'experiments/multinode_42ch/logs/node_0.txt': 'old run\n',
    '.venv/bin/python': 'not a python\n',
    'venv/lib/x.py': 'x\n',
    'pkg/__pycache__/model.cpython-311.pyc': 'bytecode\n',
    'stray.pyc': 'bytecode\n',
    '.mypy_cache/3.11/x.json': '{}\n',
    '.pytest_cache/v/cache/lastfailed': '{}\n',
    'web/node_modules/left-pad/index.js': 'x\n',
    'trainops.egg-info/PKG-INFO': 'x\n',
    'secret/token.txt': 'user exclude\n',   # excluded by the user's pattern
    'run.log': 'ignored by .gitignore\n',
    'pkg/debug.log': 'ignored by .gitignore, at any depth\n',
    'scratch/tmp.txt': 'ignored by .gitignore, at the top\n',
    'envs/py311/pyvenv.cfg': 'home = /usr/bin\n',   # a virtual environment of another name
    'envs/py311/lib/x.py': 'x\n',
}
USER_EXCLUDES = ['secret/']


def write_tree(root, files):
    for rel, content in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'wb') as handle:
            handle.write(content if isinstance(content, bytes) else content.encode())


SOURCE_MARKER = '.trainops-source'


def tree_digest(root):
    """{relative path: sha256} of every regular file under root but the sync's own record of its source (the top's
    SOURCE_MARKER, which the tests check by themselves)."""
    found = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            if name == SOURCE_MARKER and dirpath == root:
                continue
            path = os.path.join(dirpath, name)
            with open(path, 'rb') as handle:
                found[os.path.relpath(path, root)] = hashlib.sha256(handle.read()).hexdigest()
    return found


def expected_digest(files):
    return {rel: hashlib.sha256(c if isinstance(c, bytes) else c.encode()).hexdigest() for rel, c in files.items()}
