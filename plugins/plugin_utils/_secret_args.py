# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Secrets only by reference: the one rule for a ``trainops_secret_env`` value in a command line's extra vars.

A command line is readable by every user of the machine (``ps``) and ansible-runner records it (the ``command``
file of its artifact directory), so a token must never be typed into an ``-e`` argument. The documented form is
a reference the playbook resolves itself, ``"{{ lookup('ansible.builtin.env', 'HF_TOKEN') }}"`` (the token stays
in the controller's environment), or a vars file, ``-e @secrets.yml`` (only the file's name is in the argument).

Ansible templates the extra vars before any play sees them, so the rule reads the arguments as they were typed:
the job role's filter ``launch_problems`` from ansible-playbook's own ``-e`` arguments, ``tools/trainops_run.py``
from its command line before it starts ansible-playbook (it loads this file by its path: no collection install is
needed there). Both also use ``redact_extra_vars_arg`` for what they record.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

import yaml

from ansible.errors import AnsibleError
from ansible.parsing.splitter import parse_kv

SECRET_VAR = 'trainops_secret_env'
REDACTED = '<redacted>'

# One Jinja expression and nothing around it; and such an expression that is only a quoted string ("{{ 'hf_x' }}",
# a literal in disguise).
_EXPRESSION = re.compile(r'\s*\{\{.*\}\}\s*', re.DOTALL)
_QUOTED_ONLY = re.compile(r'''\s*\{\{-?\s*(?:'[^']*'|"[^"]*")\s*-?\}\}\s*''', re.DOTALL)


def is_reference(value):
    """Whether a secret's value, as typed, names where the secret is (a template) instead of being the secret.

    Empty values carry no secret. A value is a reference when it is one ``{{ ... }}`` expression and that
    expression is not just a quoted string; anything else (a plain string, a number, text around the
    expression) is a literal.
    """
    if value is None or value == '':
        return True
    if not isinstance(value, str):
        return False
    return bool(_EXPRESSION.fullmatch(value)) and not _QUOTED_ONLY.fullmatch(value)


def parse_extra_vars_arg(text):
    """The mapping one ``-e`` argument gives, parsed the way ansible-playbook does (``{...}``/``[...]`` as YAML,
    anything else as key=value; and a YAML document, ``---``, as YAML, the way tools/trainops_run.py reads it);
    None for a vars file (``@file``: not in the command line), an empty argument or one that cannot be parsed."""
    text = (text or '').strip()
    if not text or text.startswith('@'):
        return None
    if text[0] in '[{' or text.startswith('---'):
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError:
            return None
    else:
        try:
            data = parse_kv(text)
        except AnsibleError:
            return None
    return data if isinstance(data, Mapping) else None


def literal_secrets(extra_vars_args):
    """The names of the ``trainops_secret_env`` entries whose value is typed literally into one of these ``-e``
    arguments, in order, each once; ``trainops_secret_env`` itself when its whole value is a literal that is not
    a mapping. The values are never returned."""
    names = []
    for text in extra_vars_args or ():
        data = parse_extra_vars_arg(text)
        if data is None or SECRET_VAR not in data:
            continue
        secrets = data[SECRET_VAR]
        if isinstance(secrets, Mapping):
            found = [str(name) for name, value in secrets.items() if not is_reference(value)]
        else:
            found = [] if is_reference(secrets) else [SECRET_VAR]
        names.extend(name for name in found if name not in names)
    return names


def reference_example(name):
    """The command-line form that passes the secret ``name`` by reference (the value stays in the environment)."""
    name = name if name != SECRET_VAR else 'HF_TOKEN'
    return ('-e "{%s: {%s: \\"{{ lookup(\'ansible.builtin.env\', \'%s\') }}\\"}}"' % (SECRET_VAR, name, name))


def literal_secret_problems(extra_vars_args):
    """One line per secret typed literally into the ``-e`` arguments (empty when there is none): it names the
    variable and shows the reference form to use, never the value."""
    return ['%s: %s is given literally on the command line (-e), where any user\'s ps and ansible-runner\'s '
            'records see it: export it in the controller\'s environment and pass it by reference, %s '
            '(or put it in a vars file: -e @secrets.yml)'
            % (SECRET_VAR, '%s itself' % SECRET_VAR if name == SECRET_VAR else name, reference_example(name))
            for name in literal_secrets(extra_vars_args)]


def redact_extra_vars_arg(text):
    """One ``-e`` argument as it may be recorded: unchanged unless it sets ``trainops_secret_env``, else as JSON
    with every value of that variable replaced by ``<redacted>`` (the names stay)."""
    data = parse_extra_vars_arg(text)
    if data is None or SECRET_VAR not in data:
        return text
    data = dict(data)
    secrets = data[SECRET_VAR]
    if isinstance(secrets, Mapping):
        data[SECRET_VAR] = dict((str(name), REDACTED) for name in secrets)
    else:
        data[SECRET_VAR] = REDACTED
    return json.dumps(data, default=str, sort_keys=True)


def extra_vars_args(argv):
    """The values of the ``-e``/``--extra-vars`` arguments of a command line (a list of arguments), in order."""
    found = []
    after_flag = False
    for arg in argv:
        if not isinstance(arg, str):
            after_flag = False
            continue
        if after_flag:
            found.append(arg)
        elif arg.startswith('--extra-vars='):
            found.append(arg[len('--extra-vars='):])
        elif arg.startswith('-e') and len(arg) > 2 and not arg.startswith('--'):
            found.append(arg[2:])
        after_flag = arg in ('-e', '--extra-vars')
    return found


def literal_secret_values(argv):
    """The ``trainops_secret_env`` values typed literally into the ``-e`` arguments of a command line (strings that
    are not references), for a record that shows the command line as text too (and must lose them there)."""
    values = []
    for text in extra_vars_args(argv):
        data = parse_extra_vars_arg(text)
        if data is None or SECRET_VAR not in data:
            continue
        secrets = data[SECRET_VAR]
        for value in (secrets.values() if isinstance(secrets, Mapping) else [secrets]):
            if value is not None and not is_reference(value):
                values.append(str(value))
    return values


def redact_argv(argv, secret_values=()):
    """A command line (a list of arguments) as it may be recorded: the value of every ``-e``/``--extra-vars``
    argument through ``redact_extra_vars_arg``, and any of ``secret_values`` (tokens from the environment) that
    still appears in an argument replaced by ``<redacted>``."""
    values = sorted((v for v in secret_values if isinstance(v, str) and len(v) >= 4), key=len, reverse=True)
    result = []
    after_flag = False
    for arg in argv:
        if not isinstance(arg, str):
            result.append(arg)
            continue
        if after_flag:
            arg = redact_extra_vars_arg(arg)
        elif arg.startswith('--extra-vars='):
            arg = '--extra-vars=' + redact_extra_vars_arg(arg[len('--extra-vars='):])
        elif arg.startswith('-e') and len(arg) > 2 and not arg.startswith('--'):
            arg = '-e' + redact_extra_vars_arg(arg[2:])
        after_flag = arg in ('-e', '--extra-vars')
        for value in values:
            arg = arg.replace(value, REDACTED)
        result.append(arg)
    return result
