# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The variables of the roles but the job role (see __init__.py)."""

from __future__ import annotations

from ansible_collections.trainops.multinode.plugins.module_utils._declarations.base import _var

VARIABLES = (
    _var('trainops_network_mode', 'auto',
         option=dict(doc=(('V(rdma) uses the RDMA ports (an error when the node has no ACTIVE port), V(tcp) TCP '
                          'sockets (C(NCCL_IB_DISABLE=1)).'),
                          ('V(auto) (the default when not given) is V(rdma) when the node has GPUs and a usable '
                          'ACTIVE RDMA port, else V(tcp).'),)),
         doc=('V(auto): RDMA when the node has GPUs and an ACTIVE RDMA port, else TCP sockets. V(rdma): fail '
              'before launch on a node without an ACTIVE port. V(tcp): C(NCCL_IB_DISABLE=1). Short knob '
              'C(network_mode) in the job role.')),
    _var('trainops_ib_hca', 'auto',
         option=dict(doc=(('RDMA ports to use, as a list (or comma-separated string) of C(name) or C(name:port). A '
                          "bare name takes the device's ACTIVE ports. Every name and port must exist and be "
                           'ACTIVE.'),
                          ('With NCCL/RCCL 2.30.7 and later an entry may also give a rail and a plane, '
                          'C(name:port:rail:plane) (each of port, rail and plane may be left empty, as in '
                           'C(mlx5_0::1) or C(mlx5_0:1::2); an empty port takes every ACTIVE port); C(NCCL_IB_HCA) '
                           'keeps them. With an older library, or when its version is unknown (set '
                           'O(library_version)), such an entry is an error.'),
                          ('V(auto) (the default when not given, or null) takes the ACTIVE ports, first the HCAs '
                          "that serve the GPUs by PCIe topology (each GPU's nearest HCAs within PXB, as NCCL ranks "
                           'paths; storage and front-end HCAs with no GPU under the same PCIe switch left out; '
                           'every port kept when the topology cannot be read, see RV(topology)), preferring '
                           'InfiniBand over RoCE ports when a node has both, physical functions over SR-IOV virtual '
                           'functions when both are ACTIVE, leaving out RoCE ports without a RoCE v2 GID (when '
                           'O(gid_index=auto)), leaving out a port whose netdev carries the default route (a '
                           'front-end NIC) when other ports remain, and keeping the fastest ports when rates '
                           'differ; each such choice is a warning and an entry of RV(left_out).'),
                          ('AWS EFA devices (driver C(efa)) are used through the aws-ofi-nccl plugin, never listed '
                          'in C(NCCL_IB_HCA).'),)),
         doc=("HCAs for C(NCCL_IB_HCA) (exact-match form): V(auto) takes the node's ACTIVE ports, or a list such "
              'as V([mlx5_0, mlx5_1:1]) that must exist on the node.')),
    _var('trainops_ib_gid_index', 'auto',
         option=dict(doc=(('C(NCCL_IB_GID_INDEX) for RoCE ports, an integer. It must be a RoCE v2 GID with an '
                          'address on every chosen RoCE port (an empty or RoCE v1 entry is an error naming the '
                           'port).'),
                          ('V(auto) (the default when not given) follows the library. NCCL/RCCL 2.21 and later '
                          'select a GID per port, so nothing is set except C(NCCL_IB_ADDR_FAMILY=AF_INET6) (or '
                           'C(NCCL_IB_ROCE_VERSION_NUM)) when their default would land on a link-local GID. Older '
                           "ones take one index per process, so the ports' common RoCE v2 index is set (an error "
                           'when they share none). With an unknown version a common index is set, otherwise nothing '
                           '(a warning).'),
                          ('V(unset) (or null) leaves it to NCCL (2.21 and later pick a RoCE v2 GID per port; older '
                          'NCCL and RCCL use GID 0).'),)),
         doc=('C(NCCL_IB_GID_INDEX) on RoCE. V(auto) follows the library: NCCL/RCCL 2.21 and later select a GID '
              'per port, so it stays unset (C(NCCL_IB_ADDR_FAMILY=AF_INET6) where the GID tables need it); older '
              "ones get the ports' common RoCE v2 index (an error when there is none). An integer must be a RoCE "
              'v2 GID on every chosen port. V(unset) leaves it to the library.')),
    _var('trainops_nccl_library_version', 'auto',
         option=dict(doc=('The NCCL (NVIDIA) or RCCL (AMD) version the ranks load, such as V(2.21.5); V(auto) (the '
                          'default) takes C(facts.library.version). It decides the GID rule, the valid channels and '
                          'threads and which variable O(threads) sets.')),
         doc=('The NCCL/RCCL version the ranks load, such as V(2.21.5); V(auto) takes what '
              'M(trainops.multinode.node_facts) detected.')),
    _var('trainops_ib_tc', None,
         option=dict(doc=('C(NCCL_IB_TC), the traffic class of RoCE data packets (0-255, DSCP x 4, e.g. V(106) for '
                          'DSCP 26). Not set when not given.')),
         doc="C(NCCL_IB_TC), RoCE traffic class of the data (0-255, DSCP x 4); null leaves the library's default."),
    _var('trainops_ib_fifo_tc', None,
         option=dict(doc=("C(NCCL_IB_FIFO_TC), the traffic class of NCCL's control messages (0-255). An error where "
                          'the library would ignore it (before 2.22; V(0) before 2.24) or its version is unknown.')),
         doc='C(NCCL_IB_FIFO_TC), RoCE traffic class of the control messages (0-255, NCCL 2.22 and later).'),
    _var('trainops_ib_sl', None, option=dict(doc='C(NCCL_IB_SL), the InfiniBand service level (0-15).'),
         doc='C(NCCL_IB_SL), InfiniBand service level (0-15).'),
    _var('trainops_ib_qps_per_connection', None,
         option=dict(doc=(('C(NCCL_IB_QPS_PER_CONNECTION) (1-128), queue pairs per connection, spreading it over '
                          'ECMP paths.'),
                          ('NCCL 2.20 and later open it times the ports merged into one NIC (the chosen ports of '
                          'one device, at most 4); more than 128 (C(NCCL_IB_MAX_QPS)) in all is an error.'),)),
         doc='C(NCCL_IB_QPS_PER_CONNECTION), queue pairs per connection (1-128).'),
    _var('trainops_cross_nic', None,
         option=dict(doc=('C(NCCL_CROSS_NIC) (V(0) keep each ring on the same NIC across nodes, for rail-optimized '
                          "fabrics; V(1) allow crossing; V(2) NCCL's default, prefer not to).")),
         doc=('C(NCCL_CROSS_NIC) (0 keep rings on the same NIC, rail-optimized fabrics; 1 may cross; 2 prefer not '
              'to).')),
    _var('trainops_net_gdr_level', 'auto',
         option=dict(doc=(('C(NCCL_NET_GDR_LEVEL), the largest GPU-to-NIC distance at which GPUDirect RDMA is used, '
                          'one of V(LOC), V(PIX), V(PXB), V(PHB), V(SYS), or a legacy integer.'),
                          ('V(auto) (the default when not given) or V(unset) (or null) leaves it unset, since NCCL '
                          'chooses per GPU/NIC pair from the PCI topology when GPUDirect RDMA is available. When '
                           'the facts say GPUDirect RDMA is not available on an RDMA node, a warning names what to '
                           'load (C(nvidia_peermem), AMD peer memory, dma-buf); setting a level would not enable '
                           'it.'),)),
         doc=('C(NCCL_NET_GDR_LEVEL): V(auto) leaves it to NCCL (with a warning when GPUDirect RDMA is not '
              'available), or V(LOC), V(PIX), V(PXB), V(PHB), V(SYS), an integer.')),
    _var('trainops_nccl_debug', 'WARN',
         option=dict(doc=('C(NCCL_DEBUG) (V(VERSION), V(WARN), V(INFO), V(TRACE)). V(WARN) when not given; null '
                          'leaves it unset.')),
         doc='C(NCCL_DEBUG) (V(VERSION), V(WARN), V(INFO), V(TRACE)); null leaves it unset.'),
    _var('trainops_rocm_env', {'HSA_ENABLE_SDMA': '0'},
         option=dict(doc=(('ROCm runtime variables set on AMD nodes only. When not given (or null) this is '
                          'C(HSA_ENABLE_SDMA=0) (copies use blit kernels instead of the SDMA engines, the '
                           'workaround for SDMA copy hangs on MI300-class GPUs that the aorta launcher passes to '
                           'its ranks). V({}) sets none. V({}) does not drop the C(HSA_NO_SCRATCH_RECLAIM=1) that '
                           'RCCL needs on some nodes (see the description); naming C(HSA_NO_SCRATCH_RECLAIM) here '
                           'decides it.'),
                          ('C(HSA_ENABLE_IPC_MODE_LEGACY) is not a default (some ROCm 7 images need V(1), on others '
                          'it breaks RCCL P2P); set it here or in O(env_overrides).'),)),
         doc='ROCm settings every rank gets on AMD nodes.'),
    _var('trainops_nccl_env_nnodes', 0,
         option=dict(doc=('The number of nodes of the job (the job role passes it; the nccl_env role passes the '
                          "play's hosts). RCCL caps its channels at 64 when it is more than 1. Not given, one node "
                          'is assumed.')),
         doc=('Nodes in the job, for the limits that depend on it (RCCL caps channels at 64 with more than one '
              "node); V(0) counts the play's hosts. The job role passes its own node count.")),
    _var('trainops_nccl_env_gpu_ids', [],
         elements='int',
         option=dict(doc=(('The indexes of the GPUs the ranks may use on this node (a list, or a comma-separated '
                          'string), for example the GPUs a Slurm job holds on a node it shares with other jobs '
                           "(the C(slurm) inventory's C(trainops_slurm_gpu_ids)). Sets C(CUDA_VISIBLE_DEVICES) on "
                           "NVIDIA nodes, C(ROCR_VISIBLE_DEVICES) on AMD nodes (what Slurm's gres/gpu plugin sets "
                           'in its steps; C(HIP_VISIBLE_DEVICES) then counts within them) and both when the vendor '
                           'is V(none).'),
                          ("An error when an index is not one of the node's GPUs, is given twice, or when "
                          'O(nproc_per_node) is larger than the number of indexes (unless the vendor is V(none)). '
                           'Not given, empty or null, neither variable is set. O(env_overrides) wins, and a null '
                           'there removes the variable.'),)),
         doc=("The indexes of the GPUs this node's ranks may use, set as C(CUDA_VISIBLE_DEVICES) (NVIDIA), "
              'C(ROCR_VISIBLE_DEVICES) (AMD) or both (no GPU vendor); V([]) sets neither. The job role passes the '
              "C(slurm) inventory's C(trainops_slurm_gpu_ids) for a launch over SSH (docs/slurm.md). "
              'C(trainops_env) wins, and a null there removes the variable.')),
    _var('trainops_nccl_env_file', '{{ trainops_node_root }}/nccl.env', entries={'nccl_env': ('main',)}, type='str',
         doc='Where each node gets its env file (C(export KEY=value) lines).'),
    _var('trainops_nccl_conf', False, entries={'nccl_env': ('main',)}, type='bool',
         doc=('Also write the NCCL/RCCL settings to C(/etc/nccl.conf) (C(/etc/rccl.conf) on AMD), which the '
              "library reads by itself (needs become), as a managed block; the file's other lines are kept.")),
    _var('trainops_nccl_conf_path', '', entries={'nccl_env': ('main',)}, type='str',
         doc=('Where that block goes instead (written without become), e.g. the file C(NCCL_CONF_FILE) names; '
              "empty means the library's system file.")),
    _var('trainops_code_sync_knobs', False, entries={'code_sync': ('main',)}, type='bool',
         doc=('Take the short command-line knobs C(src), C(dest), C(excludes) (a list, or one comma-separated '
              'string), C(delete), C(sync_mode), C(repo), C(version) and C(force) over the C(trainops_code_sync_*) '
              'variables. playbooks/sync.yml sets it; a role or playbook that includes this role leaves it off, so '
              'extra vars meant for something else never change what is synced.')),
    _var('trainops_code_sync_mode', 'rsync', entries={'code_sync': ('main',)}, type='str', choices=['rsync', 'git'],
         doc=('C(rsync) copies O(trainops_code_sync_src) from the controller; C(git) checks out a commit of '
              'O(trainops_code_sync_repo) on every node. Short knob C(sync_mode).')),
    _var('trainops_code_sync_dest',
         "{{ trainops_workspace_dir | default((trainops_node_root | default('~/.trainops')) ~ '/workspace') }}",
         entries={'code_sync': ('main',)},
         type='str',
         doc=('Directory on each node that receives the code; created when missing. Short knob C(dest).',
              ("Defaults to the job role's workspace, C(trainops_workspace_dir), else "
               'C(<trainops_node_root>/workspace).'),)),
    _var('trainops_code_sync_src', '', entries={'code_sync': ('main',)}, type='str',
         doc=('rsync mode, required. Directory on the controller whose contents are copied into '
              'O(trainops_code_sync_dest). C(~) is expanded; a relative path is taken from the directory '
              'ansible-playbook runs in. Short knob C(src).')),
    _var('trainops_code_sync_default_excludes',
         ['/experiments/', '.venv/', 'venv/', '__pycache__/', '*.pyc', '.mypy_cache/', '.pytest_cache/', '.ruff_cache/',
          '.ansible/', 'node_modules/', '*.egg-info/'],
         entries={'code_sync': ('main',)},
         type='list',
         elements='str',
         doc=(('rsync exclude patterns applied to every sync. A trailing C(/) matches directories only, a leading '
               "C(/) anchors at the top of the source (C(/experiments/) is the launcher's output directory, not "
               'every C(experiments/) directory of the tree), other patterns match at any depth.'),
              ('Excluded paths are neither copied nor deleted on the nodes. In git mode, untracked files matching '
               'these patterns do not count as local changes.'),)),
    _var('trainops_code_sync_excludes', [], entries={'code_sync': ('main',)}, type='list', elements='str',
         doc='Further exclude patterns, added to O(trainops_code_sync_default_excludes). Short knob C(excludes).'),
    _var('trainops_code_sync_replace_source', False, entries={'code_sync': ('main',)}, type='bool',
         doc=('The destination records the source synced into it (C(.trainops-source)); rsync mode refuses to sync '
              'another source over it, naming both, unless this is true. Short knob C(replace_source).')),
    _var('trainops_code_sync_include_git', False, entries={'code_sync': ('main',)}, type='bool',
         doc='Copy the C(.git) directory too (rsync mode). By default it is excluded.'),
    _var('trainops_code_sync_delete', False, entries={'code_sync': ('main',)}, type='bool',
         doc=('Delete files on the nodes that are not in the source (rsync C(--delete-after)); excluded paths are '
              'kept. Short knob C(delete).')),
    _var('trainops_code_sync_checksum', True, entries={'code_sync': ('main',)}, type='bool',
         doc=('Compare files by content (rsync C(--checksum)) instead of size and modification time, so a tree '
              'whose files were touched but not changed transfers nothing.')),
    _var('trainops_code_sync_compress', True, entries={'code_sync': ('main',)}, type='bool',
         doc='Compress data in transit (rsync C(--compress)).'),
    _var('trainops_code_sync_mkpath', True, entries={'code_sync': ('main',)}, type='bool',
         doc=('Let rsync create missing parent directories of O(trainops_code_sync_dest) (C(--mkpath), rsync 3.2.3 '
              'or later on the controller and the nodes). C(false) creates the directory with '
              'M(ansible.builtin.file) first, one more round trip per node.')),
    _var('trainops_code_sync_timeout', 300, entries={'code_sync': ('main',)}, type='int',
         doc='rsync I/O timeout in seconds (C(--timeout)); 0 waits forever.'),
    _var('trainops_code_sync_rsync_opts', [], entries={'code_sync': ('main',)}, type='list', elements='str',
         doc='Further rsync options, e.g. C(--bwlimit=50m).'),
    _var('trainops_code_sync_repo', '', entries={'code_sync': ('main',)}, type='str',
         doc=(('git mode, required. Repository URL as the nodes reach it (C(ssh://), C(https://), C(git://), '
               'C(file://) or a path on the nodes). Short knob C(repo).'),
              ('Shown and recorded without credentials (a token in its user part or query string, filter '
               "P(trainops.multinode.redact_url#filter)); git keeps it whole in each node's C(.git/config), so "
               'prefer SSH keys or a credential helper to a token in the URL.'),)),
    _var('trainops_code_sync_version', 'HEAD', entries={'code_sync': ('main',)}, type='str',
         doc=('git mode. Branch, tag, C(HEAD) or commit id to check out. Anything but a full commit id is resolved '
              'once, on the controller, against O(trainops_code_sync_resolve_from), so every node gets the same '
              'commit even if the branch moves meanwhile. Short knob C(version).')),
    _var('trainops_code_sync_resolve_from', '', entries={'code_sync': ('main',)}, type='str',
         doc=(('git mode. Where the controller resolves O(trainops_code_sync_version). A directory on the '
               'controller (a clone, bare or not; C(file://) accepted) is asked with C(git rev-parse), so any '
               'revision resolves; anything else is a URL asked with C(git ls-remote), where branches, tags and '
               'C(HEAD) resolve.'),
              'Empty means O(trainops_code_sync_repo).',)),
    _var('trainops_code_sync_force', False, entries={'code_sync': ('main',)}, type='bool',
         doc=("git mode. Discard local changes in the nodes' checkouts (modified tracked files are reset, "
              'untracked files in the way are overwritten). Without it a node with local changes fails, naming '
              'them. Short knob C(force).')),
    _var('src', entries={'code_sync': ('main',)}, type='str',
         doc=('Short form of C(trainops_code_sync_src); like every short form here, read only where '
              'C(trainops_code_sync_knobs) is true (C(playbooks/sync.yml), C(playbooks/setup.yml)).')),
    _var('dest', entries={'code_sync': ('main',)}, type='str',
         doc='Short form of C(trainops_code_sync_dest).'),
    _var('excludes', entries={'code_sync': ('main',)}, type='raw',
         doc=('Short form of C(trainops_code_sync_excludes); also one comma-separated string (C(-e '
              'excludes=data/,*.ckpt)).')),
    _var('delete', entries={'code_sync': ('main',)}, type='raw',
         doc='Short form of C(trainops_code_sync_delete).'),
    _var('replace_source', entries={'code_sync': ('main',)}, type='raw',
         doc='Short form of C(trainops_code_sync_replace_source).'),
    _var('sync_mode', entries={'code_sync': ('main',)}, type='raw',
         doc=('Short form of C(trainops_code_sync_mode) (V(rsync) or V(git)). Like every short form here it is '
              "declared as raw; the role's own checks name a bad value.")),
    _var('repo', entries={'code_sync': ('main',)}, type='str',
         doc='Short form of C(trainops_code_sync_repo).'),
    _var('version', entries={'code_sync': ('main',)}, type='str',
         doc='Short form of C(trainops_code_sync_version).'),
    _var('force', entries={'code_sync': ('main',)}, type='raw',
         doc='Short form of C(trainops_code_sync_force).'),
    _var('trainops_ssh_mesh_cluster', '{{ trainops_nodes_group }}', entries={'ssh_mesh': ('main',)}, type='str',
         doc=('Name of the cluster; names the key directory on the controller and the key comment. Give each '
              'cluster its own name, or clusters run from one checkout share a key.')),
    _var('trainops_ssh_mesh_key_dir', "{{ '.trainops/ssh' | ansible.builtin.realpath }}/{{ trainops_ssh_mesh_cluster }}",
         entries={'ssh_mesh': ('main',)},
         type='str',
         doc=('Controller directory (created 0700, with a C(.gitignore) of C(*)) that keeps the key pair between '
              'runs. By default C(.trainops/ssh/<cluster>) in the directory C(ansible-playbook) runs from, never '
              'inside the collection.')),
    _var('trainops_ssh_mesh_key_name', 'id_ed25519_trainops', entries={'ssh_mesh': ('main',)}, type='str',
         doc="File name of the key pair on the controller and in every node's C(~/.ssh)."),
    _var('trainops_ssh_mesh_key_comment', 'trainops-mesh-{{ trainops_ssh_mesh_cluster }}',
         entries={'ssh_mesh': ('main',)},
         type='str',
         doc='Comment of the public key, as it shows in authorized_keys.'),
    _var('trainops_ssh_mesh_authorized_keys_file', '', entries={'ssh_mesh': ('main',)}, type='str',
         doc=("The authorized_keys file the nodes' sshd reads for the training user (sshd_config "
              'C(AuthorizedKeysFile)). Empty means C(~/.ssh/authorized_keys).')),
    _var('trainops_ssh_mesh_shared_home', 'auto', entries={'ssh_mesh': ('main',)}, type='raw',
         doc=(("V(true) when the training user's home is one directory shared by all nodes (NFS), V(false) when "
               'each node has its own; V(auto) finds out from a token file in C(~/.ssh) '
               '(M(trainops.multinode.dir_token)).'),
              ('Shared, the files in it are written once, from the first node, instead of by every node at the '
               'same time.'),)),
    _var('trainops_ssh_mesh_port', '{{ ansible_port | default(22) }}',
         entries={'ssh_mesh': ('main', 'verify')},
         type='raw',
         doc="Port the nodes' sshd listens on for each other; known_hosts names become C([name]:port) when not 22."),
    _var('trainops_ssh_mesh_host_key_types', ['ed25519', 'ecdsa', 'rsa'],
         entries={'ssh_mesh': ('main',)},
         type='list',
         elements='str',
         choices=['ed25519', 'ecdsa', 'rsa'],
         doc="Host key types read from each node's sshd and trusted. Each node must have at least one."),
    _var('trainops_ssh_mesh_scan_address', '', entries={'ssh_mesh': ('main', 'verify')}, type='str',
         doc=("Address each node scans for its own host keys. Empty means the node's address (C(ansible_host), "
              "else the inventory name). It must resolve on the node to one of the node's own addresses or to "
              'loopback.')),
    _var('trainops_ssh_mesh_extra_names', [], entries={'ssh_mesh': ('main', 'verify')}, type='list', elements='str',
         doc=('Further names or addresses of a node (per host) that its peers use; added to known_hosts and '
              'C(~/.ssh/config) next to the inventory name, address and hostname.')),
    _var('trainops_ssh_mesh_from', [], entries={'ssh_mesh': ('main', 'verify')}, type='list', elements='str',
         doc=('Further sources the mesh key is accepted from (C(from=) of its authorized_keys line), for the whole '
              'group, as addresses, CIDR networks without host bits (C(10.9.0.0/24)), or address patterns with '
              'C(*) or C(?) (C(10.9.*)); C(!) first refuses one. Host names do not match (sshd compares the '
              "client's address).")),
    _var('trainops_ssh_mesh_from_cluster', True, entries={'ssh_mesh': ('main', 'verify')}, type='bool',
         doc=("Accept the mesh key from every node's interface addresses (facts C(all_ipv4_addresses) and "
              'C(all_ipv6_addresses), IPv6 link-local left out) and from loopback. V(false) accepts it only from '
              'C(trainops_ssh_mesh_from), which must then name a source.')),
    _var('trainops_ssh_mesh_key_permits', [],
         entries={'ssh_mesh': ('main',)},
         type='list',
         elements='str',
         choices=['pty', 'port-forwarding', 'agent-forwarding', 'X11-forwarding', 'user-rc'],
         doc=("The mesh key's line carries C(restrict) (no pty, no port, agent or X11 forwarding, no "
              'C(~/.ssh/rc)). These are given back to it. Launchers (pdsh, mpirun, DeepSpeed) need none; V(pty) '
              'for interactive C(ssh -t).')),
    _var('trainops_ssh_mesh_manage_config', True, entries={'ssh_mesh': ('main',)}, type='bool',
         doc=('Add a managed block to C(~/.ssh/config) with C(IdentityFile) of the mesh key, '
              'C(StrictHostKeyChecking yes) and the port for the names of every node. Without it C(~/.ssh/config) '
              'must name the key.')),
    _var('trainops_ssh_mesh_verify', True, entries={'ssh_mesh': ('main',)}, type='bool',
         doc='Check at the end that every node reaches every node (tag C(verify)).'),
    _var('trainops_ssh_mesh_verify_targets', ['address', 'hostname'],
         entries={'ssh_mesh': ('main', 'verify')},
         type='list',
         elements='str',
         choices=['address', 'hostname', 'inventory_hostname'],
         doc='The names of each node B that the check connects to.'),
    _var('trainops_ssh_mesh_connect_timeout', 10, entries={'ssh_mesh': ('main', 'verify')}, type='raw',
         doc='Seconds for ssh-keyscan and for each connection of the check.'),
    _var('trainops_container_install_engine', False, entries={'container': ('main',)}, type='bool',
         doc=("Install the engine from the distribution's packages (C(trainops_container_engine_packages)) when "
              'its client is missing, and start and enable the Docker service. Off by default; a node without the '
              'engine then fails with a message saying so.')),
    _var('trainops_container_engine_packages', {'docker': ['docker.io', 'python3-requests'], 'podman': ['podman']},
         entries={'container': ('main',)},
         type='dict',
         doc=('Packages that provide each engine, for C(trainops_container_install_engine). The defaults are '
              'Debian/Ubuntu names; other distributions set their own.')),
    _var('trainops_container_docker_host', '', entries={'container': ('main',)}, type='str',
         doc='Docker API endpoint on the node. Empty means C(unix:///var/run/docker.sock).'),
    _var('trainops_container_become', False, entries={'container': ('main',)}, type='bool',
         doc=('Use privilege escalation for the engine install and service, the image and the container tasks (a '
              "non-root Ansible user that may not use the engine's socket).")),
    _var('trainops_container_image', '', entries={'container': ('main',)}, type='str',
         doc=('The image the training container runs (must have C(python3) with torch, and C(sleep)).',
              ("Empty means the vendor default for the node's GPUs (C(trainops_container_image_amd), "
               "C(trainops_container_image_nvidia)), or with an image archive the archive's first tag. CPU nodes "
               'have no default image; with C(pull) the role fails asking for one.'),
              "With an archive, it must be one of the archive's tags.",)),
    _var('trainops_container_image_amd', 'rocm/pytorch:rocm6.4.1_ubuntu24.04_py3.12_pytorch_release_2.6.0',
         entries={'container': ('main',)},
         type='str',
         doc='Default image on nodes with AMD GPUs (ROCm PyTorch).'),
    _var('trainops_container_image_nvidia', 'nvcr.io/nvidia/pytorch:25.04-py3',
         entries={'container': ('main',)},
         type='str',
         doc="Default image on nodes with NVIDIA GPUs (NVIDIA's PyTorch container)."),
    _var('trainops_container_gpu_vendor', "{{ trainops_gpu_vendor | default('auto') }}",
         entries={'container': ('main',)},
         type='str',
         choices=['auto', 'amd', 'nvidia', 'none'],
         doc=('GPU vendor of the nodes. C(auto) detects it per node (C(/dev/kfd) means amd, C(/proc/driver/nvidia) '
              'nvidia, else none). Defaults to C(trainops_gpu_vendor), shared with the job role.')),
    _var('trainops_container_image_source', 'auto',
         entries={'container': ('main',)},
         type='str',
         choices=['auto', 'pull', 'archive'],
         doc=('Where the image comes from. C(pull) pulls it from its registry; C(archive) ships '
              'C(trainops_container_image_archive) from the controller (air-gapped); C(auto) is C(archive) when '
              'C(trainops_container_image_archive) is set, else C(pull).')),
    _var('trainops_container_image_force_pull', False, entries={'container': ('main',)}, type='bool',
         doc='With C(pull), pull again even when the node has the tag (to pick up a tag that moved).'),
    _var('trainops_container_image_archive', '', entries={'container': ('main',)}, type='str',
         doc=(('An image archive on the controller (C(docker save) or C(podman save --format docker-archive), '
               'plain or gzip). Its image id is read on the controller from its C(manifest.json); a node that '
               "already has that image id under the image's name gets nothing (no copy, no load); any other node "
               'gets it copied to C(trainops_container_image_archive_dir), its sha256 compared with the '
               "controller's, loaded, and the copy removed."),
              'C(~) is expanded; a relative path is taken from where ansible-playbook runs.',)),
    _var('trainops_container_image_archive_sha256', '', entries={'container': ('main',)}, type='str',
         doc=("The archive's expected sha256 (64 hex digits). Empty means the checksum computed on the controller "
              'is the reference the copies are checked against.')),
    _var('trainops_container_image_archive_dir', '{{ trainops_node_root }}/images',
         entries={'container': ('main',)},
         type='str',
         doc='Directory on the node the archive is copied to.'),
    _var('trainops_container_image_archive_keep', False, entries={'container': ('main',)}, type='bool',
         doc='Keep the copied archive on the node after loading it.'),
    _var('trainops_container_mounts', [], entries={'container': ('main',)}, type='list', elements='str',
         doc='Extra bind mounts, C(/host/path:/container/path[:options]) (C(ro), C(rw), ...).'),
    _var('trainops_container_shm_size', '16g', entries={'container': ('main',)}, type='str',
         doc=("Size of the container's C(/dev/shm) (e.g. C(16g)). The container shares the host's IPC namespace, "
              "so it uses the node's C(/dev/shm); the value is passed to the engine for the record.")),
    _var('trainops_container_ulimits', ['memlock:-1:-1', 'stack:67108864:67108864'],
         entries={'container': ('main',)},
         type='list',
         elements='str',
         doc=('Resource limits, C(NAME:SOFT[:HARD]) with -1 for unlimited. Memlock unlimited lets RDMA register '
              'memory.')),
    _var('trainops_container_cap_add', ['IPC_LOCK'], entries={'container': ('main',)}, type='list', elements='str',
         doc=('Capabilities added to the container (C(IPC_LOCK) to pin memory; add e.g. C(SYS_PTRACE) for '
              'profilers).')),
    _var('trainops_container_security_opts', [], entries={'container': ('main',)}, type='list', elements='str',
         doc='Security options, e.g. C(seccomp=unconfined).'),
    _var('trainops_container_privileged', False, entries={'container': ('main',)}, type='bool',
         doc='Run the container privileged (every device and capability, no seccomp). Only when asked.'),
    _var('trainops_container_rdma', 'auto', entries={'container': ('main',)}, type='raw',
         doc=('Pass C(/dev/infiniband) to the container. C(auto) when the node has it, C(true) requires it, '
              'C(false) never.')),
    _var('trainops_container_devices', [], entries={'container': ('main',)}, type='list', elements='str',
         doc='Extra devices, C(/dev/host[:/dev/container][:rwm]).'),
    _var('trainops_container_env', {}, entries={'container': ('main',)}, type='dict',
         doc="Extra environment of the container. A launch passes each rank's environment explicitly anyway."),
    _var('trainops_container_labels', {}, entries={'container': ('main',)}, type='dict',
         doc=('Extra labels. The role always adds C(org.trainops.container=<name>); C(playbooks/clean.yml) removes '
              'only containers that carry it.')),
    _var('trainops_container_command', ['sleep', 'infinity'],
         entries={'container': ('main',)},
         type='list',
         elements='str',
         doc='The command that keeps the container alive between runs; work runs in it through C(exec).'),
    _var('trainops_container_restart_policy', 'unless-stopped',
         entries={'container': ('main',)},
         type='str',
         choices=['no', 'on-failure', 'always', 'unless-stopped'],
         doc='Restart policy of the container.'),
    _var('trainops_container_recreate', False, entries={'container': ('main',)}, type='bool',
         doc='Recreate the container even when nothing changed.'),
    _var('trainops_sbatch_inventory', '', entries={'sbatch': ('main',)}, type='path', required=True,
         doc=("The C(*.slurm.yml) inventory source (plugin C(trainops.multinode.slurm)) the job's playbook reads "
              'its nodes from. It must be readable on the first allocated node.')),
    _var('trainops_sbatch_nodes', 2, entries={'sbatch': ('main',)}, type='int',
         doc='Nodes to allocate (C(sbatch --nodes)), at least 1.'),
    _var('trainops_sbatch_playbook', '{{ playbook_dir }}/launch.yml', entries={'sbatch': ('main',)}, type='path',
         doc=('The playbook the job runs. It must wait for the training to end (C(launch.yml) does unless C(wait) '
              'is false), or the exit code says only that the start worked.')),
    _var('trainops_sbatch_stop_playbook', '{{ playbook_dir }}/stop.yml', entries={'sbatch': ('main',)}, type='path',
         doc=('The playbook the batch script runs, with the same inventory and variables, when the job is '
              'cancelled or reaches its time limit; it stops the ranks, which run outside the job unless '
              'C(pam_slurm_adopt) adopts the SSH sessions.')),
    _var('trainops_sbatch_stop_seconds', 120, entries={'sbatch': ('main',)}, type='int',
         doc=('Seconds before the time limit at which Slurm sends the batch script C(USR1) (C(sbatch '
              '--signal=B:USR1@N)), so that the stop playbook has time to run; the script then waits for the limit '
              '(sacct C(TIMEOUT)). From 1 to 65535.')),
    _var('trainops_sbatch_checkpoint_seconds', 60, entries={'sbatch': ('main',)}, type='int',
         doc=("With launcher=ssh, on that warning the stop playbook first sends the run's checkpoint signal to "
              "every node's supervisor and ranks and waits up to this many seconds for their checkpoint, then "
              'stops them; the outcome is C(timed_out) with the last checkpoint. Less than '
              'O(trainops_sbatch_stop_seconds); V(0) sends no signal.')),
    _var('trainops_sbatch_extra_vars', {}, entries={'sbatch': ('main',)}, type='dict',
         doc=("Variables for the job's playbook (its C(-e)), written to a 0600 JSON file next to the script. "
              'Secrets do not belong here; pass their names with C(trainops_secret_env) and export them before '
              'C(sbatch).')),
    _var('trainops_sbatch_options', [], entries={'sbatch': ('main',)}, type='list', elements='str',
         doc=(('More sbatch options, one C(--name=value) or C(-x value) per item, without whitespace in the value '
               'or a control character, written as C(#SBATCH) lines (for example C(--partition=gpu), '
               'C(--time=02:00:00), C(--gpus-per-node=8)).'),
              ('Refused, also abbreviated, because the role sets them or they break the job it runs - '
               'C(--job-name) (C(-J)), C(--nodes) (C(-N)), C(--output) (C(-o)), C(--signal), C(--requeue), '
               'C(--no-requeue), C(--parsable), C(--wait) (C(-W)) and C(--wrap).'),)),
    _var('trainops_sbatch_job_name', 'trainops', entries={'sbatch': ('main',)}, type='str',
         doc=("The job's name (C(sbatch --job-name)) and the stem of the script's file name - letters, digits, "
              'C(.), C(_), C(+) and C(-), starting with a letter or digit, at most 100 characters.')),
    _var('trainops_sbatch_requeue', False, entries={'sbatch': ('main',)}, type='bool',
         doc=(('Let Slurm requeue the job after a node failure or C(scontrol requeue) (C(#SBATCH --requeue)). An '
               'attempt Slurm restarted (C(SLURM_RESTART_COUNT) of at least 1) resumes the run the previous '
               "attempt started from its latest checkpoint (the job role's C(trainops_resume_from)); each "
               "attempt's run id is recorded in C(<script stem>.<job id>.run_id) (0600) next to the script."),
              ("False writes C(#SBATCH --no-requeue), so that a cluster's C(JobRequeue=1) (Slurm's default) does "
               'not run the whole launch again from scratch.'),)),
    _var('trainops_sbatch_dir', '{{ playbook_dir | dirname }}/sbatch', entries={'sbatch': ('main',)}, type='path',
         doc=("Where the script, its variables and by default the job's output go; the first allocated node must "
              'see it.')),
    _var('trainops_sbatch_output', '{{ trainops_sbatch_dir }}/%x-%j.out', entries={'sbatch': ('main',)}, type='str',
         doc=("The job's output file (C(sbatch --output); C(%x) is the job name, C(%j) the job id), without "
              'whitespace or control characters.')),
    _var('trainops_sbatch_ansible_playbook', '{{ ansible_playbook_python | dirname }}/ansible-playbook',
         entries={'sbatch': ('main',)},
         type='path',
         doc='The C(ansible-playbook) the job runs.'),
    _var('trainops_sbatch_submit', True, entries={'sbatch': ('main',)}, type='bool',
         doc='Submit the script; false only renders it (to submit by hand with C(sbatch)).'),
    _var('trainops_sbatch_wait', False, entries={'sbatch': ('main',)}, type='bool',
         doc=('Wait for the job to end (C(sbatch --wait)); the task then fails when the job fails, with its exit '
              'code.')),
)
