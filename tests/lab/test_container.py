"""roles/container (playbooks/container.yml) and playbooks/clean.yml on a 2-node lab whose nodes each run
their own Docker daemon (hack/lab.py up --engine docker), with the test image of hack/container_image.sh
shipped as an image archive (the air-gapped path; no registry). Root only; holds the lab's session lock
for the whole module (fixtures in container_support.py). The tests run in file order and build on
each other's state: converge, skip/load per node, the container's namespaces, recreation, check mode, a job
trained inside the containers (its status and stop), clean; the last one takes the lab's engines down and checks
nothing is left. These tests keep the promises of molecule/container too (converge, verify, the same settings again
changing nothing), which CI therefore leaves out (tests/lab/test_molecule.py, KEPT_BY_LAB_TESTS).
"""
import json
import os
import platform
import shlex
import time

import pytest

from container_support import CONTAINER, run_lab
from lab_env import lab_names
from playbook_runner import free_port, run_playbook, wait_until
# the fixtures, found by pytest under these names
from container_support import container_lab, image_archive  # noqa: F401  # pylint: disable=unused-import

pytestmark = [pytest.mark.lab, pytest.mark.slow]

NODE_ROOT = '/srv/trainops'
NAMES = lab_names()  # the lab of this session (TRAINOPS_LAB)


def test_lab_nodes_run_their_own_engine(container_lab):
    """Each node's `docker` talks to a daemon of its own (labelled with the node's name, with the node's
    hostname, running in the node's network namespace); `up --engine docker` again changes nothing."""
    ids = {}
    for node in container_lab.lab.nodes:
        info = json.loads(container_lab.docker(node['name'], "info --format '{{json .}}'").stdout)
        ids[node['name']] = info['Labels']
        assert info['Name'] == node['hostname'], info['Name']
        assert info['DockerRootDir'] == '/var/lib/docker'
        pid = node['engine_pid']
        assert os.readlink('/proc/%d/ns/net' % pid) == container_lab.lab.netns_exec(
            node, ['readlink', '/proc/self/ns/net']).stdout.strip()
        assert node['docker_host'] == 'unix://%s/node%s/run/docker.sock' % (NAMES.STATE_ROOT, node['name'][-2:])
    assert ids == {name: ['org.trainops.lab.node=%s' % name] for name in container_lab.names}, ids
    again = run_lab('up', '--engine', 'docker')
    assert 'no changes' in again.stdout, again.stdout
    status = json.loads(run_lab('status', '--json').stdout)
    assert status['healthy'] and status['engine'] == 'docker', status
    assert all(row['engine_alive'] for row in status['nodes']), status


def test_converge_loads_the_archive_on_every_node(container_lab):
    """The module's first run (fixture): on nodes without the image the archive was copied, checked,
    loaded and removed; every node runs the container from the archive's image id."""
    run, image = container_lab.converged, container_lab.image
    for host in container_lab.names:
        facts = run.facts(host)
        assert facts['name'] == CONTAINER and facts['engine'] == 'docker', facts
        assert facts['engine_bin'].endswith('/docker'), facts
        assert facts['image_id'] == image['image_id'] and facts['image'] == image['image'], facts
        assert facts['image_source'] == 'archive' and facts['node_root'] == NODE_ROOT, facts
        assert (facts['pid_mode'], facts['network_mode'], facts['ipc_mode']) == ('host', 'host', 'host')
        assert container_lab.image_id(host, image['image']) == image['image_id']
        container = container_lab.inspect(host)
        assert container['State']['Running'] and container['Image'] == image['image_id'], container['State']
        assert facts['container_id'] == container['Id']
        # the copy is gone once loaded (trainops_container_image_archive_keep: false)
        left = container_lab.ssh(host, 'ls -A %s/images 2>/dev/null || true' % NODE_ROOT).stdout.split()
        assert left == [], left
    # the images were there only if an earlier module left them: loaded where missing, never twice
    loads = run.task('Load the archive (Docker)')
    assert set(loads) == set(container_lab.names)
    for host, res in loads.items():
        if not res.get('skipped'):
            assert res['changed'] and [i['Id'] for i in res['images']] == [image['image_id']], res


def test_archive_loads_only_where_the_image_is_missing(container_lab):
    """node02 loses the image: the archive is copied and loaded there; node01, which has the image id,
    gets no copy and no load, and keeps its container."""
    have, lack = container_lab.names
    kept = container_lab.inspect(have)['Id']
    container_lab.forget_image(lack)
    started = time.monotonic()
    run = container_lab.playbook('playbooks/container.yml', container_lab.role_vars())
    elapsed = time.monotonic() - started
    assert run.rc == 0, run.explain()
    copy, load = run.task('Copy the archive to the node'), run.task('Load the archive (Docker)')
    assert copy[have].get('skipped') and load[have].get('skipped'), (copy[have], load[have])
    assert copy[lack]['changed'] and load[lack]['changed'], (copy[lack], load[lack])
    assert [i['Id'] for i in load[lack]['images']] == [container_lab.image['image_id']], load[lack]
    checksum = run.task('Checksum the copy on the node')[lack]['stat']['checksum']
    with open(container_lab.image['archive'] + '.sha256') as handle:
        assert checksum == handle.read().split()[0]
    assert run.changed()[have] == 0, run.changed()
    assert container_lab.inspect(have)['Id'] == kept
    assert container_lab.image_id(lack, container_lab.image['image']) == container_lab.image['image_id']
    assert container_lab.inspect(lack)['State']['Running']
    print('load on one node of two: %.1fs' % elapsed)


def test_container_shares_the_nodes_network_ipc_and_pids(container_lab):
    """Host network, IPC and PID namespaces; the node's trainops directory at the same path; not
    privileged. A pid recorded inside is the host's pid: the host sees and signals that process."""
    for node in container_lab.lab.nodes:
        host = node['name']
        info = container_lab.inspect(host)
        cfg = info['HostConfig']
        assert (cfg['NetworkMode'], cfg['IpcMode'], cfg['PidMode']) == ('host', 'host', 'host'), cfg
        assert cfg['Privileged'] is False
        assert '%s:%s:rw' % (NODE_ROOT, NODE_ROOT) in cfg['Binds'], cfg['Binds']
        assert cfg['CapAdd'] == ['IPC_LOCK'], cfg['CapAdd']
        assert {u['Name'] for u in cfg['Ulimits']} == {'memlock', 'stack'}, cfg['Ulimits']
        assert info['Config']['Labels'].get('org.trainops.container') == CONTAINER
        inside = container_lab.docker(host, 'exec %s python3 -c %s' % (CONTAINER, shlex.quote(
            'import socket; print(socket.gethostname(), sorted(n for _, n in socket.if_nameindex()))'))).stdout
        assert inside.strip() == '%s %s' % (node['hostname'], sorted(['lo', node['ifname']])), inside
        # a process started detached inside records its pid in the shared directory ...
        probe = '%s/pid-probe' % NODE_ROOT
        container_lab.docker(host, "exec -d -w %s %s sh -c 'echo $$ > %s.tmp && mv %s.tmp %s && exec sleep 300'" % (
            NODE_ROOT, CONTAINER, probe, probe, probe))
        pid = None
        for _attempt in range(100):
            out = container_lab.ssh(host, 'cat %s 2>/dev/null || true' % probe).stdout.strip()
            if out:
                pid = int(out)
                break
            time.sleep(0.1)
        assert pid, 'the probe never wrote its pid'
        # ... which is the host's pid of that process, in the node's network namespace
        with open('/proc/%d/cmdline' % pid, 'rb') as handle:
            assert handle.read().split(b'\0')[:2] == [b'sleep', b'300']
        assert os.readlink('/proc/%d/ns/net' % pid) == os.readlink('/proc/%d/ns/net' % node['engine_pid'])
        container_lab.ssh(host, 'kill %d && rm -f %s' % (pid, probe))
        for _attempt in range(100):
            if not os.path.exists('/proc/%d' % pid) or open('/proc/%d/stat' % pid).read().split(') ')[1][0] == 'Z':
                break
            time.sleep(0.1)
        else:
            pytest.fail('pid %d survived kill from the host' % pid)


def test_new_settings_recreate_and_check_mode_changes_nothing(container_lab):
    """Other settings recreate the container; --check reports that change without making it, and once they are
    applied reports nothing to change (the same settings twice: the role's idempotence)."""
    before = {host: container_lab.inspect(host)['Id'] for host in container_lab.names}
    extra = container_lab.role_vars(trainops_container_env={'TRAINOPS_PROBE': 'on'})
    check = container_lab.playbook('playbooks/container.yml', extra, check=True)
    assert check.rc == 0, check.explain()
    assert all(check.task('Run the training container (Docker)')[h]['changed'] for h in container_lab.names)
    assert {host: container_lab.inspect(host)['Id'] for host in container_lab.names} == before
    changed = container_lab.playbook('playbooks/container.yml', extra)
    assert changed.rc == 0, changed.explain()
    for host in container_lab.names:
        during = container_lab.inspect(host)
        assert during['Id'] != before[host]
        assert 'TRAINOPS_PROBE=on' in during['Config']['Env']
        assert changed.facts(host)['changed'] is True
    steady = container_lab.playbook('playbooks/container.yml', extra, check=True)
    assert steady.rc == 0 and steady.changed() == {h: 0 for h in container_lab.names}, steady.changed()


# ---------------------------------------------------------------------------------------------
# A 2-node job trained inside each node's training container (trainops_runtime: container), on the containers
# above: the environment reaches every rank explicitly (never lost on `docker exec`), and status/stop see the
# processes in the container (docs/containers.md).

def container_launch_vars(tmp_path, **extra):
    values = {
        'runtime': 'container',
        'trainops_python': 'python3',  # the image's interpreter
        'config': 'config/tiny.yaml',
        'trainops_experiments_dir': str(tmp_path / 'experiments'),
        'master_port': free_port(),
        'trainops_poll_interval': 1,
        'trainops_progress_interval': 10,
    }
    values.update(extra)
    return values


def container_processes(clab, node):
    """Command lines of the processes in the node's training container (`docker top`)."""
    out = clab.docker(node, "top %s -eo pid,args" % CONTAINER).stdout
    return [line for line in out.splitlines()[1:] if line.strip()]


def test_two_nodes_train_inside_their_containers_with_each_hosts_settings(container_lab, tmp_path):
    clab = container_lab
    lab = clab.lab
    proc = run_playbook('playbooks/launch.yml', str(tmp_path), container_launch_vars(tmp_path, channels=12),
                        inventory=lab.inventory, timeout=600)
    assert proc.returncode == 0, proc.stdout[-5000:]
    experiment = proc.summary['artifact_data']['trainops_experiment']
    assert experiment['outcome'] == 'succeeded'
    path = experiment['path']
    manifest = json.load(open(os.path.join(path, 'manifest.json')))
    assert manifest['world_size'] == 4 and manifest['summary']['ranks_seen'] == [0, 1, 2, 3]
    for index, node in enumerate(lab.nodes):
        for local_rank in range(2):
            rank = 2 * index + local_rank
            seen = json.load(open(os.path.join(path, 'outputs', manifest['nodes'][index]['host'], 'rank_%02d_env.json' % rank)))
            env = seen['env']
            # the host's own settings reached the rank inside the container
            assert env['TRAINOPS_NODE'] == node['name']
            assert env['GLOO_SOCKET_IFNAME'] == node['ifname'] and env['NCCL_SOCKET_IFNAME'] == '=' + node['ifname']
            assert env['NCCL_MAX_NCHANNELS'] == '12' and env['NCCL_IB_DISABLE'] == '1'
            # ... and it ran in the image's Python (the one the preflight found in the container), not the node's
            record = [n for n in manifest['nodes'] if n['host'] == node['name']][0]
            assert record['argv'][0] == 'python3'
            assert seen['python_version'] == record['python'], (seen['python_version'], record['python'])
    # the image's interpreter is Debian's, not this machine's (the nodes' own)
    assert manifest['nodes'][0]['python'] != platform.python_version()


def test_status_and_stop_reach_the_job_inside_the_containers(container_lab, tmp_path):
    clab = container_lab
    lab = clab.lab
    extravars = container_launch_vars(tmp_path, wait=False, overrides=['debug.sleep_per_step_s=0.3', 'training.epochs=50'])
    started = run_playbook('playbooks/launch.yml', str(tmp_path), extravars, inventory=lab.inventory, timeout=600)
    assert started.returncode == 0, started.stdout[-5000:]
    for node in clab.names:
        procs = wait_until(lambda n=node: [p for p in container_processes(clab, n) if 'torch.distributed.run' in p],
                           timeout=60, what='torchrun in the container of %s' % node)
        assert procs
    status = run_playbook('playbooks/status.yml', str(tmp_path), {'trainops_experiments_dir': extravars['trainops_experiments_dir']},
                          inventory=lab.inventory, timeout=300)
    assert status.returncode == 0, status.stdout[-3000:]
    jobs = status.summary['artifact_data']['trainops_status']
    assert {job['status'] for job in jobs.values()} == {'running'}, jobs
    stopped = run_playbook('playbooks/stop.yml', str(tmp_path), {'trainops_experiments_dir': extravars['trainops_experiments_dir']},
                           inventory=lab.inventory, timeout=300)
    assert stopped.returncode == 0, stopped.stdout[-3000:]
    for node in clab.names:
        left = [p for p in container_processes(clab, node) if 'torch' in p or 'supervisor.py' in p]
        assert left == [], (node, left)


def test_bad_input_fails_before_any_node_is_touched(container_lab):
    run = container_lab.playbook('playbooks/container.yml', container_lab.role_vars(
        trainops_container_image_archive='/nonexistent/image.tar'))
    assert run.rc != 0
    assert any('is not a file on the controller' in f for f in run.failures()), run.failures()
    assert run.task('Look for the image on the node') == {}
    cpu = container_lab.playbook('playbooks/container.yml', {'trainops_container_image_source': 'pull'})
    assert cpu.rc != 0
    assert any('no default image for CPU nodes' in f for f in cpu.failures()), cpu.failures()


def test_clean_removes_only_the_training_containers(container_lab):
    """clean.yml removes the role's container on every node and nothing else: a bystander container, a
    container of that name that the role did not make, the images and the data all stay."""
    first, second = container_lab.names
    image = container_lab.image['image']
    container_lab.docker(first, 'run -d --name trainops-bystander --network host %s sleep infinity' % image)
    container_lab.docker(second, 'run -d --name trainops-foreign --network host %s sleep infinity' % image)
    container_lab.ssh(first, 'echo kept > %s/data-probe' % NODE_ROOT)
    try:
        run = container_lab.playbook('playbooks/clean.yml')
        assert run.rc == 0, run.explain()
        for host in container_lab.names:
            assert container_lab.inspect(host) is None, host
            assert container_lab.image_id(host, image) == container_lab.image['image_id']
        assert container_lab.inspect(first, 'trainops-bystander')['State']['Running']
        assert container_lab.ssh(first, 'cat %s/data-probe' % NODE_ROOT).stdout.strip() == 'kept'
        # the same name without the role's label is not the role's: left alone (with a message)
        foreign = container_lab.playbook('playbooks/clean.yml', {'trainops_container_name': 'trainops-foreign'})
        assert foreign.rc == 0, foreign.explain()
        assert container_lab.inspect(second, 'trainops-foreign')['State']['Running']
        assert 'not made by roles/container' in foreign.task('Say a container of that name')[second]['msg']
        again = container_lab.playbook('playbooks/clean.yml')
        assert again.rc == 0 and again.changed() == {h: 0 for h in container_lab.names}, again.changed()
    finally:
        container_lab.docker(first, 'rm -f trainops-bystander', check=False)
        container_lab.docker(second, 'rm -f trainops-foreign', check=False)

    # clean_images / clean_data: the image and the directory's contents go, the directory stays
    assert container_lab.playbook('playbooks/container.yml', container_lab.role_vars()).rc == 0
    run = container_lab.playbook('playbooks/clean.yml', {'clean_images': True, 'clean_data': True})
    assert run.rc == 0, run.explain()
    for host in container_lab.names:
        assert container_lab.inspect(host) is None
        assert container_lab.image_id(host, image) is None
        assert container_lab.ssh(host, 'ls -A %s' % NODE_ROOT).stdout.split() == [], host


def test_down_stops_every_engine(container_lab):
    """`down` of a lab with engines leaves no daemon, container, cgroup or state behind (the lab is
    rebuilt for the rest of the session by the fixtures that need it)."""
    container_lab.docker(container_lab.names[0], 'run -d --name trainops-left --network none %s sleep infinity'
                         % container_lab.image['image'], check=False)
    pids = [node['engine_pid'] for node in container_lab.lab.nodes]
    run_lab('down')
    for pid in pids:
        assert not os.path.exists('/proc/%d' % pid) or open('/proc/%d/stat' % pid).read().split(') ')[1][0] == 'Z'
    leftovers = []
    for entry in os.listdir('/proc'):
        if entry.isdigit():
            try:
                with open('/proc/%s/cmdline' % entry, 'rb') as handle:
                    cmd = handle.read().replace(b'\0', b' ').decode(errors='replace')
                with open('/proc/%s/cgroup' % entry) as handle:
                    cgroups = handle.read()
            except OSError:
                continue
            if '%s/' % NAMES.STATE_ROOT in cmd or NAMES.PREFIX + '-node' in cgroups:
                leftovers.append((entry, cmd))
    assert leftovers == [], leftovers
    for hierarchy in ('/sys/fs/cgroup/pids', '/sys/fs/cgroup'):
        if os.path.isdir(hierarchy):
            assert not [d for d in os.listdir(hierarchy) if d.startswith(NAMES.PREFIX + '-node')], hierarchy
    assert not NAMES.STATE_ROOT.exists()
