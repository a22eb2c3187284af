# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The filter launch_entry (module_utils/_launch_plan.py entry, env): what torchrun runs and the ranks' environment,
the same as the Jinja roles/job/vars/main.yml had before (kept here, as it was)."""

from __future__ import annotations

import random

import pytest
import yaml

from ansible.errors import AnsibleFilterError
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.trainops.multinode.plugins.filter.launch_state import launch_entry
from ansible_collections.trainops.multinode.plugins.module_utils._slurm_alloc import rank_threads_env

OLD = yaml.safe_load(r"""
profile_argv: >-
  {{ ['--profiler', trainops_profile,
      '--ranks', trainops_profile_ranks | map('string') | join(',')
                 if trainops_profile_ranks is iterable and trainops_profile_ranks is not string else trainops_profile_ranks | string,
      '--out-dir', __trainops_run_dir ~ '/profiles', '--host', inventory_hostname]
     + (['--stats'] if trainops_profile_stats | bool else [])
     + (trainops_profile_args | map('regex_replace', '^', '--profiler-arg=') | list) + ['--'] }}
entrypoint: >-
  {{ __trainops_profile_wrapper if trainops_profile | length > 0 else trainops_module
     if trainops_module | default('', true) | length > 0 else trainops_script }}
script_argv: >-
  {{ (['--config', trainops_config, '--override', 'training.output_dir=' ~ __trainops_output_dir]
      + __trainops_resume_args | default([])
      + (trainops_overrides | map('regex_replace', '^', '--override=') | list)
      if __trainops_pass_config else [])
     + trainops_script_args }}
""")


def old(name, **variables):
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(OLD[name]))


def entry_params(v):
    return dict(profile=v['trainops_profile'], profile_ranks=v['trainops_profile_ranks'],
                profile_stats=v['trainops_profile_stats'], profile_args=v['trainops_profile_args'],
                run_dir=v['__trainops_run_dir'], node=v['inventory_hostname'], module=v['trainops_module'],
                script=v['trainops_script'], wrapper=v['__trainops_profile_wrapper'], pass_config=v['__trainops_pass_config'],
                config=v['trainops_config'], output_dir=v['__trainops_output_dir'], resume_args=v.get('__trainops_resume_args', []),
                overrides=v['trainops_overrides'], script_args=v['trainops_script_args'])


@pytest.mark.parametrize('seed', range(40))
def test_the_entry_is_what_the_old_jinja_gave(seed):
    rng = random.Random(seed)
    v = dict(trainops_profile=rng.choice(['', 'nsys', 'torch']), trainops_profile_ranks=rng.choice([[0, 3], '0', 'all', 1]),
             trainops_profile_stats=rng.choice([True, False, 'yes']), trainops_profile_args=rng.choice([[], ['--x=1', 'y']]),
             __trainops_run_dir='/s/runs/r1', inventory_hostname='node%d' % seed, trainops_module=rng.choice(['', None, 'pkg.train']),
             trainops_script='train.py', __trainops_profile_wrapper='/s/bin/profile_rank.py',
             __trainops_pass_config=rng.choice([True, False]), trainops_config='configs/tiny.yaml',
             __trainops_output_dir='/s/runs/r1/outputs', trainops_overrides=rng.choice([[], ['a=1', 'b.c=2']]),
             trainops_script_args=rng.choice([[], ['--lr', '0.1']]))
    if rng.random() > 0.5:
        v['__trainops_resume_args'] = ['--override', 'resume=/c.pt']
    found = launch_entry(entry_params(v))
    profiled = len(v['trainops_profile']) > 0
    assert found['entrypoint'] == old('entrypoint', **v)
    assert found['args'] == (old('profile_argv', **v) + [v['trainops_script']] if profiled else []) + old('script_argv', **v)


def test_the_environment_is_the_parts_in_order_later_winning():
    params = dict(slurm_cpus='16', nproc_per_node='4', env={}, nccl={'NCCL_DEBUG': 'WARN', 'OMP_NUM_THREADS': '2'},
                  run_id='r1', node='node0', rank=1, output_dir='/o', collective_timeout='300', checkpoint_signal='SIGUSR1',
                  resume_env={'TRAINOPS_RESUME_FROM': 'r0', 'TRAINOPS_PREVIOUS_WORLD_SIZE': '8'})
    assert launch_entry(params, 'env') == {
        'OMP_NUM_THREADS': '2', 'NCCL_DEBUG': 'WARN', 'TRAINOPS_RUN_ID': 'r1', 'TRAINOPS_NODE': 'node0',
        'TRAINOPS_NODE_RANK': '1', 'TRAINOPS_OUTPUT_DIR': '/o', 'TRAINOPS_COLLECTIVE_TIMEOUT_S': '300',
        'TRAINOPS_CHECKPOINT_SIGNAL': 'SIGUSR1', 'TRAINOPS_RESUME_FROM': 'r0', 'TRAINOPS_PREVIOUS_WORLD_SIZE': '8'}
    plain = launch_entry(dict(params, slurm_cpus=None, nccl={}, checkpoint_signal='', resume_env=None), 'env')
    assert plain == {'TRAINOPS_RUN_ID': 'r1', 'TRAINOPS_NODE': 'node0', 'TRAINOPS_NODE_RANK': '1', 'TRAINOPS_OUTPUT_DIR': '/o',
                     'TRAINOPS_COLLECTIVE_TIMEOUT_S': '300'}
    assert launch_entry(dict(params, nccl={}), 'env')['OMP_NUM_THREADS'] == rank_threads_env(16, 4)['OMP_NUM_THREADS']
    with pytest.raises(AnsibleFilterError, match='the CPUs must be a positive integer'):
        launch_entry(dict(params, slurm_cpus='0'), 'env')
    with pytest.raises(AnsibleFilterError, match='what must be entry or env'):
        launch_entry(params, 'argv')
