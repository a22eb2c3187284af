# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests of the rendering of an NCCL/RCCL environment (module_utils/_nccl_env/render.py): the env file and
nccl.conf."""

from __future__ import annotations

import subprocess

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils._nccl_env.render import (
    _quote,
    nccl_conf_path,
    render_env_file,
    render_nccl_conf,
)
from ansible_collections.trainops.multinode.tests.unit.plugins.module_utils.test__nccl_env import has


ENV = {'NCCL_SOCKET_IFNAME': '=bond0.2093', 'GLOO_SOCKET_IFNAME': 'bond0.2093', 'NCCL_DEBUG': 'WARN',
       'NCCL_IB_HCA': '=mlx5_0:1,mlx5_1:1', 'X_SPACED': 'a b', 'X_QUOTE': "it's $HOME `x`", 'X_EMPTY': '',
       'NCCL_EXCLUDE': '^=docker0,lo', 'HSA_ENABLE_SDMA': '0', 'RCCL_THREADS_PER_BLOCK': '256'}


def test_env_file_sorted_quoted_and_sourceable(tmp_path):
    text = render_env_file(ENV, header='trainops test\nsecond line')
    lines = text.splitlines()
    assert lines[:2] == ['# trainops test', '# second line']
    body = lines[2:]
    assert [line.split('=', 1)[0] for line in body] == sorted(ENV)
    assert 'NCCL_SOCKET_IFNAME==bond0.2093' in body and 'NCCL_IB_HCA==mlx5_0:1,mlx5_1:1' in body
    assert "X_SPACED='a b'" in body and "NCCL_EXCLUDE='^=docker0,lo'" in body and "X_EMPTY=''" in body
    path = tmp_path / 'nccl.env'
    path.write_text(text)
    script = 'set -a; . "%s"; set +a; for v in %s; do printf "%%s=%%s\\0" "$v" "${!v}"; done' % (path, ' '.join(sorted(ENV)))
    out = subprocess.run(['bash', '-c', script], check=True, capture_output=True, env={'HOME': '/nonexistent'}).stdout
    parsed = dict(item.split('=', 1) for item in out.decode().split('\0') if item)
    assert parsed == ENV


def test_env_file_unquoted_and_invalid():
    assert "X_SPACED=a b" in render_env_file(ENV, quote=False).splitlines()
    with pytest.raises(ValueError):
        render_env_file({'BAD NAME': '1'})
    with pytest.raises(ValueError):
        render_env_file({'OK': 'two\nlines'})


def test_nccl_conf():
    text = render_nccl_conf(ENV, header='written for gpu1 with a=b')
    lines = text.splitlines()
    comments = [line for line in lines if line.startswith('#')]
    settings = [line for line in lines if not line.startswith('#')]
    assert all('=' not in line for line in comments)  # older RCCL parses any line with '='
    assert comments[0] == '# written for gpu1 with a:b'
    assert has(comments, 'GLOO_SOCKET_IFNAME', 'HSA_ENABLE_SDMA', 'X_SPACED')
    parsed = dict(line.split('=', 1) for line in settings)  # what NCCL's parser does: split at the first '='
    assert parsed == dict((k, v) for k, v in ENV.items() if k.startswith(('NCCL_', 'RCCL_')))
    assert [line.split('=', 1)[0] for line in settings] == sorted(parsed)
    assert nccl_conf_path('amd') == '/etc/rccl.conf' and nccl_conf_path('nvidia') == '/etc/nccl.conf'


def test_a_value_with_a_trailing_newline_is_not_shell_safe():
    assert _quote('eth0,eth1') == 'eth0,eth1'
    assert _quote('eth0\n') == "'eth0\n'"
