"""playbooks/ssh_mesh.yml (role trainops.multinode.ssh_mesh) on 3 hosts of the lab of hack/lab.py (root only).

The lab's nodes share the machine's filesystem, /root included, with each other and with the
controller, while real nodes each have their own home. So that every node gets its own ~/.ssh (and
the machine's own /root/.ssh is never written), the fixture bind-mounts a node-private directory
(under the node's private /srv/trainops) onto /root/.ssh inside each node's mount namespace, from
an SSH session on the node; the mounts go away with the fixture (or with the lab). The shared-home
test mounts one directory on every node instead, as an NFS home would be.

The lab's sshd reads <its state directory>/authorized_keys (AuthorizedKeysFile), so the playbook
gets trainops_ssh_mesh_authorized_keys_file; the mesh key is taken out of that file afterwards.
"""
import base64
import hashlib
import ipaddress
import json
import os
import re
import shlex
import subprocess

import pytest

from lab_env import lab_names

pytestmark = [pytest.mark.lab, pytest.mark.slow, pytest.mark.usefixtures('lab_session_lock')]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAYBOOK = os.path.join(REPO, 'playbooks', 'ssh_mesh.yml')
ANSIBLE_PLAYBOOK = os.path.join(REPO, '.venv', 'bin', 'ansible-playbook')
KEY_NAME = 'id_ed25519_trainops'
NODES = 3
HOME_SSH = '/root/.ssh'
PRIVATE_SSH = '/srv/trainops/.test-ssh-mesh-home'           # inside a node: that node's own directory
SHARED_SSH = str(lab_names().STATE_ROOT / 'test-ssh-mesh-shared')  # the machine's: the same directory in every node
RECAP = re.compile(r'^(\S+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)', re.M)


def playbook(lab, extravars, *args, timeout=420):
    """ansible-playbook playbooks/ssh_mesh.yml on the lab; returns (rc, output, {host: recap counts})."""
    argv = [ANSIBLE_PLAYBOOK, '-i', lab.inventory, PLAYBOOK, '-e', json.dumps(extravars)] + list(args)
    proc = subprocess.run(argv, cwd=REPO, env=lab.ansible_env(), capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=timeout, check=False)
    out = proc.stdout + proc.stderr
    recap = {m.group(1): {'ok': int(m.group(2)), 'changed': int(m.group(3)), 'unreachable': int(m.group(4)),
                          'failed': int(m.group(5))} for m in RECAP.finditer(out)}
    return proc.returncode, out, recap


def private_key_secrets(path):
    """What of an OpenSSH ed25519 private key file is secret: the 32-byte seed, and the base64 characters of
    the file that encode nothing but seed bytes (the file also embeds the public key, which is no secret)."""
    text = open(path).read()
    assert 'OPENSSH PRIVATE KEY' in text
    b64 = ''.join(line.strip() for line in text.splitlines() if line.strip() and not line.startswith('-----'))
    blob = base64.b64decode(b64)
    magic = b'openssh-key-v1\0'
    assert blob.startswith(magic)

    def string(offset):
        size = int.from_bytes(blob[offset:offset + 4], 'big')
        return blob[offset + 4:offset + 4 + size], offset + 4 + size

    offset = len(magic)
    cipher, offset = string(offset)
    _kdf, offset = string(offset)
    _kdf_options, offset = string(offset)
    assert cipher == b'none' and int.from_bytes(blob[offset:offset + 4], 'big') == 1
    _public, offset = string(offset + 4)
    offset += 4 + 8                     # length of the private section, two check integers
    keytype, offset = string(offset)
    assert keytype == b'ssh-ed25519'
    _public, offset = string(offset)
    seed_at = offset + 4                # string(private): seed (32 bytes) + public key (32 bytes)
    seed = blob[seed_at:seed_at + 32]
    first, last = -(-seed_at * 8 // 6), (seed_at + 32) * 8 // 6
    return seed, b64[first:last]


def assert_no_key_material(out, key_path):
    seed, secret_b64 = private_key_secrets(key_path)
    assert len(secret_b64) >= 40
    assert 'PRIVATE KEY' not in out
    assert seed.hex() not in out and base64.b64encode(seed).decode()[:40] not in out
    leaked = [secret_b64[i:i + 12] for i in range(len(secret_b64) - 11) if secret_b64[i:i + 12] in out]
    assert not leaked, 'the output contains %d fragment(s) of the private key' % len(leaked)


def ssh_pair(lab, source, target):
    """From node `source`, as its user: ssh -o BatchMode=yes -o StrictHostKeyChecking=yes TARGET hostname."""
    command = 'ssh -n -o BatchMode=yes -o StrictHostKeyChecking=yes -o ConnectTimeout=10 %s hostname' % shlex.quote(target)
    return lab.ssh(source, command, timeout=60, check=False)


def all_pairs_work(lab):
    """Every ordered pair (A, B), B by address and by hostname; returns the failures."""
    failures = []
    for source in lab.nodes:
        for dest in lab.nodes:
            for target in (dest['address'], dest['hostname']):
                proc = ssh_pair(lab, source, target)
                if proc.returncode != 0 or proc.stdout.strip() != dest['hostname']:
                    failures.append('%s -> %s: rc %d %s %s' % (
                        source['name'], target, proc.returncode, proc.stdout.strip(), proc.stderr.strip()))
    return failures


def mesh_key_line(lab, public_key):
    """The one authorized_keys line of the mesh key: (options, the rest)."""
    lines = [line for line in open(lab.authorized_keys).read().splitlines() if public_key in line.split()]
    assert len(lines) == 1, lines
    options, rest = lines[0].split(' ', 1)
    return options, rest


def from_addresses(options):
    """The addresses that the from="..." of an options field admits (its networks expanded), and what follows it."""
    match = re.fullmatch(r'from="([^"]*)",(.*)', options)
    assert match, options
    admitted = set()
    for pattern in match.group(1).split(','):
        network = ipaddress.ip_network(pattern)
        admitted.update(str(address) for address in (network if network.num_addresses > 1 else [network.network_address]))
    return admitted, match.group(2)


def mesh_key_from(lab, source, target_node, key, known_hosts):
    """ssh with nothing but the mesh key (no config, no agent) from `source`: None (this machine's root
    namespace, the lab's controller address) or a node (over the lab's ssh, in the node's namespace)."""
    argv = ['ssh', '-F', '/dev/null', '-i', key, '-o', 'IdentitiesOnly=yes', '-o', 'IdentityAgent=none',
            '-o', 'BatchMode=yes', '-o', 'StrictHostKeyChecking=yes', '-o', 'UserKnownHostsFile=' + known_hosts,
            '-o', 'ConnectTimeout=10', 'root@' + target_node['ssh_address'], 'hostname']
    if source is None:
        return subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60, check=False)
    return lab.ssh(source, ' '.join(shlex.quote(word) for word in argv) + ' </dev/null', timeout=60, check=False)


def lab_host_keys(lab):
    """{node name: 'ssh-ed25519 AAAA...'} from the lab's known_hosts (written from the nodes' key files)."""
    keys = {}
    for line in open(lab.known_hosts).read().splitlines():
        names, keytype, key = line.split()[:3]
        keys[names.split(',')[0]] = '%s %s' % (keytype, key)
    return keys


@pytest.fixture(scope='module')
def mesh_lab(lab_nodes):
    """A 3-node lab whose nodes' /root/.ssh are bind-mounted node directories; .homes(shared) sets them."""
    lab = lab_nodes(NODES)
    created_home_ssh = not os.path.exists(HOME_SSH)
    if created_home_ssh:
        os.makedirs(HOME_SSH, mode=0o700)   # the mount point; nothing is ever written into it here
    authorized_keys = os.path.join(lab.data['state_dir'], 'authorized_keys')
    before = open(authorized_keys).read()

    def homes(shared):
        """Each node's /root/.ssh: an empty directory of its own, or (shared) one empty directory for all."""
        for index, node in enumerate(lab.nodes):
            source = SHARED_SSH if shared else PRIVATE_SSH
            fresh = 'rm -rf {s}; mkdir -m 0700 {s}; ' if index == 0 or not shared else ''
            lab.ssh(node, ('set -e; if mountpoint -q {m}; then umount {m}; fi; ' + fresh + 'mount --bind {s} {m}; '
                           'mountpoint -q {m}').format(m=HOME_SSH, s=source))

    lab.homes = homes
    lab.authorized_keys = authorized_keys
    try:
        yield lab
    finally:
        for node in lab.nodes:
            lab.ssh(node, 'if mountpoint -q {m}; then umount {m}; fi; rm -rf {s}'.format(m=HOME_SSH, s=PRIVATE_SSH),
                    check=False)
        subprocess.run(['rm', '-rf', SHARED_SSH], check=False)
        with open(authorized_keys, 'r+') as handle:      # in place: the lab's file, the lab's mode
            handle.seek(0)
            handle.write(before)
            handle.truncate()
        if created_home_ssh:
            try:
                os.rmdir(HOME_SSH)
            except OSError:
                pass


def mesh_vars(lab, tmp_path, **extra):
    extravars = {
        'trainops_ssh_mesh_key_dir': str(tmp_path / 'keys'),
        'trainops_ssh_mesh_authorized_keys_file': lab.authorized_keys,
        'trainops_ssh_mesh_verify_targets': ['address', 'hostname', 'inventory_hostname'],
    }
    extravars.update(extra)
    return extravars


def node_ssh_files(lab, node):
    """{name: 'mode owner sha256'} of the files in a node's /root/.ssh."""
    out = lab.ssh(node, 'cd %s && for f in $(ls -A); do echo "$f $(stat -c "%%a %%U" "$f") $(sha256sum < "$f" | cut -c1-64)"; done'
                  % HOME_SSH).stdout
    return {line.split()[0]: ' '.join(line.split()[1:]) for line in out.splitlines() if line.strip()}


def test_every_node_reaches_every_node_with_host_keys_checked(mesh_lab, tmp_path):
    lab = mesh_lab
    lab.homes(shared=False)
    names = sorted(lab.names)
    extravars = mesh_vars(lab, tmp_path)
    key_dir = tmp_path / 'keys'
    key = key_dir / KEY_NAME

    # check mode on a fresh cluster: runs through, creates nothing anywhere
    rc, out, recap = playbook(lab, extravars, '--check', '--diff')
    assert rc == 0, out[-5000:]
    assert sorted(recap) == names and not any(r['failed'] or r['unreachable'] for r in recap.values()), recap
    assert not key_dir.exists()
    assert all(node_ssh_files(lab, node) == {} for node in lab.nodes)

    # the real run, verbose and with diffs: the mesh is set up and checked by the role itself
    rc, out, recap = playbook(lab, extravars, '--diff', '-v')
    assert rc == 0, out[-5000:]
    assert sorted(recap) == names and all(r['changed'] > 0 and r['failed'] == 0 for r in recap.values()), recap
    assert 'ssh mesh of 3 nodes: 18/18 connections work' in out, out[-3000:]
    assert_no_key_material(out, key)
    assert os.stat(key_dir).st_mode & 0o777 == 0o700 and os.stat(key).st_mode & 0o777 == 0o600
    digest = hashlib.sha256(key.read_bytes()).hexdigest()
    public = (key_dir / (KEY_NAME + '.pub')).read_text().split()
    assert public[0] == 'ssh-ed25519' and public[2] == 'trainops-mesh-trainops_nodes'

    # every node has its own copy of the one key (0600), and the real host keys of all nodes
    host_keys = lab_host_keys(lab)
    for node in lab.nodes:
        files = node_ssh_files(lab, node)
        assert files[KEY_NAME] == '600 root %s' % digest, (node['name'], files)
        assert files[KEY_NAME + '.pub'].startswith('644 root ')
        assert files['config'].startswith('600 root ')
        known = lab.ssh(node, 'cat %s/known_hosts' % HOME_SSH).stdout.splitlines()
        assert len(known) == NODES, (node['name'], known)
        for dest in lab.nodes:
            line = [entry.split() for entry in known if entry.split()[0].split(',')[0] == dest['name']]
            assert len(line) == 1, (node['name'], dest['name'], known)
            assert '%s %s' % (line[0][1], line[0][2]) == host_keys[dest['name']]
            assert {dest['name'], dest['address'], dest['hostname']} <= set(line[0][0].split(','))
    assert host_keys[lab.nodes[0]['name']] != host_keys[lab.nodes[1]['name']]
    # the mesh key is authorized once, with its comment, from the nodes' addresses (and loopback) only, restricted
    options, rest = mesh_key_line(lab, public[1])
    assert rest == ' '.join(public), rest
    admitted, after = from_addresses(options)
    assert admitted == {node['address'] for node in lab.nodes} | {'127.0.0.1', '::1'}, options
    assert after == 'restrict', options

    # from the controller, over the lab's ssh: every ordered pair, by address and by hostname
    assert all_pairs_work(lab) == []

    # the key works only from the nodes: from this machine's root namespace (the lab's controller address, which
    # is no node's) sshd refuses it, and says why; the same command on a node gets in
    first = lab.nodes[0]
    refused = mesh_key_from(lab, None, first, str(key), lab.known_hosts)
    assert refused.returncode == 255 and 'Permission denied (publickey)' in refused.stderr, refused
    log = open(os.path.join(first['state_dir'], 'sshd.log')).read()
    controller = lab.data['controller']['address']
    assert 'correct key but not from a permitted host (host=%s, ip=%s' % (controller, controller) in log, log[-2000:]
    allowed = mesh_key_from(lab, lab.nodes[1], first, HOME_SSH + '/' + KEY_NAME, HOME_SSH + '/known_hosts')
    assert allowed.returncode == 0 and allowed.stdout.strip() == first['hostname'], allowed
    # restrict: no pty, no port forwarding between nodes (what launchers need, commands, still works above)
    pty = lab.ssh(lab.nodes[1], 'ssh -tt -o BatchMode=yes %s tty </dev/null' % shlex.quote(first['address']), check=False)
    assert 'PTY allocation request failed' in pty.stdout + pty.stderr and '/dev/pts' not in pty.stdout, pty
    forward = lab.ssh(lab.nodes[1], 'ssh -n -o BatchMode=yes -o ExitOnForwardFailure=yes -R 127.0.0.1:40222:127.0.0.1:22 '
                      '%s true' % shlex.quote(first['address']), check=False)
    assert forward.returncode != 0 and 'remote port forwarding failed' in forward.stderr, forward

    # (a second run changing nothing: test_cluster_shapes.py's, and the repair run below on the nodes it need not repair)

    # host-key checking is on: give node 1 node 2's key for node 3, and node 1 -> node 3 fails
    first, second, third = lab.nodes
    known = lab.ssh(first, 'cat %s/known_hosts' % HOME_SSH).stdout.splitlines()
    wrong_key = [line.split(None, 1)[1] for line in known if line.startswith(second['name'] + ',')][0]
    known = [line.split()[0] + ' ' + wrong_key if line.startswith(third['name'] + ',') else line for line in known]
    lab.ssh(first, 'printf "%%s\\n" %s > %s/known_hosts' % (' '.join(shlex.quote(line) for line in known), HOME_SSH))
    broken = ssh_pair(lab, first, third['address'])
    assert broken.returncode != 0 and 'Host key verification failed' in broken.stderr, broken
    assert ssh_pair(lab, first, second['address']).returncode == 0
    # ... and the role's check names exactly that pair
    rc, out, recap = playbook(lab, extravars, '--tags', 'verify')
    assert rc != 0
    assert 'ssh mesh of 3 nodes: 16/18 connections work' in out, out[-3000:]
    for target in (third['address'], third['hostname']):
        assert '%s -> %s (%s): Host key verification failed.' % (first['name'], third['name'], target) in out, out[-3000:]
    assert 'broken for 1 pair(s) of nodes (from -> to): %s -> %s (' % (first['name'], third['name']) in out

    # the next run puts the real key back, on that node only
    rc, out, recap = playbook(lab, extravars)
    assert rc == 0, out[-5000:]
    assert recap[first['name']]['changed'] == 1 and recap[second['name']]['changed'] == recap[third['name']]['changed'] == 0, recap
    assert 'ssh mesh of 3 nodes: 18/18 connections work' in out, out[-3000:]
    assert ssh_pair(lab, first, third['address']).stdout.strip() == third['hostname']


def test_shared_home_is_written_once(mesh_lab, tmp_path):
    """All nodes see one ~/.ssh (an NFS home): with trainops_ssh_mesh_shared_home it is written from one node,
    and holds each node's host key once."""
    lab = mesh_lab
    lab.homes(shared=True)
    extravars = mesh_vars(lab, tmp_path, trainops_ssh_mesh_shared_home=True)
    rc, out, recap = playbook(lab, extravars)
    assert rc == 0, out[-5000:]
    assert 'ssh mesh of 3 nodes: 18/18 connections work' in out, out[-3000:]
    # one directory: the files the first node wrote are every node's files
    files = [node_ssh_files(lab, node) for node in lab.nodes]
    assert files[0] == files[1] == files[2] and files[0][KEY_NAME].startswith('600 root '), files
    known = lab.ssh(lab.nodes[2], 'cat %s/known_hosts' % HOME_SSH).stdout.splitlines()
    assert sorted(line.split()[0].split(',')[0] for line in known) == sorted(lab.names), known
    # (a second run on a shared home changing nothing is tests/lab/test_cluster_shapes.py's, as the training user)
    # an unrestricted line of the mesh key (as an older version of the role wrote it) is replaced, once
    public = (tmp_path / 'keys' / (KEY_NAME + '.pub')).read_text().split()
    options, rest = mesh_key_line(lab, public[1])
    text = open(lab.authorized_keys).read()
    with open(lab.authorized_keys, 'w') as handle:
        handle.write(text.replace(options + ' ' + rest, rest))
    assert mesh_key_line(lab, public[1])[0] == public[0]
    rc, out, recap = playbook(lab, extravars)
    assert rc == 0, out[-5000:]
    assert [recap[name]['changed'] for name in lab.names] == [1, 0, 0], recap
    assert mesh_key_line(lab, public[1]) == (options, rest)
