#!/usr/bin/env python
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Run a trainops playbook through ansible-runner, with concise progress, a JSON summary and JUnit XML.

Usage::

    python3 tools/trainops_run.py PLAYBOOK [-i INVENTORY] [-e key=value | -e @vars.yml | -e '{"k": 1}' ...]
                                  [--summary OUT.json] [--junit OUT.xml] [--artifacts DIR] [--project-dir DIR]
                                  [-l LIMIT] [-t TAGS] [--skip-tags TAGS] [--check] [--diff] [--timeout S] [-v]

The playbook runs from the project directory (default: the repository root, the parent of this
file's directory), with ``ANSIBLE_CONFIG`` pointing at ``<project-dir>/ansible.cfg`` when that
exists, so the project's settings (collections path, default inventory, callbacks) apply even
though ansible-runner changes the working directory. ``PLAYBOOK``, ``-i`` sources and ``-e @file``
paths are looked up relative to the project directory first, then the current directory.

The installed collection ships this file too (``~/.ansible/collections/ansible_collections/trainops/multinode/
tools/trainops_run.py``). Run from there without ``--project-dir``, it finds the playbooks in the collection but runs
them from the current directory: the experiments (``experiments/``) and the artifacts (``.artifacts/``) land there,
never inside the installed collection.

Progress goes to stdout, one line per play / task start, per host failure or unreachable host,
plus the display lines (warnings, ``display.display`` output of action plugins) that are not
task results; ``-v`` adds per-host ok/changed/skipped lines and raises Ansible's verbosity.

``--summary`` writes a JSON document with ``status``, ``rc``, ``ok``, ``playbook``, ``inventory``,
``extravars``, ``duration_s``, ``stats`` (per host: ok, changed, failures, unreachable, skipped,
rescued, ignored), ``failures`` (list of host / task / msg) and ``artifact_data`` (what the playbook
published with ``ansible.builtin.set_stats``). ``--junit`` writes one test suite for the playbook
with one test case per host, failed when the host had failures or was unreachable.

Secrets only by reference: a ``trainops_secret_env`` value typed literally into an ``-e`` argument (this
command line, and ansible-playbook's, are visible to any user's ``ps``) is refused before anything runs,
with the ``lookup('ansible.builtin.env', NAME)`` form to use instead (plugins/plugin_utils/_secret_args.py,
the rule the job role applies too). ansible-runner's records of the run (``<artifacts>/<run>/``: ``command``,
the command line and the environment; ``job_events/``, ``stdout``, ``stderr`` and every other file it writes
there) keep no secret: values of secret-named variables (``--secret-env``) in the environment, the values of
``trainops_secret_env`` in the ``-e`` arguments of any command line recorded (the health check's nested
ansible-playbook too), the credentials of URLs and every secret value (of a secret-named variable, of one a
``trainops_secret_env`` reference reads, or given in a vars file) found anywhere are replaced with ``<redacted>``.
Events are redacted before ansible-runner writes them, the other files when the run ends.

Exit status: 0 when ansible-playbook succeeded and no host failed or was unreachable, otherwise
ansible-playbook's return code (or 1 when that is 0 or unknown); 2 for usage errors.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shlex
import shutil
import socket
import stat
import sys
import tempfile
import time
import uuid
import xml.etree.ElementTree as ET

try:
    import ansible_runner
except ImportError:  # reported in main(), so --help still works
    ansible_runner = None

DEFAULT_PROJECT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INSTALLED = '%sansible_collections%s' % (os.sep, os.sep) in DEFAULT_PROJECT_DIR + os.sep
"""This file is the installed collection's: the playbooks run from the current directory (see the docstring)."""
# The collection's rules this tool applies too, loaded by their paths (it runs from a clone without installing the
# collection): secrets on a command line (the job role's filter launch_problems) and credentials in URLs (redact_url).
SECRET_ARGS_PATH = os.path.join(DEFAULT_PROJECT_DIR, 'plugins', 'plugin_utils', '_secret_args.py')
GIT_STATE_PATH = os.path.join(DEFAULT_PROJECT_DIR, 'plugins', 'module_utils', '_git_state.py')
DEFAULT_ARTIFACTS = '.artifacts'
STAT_KEYS = (
    # summary key, playbook_on_stats key
    ('ok', 'ok'),
    ('changed', 'changed'),
    ('failures', 'failures'),
    ('unreachable', 'dark'),
    ('skipped', 'skipped'),
    ('rescued', 'rescued'),
    ('ignored', 'ignored'),
)
DISPLAY_EVENTS = frozenset(('verbose', 'warning', 'deprecated', 'system_warning', 'error', 'debug'))
MAX_MSG = 4000
TAIL_LINES = 40

_IDENT = re.compile(r'^\d{8}T\d{6}_[A-Za-z0-9_.-]*_[0-9a-f]{6}$')
_ANSI = re.compile(r'\x1b\[[0-9;?]*[ -/]*[@-~]')
# The per-task timestamp line of the profile_tasks / timer callbacks ("Sunday 22 November 2026  08:27:18 +0000
# (0:00:00.037)       0:00:00.037 ****"): left out of the progress output unless -v.
_PROFILE_LINE = re.compile(r'\d{2}:\d{2}:\d{2} [+-]\d{4} \(\d+:\d{2}:\d{2}\.\d+\)\s+\d+:\d{2}:\d{2}\.\d+ \*+\s*$')


class UsageError(Exception):
    """A bad command line argument (exit status 2)."""


def strip_ansi(text):
    """Remove terminal colour / cursor escape sequences and carriage returns."""
    return _ANSI.sub('', text or '').replace('\r', '')


def _truncate(text, limit=MAX_MSG):
    text = text.strip()
    if len(text) > limit:
        text = text[:limit] + '... [truncated]'
    return text


# ---------------------------------------------------------------------------
# Argument handling
# ---------------------------------------------------------------------------

SECRET_NAME_PATTERN = re.compile(r'TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|CREDENTIAL', re.IGNORECASE)
REDACTED = '<redacted>'


def _collection_module(name, path):
    """A module of the collection loaded from its file (once), as ``name``."""
    import importlib.util  # pylint: disable=import-outside-toplevel
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
    return module


def secret_args():
    """plugins/plugin_utils/_secret_args.py: the rule for secrets on a command line."""
    return _collection_module('trainops_secret_args', SECRET_ARGS_PATH)


def redact_urls_in(text):
    """plugins/module_utils/_git_state.py's redact_urls_in: the text with every URL in it without credentials."""
    return _collection_module('trainops_git_state', GIT_STATE_PATH).redact_urls_in(text)


def is_secret_name(name, extra_names=()):
    return name in extra_names or bool(SECRET_NAME_PATTERN.search(name))


def redact_command_record(artifact_dir, extra_names=()):
    """ansible-runner records the command line and the whole environment of the run in ``<artifact_dir>/command``
    (its only record of either): blank out the values of secret variables in the environment, and in the command
    line the values of ``trainops_secret_env`` in its ``-e`` arguments and any secret variable's value that
    appears there (a token given to the playbook must not outlive the run). Returns whether it changed the record."""
    path = os.path.join(artifact_dir, 'command')
    try:
        with open(path, encoding='utf-8') as handle:
            record = json.load(handle)
    except (OSError, ValueError):
        return False
    env = record.get('env') or {}
    secret = [name for name in env if is_secret_name(name, extra_names) and env[name] != REDACTED]
    command = record.get('command')
    redacted = secret_args().redact_argv(command, [env[name] for name in secret]) if isinstance(command, list) else command
    if not secret and redacted == command:
        return False
    for name in secret:
        env[name] = REDACTED
    record['command'] = redacted
    tmp = path + '.tmp'
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 'w', encoding='utf-8') as handle:
        json.dump(record, handle, ensure_ascii=False)
    os.replace(tmp, path)
    return True


# A trainops_secret_env reference names the environment variable that holds the secret: its value is a secret too.
_ENV_LOOKUP = re.compile(r"""lookup\(\s*['"](?:ansible\.builtin\.)?env['"]\s*,\s*['"]([A-Za-z_][A-Za-z0-9_]*)['"]""")
MIN_SECRET = 4
JSON_ESCAPE_LEVELS = 2
"""Shorter values are not looked for in the records (they would blank out ordinary text); as redact_argv."""


def secret_values(extravars, extra_names=(), environ=None):
    """The secret values this run knows, longest first: the values of ``trainops_secret_env`` given literally (in
    a vars file: ``-e @secrets.yml``), the environment variables its references read
    (``lookup('ansible.builtin.env', NAME)``), those named by ``--secret-env`` and those whose names look secret."""
    environ = os.environ if environ is None else environ
    names = set(extra_names)
    values = []
    secrets = (extravars or {}).get(secret_args().SECRET_VAR)
    for value in (secrets.values() if isinstance(secrets, dict) else [secrets]):
        if isinstance(value, str):
            names.update(_ENV_LOOKUP.findall(value))
            if not secret_args().is_reference(value):
                values.append(value)
        elif value is not None:
            values.append(str(value))
    values.extend(value for name, value in environ.items() if is_secret_name(name, names))
    return tuple(sorted(set(value for value in values if len(value) >= MIN_SECRET), key=len, reverse=True))


class Redactor:
    """What every record of the run goes through: secret values, ``trainops_secret_env`` in ``-e`` arguments (of
    any command line recorded, the launch's or another in its events) and the credentials of URLs
    replaced with ``<redacted>``."""

    def __init__(self, values=()):
        self.values = ()
        self.learn(values)

    def learn(self, values):
        """Look for these values too, and for their JSON-escaped forms: a result shown as text has them once, the text
        of a result that holds a JSON argument (``-e '{...}'``) twice."""
        forms = set(self.values)
        for value in values:
            if isinstance(value, str) and len(value) >= MIN_SECRET:
                level = [value]
                for _level in range(JSON_ESCAPE_LEVELS):
                    level = [json.dumps(form, ensure_ascii=ascii)[1:-1] for form in level for ascii in (True, False)]
                    forms.update(level)
                forms.add(value)
        self.values = tuple(sorted(forms, key=len, reverse=True))

    def text(self, text):
        for value in self.values:
            text = text.replace(value, REDACTED)
        return redact_urls_in(text) if '://' in text else text

    def learn_from(self, value):
        """The trainops_secret_env values typed into any command line in ``value`` (say, a command task's argv)."""
        if isinstance(value, dict):
            for item in value.values():
                self.learn_from(item)
        elif isinstance(value, list):
            if value and all(isinstance(item, str) for item in value):
                self.learn(secret_args().literal_secret_values(value))
            for item in value:
                self.learn_from(item)

    def value(self, value):
        """A record (JSON data) without secrets: first what its command lines give literally is learnt, then every
        string is redacted."""
        self.learn_from(value)
        return self._value(value)

    def _value(self, value):
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return dict((key, self._value(item)) for key, item in value.items())
        if isinstance(value, list):
            if all(isinstance(item, str) for item in value):
                value = secret_args().redact_argv(value, self.values)
            return [self._value(item) for item in value]
        return value

    def event(self, event):
        """An ansible-runner event, redacted in place (ansible-runner writes the dict its handler got)."""
        redacted = self.value(event)
        if redacted != event:
            event.clear()
            event.update(redacted)
        return event


def _rewrite(path, data):
    tmp = path + '.tmp'
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600), 'wb') as handle:
        handle.write(data)
    os.replace(tmp, path)


def redact_artifacts(artifact_dir, redactor):
    """Every file ansible-runner left in ``artifact_dir`` (``job_events/``, ``stdout``, ``stderr``, ``command``,
    ``fact_cache/``, ...) through ``redactor``: JSON files value by value, the others as text. Links are neither
    followed nor changed. Returns the files it changed, relative to ``artifact_dir``."""
    records = []
    for folder, _dirs, files in os.walk(artifact_dir):
        for name in sorted(files):
            path = os.path.join(folder, name)
            if not stat.S_ISREG(os.lstat(path).st_mode):
                continue
            with open(path, 'rb') as handle:
                text = handle.read().decode('utf-8', errors='surrogateescape')
            try:
                records.append((path, text, json.loads(text)))
            except ValueError:
                records.append((path, text, None))
    for _path, _text, record in records:   # every command line's secrets first: the text files show them too
        redactor.learn_from(record)
    changed = []
    for path, text, record in records:
        if record is None:
            redacted = redactor.text(text)
            new = None if redacted == text else redacted.encode('utf-8', errors='surrogateescape')
        else:
            redacted = redactor.value(record)
            new = None if redacted == record else json.dumps(redacted, ensure_ascii=False).encode('utf-8')
        if new is not None:
            _rewrite(path, new)
            changed.append(os.path.relpath(path, artifact_dir))
    return changed


def _redact_urls(value):
    if isinstance(value, str):
        return redact_urls_in(value) if '://' in value else value
    if isinstance(value, dict):
        return dict((key, _redact_urls(item)) for key, item in value.items())
    if isinstance(value, list):
        return [_redact_urls(item) for item in value]
    return value


def redact_extravars(extravars):
    """The summary keeps the extra vars, but never the values of trainops_secret_env, nor the credentials of a URL
    (a repository's ``https://<token>@host/...`` or ``?access_token=...``)."""
    result = _redact_urls(dict(extravars))
    secrets = result.get('trainops_secret_env')
    if isinstance(secrets, dict):
        result['trainops_secret_env'] = dict((name, REDACTED) for name in secrets)
    elif secrets is not None:
        result['trainops_secret_env'] = REDACTED
    return result


def build_parser():
    parser = argparse.ArgumentParser(
        prog='trainops_run',
        description='Run a trainops playbook through ansible-runner; print concise progress, write a JSON summary and JUnit XML.',
        epilog='Exit status: 0 on success; ansible-playbook\'s rc (or 1) when the run failed or any host failed or was unreachable; '
               '2 for usage errors.',
    )
    parser.add_argument('playbook', help='playbook path, relative to the project directory (or the current directory), or absolute')
    parser.add_argument('-i', '--inventory', action='append', default=[], metavar='INVENTORY',
                        help='inventory source (repeatable); default: the inventory ansible.cfg names')
    parser.add_argument('-e', '--extra-vars', action='append', default=[], metavar='VARS', dest='extra_vars',
                        help='extra variables: key=value [key=value ...], a JSON/YAML mapping, or @file.yml (repeatable; later wins)')
    parser.add_argument('--summary', metavar='OUT.json', help='write the JSON run summary here')
    parser.add_argument('--junit', metavar='OUT.xml', help='write JUnit XML here')
    parser.add_argument('--secret-env', action='append', default=[], metavar='NAME',
                        help='an environment variable that holds a secret (a token the playbook reads with '
                             "lookup('ansible.builtin.env', NAME)): its value is redacted from ansible-runner's record of "
                             'the environment and the command line (artifacts/<run>/command). Names matching %s are '
                             'redacted anyway; repeatable'
                             % SECRET_NAME_PATTERN.pattern)
    parser.add_argument('--artifacts', metavar='DIR',
                        help='ansible-runner artifact directory (one sub-directory per run); default: <project-dir>/%s (the '
                             'current directory\'s for the installed collection\'s copy)' % DEFAULT_ARTIFACTS)
    parser.add_argument('--keep-artifacts', type=int, default=20, metavar='N',
                        help='keep the N most recent runs of this tool in the artifact directory; other content is never '
                             'touched (0 keeps all; default: 20)')
    parser.add_argument('--project-dir', metavar='DIR', default=DEFAULT_PROJECT_DIR,
                        help='directory the playbook runs from (default: %(default)s)')
    parser.add_argument('--config', metavar='ANSIBLE_CFG',
                        help='ansible.cfg to use (default: <project-dir>/ansible.cfg when it exists)')
    parser.add_argument('-l', '--limit', help='limit the run to these hosts / groups')
    parser.add_argument('-t', '--tags', help='only run tasks with these tags')
    parser.add_argument('--skip-tags', help='skip tasks with these tags')
    parser.add_argument('-C', '--check', action='store_true', help='run in check mode')
    parser.add_argument('-D', '--diff', action='store_true', help='show diffs')
    parser.add_argument('--timeout', type=int, metavar='SECONDS', help='stop the run after this many seconds')
    parser.add_argument('-v', '--verbose', action='count', default=0,
                        help='more output: per-host ok/changed lines, and Ansible verbosity (-vv, -vvv, ...)')
    return parser


def resolve_path(path, project_dir, must_exist=True):
    """Resolve ``path`` against the project directory first, then the current directory.

    Returns an absolute path, or (when ``must_exist`` is false and neither exists) ``path`` unchanged.
    """
    path = os.path.expanduser(path)
    if os.path.isabs(path):
        return path
    for base in (project_dir, os.getcwd()):
        candidate = os.path.abspath(os.path.join(base, path))
        if os.path.exists(candidate):
            return candidate
    if must_exist:
        raise UsageError('%s not found in %s or %s' % (path, project_dir, os.getcwd()))
    return path


def _load_yaml(text, what):
    try:
        import yaml  # pylint: disable=import-outside-toplevel
    except ImportError:
        return json.loads(text)
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise UsageError('cannot parse %s: %s' % (what, exc)) from exc


def _parse_kv(text):
    try:
        from ansible.parsing.splitter import parse_kv  # pylint: disable=import-outside-toplevel
    except ImportError:
        parse_kv = None
    if parse_kv is not None:
        result = parse_kv(text)
        if '_raw_params' in result:
            raise UsageError('extra vars %r: expected key=value pairs' % text)
        return dict(result)
    result = {}
    for token in shlex.split(text):
        if '=' not in token:
            raise UsageError('extra vars %r: expected key=value pairs' % text)
        key, value = token.split('=', 1)
        result[key] = value
    return result


def parse_extra_vars(values, project_dir):
    """Turn the ``-e`` values into (merged dict for the summary, ansible-playbook arguments).

    The arguments are handed to ansible-playbook as given (``@file`` made absolute, since the
    playbook runs from the project directory), so Ansible's own parsing and precedence apply;
    the dict is the same merge, done here for the summary.
    """
    merged = {}
    args = []
    for value in values:
        value = value.strip()
        if value.startswith('@'):
            path = resolve_path(value[1:], project_dir)
            with open(path, 'r', encoding='utf-8') as handle:
                data = _load_yaml(handle.read(), path)
            if data is None:
                data = {}
            if not isinstance(data, dict):
                raise UsageError('extra vars file %s must hold a mapping' % path)
            args.extend(['-e', '@' + path])
        elif value.startswith('{') or value.startswith('---'):
            data = _load_yaml(value, 'extra vars %r' % value)
            if not isinstance(data, dict):
                raise UsageError('extra vars %r must be a mapping' % value)
            args.extend(['-e', value])
        elif value:
            data = _parse_kv(value)
            args.extend(['-e', value])
        else:
            continue
        merged.update(data)
    return merged, args


def host_key_checking_default(config_path):
    """The ``host_key_checking`` value to hand Ansible: the environment's, else ansible.cfg's, else True.

    ansible-runner sets ``ANSIBLE_HOST_KEY_CHECKING=False`` unless the variable is already set,
    which would override ansible.cfg; this keeps plain ansible-playbook behaviour.
    """
    if 'ANSIBLE_HOST_KEY_CHECKING' in os.environ:
        return os.environ['ANSIBLE_HOST_KEY_CHECKING']
    if config_path and os.path.isfile(config_path):
        import configparser  # pylint: disable=import-outside-toplevel
        parser = configparser.ConfigParser(interpolation=None, strict=False, inline_comment_prefixes=('#', ';'))
        try:
            parser.read(config_path, encoding='utf-8')
            value = parser.get('defaults', 'host_key_checking', fallback=None)
        except configparser.Error:
            value = None
        if value is not None and value.strip():
            return value.strip()
    return 'True'


# ---------------------------------------------------------------------------
# Event handling
# ---------------------------------------------------------------------------

def rotate_artifacts(root, keep):
    """Delete all but the ``keep`` newest run directories this tool created under ``root``.

    Only directories named like this tool's run idents are considered (ansible-runner's own
    rotation would delete anything in the directory).
    """
    if keep < 1:
        return []
    runs = sorted(name for name in os.listdir(root) if _IDENT.match(name) and os.path.isdir(os.path.join(root, name)))
    removed = runs[:-keep]
    for name in removed:
        shutil.rmtree(os.path.join(root, name), ignore_errors=True)
    return removed


def failure_message(res):
    """A readable message from a failed / unreachable task result."""
    if not isinstance(res, dict):
        return _truncate(str(res or ''))
    parts = []
    msg = res.get('msg')
    if msg:
        parts.append(msg if isinstance(msg, str) else json.dumps(msg, default=str))
    for item in res.get('results') or []:
        if isinstance(item, dict) and item.get('failed'):
            label = item.get('_ansible_item_label', item.get('item'))
            item_msg = item.get('msg') or item.get('stderr') or ''
            parts.append('item %s: %s' % (json.dumps(label, default=str), item_msg))
    for key in ('stderr', 'module_stderr', 'module_stdout', 'exception'):
        if res.get(key) and (not parts or key in ('stderr', 'module_stderr')):
            parts.append('%s: %s' % (key, res[key]))
    if not parts:
        if res.get('rc') is not None:
            parts.append('rc=%s' % res['rc'])
        else:
            parts.append('failed (no message)')
    return _truncate('\n'.join(str(p) for p in parts))


class RunRecorder:
    """Collects what the summary needs from the runner events and prints progress lines."""

    def __init__(self, verbosity=0, out=None, redactor=None):
        self.verbosity = verbosity
        self.redactor = redactor or Redactor()
        self.out = out or sys.stdout
        self.failures = []
        self.stats = None
        self.artifact_data = {}
        self.tail = []
        self.tasks = 0

    def _print(self, line):
        self.out.write(line + '\n')
        self.out.flush()

    def _remember(self, text):
        for line in text.splitlines():
            if line.strip():
                self.tail.append(line)
        del self.tail[:-TAIL_LINES]

    def __call__(self, event):
        try:
            self.redactor.event(event)
        except Exception as exc:  # an event that could not be redacted is not written
            self._print('[trainops_run] could not redact event %s, left out of the records: %s' % (event.get('event'), type(exc).__name__))
            return False
        try:
            self.handle(event)
        except Exception as exc:  # never let progress output break the run
            self._print('[trainops_run] could not process event %s: %s' % (event.get('event'), exc))
        return True  # keep writing the event to the artifact directory

    def handle(self, event):
        kind = event.get('event')
        data = event.get('event_data') or {}
        if kind == 'playbook_on_play_start':
            self._print('PLAY %s' % (data.get('name') or data.get('play') or data.get('pattern') or ''))
        elif kind == 'playbook_on_task_start':
            self.tasks += 1
            prefix = 'HANDLER' if data.get('is_handler') else 'TASK'
            self._print('%s %s' % (prefix, data.get('name') or data.get('task') or data.get('task_action') or ''))
        elif kind in ('runner_on_failed', 'runner_on_async_failed'):
            self._on_failed(data, unreachable=False)
        elif kind == 'runner_on_unreachable':
            self._on_failed(data, unreachable=True)
        elif kind == 'playbook_on_stats':
            self.stats = data
            self.artifact_data = data.get('artifact_data') or {}
        elif kind in DISPLAY_EVENTS:
            lines = strip_ansi(event.get('stdout') or '').rstrip().splitlines()
            if not self.verbosity:
                lines = [line for line in lines if not _PROFILE_LINE.search(line)]
            text = '\n'.join(lines)
            if text.strip():
                self._remember(text)
                self._print(text)
        elif self.verbosity and kind in ('runner_on_ok', 'runner_on_skipped'):
            state = 'skipped' if kind == 'runner_on_skipped' else ('changed' if (data.get('res') or {}).get('changed') else 'ok')
            self._print('  %s: [%s] %s' % (state, data.get('host'), data.get('task')))

    def _on_failed(self, data, unreachable):
        host = data.get('host')
        task = data.get('task')
        msg = failure_message(data.get('res'))
        if data.get('ignore_errors'):
            self._print('  failed (ignored): [%s] %s: %s' % (host, task, msg.splitlines()[0] if msg else ''))
            return
        entry = {'host': host, 'task': task, 'msg': msg}
        if unreachable:
            entry['unreachable'] = True
        self.failures.append(entry)
        self._print('%s [%s] %s: %s' % ('UNREACHABLE' if unreachable else 'FAILED', host, task, msg))


def host_stats(stats):
    """Per-host counters from the playbook_on_stats event data."""
    if not stats:
        return {}
    hosts = set()
    for dummy, key in STAT_KEYS:
        hosts.update((stats.get(key) or {}).keys())
    hosts.update((stats.get('processed') or {}).keys())
    result = {}
    for host in sorted(hosts):
        result[host] = dict((name, int((stats.get(key) or {}).get(host, 0))) for name, key in STAT_KEYS)
    return result


def fatal_failures(failures, per_host):
    """Drop the failures a host recovered from (rescued by a block), keeping the order.

    A host stops at its first fatal failure (only ``always`` sections and forced handlers run
    after it), so its fatal failures are its last N failure events, N being its ``failures``
    count in the play recap (``unreachable`` likewise). Without a recap, all are kept.
    """
    if not per_host:
        return list(failures)
    keep = set()
    for host, counts in per_host.items():
        for unreachable, count in ((False, counts['failures']), (True, counts['unreachable'])):
            if count <= 0:
                continue
            indexes = [i for i, f in enumerate(failures) if f['host'] == host and bool(f.get('unreachable')) == unreachable]
            keep.update(indexes[-count:])
    return [f for i, f in enumerate(failures) if i in keep]


def failed_hosts(per_host):
    return sorted(h for h, s in per_host.items() if s['failures'] or s['unreachable'])


# ---------------------------------------------------------------------------
# Outputs
# ---------------------------------------------------------------------------

def write_json(path, data):
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix='.%s.' % os.path.basename(path), suffix='.tmp')
    with os.fdopen(fd, 'w', encoding='utf-8') as handle:
        json.dump(data, handle, indent=2, sort_keys=True, default=str)
        handle.write('\n')
    os.replace(tmp, path)


def build_junit(summary):
    """A JUnit XML tree: one test suite for the playbook, one test case per host."""
    playbook = summary['playbook']
    classname = os.path.splitext(os.path.basename(playbook))[0] or 'playbook'
    per_host = summary['stats']
    by_host = {}
    for failure in summary['failures']:
        by_host.setdefault(failure['host'], []).append(failure)

    cases = []
    for host in sorted(per_host):
        counts = per_host[host]
        case = ET.Element('testcase', classname=classname, name=host, time='%.3f' % summary['duration_s'])
        if counts['failures'] or counts['unreachable']:
            entries = by_host.get(host) or [{'task': None, 'msg': 'host had %d failure(s), unreachable=%d' % (counts['failures'], counts['unreachable'])}]
            first = entries[0]
            failure = ET.SubElement(case, 'failure', type='unreachable' if counts['unreachable'] else 'failed',
                                    message=('%s: %s' % (first.get('task'), first.get('msg') or '')).splitlines()[0][:500])
            failure.text = '\n\n'.join('TASK %s\n%s' % (e.get('task'), e.get('msg') or '') for e in entries)
        out = ET.SubElement(case, 'system-out')
        out.text = ' '.join('%s=%d' % (k, v) for k, v in sorted(counts.items()))
        cases.append(case)

    if not summary['ok'] and not any(case.find('failure') is not None for case in cases):
        # The run failed without a failed host (syntax error, missing file, timeout, ...).
        case = ET.Element('testcase', classname=classname, name='playbook', time='%.3f' % summary['duration_s'])
        failure = ET.SubElement(case, 'failure', type=summary['status'] or 'failed',
                                message='ansible-playbook status=%s rc=%s' % (summary['status'], summary['rc']))
        failure.text = '\n\n'.join('%s' % (f.get('msg') or '') for f in summary['failures']) or None
        cases.append(case)

    failures = sum(1 for case in cases if case.find('failure') is not None)
    suites = ET.Element('testsuites', name='trainops', tests=str(len(cases)), failures=str(failures), errors='0',
                        time='%.3f' % summary['duration_s'])
    suite = ET.SubElement(suites, 'testsuite', name=playbook, tests=str(len(cases)), failures=str(failures), errors='0',
                          skipped='0', time='%.3f' % summary['duration_s'], timestamp=summary['started'], hostname=socket.gethostname())
    props = ET.SubElement(suite, 'properties')
    for name in ('status', 'rc', 'artifact_dir'):
        ET.SubElement(props, 'property', name=name, value=str(summary.get(name)))
    suite.extend(cases)
    return ET.ElementTree(suites)


def write_junit(path, summary):
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    tree = build_junit(summary)
    if hasattr(ET, 'indent'):
        ET.indent(tree)
    tree.write(path, encoding='utf-8', xml_declaration=True)


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------

def run(args):
    """Run the playbook; return the summary dict."""
    project_dir = os.path.abspath(os.path.expanduser(args.project_dir))
    if not os.path.isdir(project_dir):
        raise UsageError('project directory %s does not exist' % project_dir)
    playbook_path = resolve_path(args.playbook, project_dir)
    inventory = [resolve_path(i, project_dir, must_exist=False) for i in args.inventory]
    literal = secret_args().literal_secret_problems(args.extra_vars)
    if literal:
        raise UsageError('\n'.join(literal))
    extravars, extravar_args = parse_extra_vars(args.extra_vars, project_dir)

    config = args.config and resolve_path(args.config, project_dir)
    if not config and os.path.isfile(os.path.join(project_dir, 'ansible.cfg')):
        config = os.path.join(project_dir, 'ansible.cfg')
    # an installed collection's playbooks run from the current directory: their output lands there, not in it
    run_dir = os.getcwd() if INSTALLED and args.project_dir == DEFAULT_PROJECT_DIR else project_dir

    envvars = {'ANSIBLE_HOST_KEY_CHECKING': host_key_checking_default(config or os.environ.get('ANSIBLE_CONFIG'))}
    if config:
        envvars['ANSIBLE_CONFIG'] = config
    # Prefer the ansible-playbook that belongs to this interpreter (virtualenvs).
    bindir = os.path.dirname(os.path.abspath(sys.executable))
    if os.path.isfile(os.path.join(bindir, 'ansible-playbook')):
        envvars['PATH'] = os.pathsep.join([bindir, os.environ.get('PATH', '')])

    cmdline = list(extravar_args)
    if args.check:
        cmdline.append('--check')
    if args.diff:
        cmdline.append('--diff')

    artifact_root = os.path.abspath(os.path.expanduser(args.artifacts or os.path.join(run_dir, DEFAULT_ARTIFACTS)))
    os.makedirs(artifact_root, exist_ok=True)
    stem = re.sub(r'[^A-Za-z0-9_.-]+', '_', os.path.splitext(os.path.basename(playbook_path))[0])
    ident = '%s_%s_%s' % (time.strftime('%Y%m%dT%H%M%S'), stem, uuid.uuid4().hex[:6])

    secret_names = tuple(args.secret_env)
    redactor = Redactor(secret_values(extravars, secret_names))
    recorder = RunRecorder(verbosity=args.verbose, redactor=redactor)

    def on_status(data, runner_config=None):
        # the command record is written before the process starts: redact it as soon as it runs
        if data.get('status') == 'running' and runner_config is not None:
            redact_command_record(runner_config.artifact_dir, secret_names)

    private_data_dir = tempfile.mkdtemp(prefix='trainops_run_')
    started = datetime.datetime.now(datetime.timezone.utc)
    t0 = time.monotonic()
    try:
        kwargs = dict(
            private_data_dir=private_data_dir,
            project_dir=run_dir,
            playbook=playbook_path,
            inventory=inventory or None,
            envvars=envvars,
            cmdline=shlex.join(cmdline) if cmdline else None,
            artifact_dir=artifact_root,
            ident=ident,
            event_handler=recorder,
            status_handler=on_status,
            quiet=True,
            # leave fact caching to ansible.cfg (runner would force its jsonfile cache otherwise)
            fact_cache_type='ansible.cfg',
            limit=args.limit,
            tags=args.tags,
            skip_tags=args.skip_tags,
            verbosity=args.verbose or None,
            timeout=args.timeout,
        )
        runner = ansible_runner.run(**dict((k, v) for k, v in kwargs.items() if v is not None))
        status, rc, artifact_dir = runner.status, runner.rc, runner.config.artifact_dir
    except Exception as exc:  # report it like any failed run, so CI still gets the summary and JUnit XML
        status, rc, artifact_dir = 'error', None, os.path.join(artifact_root, ident)
        sys.stderr.write('[trainops_run] ansible-runner failed: %s: %s\n' % (type(exc).__name__, exc))
        recorder.tail.append('ansible-runner failed: %s: %s' % (type(exc).__name__, exc))
    finally:
        shutil.rmtree(private_data_dir, ignore_errors=True)
        redact_command_record(os.path.join(artifact_root, ident), secret_names)
        redact_artifacts(os.path.join(artifact_root, ident), redactor)
    duration = time.monotonic() - t0
    rotate_artifacts(artifact_root, args.keep_artifacts)

    per_host = host_stats(recorder.stats)
    bad_hosts = failed_hosts(per_host)
    failures = fatal_failures(recorder.failures, per_host)
    ok = status == 'successful' and rc == 0 and not bad_hosts
    if not ok and not failures:
        detail = '\n'.join(recorder.tail[-20:])
        failures.append({'host': None, 'task': None,
                         'msg': _truncate('ansible-playbook status=%s rc=%s%s' % (status, rc, '\n' + detail if detail else ''))})

    return {
        'status': status,
        'rc': rc,
        'ok': ok,
        'playbook': args.playbook,
        'playbook_path': playbook_path,
        'project_dir': project_dir,
        'ansible_config': config,
        'inventory': inventory or None,
        'extravars': redact_extravars(extravars),
        'limit': args.limit,
        'check': bool(args.check),
        'started': started.isoformat(),
        'duration_s': round(duration, 3),
        'stats': per_host,
        'failed_hosts': bad_hosts,
        'failures': failures,
        'artifact_data': recorder.artifact_data,
        'artifact_dir': artifact_dir,
    }


def exit_code(summary):
    if summary['ok']:
        return 0
    return summary['rc'] if isinstance(summary['rc'], int) and summary['rc'] > 0 else 1


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if ansible_runner is None:
        parser.error('the ansible-runner Python package is required (pip install ansible-runner)')
    try:
        summary = run(args)
    except UsageError as exc:
        parser.error(str(exc))

    for host, counts in sorted(summary['stats'].items()):
        print('RECAP %s %s' % (host, ' '.join('%s=%d' % (k, counts[k]) for k, dummy in STAT_KEYS)))
    artifact_data = summary.get('artifact_data') or {}
    experiment = artifact_data.get('trainops_experiment') or {}
    if experiment.get('outcome'):
        detail = experiment.get('outcome_detail') or experiment['outcome']
        print('OUTCOME %s: %s (%s)' % (experiment['outcome'], detail, experiment.get('path')))
    sweep = artifact_data.get('trainops_sweep') or {}
    if sweep.get('outcome'):
        print('SWEEP %s: %s' % (sweep['outcome'], sweep.get('path')))
        for line in sweep.get('table') or []:
            print('  ' + line)
    code = exit_code(summary)
    print('RESULT %s: status=%s rc=%s exit=%d duration=%.1fs artifacts=%s' % (
        'ok' if summary['ok'] else 'FAILED', summary['status'], summary['rc'], code, summary['duration_s'], summary['artifact_dir']))
    sys.stdout.flush()

    if args.summary:
        write_json(args.summary, summary)
    if args.junit:
        write_junit(args.junit, summary)
    return code


if __name__ == '__main__':
    sys.exit(main())
