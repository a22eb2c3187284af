# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Record the part of a real node's /proc, /sys and /dev that node facts read, for a new fixture tree.

Run on a GPU node from the checkout (hack/gpu_check.sh does, on a lent H100/H200)::

    python3 hack/gpu_record_tree.py OUT.json

It runs the collection's own detection (``_node_facts.gpu_details``, ``rdma_facts``, ``pci_topology``,
``default_route_ifnames``, ``gpudirect_facts``) against ``/`` with every filesystem call traced, then writes each
path the detection touched as it is on the node: a file's text (``/proc/kallsyms``: only the lines of the symbols the
detection looks for), a directory's entries, a link's target. ``hack/gpu_fixture_from_record.py`` turns that record
into ``tests/unit/fixtures/node_facts/<name>/root`` (the fixture encoding). GPU UUIDs and serial numbers are
blanked here, on the node: they never leave it.
"""

from __future__ import annotations

import builtins
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), '.collections'))

# pylint: disable=wrong-import-position
from ansible_collections.trainops.multinode.plugins.module_utils import _node_facts as nf  # noqa: E402

#: What the detection reads lives under these; anything else (Python's own imports) is not recorded.
PREFIXES = ('/proc/', '/sys/', '/dev/', '/usr/share/libdrm/', '/boot/')
#: Lines that identify one physical board, blanked before anything is written.
IDENTIFYING = re.compile(r'^(\s*(GPU UUID|Board Serial|Serial Number|UUID)\s*:\s*).*$', re.MULTILINE | re.IGNORECASE)
FILE_LIMIT = 64 * 1024

TOUCHED = set()
LISTED = set()


def _note(path):
    if isinstance(path, (str, bytes, os.PathLike)):
        text = os.fsdecode(os.fspath(path))
        if text.startswith(PREFIXES):
            TOUCHED.add(os.path.normpath(text))


def _traced(function):
    def wrapper(path, *args, **kwargs):
        _note(path)
        return function(path, *args, **kwargs)
    return wrapper


def _listed(function):
    def wrapper(path='.', *args, **kwargs):
        _note(path)
        if isinstance(path, str) and path.startswith(PREFIXES):
            LISTED.add(os.path.normpath(path))
        return function(path, *args, **kwargs)
    return wrapper


def _trace_filesystem():
    builtins.open = _traced(builtins.open)
    for name in ('stat', 'lstat', 'readlink'):
        setattr(os, name, _traced(getattr(os, name)))
    for name in ('listdir', 'scandir'):
        setattr(os, name, _listed(getattr(os, name)))


def _parents(path):
    parent = os.path.dirname(path)
    while parent not in ('/', ''):
        yield parent
        parent = os.path.dirname(parent)


def _entry(path, symbols):
    """How ``path`` is on this node: a link, a directory (its entries) or a file (its text)."""
    if os.path.islink(path):
        return dict(kind='link', target=os.readlink(path))
    if os.path.isdir(path):
        return dict(kind='dir', entries=sorted(os.listdir(path)))
    if not os.path.exists(path):
        return None
    try:
        with open(path, 'rb') as handle:
            if path == '/proc/kallsyms':  # the symbols looked for, their addresses zeroed (as a non-root reader sees)
                text = b''.join(b'0' * 16 + line[16:] for line in handle if any(s.encode() in line for s in symbols))
            else:
                text = handle.read(FILE_LIMIT)
    except OSError as exc:
        return dict(kind='unreadable', error=exc.strerror)
    return dict(kind='file', text=IDENTIFYING.sub(r'\1(blanked)', text.decode('utf-8', 'replace')))


def _run(argv):
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, env=dict(os.environ, LC_ALL='C'))
    return proc.returncode, proc.stdout, proc.stderr


def main(argv):
    out = argv[1] if len(argv) > 1 else 'node_tree.json'
    runner = nf.Runner(_run, lambda name: __import__('shutil').which(name))
    warnings = []
    _trace_filesystem()
    gpu = nf.gpu_details('/', runner, warnings)
    rdma = nf.rdma_facts('/', gpu['vendor'], (None, 'host'))
    facts = dict(gpu=gpu, rdma=rdma, pci=nf.pci_topology('/', gpu['pci_ids'], rdma['devices']),
                 default_ifnames=nf.default_route_ifnames('/'))
    paths = set(TOUCHED)
    for path in list(paths):
        paths.update(_parents(path))
    symbols = ('ib_umem_dmabuf_get', 'ib_register_peer_memory_client')
    tree = dict((path, _entry(path, symbols)) for path in sorted(paths))
    with open(out, 'w') as handle:
        json.dump(dict(facts=facts, warnings=warnings, tree=tree, listed=sorted(LISTED)), handle, indent=1, sort_keys=True, default=str)
    print('recorded %d paths (%d files) into %s' % (len(tree), sum(1 for e in tree.values() if e and e['kind'] == 'file'), out))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
