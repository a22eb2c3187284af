# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""roles/job/files/profile_rank.py: which ranks are profiled and the exact argv each rank execs."""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

WRAPPER = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'roles', 'job', 'files', 'profile_rank.py')


@pytest.fixture(scope='module')
def wrapper():
    spec = importlib.util.spec_from_file_location('profile_rank', WRAPPER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Exec:
    def __init__(self):
        self.calls = []

    def __call__(self, path, argv, env):
        self.calls.append((path, argv, env))


def run(wrapper, tmp_path, profiler, rank, local_rank, ranks='first', extra=()):
    execvpe = Exec()
    argv = ['--profiler', profiler, '--ranks', ranks, '--out-dir', str(tmp_path / 'profiles'), '--host', 'gpu1'] + list(extra)
    argv += ['--', 'train.py', '--config', 'c.yaml']
    wrapper.main(argv, environ={'RANK': str(rank), 'LOCAL_RANK': str(local_rank), 'PATH': '/bin'}, execvpe=execvpe)
    assert len(execvpe.calls) == 1
    return execvpe.calls[0]


@pytest.mark.parametrize('ranks, rank, local_rank, expected', [
    ('first', 0, 0, True), ('first', 5, 1, False), ('first', 8, 0, True),
    ('all', 13, 5, True), ('0,3', 3, 1, True), ('0,3', 2, 0, False),
])
def test_which_ranks_are_profiled(wrapper, ranks, rank, local_rank, expected):
    assert wrapper.selected(ranks, {'RANK': str(rank), 'LOCAL_RANK': str(local_rank)}) is expected


def test_a_rank_not_selected_runs_the_script_plainly(wrapper, tmp_path):
    path, argv, env = run(wrapper, tmp_path, 'nsys', 3, 1)
    assert argv == [sys.executable, '-u', 'train.py', '--config', 'c.yaml'] and path == sys.executable
    assert 'TRAINOPS_PROFILE_TRACE' not in env
    assert not (tmp_path / 'profiles').exists()


def test_nsys_wraps_the_rank_with_a_per_rank_output_name(wrapper, tmp_path):
    out = str(tmp_path / 'profiles')
    path, argv = run(wrapper, tmp_path, 'nsys', 4, 0, extra=['--stats', '--profiler-arg=--trace=cuda,nvtx'])[:2]
    assert path == 'nsys'
    assert argv == ['nsys', 'profile', '-o', out + '/gpu1_rank4', '--force-overwrite', 'true', '--stats=true',
                    '--trace=cuda,nvtx', sys.executable, '-u', 'train.py', '--config', 'c.yaml']
    assert os.path.isdir(out)


def test_rocprof_wraps_the_rank_with_default_tracing(wrapper, tmp_path):
    out = str(tmp_path / 'profiles')
    argv = run(wrapper, tmp_path, 'rocprof', 0, 0, extra=['--stats'])[1]
    assert argv == ['rocprofv3', '--runtime-trace', '--stats', '-d', out, '-o', 'gpu1_rank0', '--',
                    sys.executable, '-u', 'train.py', '--config', 'c.yaml']
    argv = run(wrapper, tmp_path, 'rocprof', 0, 0, extra=['--profiler-arg=--kernel-trace'])[1]
    assert argv[:2] == ['rocprofv3', '--kernel-trace'] and '--runtime-trace' not in argv


def test_torch_sets_the_trace_file_for_the_workload(wrapper, tmp_path):
    argv, env = run(wrapper, tmp_path, 'torch', 2, 0, ranks='2')[1:]
    assert argv == [sys.executable, '-u', 'train.py', '--config', 'c.yaml']
    assert env['TRAINOPS_PROFILE_TRACE'] == str(tmp_path / 'profiles' / 'gpu1_rank2.json')
    assert env['PATH'] == '/bin'


def test_the_workload_is_required(wrapper):
    with pytest.raises(SystemExit):
        wrapper.parse_args(['--profiler', 'torch', '--ranks', 'all', '--out-dir', '/tmp', '--host', 'h', '--'])
