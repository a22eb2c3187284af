"""The pure parts of hack/lab.py's package hack/trainops_lab/ (no root, nothing on the machine changes):
plan() and the nodes it computes, the files `up` renders (slurm.conf, gres.conf, slurmdbd.conf, hosts.yml,
the Slurm allocation's source, lab.json, /etc/hosts, sshd_config) and the command line."""
import argparse
import ipaddress
import json
import os
import sys
from pathlib import Path

import pytest
import yaml

HACK = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))),
                    'hack')
if HACK not in sys.path:
    sys.path.insert(0, HACK)

from trainops_lab import cli, core, inventory, plan as plan_mod, slurm, up as up_mod  # noqa: E402
from trainops_lab.core import LabError  # noqa: E402
from trainops_lab.plan import Shape, hosts_file, plan  # noqa: E402

INV = Path('/nonexistent/inventories/lab')


def lab(count=4, mgmt=False, **shape):
    return plan(count, core.DEFAULT_SUBNET, core.DEFAULT_MGMT_SUBNET if mgmt else None,
                Shape(mgmt_net=mgmt, **shape))


# --- plan: names, NICs, addresses --------------------------------------------------------------

def test_plan_names_and_addresses_of_a_4_node_lab():
    net, mgmt, nodes = lab(5)
    assert str(net) == '10.77.0.0/24' and mgmt is None
    assert [n.name for n in nodes] == ['lab-node01', 'lab-node02', 'lab-node03', 'lab-node04', 'lab-node05']
    assert [n.ns for n in nodes][:2] == ['trainops-lab-node01', 'trainops-lab-node02']
    # NIC names cycle as docs/contributing/lab.md says: node 5 has ens5 again
    assert [n.ifname for n in nodes] == ['ens5', 'enp1s0f0', 'eth1', 'bond0.2093', 'ens5']
    assert [n.address for n in nodes] == ['10.77.0.11', '10.77.0.12', '10.77.0.13', '10.77.0.14', '10.77.0.15']
    assert [n.ssh_address for n in nodes] == [n.address for n in nodes]
    assert nodes[0].mac == '02:74:6c:00:00:01' and nodes[3].peer == 'vnode04'
    assert all(len(n.nics) == 1 and n.mgmt_address is None for n in nodes)
    assert str(nodes[1].state) == '/var/lib/trainops-lab/node02'
    assert nodes[0].node_root == '/srv/trainops' and nodes[0].home == '/root'


def test_plan_with_a_management_network_gives_distinct_subnets_and_ssh_over_eno1():
    net, mgmt, nodes = lab(4, mgmt=True)
    assert (str(net), str(mgmt)) == ('10.77.0.0/24', '10.78.0.0/24')
    assert not net.overlaps(mgmt)
    node = nodes[2]
    assert (node.address, node.mgmt_address, node.ssh_address) == ('10.77.0.13', '10.78.0.13', '10.78.0.13')
    assert [(nic.ifname, nic.bridge, nic.address) for nic in node.nics] == [
        ('eth1', 'br0', '10.77.0.13'), ('eno1', 'brmgmt', '10.78.0.13')]
    assert node.nics[1].mac == '02:74:6c:01:00:03' and node.nics[1].peer == 'vmgmt03'
    assert all(ipaddress.ip_address(n.address) in net and ipaddress.ip_address(n.ssh_address) in mgmt for n in nodes)


@pytest.mark.parametrize('count, subnet, mgmt, message', [
    (0, '10.77.0.0/24', None, '--nodes must be at least 1'),
    (100, '10.77.0.0/24', None, 'at most 99 nodes'),
    (4, 'fd00::/64', None, '--subnet must be IPv4'),
    (8, '10.77.0.0/28', None, '--subnet 10.77.0.0/28 is too small for 8 nodes'),
    (4, '10.77.0.0/24', '10.77.0.0/25', '--mgmt-subnet 10.77.0.0/25 overlaps the training subnet 10.77.0.0/24'),
])
def test_plan_refuses_bad_counts_and_subnets(count, subnet, mgmt, message):
    with pytest.raises(LabError, match='^' + message.replace('(', r'\(')):
        plan(count, subnet, mgmt)


def test_shape_options_describe_and_saved_state_agree():
    shape = Shape(True, 'trainer', True, 'docker', True)
    assert shape.options() == ['--shared-home', '--user', 'trainer', '--mgmt-net', '--engine', 'docker', '--slurm']
    assert shape.describe() == 'shared home, user trainer, mgmt net, engine docker, slurm'
    saved = Shape.saved({'shape': shape.as_dict(), 'engine': 'docker', 'slurm': True})
    assert saved.as_dict() == shape.as_dict()
    assert Shape.saved({}).describe() == 'plain' and Shape().options() == []


def test_shared_home_moves_the_homes_and_the_node_root():
    _net, _mgmt, nodes = lab(2, shared_home=True, user='trainer')
    node = nodes[0]
    assert str(node.home_dir) == '/var/lib/trainops-lab/home'
    assert (node.home, str(node.home_on_host), node.node_root) == (
        '/home/trainer', '/var/lib/trainops-lab/home/trainer', '/home/trainer/.trainops')
    _net, _mgmt, nodes = lab(1, shared_home=True)
    assert [(str(source), target) for source, target in nodes[0].mounts()][:2] == [
        ('/var/lib/trainops-lab/home', '/home'), ('/var/lib/trainops-lab/home/root', '/root')]


def test_mount_lines_keep_a_needed_path_under_the_mount_point(monkeypatch):
    monkeypatch.setattr(plan_mod, 'needed_paths', lambda: [Path('/root/src/repo')])
    assert plan_mod.mount_lines('/var/lib/trainops-lab/home/root', '/root') == [
        'mkdir -p /var/lib/trainops-lab/home/root/src/repo',
        'mount --bind /root/src/repo /var/lib/trainops-lab/home/root/src/repo',
        'mount --rbind /var/lib/trainops-lab/home/root /root']
    assert plan_mod.mount_lines('/var/lib/trainops-lab/node01/tmp', '/tmp') == [
        'mount --bind /var/lib/trainops-lab/node01/tmp /tmp']


def test_hosts_file_and_sshd_config_of_a_node():
    net, _mgmt, nodes = lab(2, mgmt=True)
    text = hosts_file(net, nodes, nodes[1])
    assert text.splitlines()[0] == '# Generated by hack/lab.py for lab-node02'
    assert '10.77.0.1\ttrainops-lab-controller' in text.splitlines()
    # the name is the management address (as on real clusters), NAME-train the training one
    assert '10.78.0.12\tlab-node02' in text.splitlines() and '10.77.0.12\tlab-node02-train' in text.splitlines()
    config = nodes[0].sshd_config().splitlines()
    assert 'ListenAddress 10.78.0.11' in config and 'PermitRootLogin prohibit-password' in config
    assert config[-2:] == ['Match User root', '    AuthorizedKeysFile /var/lib/trainops-lab/authorized_keys']


# --- Slurm ---------------------------------------------------------------------------------------

def conf_lines(text, key):
    return [line for line in text.splitlines() if line.startswith(key + '=')]


def test_slurm_conf_of_a_4_node_lab_has_gres_per_node_and_one_partition():
    _net, _mgmt, nodes = lab(4, slurm=True)
    text = slurm.render_slurm_conf(nodes, '10.77.0.1')
    assert conf_lines(text, 'NodeName') == [
        'NodeName=lab-node01 NodeAddr=10.77.0.11 CPUs=2 RealMemory=1024 Gres=gpu:labgpu:4 State=UNKNOWN',
        'NodeName=lab-node02 NodeAddr=10.77.0.12 CPUs=2 RealMemory=1024 Gres=gpu:labgpu:4 State=UNKNOWN',
        'NodeName=lab-node03 NodeAddr=10.77.0.13 CPUs=2 RealMemory=1024 Gres=gpu:labgpu:4 State=UNKNOWN',
        # every fourth node has 2 GPUs (docs/contributing/lab.md: a cluster whose nodes differ)
        'NodeName=lab-node04 NodeAddr=10.77.0.14 CPUs=2 RealMemory=1024 Gres=gpu:labgpu:2 State=UNKNOWN']
    assert conf_lines(text, 'PartitionName') == [
        'PartitionName=lab Nodes=lab-node01,lab-node02,lab-node03,lab-node04 Default=YES MaxTime=INFINITE State=UP']
    assert conf_lines(text, 'SlurmctldHost') == ['SlurmctldHost=%s(10.77.0.1)' % slurm.slurm_controller_name()]
    for setting in ('GresTypes=gpu', 'SelectType=select/cons_tres', 'SelectTypeParameters=CR_CPU',
                    'TaskPlugin=task/affinity', 'ProctrackType=proctrack/linuxproc', 'AccountingStorageTRES=gres/gpu',
                    'AccountingStorageType=accounting_storage/slurmdbd', 'AccountingStoragePort=6819',
                    'ClusterName=trainops-lab', 'AuthInfo=socket=/var/lib/trainops-lab/slurm/munge/munge.socket',
                    'SlurmdSpoolDir=/var/lib/trainops-lab/slurm/%n'):
        assert setting in text.splitlines()
    # with a cgroup v1 devices hierarchy, task/cgroup confines the steps to their GPUs (cgroup.conf)
    assert 'TaskPlugin=task/affinity,task/cgroup' in slurm.render_slurm_conf(nodes, '10.77.0.1', '/sys/fs/cgroup/devices')
    assert {'CgroupPlugin=cgroup/v1', 'ConstrainDevices=yes', 'ConstrainCores=no'} <= set(
        slurm.render_cgroup_conf().splitlines())


def test_slurm_conf_with_a_management_network_addresses_the_nodes_there():
    _net, _mgmt, nodes = lab(2, mgmt=True, slurm=True)
    assert [line.split()[1] for line in conf_lines(slurm.render_slurm_conf(nodes, '10.78.0.1'), 'NodeName')] == [
        'NodeAddr=10.78.0.11', 'NodeAddr=10.78.0.12']


def test_gres_conf_names_each_nodes_stand_in_devices():
    _net, _mgmt, nodes = lab(5, slurm=True)
    lines = slurm.render_gres_conf(nodes).splitlines()
    assert lines[1] == 'AutoDetect=off'
    assert lines[2:] == ['NodeName=lab-node0%d Name=gpu Type=labgpu File=/var/lib/trainops-lab/slurm/dev/lab-node0%d/'
                         'nvidia[0-%d]' % (i, i, 1 if i == 4 else 3) for i in range(1, 6)]
    assert [p.name for p in slurm.slurm_gpu_files('lab-node08')] == ['nvidia0', 'nvidia1']
    assert [slurm.slurm_node_gpus('lab-node%02d' % i) for i in (1, 4, 8, 12, 13)] == [4, 2, 2, 2, 4]


def test_slurmdbd_conf_holds_the_password_and_the_labs_database():
    lines = slurm.render_slurmdbd_conf('s3cret').splitlines()
    assert 'StoragePass=s3cret' in lines and 'DbdPort=6819' in lines and 'StoragePort=6820' in lines
    assert 'StorageLoc=slurm_acct_db' in lines and 'DbdAddr=127.0.0.1' in lines


@pytest.mark.parametrize('state, usable', [('idle', True), ('MIXED', True), ('allocated', True), ('down*', False),
                                           ('drained', False), ('', False)])
def test_slurm_usable(state, usable):
    assert slurm.slurm_usable(state) is usable


# --- inventory -----------------------------------------------------------------------------------

def test_hosts_yml_is_yaml_with_the_nodes_and_their_vars():
    net, _mgmt, nodes = lab(4)
    data = yaml.safe_load(inventory.render_hosts_yml(INV, net, nodes, 4))
    group = data['trainops_nodes']
    assert list(group['hosts']) == ['lab-node01', 'lab-node02', 'lab-node03', 'lab-node04']
    assert group['hosts']['lab-node01'] == {'ansible_host': '10.77.0.11', 'trainops_lab_ifname': 'ens5',
                                            'trainops_master': True}
    assert group['hosts']['lab-node04'] == {'ansible_host': '10.77.0.14', 'trainops_lab_ifname': 'bond0.2093'}
    variables = group['vars']
    assert variables['ansible_user'] == 'root' and variables['ansible_connection'] == 'ansible.builtin.ssh'
    assert variables['ansible_ssh_private_key_file'] == str(INV / 'id_ed25519')
    assert 'UserKnownHostsFile=%s' % (INV / 'known_hosts') in variables['ansible_ssh_common_args']
    assert variables['ansible_python_interpreter'] == str(core.REPO / '.venv' / 'bin' / 'python')
    assert (variables['trainops_master_addr'], variables['trainops_training_network']) == ('10.77.0.11', '10.77.0.0/24')
    assert variables['trainops_node_root'] == '/srv/trainops' and variables['trainops_nproc_per_node'] == 2
    assert variables['trainops_lab_shape'] == {'shared_home': False, 'user': 'root', 'mgmt_net': False}
    assert 'trainops_lab_engine' not in variables


def test_hosts_yml_of_a_shaped_lab():
    net, _mgmt, nodes = lab(2, mgmt=True, shared_home=True, user='trainer')
    for node in nodes:
        node.engine = 'docker'
    text = inventory.render_hosts_yml(INV, net, nodes, 2)
    assert '--shared-home --user trainer --mgmt-net' in text.splitlines()[1]
    variables = yaml.safe_load(text)['trainops_nodes']['vars']
    assert yaml.safe_load(text)['trainops_nodes']['hosts']['lab-node02']['ansible_host'] == '10.78.0.12'
    # SSH over the management network, training (master address, network) over the training one
    assert (variables['trainops_master_addr'], variables['trainops_training_network']) == ('10.77.0.11', '10.77.0.0/24')
    assert variables['ansible_user'] == 'trainer' and 'trainops_node_root' not in variables
    assert variables['trainops_lab_shape'] == {'shared_home': True, 'user': 'trainer', 'mgmt_net': True}
    assert variables['trainops_lab_engine'] == 'docker'


def test_slurm_source_is_yaml_with_address_maps():
    net, _mgmt, nodes = lab(2, mgmt=True, slurm=True)
    data = yaml.safe_load(inventory.render_slurm_source(INV, net, nodes))
    assert data['plugin'] == 'trainops.multinode.slurm' and data['strict'] is True
    assert data['vars']['trainops_lab_ssh_addresses'] == {'lab-node01': '10.78.0.11', 'lab-node02': '10.78.0.12'}
    assert data['vars']['trainops_lab_addresses'] == {'lab-node01': '10.77.0.11', 'lab-node02': '10.77.0.12'}
    assert data['compose']['ansible_host'] == 'trainops_lab_ssh_addresses[inventory_hostname]'


def test_lab_json_records_the_shape_the_nodes_and_slurm():
    net, mgmt, nodes = lab(3, mgmt=True, slurm=True)
    data = json.loads(inventory.render_lab_json(INV, net, mgmt, nodes))
    assert data['shape'] == {'shared_home': False, 'user': 'root', 'mgmt_net': True, 'engine': 'none', 'slurm': True}
    assert (data['subnet'], data['mgmt_subnet']) == ('10.77.0.0/24', '10.78.0.0/24')
    assert data['controller'] == {'ifname': 'trainops-lab0', 'address': '10.77.0.1', 'mgmt_ifname': 'trainops-lab1',
                                  'mgmt_address': '10.78.0.1'}
    assert [(n['name'], n['ssh_address'], n['master']) for n in data['nodes']] == [
        ('lab-node01', '10.78.0.11', True), ('lab-node02', '10.78.0.12', False), ('lab-node03', '10.78.0.13', False)]
    assert data['slurm']['conf'] == '/var/lib/trainops-lab/slurm/slurm.conf' and data['slurm']['partition'] == 'lab'
    assert data['authorized_keys'] == '/var/lib/trainops-lab/authorized_keys' and 'engine' not in data


@pytest.mark.parametrize('value, text', [(True, 'true'), (False, 'false'), (3, '3'), ('a b', '"a b"'),
                                         (Path('/x'), '"/x"')])
def test_yq(value, text):
    assert inventory.yq(value) == text


# --- the command line ----------------------------------------------------------------------------

@pytest.fixture
def commands(monkeypatch):
    """main() with up/down/status replaced: the arguments each got."""
    seen = []
    for name in ('up', 'down', 'status'):
        monkeypatch.setattr(cli, name, lambda args, name=name: seen.append((name, args)) or 0)
    monkeypatch.setattr(core, 'VERBOSE', False)
    return seen


def test_cli_parses_up_with_every_shape(commands):
    assert cli.main(['-v', 'up', '--nodes', '4', '--slurm', '--mgmt-net', '--user', 'trainer', '--shared-home',
                     '--engine', 'docker', '--mgmt-subnet', '10.79.0.0/24']) == 0
    (name, args), = commands
    assert name == 'up' and core.VERBOSE is True
    assert (args.nodes, args.slurm, args.mgmt_net, args.user, args.shared_home, args.engine, args.mgmt_subnet) == (
        4, True, True, 'trainer', True, 'docker', '10.79.0.0/24')
    assert (args.subnet, args.timeout, args.inventory_dir) == (None, 60, str(core.DEFAULT_INVENTORY_DIR))


def test_cli_takes_global_options_after_the_command_too(commands):
    assert cli.main(['status', '--json', '--inventory-dir', '/tmp/inv', '-v']) == 0
    (name, args), = commands
    assert (name, args.json, args.inventory_dir, args.verbose) == ('status', True, '/tmp/inv', True)


@pytest.mark.parametrize('argv', [[], ['bogus'], ['up', '--engine', 'podman'], ['up', '--nodes', 'four']])
def test_cli_rejects_bad_arguments(commands, argv):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2 and commands == []


@pytest.mark.parametrize('message, rc', [('must run as root: ...', 2), ('lab-node01: sshd did not start', 1)])
def test_cli_prints_a_lab_error_and_exits(monkeypatch, capsys, message, rc):
    def fail(_args):
        raise LabError(message)
    monkeypatch.setattr(cli, 'down', fail)
    assert cli.main(['down']) == rc
    assert capsys.readouterr().err == 'hack/lab.py down: error: %s\n' % message


def up_args(**options):
    return argparse.Namespace(**dict({'engine': None, 'user': None, 'shared_home': False, 'mgmt_net': False,
                                      'slurm': False, 'mgmt_subnet': None}, **options))


def test_requested_shape_defaults_and_keeps_the_running_management_subnet():
    shape, mgmt = up_mod.requested_shape(up_args(), {})
    assert (shape.describe(), mgmt) == ('plain', None)
    shape, mgmt = up_mod.requested_shape(up_args(mgmt_net=True), {})
    assert (shape.describe(), mgmt) == ('mgmt net', '10.78.0.0/24')
    assert up_mod.requested_shape(up_args(mgmt_net=True), {'mgmt_subnet': '10.90.0.0/24'})[1] == '10.90.0.0/24'


@pytest.mark.parametrize('options, message', [
    ({'mgmt_subnet': '10.79.0.0/24'}, '--mgmt-subnet needs --mgmt-net'),
    ({'user': 'Trainer'}, "--user 'Trainer': not a user name"),
    ({'user': '1abc'}, "--user '1abc': not a user name"),
])
def test_requested_shape_refuses_bad_options_before_touching_anything(options, message):
    with pytest.raises(LabError, match='^' + message):
        up_mod.requested_shape(up_args(**options), {})


# --- two labs side by side (TRAINOPS_LAB) ------------------------------------------------------

NAMES = ('PREFIX', 'BR_NS', 'CTL_LINK', 'CTL_MGMT_LINK', 'CTL_MAC', 'MAC_PREFIX', 'MGMT_MAC_PREFIX', 'DEFAULT_SUBNET',
         'DEFAULT_MGMT_SUBNET', 'STATE_ROOT', 'LOCK_FILE', 'SESSION_LOCK', 'DEFAULT_INVENTORY_DIR')


def lab_names(number):
    """The machine-wide names of lab ``number`` (module constants: read in a fresh interpreter)."""
    import subprocess  # pylint: disable=import-outside-toplevel
    code = ('import json, sys; sys.path.insert(0, %r); from trainops_lab import core; '
            'print(json.dumps({n: str(getattr(core, n)) for n in %r}))' % (HACK, NAMES))
    env = dict(os.environ, TRAINOPS_LAB=number)
    out = subprocess.run([sys.executable, '-c', code], env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def test_a_second_lab_shares_no_machine_wide_name_with_the_first():
    first, second = lab_names(''), lab_names('2')
    assert first['PREFIX'] == 'trainops-lab' and first['DEFAULT_SUBNET'] == '10.77.0.0/24'
    assert first['STATE_ROOT'] == '/var/lib/trainops-lab' and first['CTL_LINK'] == 'trainops-lab0'
    for name in NAMES:
        assert first[name] != second[name], name
    assert second['PREFIX'] == 'trainops-lab2' and second['DEFAULT_SUBNET'] == '10.79.0.0/24'
    assert second['DEFAULT_MGMT_SUBNET'] == '10.80.0.0/24' and second['STATE_ROOT'] == '/var/lib/trainops-lab2'
    assert second['DEFAULT_INVENTORY_DIR'].endswith('/inventories/lab2')
    nets = [ipaddress.ip_network(lab[n]) for lab in (first, second) for n in ('DEFAULT_SUBNET', 'DEFAULT_MGMT_SUBNET')]
    assert not any(a.overlaps(b) for i, a in enumerate(nets) for b in nets[i + 1:])
    # interface names fit IFNAMSIZ (15 characters)
    assert max(len(lab[n]) for lab in (first, second) for n in ('CTL_LINK', 'CTL_MGMT_LINK')) <= 15


@pytest.mark.parametrize('path, mine', [
    ('/var/lib/trainops-lab', True),
    ('/var/lib/trainops-lab/node01/home', True),
    ('/run/netns/trainops-lab-node01', True),
    ('/run/netns/trainops-lab-br', True),
    ('/var/lib/trainops-lab2/node01/home', False),   # the second lab's, beside it
    ('/run/netns/trainops-lab2-node01', False),
    ('/srv/trainops-lab', False),
])
def test_down_unmounts_only_its_own_labs_paths(path, mine):
    if os.environ.get('TRAINOPS_LAB', '') not in ('', '1'):
        pytest.skip('the names of lab 1')
    assert core.names_this_lab(path) is mine


@pytest.mark.parametrize('value, number', [('', 1), ('1', 1), ('2', 2), ('9', 9)])
def test_lab_number(value, number):
    assert core.lab_number(value) == number


@pytest.mark.parametrize('value', ['0', '10', 'b', ' 2', '-1'])
def test_lab_number_refuses_anything_else(value):
    with pytest.raises(LabError, match=r'TRAINOPS_LAB=.*: want empty \(the lab\) or one digit 2\.\.9'):
        core.lab_number(value)
