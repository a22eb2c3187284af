# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""What a node's run is, checked before anything is written: its id (the run-id rule, in one place), the torchrun
argv, the environment and secrets' names, the container that runs it, and the fingerprint that tells the same run
from another (module_utils/_torchrun.py starts, queries and stops it)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import string
import time


# names are checked with fullmatch: ``$`` would let a trailing newline through
# The run-id rule, in one place: its characters, its length and no ``..``; RUN_ID_RE and the batch script's shell
# test (run_id_shell_function, for the sbatch role) are both written from these.
RUN_ID_FIRST = string.ascii_letters + string.digits
RUN_ID_REST = RUN_ID_FIRST + '_.@+=-'
RUN_ID_MAX = 200
RUN_ID_RE = re.compile('[%s][%s]{0,%d}' % (re.escape(RUN_ID_FIRST), re.escape(RUN_ID_REST), RUN_ID_MAX - 1))
ENV_NAME_RE = re.compile(r'[A-Za-z_][A-Za-z0-9_]*')
SECRET_NAMES_VAR = 'TRAINOPS_SECRET_ENV_NAMES'
"""Set for every rank: the comma-separated names of the secret variables (a workload must not record their values)."""


class TorchrunError(Exception):
    """Raised for anything the module should report with ``fail_json``; ``details`` are extra return values."""

    def __init__(self, msg, **details):
        super(TorchrunError, self).__init__(msg)
        self.msg = msg
        self.details = details


# --------------------------------------------------------------------------------------------------
# pure helpers
# --------------------------------------------------------------------------------------------------

def iso_time(epoch):
    """ISO 8601 UTC time (seconds precision) for an epoch value, ``None`` for ``None``."""
    if epoch is None:
        return None
    return time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(epoch))


def is_run_id(run_id):
    """Whether ``run_id`` is a run id: ``[A-Za-z0-9][A-Za-z0-9_.@+=-]*``, at most 200 characters, without ``..``."""
    return isinstance(run_id, str) and RUN_ID_RE.fullmatch(run_id) is not None and '..' not in run_id


def validate_run_id(run_id):
    """Run ids become directory names: allow ``[A-Za-z0-9][A-Za-z0-9_.@+=-]*`` (at most 200 characters)."""
    if not is_run_id(run_id):
        raise TorchrunError('Invalid run_id %r: use letters, digits and _ . @ + = - (starting with a letter or digit).' % (run_id, ))
    return run_id


def run_id_shell_function(name):
    """A bash function ``name`` that succeeds when its one argument is a run id (is_run_id), for a script that reads
    one from a file (the sbatch role's batch script).

    The same rule as RUN_ID_RE, written as a POSIX extended regular expression with every character listed (a range
    such as ``A-Z`` may take other letters in some locales), and the same ``..`` check. Bash matches it against the
    whole value: a newline inside it is an ordinary character, so it does not match.
    """
    if not isinstance(name, str) or not ENV_NAME_RE.fullmatch(name):
        raise TorchrunError('Invalid shell function name %r' % (name, ))

    def bracket(chars):
        return '[' + ''.join(sorted(set(chars) - {'-'})) + ('-' if '-' in chars else '') + ']'
    pattern = '^%s%s{0,%d}$' % (bracket(RUN_ID_FIRST), bracket(RUN_ID_REST), RUN_ID_MAX - 1)
    return ('%s() {\n'
            '  local pattern=%s\n'
            '  [[ $1 =~ $pattern && $1 != *..* ]]\n'
            '}\n' % (name, shlex.quote(pattern)))


def _endpoint(addr, port):
    if ':' in addr and not addr.startswith('['):
        addr = '[%s]' % addr  # IPv6 literal
    return '%s:%d' % (addr, port)


def validate_start_params(params):
    """Check the values ``state=started`` needs beyond what the argument spec checks."""
    for name in ('run_id', 'nnodes', 'nproc_per_node', 'node_rank', 'master_addr', 'master_port', 'entrypoint'):
        if params.get(name) is None:
            raise TorchrunError('%s is required when state=started' % name)
    validate_run_id(params['run_id'])
    if params['nnodes'] < 1:
        raise TorchrunError('nnodes must be >= 1, got %d' % params['nnodes'])
    if params['nproc_per_node'] < 1:
        raise TorchrunError('nproc_per_node must be >= 1, got %d' % params['nproc_per_node'])
    if not 0 <= params['node_rank'] < params['nnodes']:
        raise TorchrunError('node_rank must be between 0 and nnodes - 1 (%d), got %d' % (params['nnodes'] - 1, params['node_rank']))
    if not 1 <= params['master_port'] <= 65535:
        raise TorchrunError('master_port must be between 1 and 65535, got %d' % params['master_port'])
    if (params.get('max_restarts') or 0) < 0:
        raise TorchrunError('max_restarts must be >= 0')
    if params.get('rdzv_timeout') is not None and params['rdzv_timeout'] < 1:
        raise TorchrunError('rdzv_timeout must be >= 1 second')
    if not params.get('entrypoint'):
        raise TorchrunError('entrypoint must not be empty')
    if (params.get('stop_timeout') or 0) < 0:
        raise TorchrunError('stop_timeout must be >= 0')
    if params.get('container') is not None and not CONTAINER_RE.fullmatch(params['container']):
        raise TorchrunError('container must be a container name or id, got %r' % (params['container'], ))


CONTAINER_RE = re.compile(r'[A-Za-z0-9][A-Za-z0-9_.-]*')


def container_argv(engine, container, python, run_dir, supervisor, job, user=None, pass_env=()):
    """Start the supervisor inside ``container`` (detached), its output appended to supervisor.log there.

    ``user`` (``uid:gid``) runs it, and so the ranks, as the node's user rather than the image's default
    (root); each name in ``pass_env`` is given as ``-e NAME``, which takes the value from the environment
    of the engine's client, so secret values never appear in an argv.
    """
    argv = [engine, 'exec', '-d']
    if user:
        argv += ['-u', user]
    for name in pass_env:
        argv += ['-e', name]
    return argv + ['-w', run_dir, container, 'sh', '-c', 'exec "$0" "$@" >>supervisor.log 2>&1', python, supervisor, job]


def check_container(system, engine, container, run_dir):
    """The container must run, share the host's PID namespace and see ``run_dir`` at the same path."""
    rc, out, err = system.run([engine, 'inspect', '--type', 'container', '--format',
                               '{{.State.Running}} {{.HostConfig.PidMode}}', container])
    if rc != 0:
        raise TorchrunError('container %s cannot be inspected with %s (rc %d): %s. Start it first (roles/container, '
                            'playbooks/container.yml).' % (container, engine, rc, (err or out).strip()))
    running, _sep, pid_mode = out.strip().partition(' ')
    if running != 'true':
        raise TorchrunError('container %s is not running. Start it first (roles/container, playbooks/container.yml).'
                            % container)
    if pid_mode != 'host':
        raise TorchrunError('container %s does not share the host PID namespace (PidMode %r): the pids the supervisor '
                            'records inside it could not be checked or stopped from the node. Run it with --pid=host '
                            '(roles/container does).' % (container, pid_mode or 'private'))
    rc, out, err = system.run([engine, 'exec', container, 'test', '-f', os.path.join(run_dir, 'job.json')])
    if rc != 0:
        raise TorchrunError('the run directory %s is not visible inside container %s: mount the node\'s trainops '
                            'directory at the same path in the container (roles/container does).' % (run_dir, container))


def build_argv(params):
    """Return the argv list (never a shell string) that starts torchrun for this node.

    With ``module``, the entrypoint is a module torchrun runs as ``python -m`` would (``--module``).
    ``rdzv_timeout`` is passed through ``--rdzv-conf``: torch's static TCP rendezvous reads the key
    ``timeout`` while the dynamic (c10d) rendezvous handler reads ``join_timeout``.
    """
    argv = list(params.get('command_prefix') or [])
    if params.get('torchrun'):
        argv.append(params['torchrun'])
    else:
        argv.extend([params.get('python') or 'python3', '-m', 'torch.distributed.run'])
    argv.extend(['--nnodes', str(params['nnodes']), '--nproc-per-node', str(params['nproc_per_node'])])
    backend = params.get('rdzv_backend') or 'static'
    timeout = params.get('rdzv_timeout')
    if backend == 'static':
        argv.extend([
            '--rdzv-backend', 'static',
            '--node-rank', str(params['node_rank']),
            '--master-addr', params['master_addr'],
            '--master-port', str(params['master_port']),
        ])
        if timeout is not None:
            argv.extend(['--rdzv-conf', 'timeout=%d' % timeout])
    elif backend == 'c10d':
        argv.extend([
            '--rdzv-backend', 'c10d',
            '--rdzv-endpoint', _endpoint(params['master_addr'], params['master_port']),
            '--rdzv-id', params.get('rdzv_id') or params['run_id'],
        ])
        if timeout is not None:
            argv.extend(['--rdzv-conf', 'join_timeout=%d' % timeout])
    else:
        raise TorchrunError('Unsupported rdzv_backend %r' % (backend, ))
    argv.extend(['--max-restarts', str(params.get('max_restarts') or 0)])
    if params.get('module'):
        argv.append('--module')
    argv.append(params['entrypoint'])
    argv.extend(params.get('entrypoint_args') or [])
    return [str(a) for a in argv]


def normalize_env(env, what='env'):
    """Return the job environment as ``{str: str}``; ``None`` values are refused."""
    result = {}
    for key, value in (env or {}).items():
        if not ENV_NAME_RE.fullmatch(str(key)):
            raise TorchrunError('%s: %r is not a valid environment variable name' % (what, key))
        if value is None:
            raise TorchrunError('%s: the value of %s must not be null' % (what, key))
        if isinstance(value, bool):
            value = 'true' if value else 'false'
        result[str(key)] = str(value)
    return result


def split_secret_env(env, secret_env):
    """``(env, secrets)`` as ``{str: str}``: ``env`` gains TRAINOPS_SECRET_ENV_NAMES; a name in both is refused."""
    env = normalize_env(env)
    secrets = normalize_env(secret_env, 'secret_env')
    both = sorted(set(env) & set(secrets))
    if both:
        raise TorchrunError('%s set both in env and in secret_env: give each variable once.' % ', '.join(both))
    if secrets:
        env[SECRET_NAMES_VAR] = ','.join(sorted(secrets))
    return env, secrets


def compute_fingerprint(argv, env, chdir, secret_names=()):
    """sha256 over argv, env, chdir and the names of the secret variables (canonical JSON)."""
    record = {'argv': list(argv), 'env': dict(env or {}), 'chdir': chdir}
    if secret_names:
        record['secret_env_names'] = sorted(secret_names)
    blob = json.dumps(record, sort_keys=True, separators=(',', ':'))
    return hashlib.sha256(blob.encode('utf-8')).hexdigest()


def render_env_file(env, run_id, secret_names=()):
    """The environment every rank of the run gets on top of the node's, as a file a shell can source."""
    lines = ['# Environment of every rank of run %s on this node (set by trainops.multinode.torchrun).' % run_id,
             '# Reproduce a rank by hand: set -a; . ./env.sh; set +a']
    if secret_names:
        lines.append('# Also set, from trainops_secret_env and never written to a file: %s' % ', '.join(sorted(secret_names)))
    lines.extend('export %s=%s' % (key, shlex.quote(value)) for key, value in sorted(env.items()))
    return '\n'.join(lines) + '\n'
