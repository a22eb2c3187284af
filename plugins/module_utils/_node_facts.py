# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Node facts for trainops.multinode: GPUs, RDMA devices and the network interface that reaches the master.

Everything read from the filesystem goes through ``root`` so tests run on fake sysfs/procfs trees;
every command goes through ``Runner`` (``run`` and ``which``) so tests can replace it.

GPUs and RDMA devices are read from procfs/sysfs first. The vendor tools (``nvidia-smi``, ``amd-smi``,
``rocm-smi``) only fill what the files cannot tell (GPU interconnect, a missing model or driver version)
and only when they are installed; a tool that is missing, fails or times out never fails the facts.
"""

from __future__ import annotations

import errno
import ipaddress
import json
import re

# the program run with the ranks' interpreter (its source, with python -c): imported so that AnsiballZ packs it
from ansible_collections.trainops.multinode.plugins.module_utils import _kernel_network, _torch_probe
from ansible_collections.trainops.multinode.plugins.module_utils._facts_io import (
    TOOL_DIRS, TOOL_TIMEOUT, NodeFactsError, Runner, _json, _read)
from ansible_collections.trainops.multinode.plugins.module_utils._files import module_source
from ansible_collections.trainops.multinode.plugins.module_utils._gpu_facts import gpu_details, gpu_facts
from ansible_collections.trainops.multinode.plugins.module_utils._rdma_facts import pci_topology, rdma_facts

__all__ = ['NodeFactsError', 'Runner', 'TOOL_DIRS', 'TOOL_TIMEOUT', 'default_route_ifnames', 'gpu_details', 'gpu_facts',
           'interfaces', 'interpreter_probe', 'library_facts', 'network_facts', 'node_facts', 'pci_topology',
           'rdma_facts']
"""What the node_facts and preflight modules use: the facts of each concern are decided in their own module
(_facts_io: reading files and tools, _gpu_facts: GPUs, _rdma_facts: RDMA and PCIe topology; the network and the
NCCL/RCCL library here), and composed by :func:`node_facts`."""


# ------------------------------------------------------------------------------------------------
# network
# ------------------------------------------------------------------------------------------------

class _NoIpCommand(Exception):
    """The node has no ``ip`` (iproute2): the kernel is asked directly (_kernel_network)."""


def _ip_json(runner, argv):
    """``_json`` of an ``ip`` command; _NoIpCommand when the node has no ``ip`` to run."""
    try:
        return _json(runner, argv)
    except NodeFactsError as exc:
        if isinstance(exc.__cause__, OSError) and exc.__cause__.errno == errno.ENOENT:
            raise _NoIpCommand()
        raise


def interfaces(runner):
    """Every interface with its MTU, state and addresses (CIDR), from ``ip -j addr show``."""
    result = []
    for link in _ip_json(runner, ['ip', '-j', 'addr', 'show']):
        addrs = ['{0}/{1}'.format(a['local'], a['prefixlen']) for a in link.get('addr_info', [])
                 if a.get('family') in ('inet', 'inet6') and 'local' in a]
        result.append(dict(ifname=link.get('ifname'), mtu=link.get('mtu'), operstate=link.get('operstate'),
                           addresses=addrs))
    return result


def _reaches(iface, master):
    """True when one of the interface's networks contains the master's address."""
    for cidr in iface['addresses']:
        try:
            if master in ipaddress.ip_interface(cidr).network:
                return True
        except ValueError:
            continue
    return False


def network_facts(runner, master_addr, socket_ifname='auto', check_ifname=True):
    """The interface the kernel routes ``master_addr`` through (or the override), its address and MTU."""
    try:
        master = ipaddress.ip_address(master_addr)
    except ValueError:
        raise NodeFactsError('master_addr {0!r} is not an IP address; give the master address the nodes use '
                             '(trainops_master_addr)'.format(master_addr))
    ifaces, route, source = _interfaces_and_route(runner, master)
    by_name = dict((i['ifname'], i) for i in ifaces)
    routed = route.get('dev')
    if route.get('type') == 'local' and not master.is_loopback:
        # the master's address is this host's own: use the interface that carries it, not lo
        owners = [i['ifname'] for i in ifaces if any(ipaddress.ip_interface(c).ip == master for c in i['addresses'])]
        routed = owners[0] if owners else routed
    chosen = routed if socket_ifname in (None, '', 'auto') else socket_ifname
    if chosen not in by_name:
        raise NodeFactsError('interface {0!r} does not exist on this node (it has: {1}); fix the override '
                             'trainops_socket_ifname or set it to auto'.format(chosen, ', '.join(sorted(by_name))))
    iface = by_name[chosen]
    if check_ifname and chosen != routed and not _reaches(iface, master):
        raise NodeFactsError('interface {0!r} cannot reach the master {1}: its addresses {2} are not on the master\'s '
                             'network and the kernel routes the master through {3!r}; use {3!r}, set '
                             'trainops_socket_ifname to auto, or fix the override'.format(
                                 chosen, master, iface['addresses'] or 'none', routed))
    family = 4 if master.version == 4 else 6
    address = [c.split('/')[0] for c in iface['addresses'] if ipaddress.ip_interface(c).version == family]
    return dict(master_addr=str(master), routed_ifname=routed, route_src=route.get('prefsrc'), ifname=chosen,
                address=address[0] if address else None, mtu=iface['mtu'], operstate=iface['operstate'],
                overridden=chosen != routed, interfaces=ifaces, source=source)


def _interfaces_and_route(runner, master):
    """(interfaces, the route to ``master``, what told): ``ip -j``, or the kernel asked directly on a node without ip."""
    try:
        ifaces = interfaces(runner)
        route = _ip_json(runner, ['ip', '-j', 'route', 'get', str(master)])
        return ifaces, (route[0] if route else {}), 'ip'
    except _NoIpCommand:
        pass
    ifaces = _kernel_network.interfaces()
    try:
        return ifaces, _kernel_network.route_get(master, ifaces), 'kernel (no ip command on the node)'
    except _kernel_network.KernelNetworkError as exc:
        raise NodeFactsError(str(exc))


def default_route_ifnames(root='/'):
    """Interfaces that carry a default route (IPv4 /proc/net/route, IPv6 /proc/net/ipv6_route), in file order."""
    names = []
    for line in (_read(root, 'proc/net/route') or '').splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 8 and fields[1] == '00000000' and fields[7] == '00000000' and fields[0] not in names:
            names.append(fields[0])
    for line in (_read(root, 'proc/net/ipv6_route') or '').splitlines():
        fields = line.split()
        if len(fields) >= 10 and fields[0] == '0' * 32 and fields[1] == '00' and fields[9] != 'lo' \
                and fields[9] not in names:
            names.append(fields[9])
    return names


# ------------------------------------------------------------------------------------------------
# NCCL / RCCL library and net plugins, read where the ranks run (plugins/module_utils/_torch_probe.py)
# ------------------------------------------------------------------------------------------------

ROCM_RCCL = _torch_probe.ROCM_RCCL
net_plugin_identity = _torch_probe.net_plugin_identity
_TEXT_LIMIT = 300


def interpreter_probe(runner, python, import_torch=False, prefix=None, library=None, root='/'):
    """Run _torch_probe.py with the ranks' interpreter (``prefix``: in their container, e.g. ``['docker', 'exec',
    'trainops-train']``); its JSON as a dict, ``error`` saying what went wrong. ``library``: the GPU vendor whose
    NCCL/RCCL to look for; ``root`` (tests) is passed on only when nothing runs in a container."""
    argv = list(prefix or []) + [python, '-c', module_source(_torch_probe)]
    argv += [_torch_probe.IMPORT_FLAG] if import_torch else []
    argv += [_torch_probe.LIBRARY_FLAG, library] if library in ('nvidia', 'amd') else []
    argv += [_torch_probe.ROOT_FLAG, root] if root not in (None, '/') and not prefix else []
    try:
        rc, out, err = runner.run(argv)
    except (OSError, ValueError) as exc:
        return dict(python=None, version=None, location=None, imported=False, error=str(exc))
    try:
        data = json.loads(out or '')
        if not isinstance(data, dict):
            raise ValueError('not an object')
    except ValueError:
        lines = (err or out or '').strip().splitlines()
        data = dict(python=None, version=None, location=None, imported=False,
                    error='rc={0}: {1}'.format(rc, ' / '.join(lines[-3:]) or 'no output'))
    if rc != 0 and not data.get('error'):
        data['error'] = 'rc={0}: {1}'.format(rc, (err or '').strip()[-300:])
    return data


def _text(value):
    """A string the probe printed, bounded and printable (the node's output is checked, not trusted), else None."""
    if not isinstance(value, str) or not value or len(value) > _TEXT_LIMIT or not value.isprintable():
        return None
    return value


def _version_text(value):
    value = _text(value)
    return value if value and _torch_probe.VERSION.match(value) else None


def _library_names(value):
    return [b for b in value if isinstance(b, str) and _torch_probe.BUNDLED.match(b)] if isinstance(value, list) else []


def _checked_probe(data):
    """The probe's ``library`` findings with every field checked: what ``_torch_probe.choose_library`` reads."""
    torch = data.get('torch') if isinstance(data.get('torch'), dict) else None
    files = data.get('files') if isinstance(data.get('files'), dict) else None
    wheels = data.get('wheels') if isinstance(data.get('wheels'), dict) else {}
    found = dict(reported=_version_text(data.get('reported')), torch=None, files=None,
                 wheels=dict((k, _version_text(v)) for k, v in wheels.items()
                             if isinstance(k, str) and _torch_probe.NCCL_WHEEL.match(k) and _version_text(v)))
    if torch and _text(torch.get('version')):
        wheel = _text(torch.get('nccl_wheel'))
        found['torch'] = dict(version=_text(torch['version']),
                              nccl_wheel=wheel if wheel and _torch_probe.NCCL_WHEEL.match(wheel) else None,
                              bundled=_library_names(torch.get('bundled')),
                              replaced=_library_names(torch.get('replaced')))
    if files and _version_text(files.get('version')) and _text(files.get('file')):
        found['files'] = dict(version=files['version'], file=files['file'])
    found['runtime'] = _checked_runtime(data.get('runtime'))
    return found


def _checked_runtime(value):
    """The probe's ``runtime`` (the library the ranks' process maps and its ncclGetVersion), checked like the rest."""
    if not isinstance(value, dict):
        return None
    path, how = _text(value.get('path')), _text(value.get('how'))
    told_by = value.get('told_by') if value.get('told_by') in ('ncclGetVersion()', 'its version string') else None
    version = _version_text(value.get('version'))
    if version and path and path.startswith('/') and how and told_by:
        return dict(version=version, path=path, how=how, told_by=told_by)
    return dict(version=None, error=_text(str(value.get('error') or 'no version read')[:_TEXT_LIMIT]))


def _rocm_runtime(data, torch_rocm):
    """The ROCm runtime the ranks use: the one a ROCm wheel of torch bundles, else torch's HIP, else /opt/rocm."""
    if torch_rocm:
        return torch_rocm
    match = re.match(r'^(\d+\.\d+(?:\.\d+)?)', _text(data.get('hip')) or '')
    return match.group(1) if match else _version_text(data.get('rocm'))


def _plugins(data):
    plugin = _text(data.get('aws_ofi_nccl'))
    others = [dict(path=_text(o.get('path')), aws_ofi_nccl=False, version=_version_text(o.get('version')),
                   names=[n for n in o.get('names') if _text(n)] if isinstance(o.get('names'), list) else [])
              for o in data.get('other_net_plugins') or [] if isinstance(o, dict) and _text(o.get('path'))]
    return plugin if plugin and plugin.startswith('/') else None, others


def _dmabuf_options(value):
    if not isinstance(value, dict):
        return None
    return dict((k, value.get(k) is True) for k in _torch_probe.DMABUF_KERNEL_OPTIONS)


def _dmabuf_search(value):
    """The probe's ``dmabuf_kernel_search`` (the file RCCL >= 2.28 reads and the options in it), checked."""
    if not isinstance(value, dict):
        return None
    name = _text(value.get('file'))
    allowed = ['/' + p for p in _torch_probe.KERNEL_CONFIG_FILES] + ['/proc/kallsyms']
    if not name or not any(re.fullmatch(re.escape(a).replace(re.escape('{0}'), r'[^/\s]+'), name) for a in allowed):
        return None
    return dict(file=name, options=_dmabuf_options(value.get('options')))


def library_facts(root='/', gpu_vendor='none', probed=None, where='host'):
    """The NCCL (NVIDIA) or RCCL (AMD) the node's ranks load, the aws-ofi-nccl net plugin and, on AMD, the kernel
    options RCCL's dma-buf path reads, all as seen where the ranks run.

    ``probed`` is the ``library`` part of _torch_probe.py's output from the ranks' interpreter (``where``: ``host``
    or ``container <name>``); without it the host's files under ``root`` are read (node_facts without an
    interpreter). ``version`` is None when nothing tells; ``source`` says what told it, ``read_in`` where.
    """
    name = {'nvidia': 'nccl', 'amd': 'rccl'}.get(gpu_vendor)
    library = dict(name=name, version=None, source=None, read_in=where if probed is not None else 'host', rocm=None)
    data = probed if isinstance(probed, dict) else {}
    if probed is not None:
        found = _checked_probe(data)
        plugin, others = _plugins(data)
        kernel = _dmabuf_options(data.get('dmabuf_kernel'))
        search = _dmabuf_search(data.get('dmabuf_kernel_search'))
        if data.get('reported_error') and found['torch'] and not found['reported']:
            library['torch_error'] = _text(str(data['reported_error'])[:_TEXT_LIMIT])
        if found['runtime'] and found['runtime'].get('error'):
            library['runtime_error'] = found['runtime']['error']  # why the loaded library could not be asked
    else:
        found = dict(files=_torch_probe.library_from_files(root, gpu_vendor) if name else None)
        data = dict(rocm=_torch_probe.rocm_from_files(root))
        plugin, others = _torch_probe.net_plugins(root)
        kernel = _torch_probe.dmabuf_kernel_config(root) if gpu_vendor == 'amd' else None
        search = _torch_probe.dmabuf_kernel_search(root) if gpu_vendor == 'amd' else None
    if name:
        chosen = _torch_probe.choose_library(gpu_vendor, found)
        if chosen:
            library.update(chosen)
            if where != 'host' and probed is not None:
                library['source'] += ' (in %s)' % where
        files = found.get('files')
        if files and files['version'] != library['version']:
            # the library's files there that the ranks do not load (a host NCCL beside torch's own)
            library['not_loaded'] = dict(files, read_in=library['read_in'])
        torch = found.get('torch') or {}
        if gpu_vendor == 'amd':
            library['rocm'] = _rocm_runtime(data, _torch_probe.rocm_of_torch(torch.get('version')))
    library['aws_ofi_nccl'] = plugin
    if others and not plugin:
        library['other_net_plugins'] = others  # libnccl-net*.so files that are not aws-ofi-nccl (an HPC-X SHARP one)
    library['dmabuf_kernel'] = kernel
    library['dmabuf_kernel_search'] = search
    return library


def node_facts(runner, master_addr, socket_ifname='auto', check_ifname=True, root='/', warnings=None, probe=None,
               where='host'):
    """``trainops_node``: gpu, rdma, network and library facts. Tool problems are appended to ``warnings``.

    ``probe(vendor)`` runs _torch_probe.py with the ranks' interpreter (``interpreter_probe``), ``where`` they run
    (``host`` or ``container <name>``): the library facts and RCCL's dma-buf options come from there. Without it the
    host's files are read.
    """
    network = network_facts(runner, master_addr, socket_ifname, check_ifname)
    network['default_ifnames'] = default_route_ifnames(root)
    gpu = gpu_details(root, runner, warnings)
    probed = result = None
    if probe is not None and gpu['vendor'] in ('nvidia', 'amd'):
        result = probe(gpu['vendor'])
        probed = result.get('library') if isinstance(result, dict) and isinstance(result.get('library'), dict) else {}
    library = library_facts(root, gpu['vendor'], probed, where)
    if probed == {}:
        library['probe_error'] = _text(str((result or {}).get('error') or 'no answer')[-_TEXT_LIMIT:])
    # RCCL's dma-buf options, read where the library was: facts of the GPUDirect path (rdma.gpudirect), not the library
    rdma = rdma_facts(root, gpu['vendor'], (library.pop('dmabuf_kernel'), library['read_in'],
                                            library.pop('dmabuf_kernel_search')))
    return dict(gpu=gpu, rdma=rdma, network=network, pci=pci_topology(root, gpu['pci_ids'], rdma['devices']),
                library=library)
