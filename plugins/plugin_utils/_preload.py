# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The collection's filter and action plugins imported in the controller's main process (callback ``preload``).

Ansible forks a worker per host and task; a worker that uses one of the collection's filters first makes
ansible-core import every filter file of the collection (to find one filter by name) with the module_utils they
import, and a worker that runs one of its action plugins imports that plugin: about 0.08 CPU-s each time, lost with
the worker. Imported once in the main process before the first worker is forked, they are in every worker's
``sys.modules`` already, where ansible-core's plugin loader finds them (``PluginLoader._load_module_source``).
The plugins are found by listing the collection's own directories, so a new filter or action file needs no entry.
"""

from __future__ import annotations

import importlib
import os

COLLECTION = 'trainops.multinode'
PACKAGE = 'ansible_collections.trainops.multinode.plugins'
PLUGINS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KINDS = ('filter', 'action')


def plugin_modules(plugins_dir=PLUGINS_DIR, kinds=KINDS):
    """The Python module names of the collection's plugins of these kinds, from the files in their directories."""
    names = []
    for kind in kinds:
        folder = os.path.join(plugins_dir, kind)
        if not os.path.isdir(folder):
            continue
        for entry in sorted(os.listdir(folder)):
            stem, ext = os.path.splitext(entry)
            if ext == '.py' and stem != '__init__' and stem.isidentifier():
                names.append('%s.%s.%s' % (PACKAGE, kind, stem))
    return names


def _first_filter(module):
    """One filter name the module provides (its FilterModule's first), or None."""
    filter_module = getattr(module, 'FilterModule', None)
    if filter_module is None:
        return None
    names = sorted(filter_module().filters())
    return names[0] if names else None


def preload(import_module=importlib.import_module, filter_loader=None, plugins_dir=PLUGINS_DIR):
    """Import every filter and action plugin of the collection, then have Ansible's filter loader resolve one filter
    by its FQCN (which fills the loader's own caches of the collection's filter files). Returns
    ``[(module name or FQCN, error text)]`` for what could not be loaded; never raises."""
    failed = []
    first = None
    for name in plugin_modules(plugins_dir):
        try:
            module = import_module(name)
        except Exception as exc:  # pylint: disable=broad-except  # a broken plugin: the task using it will say so
            failed.append((name, '%s: %s' % (type(exc).__name__, exc)))
            continue
        if first is None and '.filter.' in name:
            first = _first_filter(module)
    if first is not None:
        fqcn = '%s.%s' % (COLLECTION, first)
        try:
            if filter_loader is None:
                from ansible.plugins.loader import filter_loader  # pylint: disable=import-outside-toplevel
            filter_loader.get(fqcn)
        except Exception as exc:  # pylint: disable=broad-except
            failed.append((fqcn, '%s: %s' % (type(exc).__name__, exc)))
    return failed
