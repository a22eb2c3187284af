# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Turn a record of hack/gpu_record_tree.py into a node_facts fixture tree (tests/unit/fixtures/node_facts/README.md):

    python3 hack/gpu_fixture_from_record.py node_tree.json tests/unit/fixtures/node_facts/<name>

Writes ``<name>/root`` in the fixture encoding: path components percent-encoded (``0000%3A00%3A06.0``), a link as
``NAME.symlink`` holding its relative target (kept only when the target was recorded too: a link out of what was
read, such as ``/proc/net -> self/net``, becomes the directory of its recorded entries), ``.keep`` in a directory
with nothing else recorded. Only what the detection read is written; absent paths stay absent.
"""

from __future__ import annotations

import json
import os
import posixpath
import shutil
import sys
from urllib.parse import quote


def encoded(path):
    return '/'.join(quote(part, safe='') for part in path.strip('/').split('/'))


def kept_links(tree):
    """The recorded links whose target was recorded too, as {path: relative target}."""
    links = {}
    for path, entry in tree.items():
        if entry and entry['kind'] == 'link':
            target = posixpath.normpath(posixpath.join(posixpath.dirname(path), entry['target']))
            if tree.get(target):
                links[path] = entry['target']
    return links


def resolved(path, links):
    """``path`` with a kept link above it replaced by the link's target (the file lives there in the fixture)."""
    for link, target in links.items():
        if path.startswith(link + '/'):
            return posixpath.normpath(posixpath.join(posixpath.dirname(link), target)) + path[len(link):]
    return path


def write_fixture(record, dest):
    tree = record['tree']
    links = kept_links(tree)
    root = os.path.join(dest, 'root')
    if os.path.exists(root):
        shutil.rmtree(root)
    os.makedirs(root)
    for path in sorted(tree):
        entry = tree[path]
        if not entry:
            continue  # absent on the node
        out = os.path.join(root, encoded(resolved(path, links)))
        if path in links:
            os.makedirs(os.path.dirname(out), exist_ok=True)
            with open(out + '.symlink', 'w') as handle:
                handle.write(links[path] + '\n')
        elif entry['kind'] == 'file':
            os.makedirs(os.path.dirname(out), exist_ok=True)
            with open(out, 'w') as handle:
                handle.write(entry['text'])
        elif entry['kind'] in ('dir', 'link'):
            os.makedirs(out, exist_ok=True)
    for dirpath, dirnames, filenames in os.walk(root):
        if not dirnames and not filenames:
            open(os.path.join(dirpath, '.keep'), 'w').close()
    return root


def main(argv):
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    with open(argv[1]) as handle:
        record = json.load(handle)
    root = write_fixture(record, argv[2])
    print('wrote %s' % root)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
