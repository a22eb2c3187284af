# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The health check before an attempt (``trainops_health_check``, roles/job/tasks/health_gate.yml) as a command: the
launch's own ansible-playbook command line, with playbooks/health.yml instead of the launch and the nodes to check.

The check runs as an ansible-playbook of its own, not as tasks of the launch's play: it sets the launch's variables
(the script, the launcher, the timeouts) for its short all-reduces, and what a task sets stays set for the rest of a
play. The same inventory sources, extra vars, user, key, connection and privilege options reach it as the launch
got them (``ansible.context.CLIARGS``, read in the controller's worker), then its own extra vars, which come last and
win: the nodes (``trainops_health_nodes``) and the run name. (The check itself sets its script, launcher, waiting and
profile after it has mapped the command line's knobs: roles/job/tasks/health.yml.) A password asked at a prompt
cannot be passed on; such a launch is told to give the password by file.
"""

from __future__ import annotations

import json
import os
import shutil
import sys

from ansible import context

PROMPTS = (('ask_pass', '--ask-pass', '--connection-password-file'),
           ('become_ask_pass', '--ask-become-pass', '--become-password-file'),
           ('ask_vault_pass', '--ask-vault-password', '--vault-password-file'))
"""The options that prompt for a password, and the option to give it by file instead."""

VALUE_OPTIONS = (('remote_user', '--user'), ('private_key_file', '--private-key'), ('connection', '--connection'),
                 ('timeout', '--timeout'), ('ssh_common_args', '--ssh-common-args'),
                 ('ssh_extra_args', '--ssh-extra-args'), ('sftp_extra_args', '--sftp-extra-args'),
                 ('scp_extra_args', '--scp-extra-args'), ('connection_password_file', '--connection-password-file'),
                 ('module_path', '--module-path'), ('forks', '--forks'))
"""The launch's options passed on as they were given (``CLIARGS`` key, option)."""

BECOME_OPTIONS = (('become_method', '--become-method'), ('become_user', '--become-user'),
                  ('become_password_file', '--become-password-file'))
"""Passed on with ``--become`` when the launch had it."""


def _many(value):
    if value is None:
        return ()
    return (value, ) if isinstance(value, str) else tuple(value)


def passed_on(cliargs):
    """The launch's options as arguments for another ansible-playbook, and the prompts that cannot be passed on."""
    argv, problems = [], []
    for key, option, instead in PROMPTS:
        if cliargs.get(key):
            problems.append('trainops_health_check: the launch asks for a password (%s), which the health check\'s '
                            'own ansible-playbook cannot; give it by file (%s)' % (option, instead))
    for source in _many(cliargs.get('inventory')):
        argv += ['--inventory', source]
    for key, option in VALUE_OPTIONS:
        for value in _many(cliargs.get(key)) if key == 'module_path' else [cliargs.get(key)]:
            if value not in (None, ''):
                argv += [option, str(value)]
    if cliargs.get('become'):
        argv.append('--become')
        for key, option in BECOME_OPTIONS:
            if cliargs.get(key):
                argv += [option, str(cliargs[key])]
    for vault_id in _many(cliargs.get('vault_ids')):
        argv += ['--vault-id', vault_id]
    for password_file in _many(cliargs.get('vault_password_files')):
        argv += ['--vault-password-file', password_file]
    for extra in _many(cliargs.get('extra_vars')):
        argv += ['--extra-vars', extra]
    if cliargs.get('verbosity'):
        argv.append('-' + 'v' * int(cliargs['verbosity']))
    return argv, problems


def ansible_playbook(argv0=None):
    """The ansible-playbook the launch runs in (its own script), else the one on the PATH."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    if os.path.basename(argv0 or '') == 'ansible-playbook' and os.path.isfile(argv0):
        return os.path.abspath(argv0)
    return shutil.which('ansible-playbook') or 'ansible-playbook'


def health_command(nodes, run_name, playbook, cliargs=None, argv0=None):
    """``{'argv', 'chdir', 'problems'}``: the command that checks ``nodes`` (rank order) with ``playbook``
    (playbooks/health.yml, or its FQCN in an installed collection), naming its experiments ``run_name``."""
    cliargs = context.CLIARGS if cliargs is None else cliargs
    options, problems = passed_on(cliargs)
    own = dict(trainops_health_nodes=list(nodes), run_name=run_name)
    argv = [ansible_playbook(argv0), playbook] + options + ['--extra-vars', json.dumps(own, sort_keys=True)]
    return dict(argv=argv, chdir=os.getcwd(), problems=problems)
