#!/usr/bin/python
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


DOCUMENTATION = r"""
module: preflight
short_description: Read-only launch checks of one training node, in one run
version_added: 0.1.0
author:
  - trainops maintainers (@trainops)
description:
  - Runs, in one module run on the node, every check the launch needs before it creates or starts anything there,
    and returns everything it found, so that one launch costs one round trip per node for its checks.
  - The node's facts, as M(trainops.multinode.node_facts) returns them (GPUs, RDMA, the interface that reaches the
    master), under C(trainops_node); a bad interface override is a problem. Only procfs/sysfs are read here, no vendor
    tool runs (C(nvidia-smi), C(amd-smi)), so the GPU interconnect is not reported.
  - The training interpreter O(python) and its torch. By default the installed version is read from the package
    metadata, which takes milliseconds; O(import_torch=true) imports torch (1-2 s of CPU), which also proves that its
    libraries load. On GPU nodes torch is imported all the same, to read the NCCL/RCCL the ranks' process maps (see
    M(trainops.multinode.node_facts)); an import that fails there is reported in the library facts, not as a problem.
  - A job still running in this node's own directory below O(state_dir) (see M(trainops.multinode.torchrun)); a
    problem unless O(replace=true).
  - With O(training_network), that the interface the node will train over, and the master's address, are on it.
  - O(script) under O(workspace_dir), when given.
  - The master port, when O(master_port) is given (on the master); a problem when something listens on it, unless
    O(replace=true).
  - Every problem found is reported with what to do about it; with O(fail_on_problems=true) the module fails listing
    all of them.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.facts
  - trainops.multinode._attributes
  - trainops.multinode._node_network
options:
  python:
    description:
      - The interpreter the training runs with. Not checked when omitted.
    type: str
  container:
    description:
      - Check O(python) and its torch inside this running container instead of on the node (the training runs there).
    type: str
  container_engine:
    description:
      - The engine CLI for O(container).
    type: str
    default: docker
  import_torch:
    description:
      - Import torch instead of reading its version from the package metadata.
    type: bool
    default: false
  state_dir:
    description:
      - The state root (as M(trainops.multinode.torchrun) uses it); C(~) is expanded on the node. The node's own
        directory below it is C(<state_dir>/<node_id or host name>).
      - The job recorded there is reported, and is a problem while it runs unless O(replace=true).
    type: str
  node_id:
    description:
      - The name of the node's own directory below O(state_dir) instead of its host name (see
        M(trainops.multinode.torchrun)).
    type: str
  identify_dirs:
    description:
      - For each of O(state_dir) and O(workspace_dir) named here, return the token of that directory
        (C(.trainops-dir-id), created by M(trainops.multinode.dir_token)) in RV(paths), V(null) when it has none yet.
        Nodes that return the same token share that directory (an NFS home, say); the launch keeps per-node state
        apart and syncs a shared workspace once.
      - Read-only. The launch creates missing tokens only after every check on every node passed.
    type: list
    elements: str
    choices: [state_dir, workspace_dir]
    default: []
  training_network:
    description:
      - The network the training traffic must use, in CIDR form (C(10.0.0.0/16)), when the nodes also have another one
        (a management network that Ansible uses).
      - A problem when the interface chosen for training has no address on it, and (on the master, O(master_port)
        given) when O(master_addr) is not on it.
    type: str
  workspace_dir:
    description:
      - The node's workspace; C(~) is expanded on the node. Its absolute path is returned.
    type: str
  script:
    description:
      - The training script relative to O(workspace_dir); a problem when it is not a file. Not checked when omitted.
    type: str
  git_path:
    description:
      - Read the git state of this checkout on the node (see M(trainops.multinode.git_state)); C(~) is expanded on the
        node. It is returned, not judged; the launch compares all nodes with the filter
        P(trainops.multinode.git_compare#filter).
    type: str
  need_rsync:
    description:
      - The workspace will be synced to the node with rsync; a problem when C(rsync) is not on the node's C(PATH).
    type: bool
    default: false
  find_executables:
    description:
      - Look these programs up on the node's C(PATH) (the login environment of Ansible's connection) and return
        where they are in RV(executables). Not judged here, so that the controller can name every node that lacks
        one at once (the job role does this for the profiler of C(profile=nsys) or C(profile=rocprof)).
    type: list
    elements: str
    default: []
  master_port:
    description:
      - Probe this port on the node (give it on the master only). Not probed when omitted.
    type: int
  reach_port:
    description:
      - Check that this node reaches the master's O(reach_port) from the address of the interface it will use (see
        O(socket_ifname)), retrying for O(reach_timeout) seconds; a problem when it cannot. Give the master port on
        every node, and O(reach_peers) on the master.
      - Skipped in check mode.
    type: int
  reach_peers:
    description:
      - On the master only, open O(reach_port) for the check with a short-lived listener that exits once this many
        nodes (the master included) have connected, or after O(reach_timeout) + 10 seconds.
      - The listener runs detached, so that the nodes' checks, run in parallel, can connect to it; it needs C(forks)
        at least the number of nodes, or the master first in the inventory.
    type: int
  reach_timeout:
    description:
      - Seconds a node keeps trying to reach the master's port.
    type: int
    default: 20
  replace:
    description:
      - The launch will replace a running job, so neither a running job nor a taken master port is a problem.
    type: bool
    default: false
  gpu_ids:
    description:
      - The GPUs a Slurm job holds on this node, as Slurm numbers them (the C(trainops.multinode.slurm) inventory's
        C(trainops_slurm_gpu_ids)). Where this session may use only some of the host's GPU device files (a job's
        devices cgroup, C(ConstrainDevices) with C(pam_slurm_adopt)), RV(gpu_view) gives them numbered from 0 among
        those, as the ranks will see them.
    type: list
    elements: int
    default: []
  nproc_per_node:
    description:
      - The ranks the launch starts here; where the session may use only some GPUs, fewer visible GPUs is a problem.
    type: int
  fail_on_problems:
    description:
      - Fail, listing every problem, when any was found. With V(false) the problems are only returned.
    type: bool
    default: true
requirements:
  - C(ip) from iproute2 with JSON output (C(-j)).
notes:
  - Read-only; safe in check mode.
seealso:
  - module: trainops.multinode.node_facts
  - module: trainops.multinode.torchrun
"""

EXAMPLES = r"""
- name: Check a node before launching on it
  trainops.multinode.preflight:
    master_addr: 10.0.0.11
    python: /opt/venv/bin/python
    state_dir: ~/.trainops/state
    workspace_dir: ~/.trainops/workspace
    script: train.py
    master_port: "{{ 29500 if node_rank == 0 else omit }}"
  register: checked

- name: Use what it found
  ansible.builtin.debug:
    msg: "{{ inventory_hostname }}: torch {{ checked.torch.version }} on {{ trainops_node.network.ifname }}"
"""

RETURN = r"""
gpu_view:
  description:
    - The GPUs the ranks will see from this node's session (module_utils/_gpu_visibility.py). C(constrained) is true when
      the session may use only some of the host's GPU device files (a Slurm job's devices cgroup); C(ids) are then the
      local indexes of O(gpu_ids) among those (what to put into C(CUDA_VISIBLE_DEVICES)/C(ROCR_VISIBLE_DEVICES)), else
      O(gpu_ids) as given; C(sees) is how many GPUs the ranks will see, C(detail) what the node saw.
  returned: when the facts could be detected
  type: dict
  sample: {constrained: true, ids: [0, 1, 2, 3], sees: 4, problems: [],
           detail: "this session may use 4 of the host's 8 GPU devices (/dev/nvidia4, ...); devices cgroup /slurm/uid_1000/job_13/step_extern"}
ansible_facts:
  description: The node's facts under C(trainops_node), as M(trainops.multinode.node_facts) returns them.
  returned: when the facts could be detected
  type: dict
  sample: {trainops_node: {gpu: {vendor: none, count: 0}, network: {ifname: ens5, address: 10.0.0.12}}}
problems:
  description: What stops a launch on this node, each with what to do about it. Empty when the node is ready.
  returned: always
  type: list
  elements: str
  sample: ["port 29500 is already in use on the master (10.0.0.11). Pick another one with -e master_port=NNNNN, ..."]
torch:
  description:
    - The training interpreter's C(python) version and C(executable), torch's C(version) and C(location), whether it
      was C(imported), and C(error) when torch could not be found or imported.
  returned: when O(python) is given
  type: dict
  sample: {python: 3.11.9, executable: /opt/venv/bin/python, version: 2.13.0+cpu, imported: false, error: null}
job:
  description: The job recorded in O(state_dir), as M(trainops.multinode.torchrun) with O(trainops.multinode.torchrun#module:state=query) returns it.
  returned: when O(state_dir) is given
  type: dict
  sample: {run_id: null, status: absent}
paths:
  description:
    - The absolute C(state_root) (O(state_dir)), this node's own C(state_dir) below it and C(workspace_dir) on the node
      (C(null) when not given).
    - With O(identify_dirs), C(state_root_token) and C(workspace_token).
  returned: always
  type: dict
  sample: {state_root: /home/train/.trainops/state, state_dir: /home/train/.trainops/state/gpu-01,
           workspace_dir: /home/train/.trainops/workspace, state_root_token: 3f0c..., workspace_token: 9a1b...}
host:
  description: The node's C(hostname), C(boot_id) and C(machine_id).
  returned: always
  type: dict
script_exists:
  description: Whether O(script) is a file under O(workspace_dir).
  returned: when O(script) and O(workspace_dir) are given
  type: bool
git:
  description: The git state of O(git_path), as M(trainops.multinode.git_state) returns it (up to 20 files listed).
  returned: when O(git_path) is given
  type: dict
  sample: {state: repository, branch: main, commit: 3f1c2e9d0a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d, dirty: false}
rsync:
  description: The path of C(rsync) on the node, C(null) when it has none.
  returned: when O(need_rsync=true)
  type: str
  sample: /usr/bin/rsync
executables:
  description: Each program of O(find_executables) with its path on the node, C(null) when it is not on the C(PATH).
  returned: when O(find_executables) is not empty
  type: dict
  sample: {nsys: /usr/local/bin/nsys}
reach:
  description:
    - Whether the master's port was reached (C(ok)) from C(source) on C(ifname) to C(target), after how many C(attempts)
      and C(ms), and the last C(error).
  returned: when O(reach_port) is given, not in check mode
  type: dict
  sample: {ok: true, ifname: ens5, source: 10.0.0.12, target: "10.0.0.11:29500", attempts: 1, ms: 2, error: null}
master_port_free:
  description: Whether nothing listens on O(master_port); C(null) when not probed.
  returned: always
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.trainops.multinode.plugins.module_utils._git_state import Runner as GitRunner
from ansible_collections.trainops.multinode.plugins.module_utils._node_facts import Runner
from ansible_collections.trainops.multinode.plugins.module_utils._preflight import preflight


def main():
    module = AnsibleModule(
        argument_spec=dict(
            master_addr=dict(type='str', required=True),
            socket_ifname=dict(type='str', default='auto'),
            check_ifname=dict(type='bool', default=True),
            python=dict(type='str'),
            import_torch=dict(type='bool', default=False),
            container=dict(type='str'),
            container_engine=dict(type='str', default='docker'),
            state_dir=dict(type='str'),
            node_id=dict(type='str'),
            workspace_dir=dict(type='str'),
            identify_dirs=dict(type='list', elements='str', default=[], choices=['state_dir', 'workspace_dir']),
            training_network=dict(type='str'),
            script=dict(type='str'),
            git_path=dict(type='str'),
            need_rsync=dict(type='bool', default=False),
            find_executables=dict(type='list', elements='str', default=[]),
            master_port=dict(type='int'),
            reach_port=dict(type='int'),
            reach_peers=dict(type='int'),
            reach_timeout=dict(type='int', default=20),
            replace=dict(type='bool', default=False),
            gpu_ids=dict(type='list', elements='int', default=[]),
            nproc_per_node=dict(type='int'),
            fail_on_problems=dict(type='bool', default=True),
            root=dict(type='path', default='/'),
        ),
        supports_check_mode=True,
    )
    # no vendor tool runs here (Runner without `which`): the launch needs GPU counts and RDMA ports, which
    # procfs/sysfs give in milliseconds; trainops.multinode.node_facts adds what nvidia-smi/amd-smi tell
    runner = Runner(lambda argv: module.run_command(argv, environ_update={'LC_ALL': 'C'}, handle_exceptions=False))
    git_runner = None
    if module.params['git_path']:
        git = module.get_bin_path('git')
        if git:
            git_runner = GitRunner(lambda argv, env: module.run_command(
                argv, environ_update=env, expand_user_and_vars=False, errors='replace'), git=git)
    result = preflight(runner, module.params, root=module.params['root'], check_mode=module.check_mode,
                       git_runner=git_runner)
    if result['problems'] and module.params['fail_on_problems']:
        module.fail_json(msg=' | '.join(result['problems']), **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
