# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""What each role variable is for users: the declarations the generated files are written from.

``hack/gen_docs.py`` (one command; ``--check`` in the tests) writes from these declarations and the rows of
``_knobs.py``: every role's ``defaults/main.yml`` and ``meta/argument_specs.yml`` (every entry point),
the setting options of ``plugins/modules/nccl_env.py``'s documentation, and ``docs/reference/knobs.md``. Nothing
imports this module at run time.

* ``ENTRY_POINTS``: each role's entry points, their short description and description.
* ``VARIABLES`` (job.py: the job role's, roles.py: the other roles'): one :class:`Var` per role variable: its
  default (``role_default=False``: the argument spec's default only, for an entry point's parameter the role's
  defaults leave undefined), its description (one for every role, or ``{role: description}``), the entry points
  that take it, its argument spec (type, elements, choices, required, no_log, options) and, for a knob with a
  ``nccl_env`` setting, the module's ``option`` (description, default). A knob's type and choices are its row's
  (``_knobs.py``; the module option's are ``_knobs.option``); its roles are the row's ``roles``, and it is an option
  of every entry point of that role's ``KNOB_ENTRIES`` group, plus the ``entries`` given here.
* ``OPTIONS``: the ``nccl_env`` module's option of a knob setting without a role variable.

``problems()`` names every declaration that contradicts the registry or is missing; the generator writes nothing
while there is one.
"""

from __future__ import annotations

from ansible_collections.trainops.multinode.plugins.module_utils import _knobs
from ansible_collections.trainops.multinode.plugins.module_utils._declarations import job, roles as _roles
from ansible_collections.trainops.multinode.plugins.module_utils._declarations.base import NO_DEFAULT

KNOB_ENTRIES = {'job': ('main',), 'nccl_env': ('main', 'compute')}
"""The entry points of a role that take every knob of the role (one group: a knob is declared once for them)."""

ENTRY_POINTS = {
    'job': {
        'main': dict(short_description='Launch a ranked multi-node torchrun job, wait, collect and summarize it',
                     description=('Validates every input on the controller, checks every node, starts torchrun on all '
                                  'nodes or none, waits with progress, and collects logs, metrics and a manifest into '
                                  'a new experiment directory.')),
        'status': dict(short_description='Show a job on every node and collect it once it has ended'),
        'logs': dict(short_description="Print one rank's log lines, or follow them live while the job runs"),
        'stop': dict(short_description='Stop a job on every node and collect it'),
        'sweep': dict(short_description=('Run a grid of launch knobs, one experiment per point, with a results table '
                                         'and plots'),
                      description=(('Entry point of C(playbooks/sweep.yml); takes every option of the main entry point '
                                    'for all points.'),
                                   ('One validation, preflight and workspace sync, then each point starts, waits and is '
                                    'collected (docs/sweeps.md).'),)),
        'health': dict(short_description=("Find the bad node - every node's GPU and NIC state, then all-reduces of all "
                                          'nodes, pairs or halves'),
                       description=(('Entry point of C(playbooks/health.yml); takes every option of the main entry point '
                                     '(C(trainops_nproc_per_node), the NCCL knobs, C(trainops_experiments_dir), ...) for '
                                     'its measurements (docs/health.md).'),
                                    ("Every node's PCIe links, RDMA ports and GPU memory errors (module "
                                     'C(trainops.multinode.node_health)), then a short all-reduce of all nodes; when it '
                                     'fails or is below the floor, every pair up to C(trainops_health_all_pairs_max) '
                                     'nodes, else (or beyond) a bisection. A pair named alone is measured again first. '
                                     'Writes C(health.json) in C(<trainops_experiments_dir>/health_<timestamp>/) and '
                                     'fails when a node is suspect.'),)),
        'collect': dict(short_description='Collect a job that has ended (or is given up) into its experiment directory',
                        description=(('Stops what is left of the job when a node failed or the wait gave up, fetches '
                                      "every node's log, outputs and profiles, finishes the manifest with the outcome, "
                                      'prints the summary and publishes it (set_stats), then fails naming the node(s) '
                                      'that failed unless O(trainops_collect_fail=false).'),
                                     ('Included by the launch after the wait, by each point of a sweep, and by the status '
                                      'and stop entry points. After a wait it also reads what the wait recorded on each '
                                      'node (its verdict and error).'),)),
    },
    'nccl_env': {
        'main': dict(short_description='Detect every node and write its NCCL/RCCL environment file',
                     description=("Runs M(trainops.multinode.node_facts) on every node, computes each node's NCCL/RCCL "
                                  'environment from its own facts with M(trainops.multinode.nccl_env), checks that all '
                                  'nodes use the same transport, and writes the env file (optionally '
                                  'C(/etc/nccl.conf)).')),
        'compute': dict(short_description=("Compute every node's NCCL/RCCL environment from trainops_node facts "
                                           '(controller only)'),
                        description=('Used by the job role after its preflight: needs C(trainops_node) on every node; '
                                     'registers C(__trainops_nccl) per node and fails on errors or transports that differ '
                                     'across nodes.')),
    },
    'code_sync': {
        'main': dict(short_description="Bring the controller's work tree or one exact git commit to every node",
                     description=(('C(rsync) mode (the default) copies a directory of the controller to every node '
                                   "with M(ansible.posix.synchronize), over each node's own SSH settings with its host "
                                   'key checked (C(ansible_connection=local) nodes are copied to locally). Contents '
                                   'are compared by checksum, so a tree that has not changed transfers nothing and '
                                   'reports no change.'),
                                  ('C(git) mode resolves a branch, tag or HEAD once, on the controller, to a commit '
                                   'id, and every node fetches O(trainops_code_sync_repo) and checks out exactly that '
                                   'commit (detached HEAD). A node whose checkout has local changes fails unless '
                                   'O(trainops_code_sync_force).'),
                                  ('Sets the fact C(trainops_code_sync) on every node (mode, dest, changed, '
                                   'check_mode, files_transferred, items; rsync also src, deleted, dirs_created; git '
                                   'also repo, version, commit, before, after, local_changes) and publishes all of '
                                   'them keyed by host with M(ansible.builtin.set_stats) as C(trainops_code_sync).'),
                                  ('With O(trainops_code_sync_knobs) (playbooks/sync.yml sets it) the short knobs '
                                   'C(src), C(dest), C(excludes), C(delete), C(sync_mode), C(repo), C(version) and '
                                   'C(force) take the place of these variables when given.'),)),
    },
    'ssh_mesh': {
        'main': dict(short_description=('Passwordless SSH between all nodes for the training user, with host-key '
                                        'checking on'),
                     description=(('One ed25519 key pair for the training user (the user the tasks run as, i.e. '
                                   'C(ansible_user), or C(become_user) when the play uses become), generated once on '
                                   'the controller in C(trainops_ssh_mesh_key_dir) and reused by later runs.'),
                                  ('On every node of C(trainops_nodes_group) the private key goes to '
                                   'C(~/.ssh/<trainops_ssh_mesh_key_name>) (0600, never printed), the public key into '
                                   'the authorized_keys that the node\'s sshd reads as C(from="<every node\'s addresses, '
                                   'loopback, trainops_ssh_mesh_from>",restrict <key>) (the key works only from the '
                                   'cluster, without pty or forwarding; C(trainops_ssh_mesh_key_permits) gives some '
                                   'back), and the host keys of all nodes into C(~/.ssh/known_hosts) under their '
                                   'inventory name, address and hostname. Each node reads its own host keys from its '
                                   'own sshd (ssh-keyscan to one of its own addresses); host-key checking stays on '
                                   'everywhere.'),
                                  ('Before anything is written, the names every node goes by (inventory name, address, '
                                   'the host names it reports, C(trainops_ssh_mesh_extra_names)) must be host names or '
                                   'addresses, each of one node only; a reported host name must be an RFC 1123 host '
                                   "name, and one that ssh reads as an address must be the node's own."),
                                  ("A block in C(~/.ssh/config) names the key for the mesh's hosts, so plain C(ssh "
                                   '<node>) works.'),
                                  ('Ends by checking that C(ssh -o BatchMode=yes -o StrictHostKeyChecking=yes B true) '
                                   'works from every node A to every node B (C(trainops_ssh_mesh_verify)), failing '
                                   'with a table of the broken pairs.'),
                                  ('Idempotent; in check mode it reports what would change and changes nothing (the '
                                   'key pair is not generated).'),)),
        'verify': dict(short_description='Check that every node reaches every node over SSH, with host-key checking on',
                       description=('From every node A to every node B of C(trainops_nodes_group), by each name in '
                                    'C(trainops_ssh_mesh_verify_targets), runs C(ssh -o BatchMode=yes -o '
                                    'StrictHostKeyChecking=yes B true) as the training user. Changes nothing. Fails with '
                                    'a table of the broken pairs (from, to, name, error) naming them.')),
    },
    'container': {
        'main': dict(short_description=('One long-lived training container per node, from a pulled image or a '
                                        'shipped image archive'),
                     description=(('Ensures a container engine on every node (Docker by default, Podman as an option), '
                                   "installing it from the distribution's packages only when asked."),
                                  ('Ensures the image on every node, pulled from a registry (a default per GPU vendor) '
                                   'or loaded from an image archive shipped from the controller (air-gapped), copied '
                                   "only to nodes that lack the archive's image id and checked with sha256 after the "
                                   'copy.'),
                                  ('Runs one long-lived container per node, named C(trainops_container_name), with the '
                                   "host's network, IPC and PID namespaces, the node's trainops directory mounted at "
                                   'the same absolute path, the GPU (AMD C(/dev/kfd), C(/dev/dri) with groups '
                                   'video/render; NVIDIA GPU device requests) and RDMA (C(/dev/infiniband)) devices, '
                                   'memlock unlimited and C(IPC_LOCK); unprivileged unless asked. A re-run changes '
                                   'nothing; a new image or other settings recreate it.'),
                                  ('Sets the fact C(trainops_container) on every node (name, engine, engine_bin, '
                                   'engine_version, docker_host, image, image_id, image_source, image_loaded, '
                                   'container_id, changed, node_root, state_dir, runs_dir, workspace_dir, mounts, '
                                   'gpu_vendor, devices, groups, network_mode, ipc_mode, pid_mode, privileged).'),
                                  ('The Docker modules (community.docker) need the Python package C(requests) in the '
                                   'Python Ansible runs on the node.'),)),
    },
    'sbatch': {
        'main': dict(short_description='Render a Slurm batch script that runs a launch unattended, and submit it',
                     description=('Writes a batch script and the variables of the playbook it runs (0600) into '
                                  'O(trainops_sbatch_dir), and submits it with C(sbatch). On the first allocated node '
                                  'the script runs C(ansible-playbook) with the M(trainops.multinode.slurm) inventory '
                                  'of its own allocation and exits with its return code, so the Slurm job completes '
                                  "(exit code 0) exactly when the playbook succeeded and fails with the playbook's "
                                  'code otherwise.')),
    },
}

VARIABLES = job.VARIABLES + _roles.VARIABLES

OPTIONS = {
    # the nccl_env module's option of a knob setting that has no role variable (the others: ``option`` of a Var)
    'require_transport': dict(doc=('Set C(NCCL_NET) to V(IB) (InfiniBand/RoCE), V(Libfabric) (EFA, the name aws-ofi-nccl '
                                   'registers) or V(Socket) (TCP) so NCCL fails instead of silently falling back to sockets.'), default=False),
}


BY_NAME = dict((var.name, var) for var in VARIABLES)
_BY_VAR = dict((knob.var, knob) for knob in _knobs.KNOBS if knob.var)


def _knob(var):
    return _BY_VAR.get(var.name)


def roles(var):
    """The roles that declare a variable, in the order of ``ENTRY_POINTS``."""
    knob = _knob(var)
    named = set(var.entries) | set(knob.roles if knob else ())
    return [role for role in ENTRY_POINTS if role in named]


def entry_points(var, role):
    """The entry points of ``role`` that take ``var``, in the role's order."""
    knob = _knob(var)
    named = set(var.entries.get(role, ()))
    if knob is not None and role in knob.roles:
        named |= set(KNOB_ENTRIES[role])
    return [entry for entry in ENTRY_POINTS[role] if entry in named]


def description(var, role):
    """The variable's description in ``role``: a list of paragraphs."""
    doc = var.doc.get(role) if isinstance(var.doc, dict) else var.doc
    return [doc] if isinstance(doc, str) else list(doc or ())


def argument_spec(var, role):
    """The variable's option in the argument specs of ``role`` (description, type, elements, choices, ..., default)."""
    spec = dict(description=description(var, role))
    spec.update((key, value) for key, value in var.spec.items() if key != 'choices')
    knob = _knob(var)
    spec['type'] = knob.type if knob is not None else var.spec.get('type', 'str')
    choices = knob.choices if knob is not None else var.spec.get('choices')
    ordered = dict(description=spec.pop('description'), type=spec.pop('type'))
    if 'elements' in spec:
        ordered['elements'] = spec.pop('elements')
    if choices:
        ordered['choices'] = list(choices)
    ordered.update(spec)
    if var.default != NO_DEFAULT and not var.spec.get('required'):
        ordered['default'] = var.default
    return ordered


def role_defaults(role):
    """``{variable: default}`` of ``role``'s defaults/main.yml, in declaration order."""
    return dict((var.name, var.default) for var in VARIABLES
                if role in roles(var) and var.role_default and var.default != NO_DEFAULT)


def _module_declaration(knob, variables=None, options=None):
    """The declared ``nccl_env`` option of a knob's setting ({doc, default}), or None."""
    if knob.var:
        var = dict((var.name, var) for var in (VARIABLES if variables is None else variables)).get(knob.var)
        return var.option if var is not None else None
    return (OPTIONS if options is None else options).get(knob.setting)


def module_option(knob):
    """The ``nccl_env`` module's option of a knob's setting."""
    declared = _module_declaration(knob)
    doc = declared['doc']
    option = dict(description=[doc] if isinstance(doc, str) else list(doc))
    option.update(_knobs.option(knob))
    if 'default' in declared:
        option['default'] = declared['default']
    return option


def problems(variables=None, options=None):
    """Every declaration that is missing or contradicts the registry, one line each (empty: all agree)."""
    variables = VARIABLES if variables is None else variables
    options = OPTIONS if options is None else options
    lines = []
    by_name = {}
    for var in variables:
        if var.name in by_name:
            lines.append('%s is declared twice' % var.name)
        by_name[var.name] = var
        knob = _BY_VAR.get(var.name)
        if knob is not None and (set(var.spec) & {'type', 'choices'}):
            lines.append('%s: a knob\'s type and choices are its row\'s in _knobs.py; do not declare them' % var.name)
        for role in sorted(var.entries):
            if role not in ENTRY_POINTS:
                lines.append('%s: no role %s' % (var.name, role))
                continue
            for entry in sorted(set(var.entries[role]) - set(ENTRY_POINTS[role])):
                lines.append('%s: role %s has no entry point %s' % (var.name, role, entry))
        for role in roles(var):
            if not description(var, role):
                lines.append('%s: no description for role %s' % (var.name, role))
        if knob is not None and var.default != NO_DEFAULT and knob.low is not None \
                and _knobs.range_problem({knob.key: var.default}, knob):
            lines.append('%s: the default %r is outside the row\'s range' % (var.name, var.default))
        if var.option is not None and (knob is None or not knob.setting):
            lines.append('%s: an option of the nccl_env module is declared, but the variable is no knob with a setting'
                         % var.name)
    for knob in _knobs.KNOBS:
        if knob.var and knob.roles and knob.var not in by_name:
            lines.append('%s (knob %s) has no declaration in _declarations/' % (knob.var, knob.key))
    for knob in _knobs.KNOBS:
        if knob.setting and not (knob.var and knob.var not in by_name) \
                and _module_declaration(knob, variables, options) is None:
            lines.append('nccl_env option %s (knob %s) has no declaration (option= of its variable, or OPTIONS)' % (
                knob.setting, knob.key))
    settings = set(knob.setting for knob in _knobs.KNOBS if knob.setting and not knob.var)
    for setting in sorted(set(options) - settings):
        lines.append('nccl_env option %s in OPTIONS is no knob setting without a role variable' % setting)
    return lines
