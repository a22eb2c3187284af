# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The NCCL/RCCL the ranks load, read where they run (issue 26, items 1, 4 and 5).

The program plugins/module_utils/_torch_probe.py really runs here, in this interpreter, over the recorded
fixtures' Python environments (tests/unit/fixtures/node_facts/<name>: the host's ``root``, the training
container's ``container``); node_facts and nccl_env then decide from what it printed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils._nccl_env.deciders import compute
from ansible_collections.trainops.multinode.plugins.module_utils import _node_facts as nf
from ansible_collections.trainops.multinode.plugins.module_utils import _torch_probe as tp
from ansible_collections.trainops.multinode.plugins.module_utils._files import module_source

from ansible_collections.trainops.multinode.tests.unit.plugins.module_utils import native_libs as native

_TREE = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'fixtures', 'node_facts', 'fixture_tree.py')
_SPEC = importlib.util.spec_from_file_location('library_fixture_tree', _TREE)
fixture_tree = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(fixture_tree)

H100 = 'h100_roce_host_nccl_beside_torch_wheel'
H100_SITE = 'usr/local/lib/python3.10/dist-packages'
MI300X = 'mi300x_container_torch_rccl'
MI300X_SITE = 'opt/venv/lib/python3.10/site-packages'
CONTAINER = ['docker', 'exec', 'trainops-train']


def link(name, cidr, mtu=9000):
    addr, plen = cidr.split('/')
    return {'ifname': name, 'mtu': mtu, 'operstate': 'UP',
            'addr_info': [{'family': 'inet', 'local': addr, 'prefixlen': int(plen)}]}


class NodeRunner:
    """``ip -j`` answers recorded for the node; the probe run for real, in this interpreter, with only the fixture's
    site-packages on its path (``-S``), its files read under the fixture's tree (the container's through
    ``docker exec``)."""

    def __init__(self, links, master, route, host_root, site, container_root=None):
        self.outputs = {('ip', '-j', 'addr', 'show'): json.dumps(links),
                        ('ip', '-j', 'route', 'get', master): json.dumps([route])}
        self.host_root, self.site, self.container_root = host_root, site, container_root
        self.probes = []
        self.env = {}  # the ranks' environment (LD_LIBRARY_PATH)

    def which(self, name):
        return None

    def run(self, argv):
        argv = list(argv)
        if tuple(argv) in self.outputs:
            return 0, self.outputs[tuple(argv)], ''
        root = self.host_root
        if argv[:3] == CONTAINER:
            assert self.container_root, 'no container on this node'
            argv, root = argv[3:], self.container_root
            assert tp.ROOT_FLAG not in argv  # in a container, / is the container's
            argv += [tp.ROOT_FLAG, root]
        if os.path.isabs(argv[0]) and not os.path.exists(argv[0]):
            raise FileNotFoundError(2, 'No such file or directory', argv[0])  # as run_command raises it
        assert argv[1] == '-c' and argv[2] == module_source(tp), argv[:2]
        self.probes.append(argv[3:])
        env = dict(dict((k, v) for k, v in os.environ.items() if k != 'LD_LIBRARY_PATH'),
                   PYTHONPATH=os.path.join(root, self.site), PYTHONDONTWRITEBYTECODE='1', **self.env)
        proc = subprocess.run([sys.executable, '-S'] + argv[1:], capture_output=True, text=True, env=env, check=False)
        return proc.returncode, proc.stdout, proc.stderr


def probe_for(runner, python='python3', prefix=None, import_torch=False, root='/'):
    return lambda vendor: nf.interpreter_probe(runner, python, import_torch, prefix, vendor, root)


# ------------------------------------------------------------------------------------------------
# A node whose host NCCL differs from torch's: the torch 2.4.1 wheel requires nvidia-nccl-cu12 2.20.5, the host has
# libnccl.so.2.23.4 (h100_8gpu_roce_frontend: RoCE v2 GIDs at index 3)
# ------------------------------------------------------------------------------------------------

FE_LINKS = [link('lo', '127.0.0.1/8', 65536), link('eno8np0', '10.0.0.21/24')] + [
    link('ens%dnp0' % (10 + i), '10.100.%d.21/24' % i) for i in range(8)]
FE_ROUTE = {'dst': '10.0.0.11', 'dev': 'eno8np0', 'prefsrc': '10.0.0.21'}


@pytest.fixture
def h100(tmp_path):
    root = fixture_tree.materialize(H100, tmp_path / 'host')
    return root, NodeRunner(FE_LINKS, '10.0.0.11', FE_ROUTE, root, H100_SITE)


def test_the_wheel_torch_requires_wins_over_the_hosts_nccl(h100):
    root, runner = h100
    facts = nf.node_facts(runner, '10.0.0.11', root=root, probe=probe_for(runner, root=root))
    lib = facts['library']
    assert (lib['name'], lib['version']) == ('nccl', '2.20.5')
    assert lib['source'] == 'python package nvidia-nccl-cu12, which torch 2.4.1 requires'
    assert lib['not_loaded'] == dict(version='2.23.4', file='/usr/lib/x86_64-linux-gnu/libnccl.so.2.23.4',
                                     read_in='host')
    # cheap: metadata only, torch not imported (no reported_error, no torch_error)
    assert runner.probes == [[tp.LIBRARY_FLAG, 'nvidia', tp.ROOT_FLAG, root]] and 'torch_error' not in lib
    res = compute(facts, dict(nproc_per_node=8))
    # NCCL 2.20.5 src/transport/net_ib.cc: NCCL_PARAM(IbGidIndex, "IB_GID_INDEX", 0), one index per process: the
    # rails' common RoCE v2 index 3 is pinned. With the host's 2.23.4 (a GID per port since 2.21) it stays unset,
    # and torch's 2.20.5 would use GID 0 (link-local, RoCE v1): the failure issue 26 names.
    assert res['env']['NCCL_IB_GID_INDEX'] == '3'
    assert res['library'] == dict(name='nccl', version='2.20.5', read_in='host',
                                  source='python package nvidia-nccl-cu12, which torch 2.4.1 requires')
    host_only = nf.node_facts(runner, '10.0.0.11', root=root)
    assert host_only['library']['version'] == '2.23.4'
    assert 'NCCL_IB_GID_INDEX' not in compute(host_only, dict(nproc_per_node=8))['env']


def test_without_a_library_to_ask_the_required_wheel_tells_not_the_compile_time_version(h100):
    root, runner = h100
    facts = nf.node_facts(runner, '10.0.0.11', root=root, probe=probe_for(runner, import_torch=True, root=root))
    # the stand-in torch maps no library (no libtorch_cuda.so built): torch.cuda.nccl.version() is only the version
    # torch was compiled with (torch/csrc/cuda/nccl.cpp NCCL_MAJOR/MINOR/PATCH), ranked after the wheel's metadata
    assert facts['library']['version'] == '2.20.5'
    assert facts['library']['source'] == 'python package nvidia-nccl-cu12, which torch 2.4.1 requires'
    assert facts['library']['runtime_error'].startswith('torch maps no NCCL and libtorch_cuda.so')
    assert runner.probes == [[tp.IMPORT_FLAG, tp.LIBRARY_FLAG, 'nvidia', tp.ROOT_FLAG, root]]


def test_a_torch_without_nccl_wheel_or_bundle_loads_the_system_library(h100):
    root, runner = h100
    site = os.path.join(root, H100_SITE)
    metadata_file = os.path.join(site, 'torch-2.4.1.dist-info', 'METADATA')
    with open(metadata_file) as handle:
        text = handle.read()
    with open(metadata_file, 'w') as handle:  # an NGC-style build: torch links the system's libnccl.so.2
        handle.write('\n'.join(line for line in text.splitlines() if 'nvidia-nccl' not in line) + '\n')
    facts = nf.node_facts(runner, '10.0.0.11', root=root, probe=probe_for(runner, root=root))
    assert facts['library']['version'] == '2.23.4'
    assert facts['library']['source'] == ('/usr/lib/x86_64-linux-gnu/libnccl.so.2.23.4, the system library torch '
                                          '2.4.1 loads (it bundles none)')


def test_nothing_cheap_tells_so_torch_is_asked_and_an_unknown_version_fails_the_decision(h100):
    root, runner = h100
    site = os.path.join(root, H100_SITE)
    os.remove(os.path.join(root, 'usr/lib/x86_64-linux-gnu/libnccl.so.2.23.4'))
    os.rename(os.path.join(site, 'nvidia_nccl_cu12-2.20.5.dist-info'), os.path.join(site, 'elsewhere'))
    facts = nf.node_facts(runner, '10.0.0.11', root=root, probe=probe_for(runner, root=root))
    # the wheel is gone and no library is mapped: the compile-time version, said so
    assert facts['library']['source'] == ('torch.cuda.nccl.version() of torch 2.4.1: the version torch was compiled '
                                          'with, not read from the loaded library')
    with open(os.path.join(site, 'torch/cuda/nccl.py'), 'a') as handle:  # a CPU-only build has no NCCL
        handle.write('\n\ndef version():  # noqa: F811\n    raise RuntimeError("no NCCL in this build")\n')
    facts = nf.node_facts(runner, '10.0.0.11', root=root, probe=probe_for(runner, root=root))
    assert facts['library']['version'] is None and facts['library']['source'] is None
    assert facts['library']['torch_error'] == 'RuntimeError: no NCCL in this build'
    # a decision that depends on the version is refused naming the knob, never guessed
    res = compute(facts, dict(nproc_per_node=8, channels=48))
    assert any('version is unknown' in e and 'trainops_nccl_library_version' in e for e in res['errors']), res


def test_an_interpreter_that_cannot_be_asked_leaves_the_version_unknown(h100):
    root, runner = h100
    facts = nf.node_facts(runner, '10.0.0.11', root=root, probe=probe_for(runner, python='/nonexistent/python',
                                                                          root=root))
    lib = facts['library']
    assert (lib['version'], lib['source']) == (None, None)  # the host's 2.23.4 is not what these ranks load
    assert 'No such file' in lib['probe_error']


# ------------------------------------------------------------------------------------------------
# The library the ranks' process maps, asked with ncclGetVersion (issue 42 item 6): real shared objects built with
# cc (native_libs.py), loaded by the stand-in torch as torch._C's link chain loads them
# ------------------------------------------------------------------------------------------------

WHEEL_NCCL = os.path.join(H100_SITE, 'nvidia/nccl/lib/libnccl.so.2')


def cuda_wheel(root, version='2.20.5', get_version=True, linked=True):
    """torch 2.4.1's chain: torch/lib/libtorch_cuda.so -> libnccl.so.2, DT_RUNPATH $ORIGIN/../../nvidia/nccl/lib,
    the nvidia-nccl-cu12 wheel's directory (``linked`` False: NCCL linked statically, no DT_NEEDED)."""
    site = os.path.join(root, H100_SITE)
    nccl = native.nccl_library(os.path.join(root, WHEEL_NCCL), version, get_version=get_version)
    native.torch_library(os.path.join(site, 'torch/lib/libtorch_cuda.so'), nccl if linked else None,
                         '$ORIGIN/../../nvidia/nccl/lib')
    return os.path.realpath(nccl)


def upgrade_wheel(root, version):
    """``pip install -U nvidia-nccl-cu12==<version>`` after torch: the dist-info and the library are the new ones."""
    site = os.path.join(root, H100_SITE)
    new = os.path.join(site, 'nvidia_nccl_cu12-%s.dist-info' % version)
    os.rename(os.path.join(site, 'nvidia_nccl_cu12-2.20.5.dist-info'), new)
    with open(os.path.join(new, 'METADATA')) as handle:
        text = handle.read().replace('Version: 2.20.5', 'Version: ' + version)
    with open(os.path.join(new, 'METADATA'), 'w') as handle:
        handle.write(text)
    return cuda_wheel(root, version)


def edit(path, old, new):
    with open(path) as handle:
        text = handle.read()
    assert old in text
    with open(path, 'w') as handle:
        handle.write(text.replace(old, new))


def probed_library(runner, root):
    facts = nf.node_facts(runner, '10.0.0.11', root=root, probe=probe_for(runner, root=root))
    return facts['library']


def test_the_torch_wheels_nccl_as_mapped(h100):
    root, runner = h100
    nccl = cuda_wheel(root)
    lib = probed_library(runner, root)
    assert (lib['version'], lib['source']) == (
        '2.20.5', 'ncclGetVersion() of %s, mapped after import torch (torch 2.4.1)' % nccl)
    assert 'runtime_error' not in lib


REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', '..')


def test_the_standalone_command_in_the_docs(h100):
    # docs/nccl.md and the module's docstring: `python3 plugins/module_utils/_torch_probe.py --library nvidia`, from
    # the repository root, with nothing but the standard library and torch (-S: no site-packages, so no Ansible)
    root, dummy = h100
    nccl = cuda_wheel(root, '2.23.4')
    env = dict(dict((k, v) for k, v in os.environ.items() if k not in ('LD_LIBRARY_PATH', 'PYTHONPATH')),
               PYTHONPATH=os.path.join(root, H100_SITE), PYTHONDONTWRITEBYTECODE='1')
    proc = subprocess.run([sys.executable, '-S', 'plugins/module_utils/_torch_probe.py', '--library', 'nvidia'],
                          cwd=REPO, env=env, capture_output=True, text=True, check=True)
    runtime = json.loads(proc.stdout)['library']['runtime']
    assert runtime == dict(version='2.23.4', path=nccl, how='mapped after import torch', error=None,
                           told_by='ncclGetVersion()')
    assert json.loads(proc.stdout)['library']['reported'] == '2.20.5'  # torch.cuda.nccl.version(): compile time


def test_a_newer_nvidia_nccl_wheel_is_the_one_reported(h100):
    root, runner = h100
    nccl = upgrade_wheel(root, '2.23.4')
    lib = probed_library(runner, root)
    # torch 2.4.1 still says 2.20.5 (compiled with it): the process maps the upgraded wheel's library
    assert (lib['version'], lib['source']) == (
        '2.23.4', 'ncclGetVersion() of %s, mapped after import torch (torch 2.4.1)' % nccl)
    res = compute(nf.node_facts(runner, '10.0.0.11', root=root, probe=probe_for(runner, root=root)),
                  dict(nproc_per_node=8))
    # NCCL >= 2.21 picks a GID per port: NCCL_IB_GID_INDEX stays unset (the compile-time 2.20.5 would pin 3)
    assert 'NCCL_IB_GID_INDEX' not in res['env']


def test_a_library_on_ld_library_path_is_the_one_reported(h100):
    root, runner = h100
    cuda_wheel(root)
    site_lib = native.nccl_library(os.path.join(root, 'opt/nccl-2.27.3/lib/libnccl.so.2'), '2.27.3')
    # DT_RUNPATH is searched after LD_LIBRARY_PATH (ld.so(8)): the ranks' LD_LIBRARY_PATH wins over the wheel
    runner.env = dict(LD_LIBRARY_PATH=os.path.dirname(site_lib))
    lib = probed_library(runner, root)
    assert (lib['version'], lib['source']) == (
        '2.27.3', 'ncclGetVersion() of %s, mapped after import torch (torch 2.4.1)' % os.path.realpath(site_lib))


def test_a_lazily_loaded_nccl_is_loaded_as_torch_loads_it(h100):
    root, runner = h100
    nccl = cuda_wheel(root)
    torch_dir = os.path.join(root, H100_SITE, 'torch')
    # a build that loads NCCL when torch.cuda.nccl is first used, not at import
    edit(os.path.join(torch_dir, '__init__.py'), 'if os.path.exists(_LINKED):', 'if False:')
    with open(os.path.join(torch_dir, 'cuda', 'nccl.py'), 'a') as handle:
        handle.write('\n\nimport ctypes, os  # noqa: E401,E402\n\n\ndef version():  # noqa: F811\n'
                     '    ctypes.CDLL(os.path.join(os.path.dirname(__file__), "..", "lib", "libtorch_cuda.so"))\n'
                     '    return (2, 20, 5)\n')
    lib = probed_library(runner, root)
    assert lib['source'] == 'ncclGetVersion() of %s, mapped after torch.cuda.nccl was used (torch 2.4.1)' % nccl
    # a build that maps it only with a communicator: the probe loads what libtorch_cuda.so names (DT_NEEDED),
    # found as the loader finds it, and creates no communicator
    edit(os.path.join(torch_dir, 'cuda', 'nccl.py'), '    ctypes.CDLL(', '    (')
    lib = probed_library(runner, root)
    assert (lib['version'], lib['source']) == (
        '2.20.5', 'ncclGetVersion() of %s, loaded by the probe as libtorch_cuda.so links it (torch 2.4.1)' % nccl)


def test_a_library_without_nccl_get_version_is_read_from_its_banner(h100):
    root, runner = h100
    nccl = cuda_wheel(root, '2.21.5', get_version=False)
    lib = probed_library(runner, root)
    assert (lib['version'], lib['source']) == (
        '2.21.5', 'its version string of %s, mapped after import torch (torch 2.4.1)' % nccl)


def test_statically_linked_nccl_falls_back_to_the_compile_time_version_said_so(h100):
    root, runner = h100
    cuda_wheel(root, linked=False)
    site = os.path.join(root, H100_SITE)
    os.remove(os.path.join(root, 'usr/lib/x86_64-linux-gnu/libnccl.so.2.23.4'))
    edit(os.path.join(site, 'torch-2.4.1.dist-info', 'METADATA'), 'Requires-Dist: nvidia-nccl-cu12', 'Requires-Dist: x')
    lib = probed_library(runner, root)
    assert lib['version'] == '2.20.5'
    assert lib['source'].endswith('the version torch was compiled with, not read from the loaded library')
    assert lib['runtime_error'] == ('torch maps no NCCL and libtorch_cuda.so, libtorch_global_deps.so link none '
                                    '(linked statically, or a CPU build)')


@pytest.mark.parametrize('rpath, first', [(False, 'ld_library_path'), (True, 'wheel')])
def test_the_library_torch_links_is_searched_as_the_loader_searches(tmp_path, monkeypatch, rpath, first):
    wheel = native.nccl_library(str(tmp_path / 'nvidia/nccl/lib/libnccl.so.2'), '2.20.5')
    other = native.nccl_library(str(tmp_path / 'ld_library_path/libnccl.so.2'), '2.27.3')
    torch_lib = str(tmp_path / 'torch' / 'lib')
    native.torch_library(os.path.join(torch_lib, 'libtorch_cuda.so'), wheel, '$ORIGIN/../../nvidia/nccl/lib',
                         rpath=rpath)
    dynamic = tp.elf_dynamic(os.path.join(torch_lib, 'libtorch_cuda.so'))
    assert 'libnccl.so.2' in dynamic['needed']
    assert dynamic['rpath' if rpath else 'runpath'] == ['$ORIGIN/../../nvidia/nccl/lib']
    monkeypatch.setenv('LD_LIBRARY_PATH', os.path.dirname(other))
    found, linker = tp.linked_library('nvidia', torch_lib)
    # DT_RPATH (without DT_RUNPATH) comes before LD_LIBRARY_PATH, DT_RUNPATH after it
    expected = {'wheel': os.path.join(torch_lib, '../../nvidia/nccl/lib/libnccl.so.2'), 'ld_library_path': other}
    assert (found, linker) == (expected[first], 'libtorch_cuda.so')
    assert tp.nccl_get_version(found) == ({'wheel': '2.20.5', 'ld_library_path': '2.27.3'}[first], None)
    monkeypatch.delenv('LD_LIBRARY_PATH')
    os.remove(wheel)
    assert tp.linked_library('nvidia', torch_lib) == ('libnccl.so.2', 'libtorch_cuda.so')  # the loader's cache


def test_what_is_not_an_elf_shared_object_is_not_read(tmp_path):
    text = tmp_path / 'libtorch_cuda.so'
    text.write_text('ELF NCCL version 2.20.5+cuda12.4')
    assert tp.elf_dynamic(str(text)) is None and tp.elf_dynamic(str(tmp_path / 'absent.so')) is None
    assert tp.linked_library('nvidia', str(tmp_path)) == (None, None)
    assert tp.nccl_get_version(str(text))[0] is None
    assert tp.library_version_string(str(text)) == '2.20.5'
    maps = tmp_path / 'maps'
    maps.write_text('7f00-7f01 r-xp 00000000 08:01 1 /opt/x/libnccl.so.2.23.4 (deleted)\n'
                    '7f01-7f02 r--p 00000000 08:01 2 /opt/x/libnccl-net.so\n7f02-7f03 rw-p 00000000 00:00 0 \n'
                    '7f03-7f04 r-xp 00000000 08:01 3 /opt/rocm/lib/librccl.so.1.0\n')
    assert tp.mapped_libraries('nvidia', str(maps)) == ['/opt/x/libnccl.so.2.23.4']
    assert tp.mapped_libraries('amd', str(maps)) == ['/opt/rocm/lib/librccl.so.1.0']


def test_probe_output_is_checked_not_trusted():
    data = dict(reported='2.21.5; rm -rf /', torch=dict(version='2.4.1', nccl_wheel='evil', bundled=['../x.so']),
                runtime=dict(version='2.27.3', path='relative/libnccl.so.2', how='mapped after import torch',
                             told_by='ncclGetVersion()'),
                wheels={'nvidia-nccl-cu12': '2.20.5\n'}, files=dict(version='2.23.4', file='x' * 400),
                aws_ofi_nccl='relative/lib.so', dmabuf_kernel=dict(CONFIG_PCI_P2PDMA='yes'))
    lib = nf.library_facts('/', 'nvidia', data)
    assert (lib['version'], lib['source'], lib['aws_ofi_nccl']) == (None, None, None)
    kernel = nf.library_facts('/', 'amd', data)['dmabuf_kernel']
    assert kernel == {'CONFIG_DMABUF_MOVE_NOTIFY': False, 'CONFIG_PCI_P2PDMA': False}


@pytest.mark.parametrize('value, text', [((2, 21, 5), '2.21.5'), ((2, 27, 3, 'rc1'), '2.27.3'), (22105, '2.21.5'),
                                         (2708, '2.7.8'), (None, None), ('2.21.5', None), (True, None)])
def test_version_text_reads_what_torch_cuda_nccl_version_returns(value, text):
    # torch/cuda/nccl.py: a (major, minor, patch[, suffix]) tuple; older torch returned NCCL_VERSION_CODE
    # (nccl.h: major * 10000 + minor * 100 + patch since 2.9, major * 1000 + minor * 100 + patch before)
    assert tp.version_text(value) == text


# ------------------------------------------------------------------------------------------------
# An MI300X node whose ranks run in a container: torch 2.5.1+rocm6.2 bundles RCCL 2.20.5 in torch/lib, the host has
# ROCm 6.3's rccl.h (2.21.5) and a /boot/config with both dma-buf options; the container has no /boot
# ------------------------------------------------------------------------------------------------

MI_RAILS = ['enp6s0np0', 'enp35s0np0', 'enp57s0np0', 'enp93s0np0', 'enp160s0np0', 'enp176s0np0', 'enp192s0np0',
            'enp224s0np0']
MI_LINKS = [link('lo', '127.0.0.1/8', 65536), link('enp49s0f0np0', '10.0.0.12/24')] + [
    link(n, '10.200.%d.11/24' % i) for i, n in enumerate(MI_RAILS)]
MI_ROUTE = {'dst': '10.0.0.11', 'dev': 'enp49s0f0np0', 'prefsrc': '10.0.0.12'}


@pytest.fixture
def mi300x(tmp_path):
    host = fixture_tree.materialize(MI300X, tmp_path / 'host')
    container = fixture_tree.materialize(MI300X, tmp_path / 'container', part='container')
    return host, container, NodeRunner(MI_LINKS, '10.0.0.11', MI_ROUTE, host, MI300X_SITE, container)


def in_container(runner, host, **kwargs):
    return nf.node_facts(runner, '10.0.0.11', root=host, probe=probe_for(runner, prefix=CONTAINER, **kwargs),
                         where='container trainops-train')


def test_container_rccl_is_torchs_and_dmabuf_is_judged_inside(mi300x):
    host, _container, runner = mi300x
    facts = in_container(runner, host)
    lib = facts['library']
    # ROCm docs, RCCL usage tips ("Using RCCL and CPX in PyTorch"): a wheel's torch/lib/librccl.so "is the version
    # of RCCL that is packaged as part of ROCm version 6.2"; RCCL CHANGELOG: RCCL 2.20.5 for ROCm 6.2.0
    assert (lib['name'], lib['version'], lib['rocm'], lib['read_in']) == ('rccl', '2.20.5', '6.2',
                                                                          'container trainops-train')
    assert lib['source'] == 'the RCCL of ROCm 6.2 that torch 2.5.1+rocm6.2 bundles (in container trainops-train)'
    assert runner.probes == [[tp.LIBRARY_FLAG, 'amd', tp.ROOT_FLAG, runner.container_root]]
    # RCCL src/misc/rocmwrap.cc initOnceFunc opens /boot/config-<release> in the ranks' process: inside the
    # container, which has no /boot, so it cannot confirm CONFIG_DMABUF_MOVE_NOTIFY / CONFIG_PCI_P2PDMA
    gdr = facts['rdma']['gpudirect']
    assert (gdr['dma_buf'], gdr['dmabuf_kernel'], gdr['dmabuf_read_in'], gdr['path']) == (
        True, None, 'container trainops-train', None)
    res = compute(facts, dict(nproc_per_node=8))
    assert 'NCCL_DMABUF_ENABLE' not in res['env']
    assert any('inside container trainops-train, where it cannot be read: mount /boot read-only' in w
               for w in res['warnings']), res['warnings']
    # the same node judged on the host (no container) reads the host's /boot and enables dma-buf
    on_host = nf.node_facts(runner, '10.0.0.11', root=host)
    assert on_host['rdma']['gpudirect']['dmabuf_read_in'] == 'host'
    assert on_host['library']['version'] == '2.21.5'  # the host's rccl.h: not what the container's torch loads
    assert compute(on_host, dict(nproc_per_node=8))['env']['NCCL_DMABUF_ENABLE'] == '1'


def test_container_with_boot_mounted_enables_dmabuf(mi300x):
    host, container, runner = mi300x
    os.makedirs(os.path.join(container, 'boot'))
    with open(os.path.join(host, 'boot', 'config-6.8.0-45-generic')) as src, \
            open(os.path.join(container, 'boot', 'config-6.8.0-45-generic'), 'w') as dst:
        dst.write(src.read())  # the container role's /boot:/boot:ro on AMD nodes
    facts = in_container(runner, host)
    assert facts['rdma']['gpudirect']['path'] == 'dma_buf'
    res = compute(facts, dict(nproc_per_node=8))
    assert res['env']['NCCL_DMABUF_ENABLE'] == '1'
    assert 'read where RCCL reads it (container trainops-train)' in res['reasons']['NCCL_DMABUF_ENABLE']


def swap_rccl(container, version):
    """A librccl.so of ``version`` copied over torch/lib's, which libtorch_hip.so links (DT_RUNPATH $ORIGIN)."""
    site = os.path.join(container, MI300X_SITE)
    rccl = native.nccl_library(os.path.join(site, 'torch/lib/librccl.so'), version, vendor='amd')
    native.torch_library(os.path.join(site, 'torch/lib/libtorch_hip.so'), rccl, '$ORIGIN')
    return os.path.realpath(rccl)


def test_rccl_2_28_in_a_container_without_boot_reads_the_kernel_symbols(mi300x):
    host, container, runner = mi300x
    swap_rccl(container, '2.28.3')
    facts = in_container(runner, host)
    assert facts['library']['version'] == '2.28.3'
    # rocm-systems projects/rccl src/misc/rocmwrap.cc: no config file opens in the container (no /boot, no
    # /proc/config.gz, no module directories), so RCCL 2.28 reads the host's /proc/kallsyms, which the container sees
    gdr = facts['rdma']['gpudirect']
    assert (gdr['dmabuf_kernel'], gdr['dmabuf_read_in']) == (None, 'container trainops-train')
    assert gdr['dmabuf_kernel_search'] == dict(file='/proc/kallsyms', options={
        'CONFIG_DMABUF_MOVE_NOTIFY': True, 'CONFIG_PCI_P2PDMA': True})
    res = compute(facts, dict(nproc_per_node=8))
    assert res['env']['NCCL_DMABUF_ENABLE'] == '1' and not [w for w in res['warnings'] if 'mount /boot' in w]
    assert res['reasons']['NCCL_DMABUF_ENABLE'].endswith(
        '/proc/kallsyms has CONFIG_DMABUF_MOVE_NOTIFY and CONFIG_PCI_P2PDMA (the symbols dma_buf_move_notify, '
        'pci_p2pdma): the first place RCCL 2.28 and later read, read where RCCL reads it (container trainops-train)')


def test_a_replaced_bundled_rccl_is_the_one_asked(mi300x):
    host, container, runner = mi300x
    site = os.path.join(container, MI300X_SITE)
    # RCCL's docs tell CPX users to copy a newer librccl.so over torch/lib's: torch 2.5.1+rocm6.2 still reports the
    # RCCL it was compiled with (2.20.5)
    rccl = swap_rccl(container, '2.22.3')
    facts = in_container(runner, host)
    assert facts['library']['version'] == '2.22.3'
    assert facts['library']['source'] == ('ncclGetVersion() of %s, mapped after import torch (torch 2.5.1+rocm6.2) '
                                          '(in container trainops-train)' % rccl)
    # HIP of the wheel's ROCm: torch.version.hip
    assert facts['library']['rocm'] == '6.2'
    # not asked: a replaced library whose version cannot be read is unknown, never the compile-time 2.20.5
    os.remove(os.path.join(site, 'torch/lib/libtorch_hip.so'))
    assert in_container(runner, host)['library']['version'] is None


def test_channel_limit_of_the_container_rccl_on_two_nodes(mi300x):
    host, _container, runner = mi300x
    facts = in_container(runner, host)
    # RCCL 2.20.5 src/graph/topo.cc ncclTopoPostset: at most 64 channels on more than one node; the host's rccl.h
    # would not change that, but the version recorded is the container's
    res = compute(facts, dict(nproc_per_node=8, nnodes=2, channels=128))
    assert any('channels 128' in e and '64' in e for e in res['errors']), res['errors']
