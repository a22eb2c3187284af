# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Read-only launch preflight of one node, in one Python process.

The launch used to spend four module runs per node on what this does in one (node facts, the
training interpreter's torch, a job still running, the master port): every module run costs a
Python start with its payload on the node and a few hundred ms of controller CPU per node, which is
what made the 16-node launch slow (docs/contributing/benchmarks.md). Nothing here creates, starts or changes
anything. Problems the user must fix are collected, not raised, so one run reports all of them.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import select
import shutil
import socket
import subprocess
import sys
import time

# programs this module runs on the node (their source, with python -c): imported so that AnsiballZ packs them
from ansible_collections.trainops.multinode.plugins.module_utils import _gpu_visibility, _port_listener
from ansible_collections.trainops.multinode.plugins.module_utils._files import module_source
from ansible_collections.trainops.multinode.plugins.module_utils._git_state import (
    STATE_ERROR,
    GitStateError,
    collect as git_collect,
    empty_state as git_empty_state,
)
from ansible_collections.trainops.multinode.plugins.module_utils._node_facts import (
    NodeFactsError,
    interpreter_probe,
    node_facts,
)
from ansible_collections.trainops.multinode.plugins.module_utils._node_identity import (
    NodeIdentityError,
    dir_token,
    host_identity,
    node_state_dir,
)
from ansible_collections.trainops.multinode.plugins.module_utils._outcomes import STATUS_RUNNING
from ansible_collections.trainops.multinode.plugins.module_utils._torchrun import (
    TorchrunError,
    TorchrunNode,
)


def port_in_use(port, bind_addr=''):
    """True when something listens on ``port`` here (a bind with SO_REUSEADDR fails), False when free.

    torchrun's TCPStore listens on every address of the master, so any listener on the port, on
    any address, makes the rendezvous fail; a socket merely in TIME_WAIT does not.
    """
    for family, addr in ((socket.AF_INET6, '::'), (socket.AF_INET, '0.0.0.0')):
        try:
            sock = socket.socket(family, socket.SOCK_STREAM)
        except OSError:
            continue
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((bind_addr or addr, port))
            return False
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return True
            if exc.errno in (errno.EAFNOSUPPORT, errno.EADDRNOTAVAIL):
                continue
            raise
        finally:
            sock.close()
    return False


def _abspath(path):
    return os.path.abspath(os.path.expanduser(path)) if path else None


def preflight(runner, params, root='/', port_check=port_in_use, check_mode=False, listen=None, git_runner=None):
    """Run every check; return the module result (``problems`` empty when the node may start)."""
    problems = []
    result = dict(changed=False, problems=problems)
    listen = listen or open_master_port

    prefix = [params.get('container_engine') or 'docker', 'exec', params['container']] if params.get('container') else []
    python = params.get('python')
    probed = {}

    def probe(vendor):
        """The ranks' interpreter, asked once for torch and, on GPU nodes, the NCCL/RCCL torch loads (issue 26)."""
        probed['torch'] = interpreter_probe(runner, python, params.get('import_torch', False), prefix, vendor, root)
        return probed['torch']

    try:
        facts = node_facts(runner, params['master_addr'], params.get('socket_ifname') or 'auto',
                           params.get('check_ifname', True), root=root, probe=probe if python else None,
                           where='container ' + params['container'] if params.get('container') else 'host')
    except NodeFactsError as exc:
        facts = None
        problems.append(str(exc))
    result['ansible_facts'] = dict(trainops_node=facts) if facts is not None else {}
    if facts is not None:
        # the GPUs the ranks will see from this session: a Slurm job's devices cgroup renumbers them from 0
        vendor = facts['gpu']['vendor']
        view = _gpu_visibility.rank_view(_gpu_visibility.probe(root, vendor), params.get('gpu_ids') or [],
                                         params.get('nproc_per_node'), vendor)
        result['gpu_view'] = view
        problems.extend('%s: %s' % (socket.gethostname(), line) for line in view['problems'])  # (what it saw)

    if python:
        torch = probed.get('torch') or interpreter_probe(runner, python, params.get('import_torch', False), prefix,
                                                         root=root)
        result['torch'] = dict((k, v) for k, v in torch.items() if k != 'library')  # that part is in the facts
        if torch.get('error') or not torch.get('version'):
            problems.append('{0}{1} cannot {2} torch: {3}. Install torch for that interpreter on the node, or point '
                            'trainops_python at one that has it.'.format(
                                python, ' in container ' + params['container'] if params.get('container') else '',
                                'import' if params.get('import_torch') else 'find',
                                torch.get('error') or 'no version found'))

    identity = host_identity()
    result['host'] = identity
    paths = node_paths(params, problems)
    result['paths'] = paths

    training_network = params.get('training_network')
    if training_network and facts is not None:
        problems.extend(training_network_problems(training_network, params['master_addr'], facts['network'],
                                                  is_master=bool(params.get('master_port'))))

    if paths['state_dir']:
        try:
            job = TorchrunNode(paths['state_dir'], identity=identity).query(log_lines=0)['job']
        except TorchrunError as exc:
            job = dict(status='unknown', run_id=None)
            problems.append('cannot read the job state in {0}: {1}'.format(paths['state_dir'], exc.msg))
        result['job'] = job
        if job.get('status') == STATUS_RUNNING and not params.get('replace'):
            problems.append('job {0} is still running here (pid {1}, started {2}). Stop it with playbooks/stop.yml, '
                            'or launch with -e replace=true to stop it first.'.format(
                                job.get('run_id'), job.get('pid'), job.get('started_at')))

    script = params.get('script')
    if script and paths['workspace_dir']:
        script_path = os.path.join(paths['workspace_dir'], script)
        result['script_exists'] = os.path.isfile(script_path)
        if not result['script_exists']:
            problems.append('{0} does not exist. Sync the code to the node (trainops_sync_workspace: true) or fix '
                            'script/trainops_workspace_dir.'.format(script_path))

    git_path = params.get('git_path')
    if git_path:
        # compared across nodes by the controller (filter trainops.multinode.git_compare), not judged here
        if git_runner is None:
            state = git_empty_state(git_path)
            state.update(state=STATE_ERROR, message='git is not installed on this node (no git in PATH)')
        else:
            try:
                state = git_collect(git_runner, _abspath(git_path), max_files=20, scope=True)
            except GitStateError as exc:
                state = exc.state
        result['git'] = state

    if params.get('need_rsync'):
        result['rsync'] = shutil.which('rsync')
        if not result['rsync']:
            problems.append('rsync is not installed (the workspace is synced with it). Install rsync on the node, or '
                            'set trainops_sync_workspace: false and put the code there yourself.')

    # looked up, not judged: the controller names every node that lacks one (the profiler, checks.yml)
    executables = params.get('find_executables') or []
    if executables:
        result['executables'] = dict((name, shutil.which(name)) for name in executables)

    port = params.get('master_port')
    result['master_port_free'] = None
    if port:
        in_use = port_check(port)
        result['master_port_free'] = not in_use
        if in_use and not params.get('replace'):
            problems.append('port {0} is already in use on the master ({1}). Pick another one with -e master_port=NNNNN, '
                            'or stop what holds it.'.format(port, params['master_addr']))

    reach_port = params.get('reach_port')
    if reach_port and not check_mode:
        timeout = params.get('reach_timeout') or 20
        if params.get('reach_peers') and result['master_port_free'] is not False:
            error = listen(sys.executable, reach_port, params['reach_peers'], timeout + 10)
            if error:
                problems.append('cannot open the master port for the reachability check: {0}'.format(error))
        network = (facts or {}).get('network') or {}
        reach = reach_master(params['master_addr'], reach_port, network.get('address'), network.get('ifname'), timeout)
        result['reach'] = reach
        if not reach['ok']:
            problems.append('cannot reach the master port {0} from {1} ({2}) within {3} s: {4}. Check the routes and '
                            'firewalls between this node and the master, or choose another interface with '
                            'trainops_socket_ifname.'.format(reach['target'], reach['ifname'], reach['source'], timeout,
                                                             reach['error']))
    identify_dirs(paths, params.get('identify_dirs') or [])
    return result


def node_paths(params, problems):
    """Absolute paths on this node: the state root, this node's own state directory below it, the workspace."""
    state_root = _abspath(params.get('state_dir'))
    paths = dict(state_root=state_root, state_dir=None, workspace_dir=_abspath(params.get('workspace_dir')))
    if state_root:
        try:
            paths['state_dir'] = node_state_dir(state_root, params.get('node_id'))
        except NodeIdentityError as exc:
            problems.append(str(exc))
    return paths


def identify_dirs(paths, which):
    """Add the tokens of the state root and/or the workspace (``which``: ``state_dir``, ``workspace_dir``), by which
    the controller sees which nodes share them; ``None`` where there is none yet (read-only: the launch makes them
    with trainops.multinode.dir_token once every check passed)."""
    for param, key, token_key in (('state_dir', 'state_root', 'state_root_token'),
                                  ('workspace_dir', 'workspace_dir', 'workspace_token')):
        paths[token_key] = dir_token(paths[key], create=False) if param in which and paths.get(key) else None


def training_network_problems(cidr, master_addr, network, is_master=False):
    """The master's address (checked on the master) and the interface this node uses must be on the training network."""
    try:
        net = ipaddress.ip_network(cidr, strict=False)
    except ValueError:
        return ['trainops_training_network={0!r} is not a network in CIDR form (e.g. 10.0.0.0/16)'.format(cidr)]
    problems = []
    if is_master and ipaddress.ip_address(master_addr) not in net:
        problems.append('the master address {0} is not on the training network {1} (trainops_training_network): set '
                        'trainops_master_addr to the master\'s address on that network; ansible_host is often the '
                        'management address'.format(master_addr, net))
    ifname = network.get('ifname')
    iface = next((i for i in network.get('interfaces') or [] if i.get('ifname') == ifname), {})
    on_net = [c for c in iface.get('addresses') or [] if ipaddress.ip_interface(c).ip in net]
    if not on_net:
        problems.append('interface {0}, which this node would use for training, has no address on the training network '
                        '{1} (its addresses: {2}): check trainops_master_addr and trainops_socket_ifname'.format(
                            ifname, net, ', '.join(iface.get('addresses') or []) or 'none'))
    return problems


# --- reachability of the master's port ----------------------------------------------------------
# The master's preflight opens the master port for a short window (a detached listener that exits
# once every node has connected, or when the window ends) and every node's preflight connects to it
# from the address of the interface it will use. That proves, before anything starts, that the port
# is reachable through that interface (routing, firewalls), at no extra round trip.
def open_master_port(python, port, peers, window):
    """Start the detached listener on ``port`` for ``peers`` connections or ``window`` seconds.

    Returns None once it listens, or an error string.
    """
    read_fd, write_fd = os.pipe()
    try:
        with open(os.devnull, 'rb') as devnull_in, open(os.devnull, 'wb') as devnull_out:
            subprocess.Popen([python, '-c', module_source(_port_listener), str(port), str(peers), str(window), str(write_fd)],
                             stdin=devnull_in, stdout=devnull_out, stderr=devnull_out, close_fds=True,
                             pass_fds=(write_fd,), start_new_session=True)
    except OSError as exc:
        os.close(read_fd)
        os.close(write_fd)
        return 'cannot start the port listener: {0}'.format(exc)
    os.close(write_fd)
    try:
        if not select.select([read_fd], [], [], 10)[0]:
            return 'the port listener did not start within 10 s'
        answer = os.read(read_fd, 512).decode('utf-8', 'replace')
    finally:
        os.close(read_fd)
    return None if answer == 'R' else 'cannot listen on port {0}: {1}'.format(port, answer[1:] or 'it exited')


def reach_master(master_addr, port, source_addr, ifname, timeout, clock=None, sleep=None):
    """Connect to ``master_addr:port`` from ``source_addr`` (the chosen interface), retrying until ``timeout``."""
    clock = clock or time.monotonic
    sleep = sleep or time.sleep
    start = clock()
    attempts, error = 0, None
    family = socket.AF_INET6 if ':' in master_addr else socket.AF_INET
    while True:
        attempts += 1
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.settimeout(max(0.5, min(3.0, timeout - (clock() - start))))
            if source_addr:
                sock.bind((source_addr, 0))
            sock.connect((master_addr, port))
            return dict(ok=True, ifname=ifname, source=source_addr, target='{0}:{1}'.format(master_addr, port),
                        attempts=attempts, ms=int((clock() - start) * 1000), error=None)
        except OSError as exc:
            error = exc.strerror or str(exc)
        finally:
            sock.close()
        if clock() - start >= timeout:
            break
        sleep(0.2)
    return dict(ok=False, ifname=ifname, source=source_addr, target='{0}:{1}'.format(master_addr, port),
                attempts=attempts, ms=int((clock() - start) * 1000), error=error)
