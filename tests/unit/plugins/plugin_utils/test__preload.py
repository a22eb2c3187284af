# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection's filter and action plugins imported once in the controller's main process (callback preload)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from ansible_collections.trainops.multinode.plugins.plugin_utils import _preload

PLUGINS = os.path.dirname(os.path.dirname(os.path.abspath(_preload.__file__)))
REPO = os.path.dirname(PLUGINS)


def test_every_filter_and_action_file_of_the_collection_is_listed():
    names = _preload.plugin_modules()
    for kind in ('filter', 'action'):
        files = sorted(f[:-3] for f in os.listdir(os.path.join(PLUGINS, kind)) if f.endswith('.py') and f != '__init__.py')
        assert files, kind
        assert [n.rsplit('.', 1)[1] for n in names if n.split('.')[-2] == kind] == files
    assert all(n.startswith('ansible_collections.trainops.multinode.plugins.') for n in names)


def test_only_python_files_of_the_listed_kinds(tmp_path):
    (tmp_path / 'filter').mkdir()
    for name in ('a.py', 'b.yml', '__init__.py', 'not-a-name.py', 'c.pyc'):
        (tmp_path / 'filter' / name).write_text('')
    (tmp_path / 'modules').mkdir()
    (tmp_path / 'modules' / 'm.py').write_text('')
    assert _preload.plugin_modules(str(tmp_path)) == ['ansible_collections.trainops.multinode.plugins.filter.a']


class FakeLoader:
    def __init__(self, error=None):
        self.asked, self.error = [], error

    def get(self, name):
        self.asked.append(name)
        if self.error:
            raise self.error


class FakeFilters:
    def filters(self):
        return {'zeta': None, 'alpha': None}


def test_imports_each_then_resolves_one_filter_by_fqcn(tmp_path):
    for kind, files in (('filter', ('f1.py', 'f2.py')), ('action', ('act.py', ))):
        (tmp_path / kind).mkdir()
        for name in files:
            (tmp_path / kind / name).write_text('')
    imported = []

    def import_module(name):
        imported.append(name)
        return type('Module', (), {'FilterModule': FakeFilters}) if '.filter.' in name else object()
    loader = FakeLoader()
    assert _preload.preload(import_module, loader, str(tmp_path)) == []
    assert [n.rsplit('.', 2)[1:] for n in imported] == [['filter', 'f1'], ['filter', 'f2'], ['action', 'act']]
    assert loader.asked == ['trainops.multinode.alpha']


def test_a_plugin_that_cannot_be_imported_is_reported_and_the_others_still_load(tmp_path):
    (tmp_path / 'filter').mkdir()
    for name in ('bad.py', 'good.py'):
        (tmp_path / 'filter' / name).write_text('')

    def import_module(name):
        if name.endswith('.bad'):
            raise ImportError('no module named torch')
        return type('Module', (), {'FilterModule': FakeFilters})
    loader = FakeLoader(error=KeyError('x'))
    failed = _preload.preload(import_module, loader, str(tmp_path))
    assert failed == [('ansible_collections.trainops.multinode.plugins.filter.bad', 'ImportError: no module named torch'),
                      ('trainops.multinode.alpha', "KeyError: 'x'")]


def test_in_a_fresh_interpreter_every_plugin_is_in_sys_modules_afterwards():
    """The real plugins import (nothing in them needs a worker), and Ansible's filter loader resolves one."""
    code = textwrap.dedent('''
        import sys
        from ansible.plugins.loader import init_plugin_loader
        init_plugin_loader()
        from ansible_collections.trainops.multinode.plugins.plugin_utils import _preload
        assert _preload.preload() == [], _preload.preload()
        missing = [n for n in _preload.plugin_modules() if n not in sys.modules]
        assert not missing, missing
        print('ok', len(_preload.plugin_modules()))
    ''')
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, 'ansible.cfg'))
    proc = subprocess.run([sys.executable, '-c', code], cwd=REPO, env=env, capture_output=True, text=True, check=False,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith('ok ')
