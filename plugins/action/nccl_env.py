# -*- coding: utf-8 -*-

# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Compute a node's NCCL/RCCL environment on the controller from its ``trainops_node`` facts.

Two forms (see plugins/modules/nccl_env.py for the documentation):

* ``facts`` + settings: the environment of this host's ranks (``compute`` in module_utils/_nccl_env/deciders.py);
* ``cluster``: ``{host: registered result of the first form}``, checked across nodes (``check_cluster`` in
  module_utils/_nccl_env/cluster.py).

Nothing runs on the managed node and nothing changes anywhere.

With ``role_vars`` (roles/nccl_env/tasks/compute.yml) the settings are read here from the role variables the knob
registry names, each templated once (``_knobs.role_settings``), instead of the task building a ``settings`` dict in
Jinja for every node.
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

from ansible_collections.trainops.multinode.plugins.module_utils._knobs import role_settings
from ansible_collections.trainops.multinode.plugins.module_utils._knobs import KNOBS, option
from ansible_collections.trainops.multinode.plugins.module_utils._nccl_env.cluster import check_cluster
from ansible_collections.trainops.multinode.plugins.module_utils._nccl_env.deciders import compute
from ansible_collections.trainops.multinode.plugins.module_utils._nccl_env.render import (
    nccl_conf_path,
    render_env_file,
    render_nccl_conf,
)

SETTINGS_SPEC = dict((knob.setting, option(knob)) for knob in KNOBS if knob.setting)
"""The settings' options, from the registry (module_utils/_knobs.py)."""

ARGUMENT_SPEC = dict(facts=dict(type='dict'), cluster=dict(type='dict'), settings=dict(type='dict'),
                     role_vars=dict(type='bool', default=False), **SETTINGS_SPEC)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        if task_vars is None:
            task_vars = {}
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp

        dummy, args = self.validate_argument_spec(
            argument_spec=ARGUMENT_SPEC,
            mutually_exclusive=[('facts', 'cluster'), ('role_vars', 'settings'), ('role_vars', 'cluster')],
            required_one_of=[('facts', 'cluster')])
        result['changed'] = False

        # the settings the task gave, as options or in the settings dict (an option wins): a missing one takes
        # compute()'s default (source "default"/"detected"), while an explicit null means "leave it unset" for
        # nccl_debug, gid_index and net_gdr_level
        if args['role_vars']:
            args['settings'] = role_settings(lambda var: self._role_var(task_vars, var),
                                             task_vars.get('ansible_play_hosts'))
        settings, problems = self._settings(args)
        if problems:
            result.update(failed=True, msg='nccl_env settings: %s' % '; '.join(problems))
            return result
        if args.get('cluster') is not None:
            given = sorted(settings)
            check = check_cluster(args['cluster'])
            result.update(table=check['table'], transports=check['transports'], errors=check['errors'],
                          warning_messages=check['warnings'])
            if given:
                check['warnings'].append('settings ignored with cluster: %s' % ', '.join(given))
            if check['warnings']:
                result['warnings'] = list(check['warnings'])
            if check['errors']:
                result['failed'] = True
                result['msg'] = 'NCCL settings disagree across nodes:\n- %s\n%s' % (
                    '\n- '.join(check['errors']), check['table'])
            else:
                result['msg'] = 'NCCL settings agree across %d node(s):\n%s' % (len(check['transports']), check['table'])
            return result

        host = to_text(task_vars.get('inventory_hostname') or 'localhost')
        res = compute(args['facts'], settings)
        result.update(
            env=res['env'], sources=res['sources'], reasons=res['reasons'], transport=res['transport'],
            link_layer=res['link_layer'], hcas=res['hcas'], left_out=res['left_out'], topology=res['topology'],
            socket_ifname=res['socket_ifname'], vendor=res['vendor'], library=res['library'],
            gpudirect=res['gpudirect'], unset=res['unset'], errors=res['errors'], warning_messages=res['warnings'],
            nccl_conf_path=nccl_conf_path(res['vendor']))
        if res['warnings']:
            result['warnings'] = ['%s: %s' % (host, w) for w in res['warnings']]
        if res['errors']:
            result['failed'] = True
            result['msg'] = '%s: the NCCL environment cannot be computed:\n%s' % (
                host, '\n'.join('%s: %s' % (host, e) for e in res['errors']))
            return result
        header = 'NCCL/RCCL environment of %s (trainops.multinode.nccl_env), transport %s' % (host, res['transport'])
        result['env_file'] = render_env_file(res['env'], header=header)
        result['nccl_conf'] = render_nccl_conf(res['env'], header=header)
        result['msg'] = '%s: transport %s, %d variable(s)' % (host, res['transport'], len(res['env']))
        return result

    def _role_var(self, task_vars, var):
        """A role variable's value, templated (role_vars)."""
        if var not in task_vars:
            raise AnsibleActionFail('nccl_env role_vars: the role variable %s is not defined (roles/nccl_env/defaults '
                                    'declares it; run the module through the role, or pass settings)' % var)
        return self._templar.template(task_vars[var])

    def _settings(self, args):
        """The settings given, ``settings`` checked against the same options as the task's own; and the problems."""
        extra = args.get('settings') or {}
        unknown = sorted(str(k) for k in extra if k not in SETTINGS_SPEC)
        if unknown:
            return {}, ['unknown setting(s) in settings: %s' % ', '.join(unknown)]
        checked = ArgumentSpecValidator(SETTINGS_SPEC).validate(dict(extra))
        if checked.error_messages:
            return {}, ['in settings: %s' % m for m in checked.error_messages]
        settings = dict((k, checked.validated_parameters.get(k)) for k in extra)
        settings.update((k, args.get(k)) for k in SETTINGS_SPEC if k in self._task.args)
        return settings, []
