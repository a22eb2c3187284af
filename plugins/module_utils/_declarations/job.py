# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The job role's variables (see __init__.py); a variable the job role shares with other roles is declared here
once."""

from __future__ import annotations

from ansible_collections.trainops.multinode.plugins.module_utils import _launchers
from ansible_collections.trainops.multinode.plugins.module_utils._declarations.base import _var

VARIABLES = (
    _var('trainops_straggler_threshold', 0.15, entries={'job': ('status', 'stop', 'collect')},
         doc=("How far (a fraction; V(0.15) is 15 %) a node's step time may lie above the median of the other "
              "nodes' before the node is named a straggler, in the progress lines while the job runs and in the "
              "summary and the manifest (C(summary.stragglers)). A node's step time is its ranks' "
              'C(compute_time_s) where the script writes it in its metrics, else C(step_time_s) (docs/failures.md, '
              'Stragglers). Above 0, at most 10.')),
    _var('trainops_nodes_group', 'trainops_nodes',
         entries={'job': ('main', 'status', 'stop'), 'nccl_env': ('main',), 'ssh_mesh': ('main', 'verify')},
         type='str',
         doc={'job': ('Inventory group whose hosts are the nodes. Ranks follow its order; the node with '
                      'C(trainops_master=true), or the first, is node rank 0.'),
              'nccl_env': ('Inventory group of the nodes; the one with C(trainops_master=true), or the first, is '
                           'the master.'),
              'ssh_mesh': 'Inventory group whose hosts form the mesh. The play must run on all of them.'}),
    _var('trainops_master', entries={'job': ('main',)}, type='bool',
         doc=('A host variable. V(true) makes this node the master (node rank 0, the rendezvous host); at most one '
              'node of the nodes group may be marked. Unset on every node, the first node of the group is the '
              "master. The C(slurm) inventory marks the allocation's first node.")),
    _var('trainops_master_addr', entries={'job': ('main',)}, type='str',
         doc=("The address the other nodes reach the master's rendezvous port at (C(MASTER_ADDR)). Unset, the "
              "master's C(ansible_host), else its inventory name. Set it when the nodes train on another network "
              "than the one Ansible reaches them on, e.g. the master's address on the training network "
              '(docs/cluster-shapes.md).')),
    _var('trainops_channels', None,
         option=dict(doc=(('C(NCCL_MAX_NCHANNELS), at most what the library honours. NCCL, MAXCHANNELS (32 before '
                          '2.25, 64 since). RCCL, MAXCHANNELS (32 in 2.18.3, 64 in 2.18.6, 128 from 2.20.5) on '
                           'gfx942 and gfx950, 32 on other GPUs, the compute units of a CPX-mode partition (RCCL '
                           '2.21 and later), and 64 when O(nnodes) is more than 1.'),
                          ('A larger value is an error naming that limit (the library would clamp it silently), and '
                          'so is a value above 32 when the library version is unknown and the limit depends on it. '
                           'Not set when not given (the library decides).'),)),
         doc={'job': ('Maximum NCCL/RCCL channels (NCCL_MAX_NCHANNELS); null (the default) leaves it to the '
                      "library. Each node checks it against its library's MAXCHANNELS (NCCL 32 before 2.25, else "
                      '64; RCCL 128 on gfx942/gfx950). Short knob C(channels).'),
              'nccl_env': ("C(NCCL_MAX_NCHANNELS), at most the library's MAXCHANNELS (NCCL 32 before 2.25, else "
                           '64; RCCL 128 on gfx942/gfx950); null leaves it to the library.')}),
    _var('trainops_min_channels', None,
         option=dict(doc=('C(NCCL_MIN_NCHANNELS), at most O(channels) and within the limits of O(channels). Not set '
                          'when not given.')),
         doc={'job': ('Minimum channels (NCCL_MIN_NCHANNELS), 1 to C(trainops_channels); unset lets NCCL choose. '
                      'Short knob C(min_channels).'),
              'nccl_env': 'C(NCCL_MIN_NCHANNELS); null lets the library choose.'}),
    _var('trainops_threads', None,
         option=dict(doc=(('Threads per block. NVIDIA, C(NCCL_NTHREADS) (a multiple of 32 from 64 to 512). RCCL '
                          'before 2.28, C(NCCL_NTHREADS) from 4 x the warp size to 256 (only 256 on MI300X, '
                           'gfx942). RCCL 2.28 and later, C(RCCL_THREADS_PER_BLOCK), a multiple of the warp size '
                           'from 3 warps to 256 (V(192) or V(256) on gfx942; RCCL rounds and clamps any other '
                           'value); a warning unless C(RCCL_WARP_SPEED_ENABLE=1) is in O(env_overrides).'),
                          ("Not set when not given (the library's own value). A value the library would not take as "
                          'it is is an error naming what it would run; so is any value on an AMD node whose RCCL '
                           'version is unknown (the version decides the variable). On a node without GPUs nothing '
                           'is set (a warning).'),)),
         doc={'job': ('Threads per block; null (the default) leaves it to the library. NCCL_NTHREADS on NVIDIA '
                      '(64-512, a multiple of 32) and RCCL before 2.28 (only 256 on gfx942), '
                      'RCCL_THREADS_PER_BLOCK on RCCL 2.28 and later; checked per node. Short knob C(threads).'),
              'nccl_env': ('C(NCCL_NTHREADS) on NVIDIA and RCCL before 2.28 (values the library takes, only 256 on '
                           'gfx942), C(RCCL_THREADS_PER_BLOCK) on RCCL 2.28 and later; null leaves it to the '
                           'library.')}),
    _var('trainops_nproc_per_node', 8,
         entries={'job': ('status', 'stop')},
         option=dict(doc=("Ranks per node; an error when larger than the node's GPU count (unless the vendor is "
                          'V(none)).')),
         doc={'job': ('Ranks per node (GPUs per node on GPU hosts), 1 to 256; it may differ per node. Short knob '
                      'C(nproc).'),
              'nccl_env': "Ranks per node; more than the node's GPUs is an error."}),
    _var('trainops_script', 'train.py',
         doc=(('Training entrypoint, a file relative to the workspace (C(trainops_workspace_src)). Short knob '
               'C(script).'),
              "Exclusive with C(trainops_module); the default V(train.py) is the shipped workspace's script.",)),
    _var('trainops_module', '',
         doc=('The entrypoint as a Python module, run as C(python -m) runs it (torchrun C(--module)), from the '
              "node's workspace, e.g. V(torchtitan.train). A dotted name; exclusive with C(trainops_script). Short "
              'knob C(module).')),
    _var('trainops_config', 'config/default.yaml',
         doc='Config file passed as C(--config), relative to the workspace. Short knob C(config).'),
    _var('trainops_overrides', [], elements='str',
         doc='C(key=value) items passed as C(--override key=value). Short knob C(overrides).'),
    _var('trainops_pass_config_args', 'auto', entries={'job': ('main',)}, type='raw',
         doc=(('Pass C(--config), C(--override training.output_dir=...) and the overrides to the script (the '
               'convention of files/workspace/train.py).'),
              ('V(auto) passes them only to a script C(train.py) whose workspace holds the config file '
               '(C(trainops_config)), as the shipped workspace does, never to a module; V(true) or V(false) decide '
               'for any script.'),)),
    _var('trainops_script_args', [],
         doc=("The entrypoint's own arguments, passed as they are - a string, split as a shell would (C(shlex)), "
              'or a list of strings. After our config arguments, when those are passed. Short knob C(args).')),
    _var('trainops_progress_pattern', '',
         doc=("A Python regular expression searched in the job's log lines; the last match (its group 1 when it "
              "has a group) is the progress the wait shows. Empty - the shipped script's C([trainops] ... step=) "
              "lines, else a script's last log line. Short knob C(progress_pattern).")),
    _var('trainops_master_port', 29500, entries={'job': ('status', 'stop')},
         doc='Rendezvous port on the master, 1024-65535. Short knob C(master_port).'),
    _var('trainops_rdzv_backend', 'static',
         doc='C(static) fixes rank to host by inventory order; C(c10d) uses elastic rendezvous with the run id.'),
    _var('trainops_rdzv_timeout', 300,
         doc='Seconds torchrun waits for all nodes to join.'),
    _var('trainops_max_restarts', 0,
         doc='torchrun --max-restarts.'),
    _var('trainops_collective_timeout', 300,
         doc=('Seconds a collective may wait for a peer before the job fails instead of hanging; passed to the '
              'script as TRAINOPS_COLLECTIVE_TIMEOUT_S.')),
    _var('trainops_python', 'python3', entries={'job': ('main',), 'nccl_env': ('main',)}, type='str',
         doc={'job': 'Interpreter on the nodes that has torch; torchrun runs as C(python -m torch.distributed.run).',
              'nccl_env': ("The ranks' interpreter on the nodes. M(trainops.multinode.node_facts) asks it which "
                           'NCCL/RCCL torch loads (the C(nvidia-nccl-cu*) package torch requires, the RCCL a ROCm '
                           "wheel bundles, or what torch reports); the host's library files count only where torch "
                           "loads the system's library.")}),
    _var('trainops_torchrun', '', entries={'job': ('main',)}, type='str',
         doc='Explicit torchrun executable on the nodes; empty uses C(trainops_python).'),
    _var('trainops_command_prefix', [], elements='str',
         doc='Wrapper argv put before the torchrun command (a profiler such as rocprofv3).'),
    _var('trainops_profile', '', entries={'job': ('sweep', 'collect')},
         doc=(('Per-rank profiler, V(nsys), V(rocprof) (rocprofv3) or V(torch) (torch.profiler inside train.py); '
               'empty is off.'),
              ('Each selected rank runs under it with the output name C(<node>_rank<global rank>); the traces are '
               "collected into the experiment's C(profiles/) (docs/sweeps.md)."),)),
    _var('trainops_profile_ranks', 'first', entries={'job': ('sweep',)},
         doc=('The ranks to profile, V(first) (local rank 0 of every node), V(all), or global ranks (a list, or '
              'C(0,3)).')),
    _var('trainops_profile_stats', False, entries={'job': ('sweep',)},
         doc='Ask the profiler for its summary (nsys C(--stats=true), rocprofv3 C(--stats)).'),
    _var('trainops_profile_args', [], entries={'job': ('sweep',)}, elements='str',
         doc='Further arguments of the profiler.'),
    _var('trainops_socket_ifname', 'auto',
         option=dict(doc=(('Interface (or list of interfaces) for the NCCL bootstrap/socket transport and gloo. It '
                          'must exist on the node and have an address.'),
                          ('V(auto) (the default when not given, or null) takes C(facts.network.ifname), the '
                          'interface that reaches the master.'),)),
         doc={'job': ('Interface for NCCL/gloo sockets on each node. C(auto) asks the kernel which interface '
                      'routes the master address; an override must exist on the node and reach the master, or the '
                      'launch fails before anything starts.'),
              'nccl_env': ("Interface for NCCL/gloo sockets; V(auto) takes the one the kernel routes the master's "
                           'address through on each node. C(NCCL_SOCKET_IFNAME) gets the exact-match form '
                           'C(=name).')}),
    _var('trainops_gpu_vendor', 'auto', option=dict(doc='GPU vendor of the node; defaults to C(facts.gpu.vendor).'),
         doc={'job': 'GPU vendor of the node: C(auto) detects from /dev/kfd and /proc/driver/nvidia.',
              'nccl_env': 'V(auto) (detect), V(nvidia), V(amd) or V(none).'}),
    _var('trainops_env', {},
         option=dict(doc=(('Variables that win over anything computed; a null value removes the variable (returned '
                          'in RV(unset)).'),
                          ('C(NCCL_SOCKET_IFNAME), C(GLOO_SOCKET_IFNAME) and C(NCCL_IB_HCA) overrides are checked '
                          'against the node. One that selects nothing is an error, a prefix that matches several '
                           'interfaces or HCAs is a warning. C(GLOO_SOCKET_IFNAME) must be plain names separated by '
                           'commas (gloo knows no C(=) or C(^) prefix).'),), default={}),
         doc={'job': 'Extra environment for every rank; wins over the computed NCCL/RCCL settings.',
              'nccl_env': ('Extra environment for every rank; wins over everything computed, a null value removes '
                           'a variable.')}),
    _var('trainops_secret_env', {}, no_log=True,
         doc=(('Secret environment for every rank (tokens such as C(HF_TOKEN)). The values reach the ranks and '
               'appear nowhere else (manifest, node records, Ansible output, ansible-runner artifacts); the '
               'manifest records the names.'),
              'A name may not also be in C(trainops_env).',
              ('Only by reference: a value typed literally into an C(-e) argument of C(ansible-playbook) (its '
               'command line, in every user\'s C(ps)) is refused before any node is touched; pass C("{{ '
               'lookup(\'ansible.builtin.env\', \'HF_TOKEN\') }}") or use a vars file (C(-e @secrets.yml)).'),)),
    _var('trainops_node_root', '~/.trainops',
         entries={'job': ('main', 'status', 'logs', 'stop'), 'nccl_env': ('main',), 'container': ('main',)},
         type='str',
         doc={'job': ('Directory on each node holding its state, runs and workspace copy. It may be on a file '
                      'system every node sees (an NFS home), because each node keeps its state in '
                      'C(<node_root>/state/<host name>) and a shared workspace is synced once.'),
              'nccl_env': 'Per-node directory of trainops files.',
              'container': ("The node's trainops directory (C(state/), C(runs/), C(workspace/)), shared with the "
                            'job role. Created when missing (mode 0750), expanded on the node (C(~) is the remote '
                            "user's home) and mounted read-write at the same absolute path in the container, so "
                            'paths the launch records are the same inside and outside.')}),
    _var('trainops_node_id', '', entries={'job': ('status', 'logs', 'stop', 'collect')},
         doc=("The name of the node's own state directory instead of its host name; needed only when nodes with "
              'the same host name share the node root.')),
    _var('trainops_training_network', '',
         doc=('The network (CIDR, such as V(10.0.0.0/16)) the training must use when Ansible reaches the nodes '
              "over another (management) network; every node's training interface and the master address must be "
              'on it. Empty (the default) checks nothing.')),
    _var('trainops_workspace_dir', '{{ trainops_node_root }}/workspace', entries={'job': ('main',)}, type='str',
         doc='Workspace on the node; the script runs there.'),
    _var('trainops_sync_workspace', True, entries={'job': ('main',)}, type='bool',
         doc='Copy C(trainops_workspace_src) from the controller to each node before starting.'),
    _var('trainops_sync_rsync_opts', ['--exclude=__pycache__', '--exclude=*.pyc'],
         entries={'job': ('main',)},
         type='list',
         elements='str',
         doc=(('Extra rsync options for the workspace sync (M(trainops.multinode.rsync) '
               'O(trainops.multinode.rsync#module:rsync_opts)), e.g. V(--delete).'),
              ('A node on the local connection gets a copy made without rsync, which implements C(--exclude), '
               'C(--include), C(--delete), C(--delete-excluded), C(--checksum) and C(--compress); another option '
               'needs rsync on the controller.'),)),
    _var('trainops_launcher', _launchers.DEFAULT,
         doc=('How torchrun starts on the nodes. V(ssh) - a detached supervisor on every node, over SSH. V(srun) - '
              'one Slurm step of the current allocation (C(SLURM_JOB_ID), or C(trainops_slurm_job_id) of the slurm '
              'inventory), one task per node in allocation order, C(--kill-on-bad-exit=1); stop cancels the step. '
              'Not with C(trainops_runtime=container). Short knob C(launcher). See docs/slurm.md.')),
    _var('trainops_slurm_gpu_ids', [], entries={'job': ('main',)}, type='list', elements='int',
         doc=('The indexes of the GPUs the Slurm job holds on this node, as Slurm numbers them (gres.conf order, '
              'the C(IDX) of C(scontrol --details show job)); the C(slurm) inventory sets it per node. A launch '
              "over SSH gives them to the node's ranks as C(CUDA_VISIBLE_DEVICES) (NVIDIA), "
              'C(ROCR_VISIBLE_DEVICES) (AMD) or both (no GPU vendor), so that a node shared with other jobs uses '
              "this job's GPUs, numbered from 0 where the preflight finds the session confined to the job's "
              'devices (C(ConstrainDevices)); V([]) sets neither, and C(trainops_env) wins (a null there removes '
              'the variable). A srun step gets its GPUs from Slurm itself. See docs/slurm.md.')),
    _var('trainops_slurm_job_id', entries={'job': ('main',)}, type='str',
         doc=('The Slurm job whose allocation the nodes belong to; the C(slurm) inventory sets it from '
              "C(SLURM_JOB_ID). Unset, the controller's C(SLURM_JOB_ID). C(launcher=srun) starts its step in this "
              'job.')),
    _var('trainops_slurm_nodelist', entries={'job': ('main',)}, type='str',
         doc=("The allocation's node list expression (C(gpu[01-04])), as the C(slurm) inventory read it. "
              'Information only.')),
    _var('trainops_slurm_node_name', entries={'job': ('main',)}, type='str',
         doc=("A host variable. The node's Slurm name, where Ansible knows the host under another name; unset, the "
              "inventory name (the C(slurm) inventory's). C(launcher=srun) gives srun these names.")),
    _var('trainops_slurm_cpus', entries={'job': ('main',)}, type='int',
         doc=('A host variable the C(slurm) inventory sets. The CPUs the Slurm job holds on the node. A launch '
              'with more ranks on the node than this is refused unless C(trainops_allow_few_cpus); each rank gets '
              'C(OMP_NUM_THREADS) = CPUs / ranks (at least 1).')),
    _var('trainops_slurm_mem_mb', entries={'job': ('main',)}, type='int',
         doc=('A host variable the C(slurm) inventory sets. The memory in MB the Slurm job holds on the node '
              '(unset where Slurm does not track memory), checked against C(trainops_mem_per_node).')),
    _var('trainops_slurm_gpus_implicit', entries={'job': ('main',)}, type='bool',
         doc=('Set by the C(slurm) inventory when the job holds the GPUs of its nodes only because it holds the '
              'whole nodes (C(--exclusive) without C(--gpus*)). A srun step gets none of those GPUs, so '
              'C(launcher=srun) is refused.')),
    _var('trainops_slurm_problem', entries={'job': ('main',)}, type='str',
         doc=('Set by the C(slurm) inventory when the job is ending (its GPUs released) and gives no ranks per '
              'node; a launch is refused, showing it. C(status.yml) and C(stop.yml) need no ranks.')),
    _var('trainops_srun_wait', 300, entries={'job': ('main',)}, type='int',
         doc=('With C(trainops_launcher=srun), C(srun --wait) - seconds the step waits for the other nodes once '
              'one ended with exit code 0 (V(0) waits forever). A failed node ends the step at once.')),
    _var('trainops_srun_args', [], entries={'job': ('main',)}, type='list', elements='str',
         doc=('With C(trainops_launcher=srun), more srun options for the step, for example C(--gpus-per-task=8). '
              "They come after the step's own options and may override them (C(--cpu-bind=none), C(--immediate)); "
              'C(--overlap) lets the step share the nodes with another step of the allocation instead of waiting '
              'for it.')),
    _var('trainops_checkpoint_signal', 'USR1',
         doc=('The run\'s checkpoint signal, V(USR1) or V(USR2); V("") for none. Slurm sends it before a time limit '
              '(C(salloc)/C(sbatch --signal=USR1@90)) to every process of the job. The supervisor records it and '
              'lives on, torchrun starts with it ignored, the ranks get it in C(TRAINOPS_CHECKPOINT_SIGNAL) and '
              'handle it (the shipped workload checkpoints at its next step). Without one, such a signal kills the '
              'supervisor and torchrun.')),
    _var('trainops_checkpoint_signal_seconds', 0,
         doc=("With C(trainops_launcher=srun), seconds before the step's time limit (the earlier of its C(srun "
              "--time) and the job's) at which the launch sends the step the checkpoint signal (C(scancel "
              "--signal=SIG JOB.STEP), from a timer on the controller); V(0) sends nothing (an allocation's own "
              'C(--signal) still reaches the step). C(srun --signal) does not do this - Slurm keeps a warning '
              'signal for job allocations only.')),
    _var('trainops_srun_start_timeout', 30,
         doc=('With C(trainops_launcher=srun), seconds Slurm has to create the step (C(srun --immediate)). A step '
              'whose nodes stay busy that long (another step of the allocation holds their CPUs or GPUs) is given '
              'up, its srun client ended and a step of its name cancelled, so that nothing starts later; the '
              "launch fails saying what srun said. Each node's supervisor then has at least 60 s (or this long, if "
              'longer) to start in the step. At least V(1).')),
    _var('trainops_allow_few_cpus', False,
         doc=('Inside a Slurm allocation (the C(trainops.multinode.slurm) inventory), launch on nodes whose '
              'allocation holds fewer CPUs than ranks (C(salloc --gpus-per-node=8) holds one CPU per node unless '
              'the site sets C(DefCpuPerGPU)). Without it such a launch fails naming the nodes; every rank gets '
              "C(OMP_NUM_THREADS) = the node's CPUs / its ranks, at least 1, either way.")),
    _var('trainops_mem_per_node', '',
         doc=("The memory the workload needs on each node, as Slurm's C(--mem) takes it (V(64G), V(500000) in MB); "
              'V("") says nothing. Inside a Slurm allocation that tracks memory (C(Mem=) in C(scontrol --details '
              'show job)), a node holding less fails the launch, naming C(--mem).')),
    _var('trainops_runtime', 'host',
         doc=("Where the ranks run - V(host), or V(container), the node's training container started by the role "
              "C(trainops.multinode.container) (it shares the host's PID namespace and mounts "
              'C(trainops_node_root) at the same path). The per-host environment is passed to the ranks explicitly '
              'either way. Short knob C(runtime).')),
    _var('trainops_container_name', 'trainops-train', entries={'job': ('main',), 'container': ('main',)}, type='str',
         doc={'job': ('The training container on each node (the fact C(trainops_container.name) wins when the '
                      'container role set it).'),
              'container': ('Name of the training container on every node. The launch '
                            '(C(trainops_runtime=container)) runs work in it by this name.')}),
    _var('trainops_container_engine', 'docker',
         entries={'job': ('main',), 'container': ('main',)},
         type='str',
         choices=['docker', 'podman'],
         doc={'job': 'The container engine CLI, V(docker) or V(podman).',
              'container': ("The container engine. C(docker) uses the community.docker modules (the daemon's API); "
                            'C(podman) the containers.podman modules (daemonless).')}),
    _var('trainops_git_check', 'auto',
         doc=("V(auto) compares the git state of every node's checkout (C(trainops_workspace_dir)) with the "
              'reference when the nodes run their own checkout (C(trainops_sync_workspace=false)); V(always) also '
              "when syncing (then only the controller's tree is checked, and a dirty one fails); V(never) skips "
              'it. A mismatch fails before anything starts, with a table node | branch @ commit | dirty | verdict.')),
    _var('trainops_git_reference', 'controller',
         doc=("What the nodes are compared with - the controller's C(trainops_workspace_src) (V(controller)), or "
              'the first node (V(first_node)) when the code is not on the controller.')),
    _var('trainops_allow_dirty', False,
         doc='Accept uncommitted changes in the compared checkouts. Short knob C(allow_dirty).'),
    _var('trainops_check_reachability', True, entries={'job': ('main',)}, type='bool',
         doc=("Before launch, check that every node reaches the master's port through the interface it will use "
              '(the master opens the port briefly), and show the result as a table. Skipped with '
              'O(trainops_replace).')),
    _var('trainops_reach_timeout', 20, entries={'job': ('main',)}, type='int',
         doc="Seconds a node keeps trying to reach the master's port in that check."),
    _var('trainops_preflight_import_torch', False, entries={'job': ('main',)}, type='bool',
         doc=('Import torch on every node in the preflight instead of reading its installed version from the '
              "package metadata; slower (1-2 s of CPU per node), but proves that torch's libraries load.")),
    _var('trainops_replace_source', False,
         doc=('The workspace on each node records the source synced into it (C(.trainops-source)); a launch that '
              'would sync another source (C(src)) into it is refused, naming both, unless this is true. Short knob '
              'C(replace_source).')),
    _var('trainops_sync_exclude', [], elements='str',
         doc=('rsync exclude patterns the workspace sync leaves out, besides C(.git), virtual environments '
              "(C(.venv), C(venv), any directory with a C(pyvenv.cfg)), C(__pycache__) and what the workspace's "
              'C(.gitignore) files exclude, e.g. V([data/, "*.ckpt"]). Short knob C(sync_exclude).')),
    _var('trainops_workspace_src', '{{ role_path | dirname | dirname }}/files/workspace',
         doc=("Workspace on the controller: the directory of your code, synced to every node's workspace (default: "
              "the collection's files/workspace). Short knob C(src).")),
    _var('trainops_experiments_dir', "{{ 'experiments' | ansible.builtin.realpath }}",
         entries={'job': ('main', 'status', 'logs', 'stop')},
         type='str',
         doc=('Controller directory that receives one new experiment directory per launch. By default '
              'C(experiments) in the directory C(ansible-playbook) runs from, never inside the collection.')),
    _var('trainops_run_name', 'multinode',
         doc='Prefix of the experiment directory name. Short knob C(run_name).'),
    _var('trainops_wait', True,
         doc='Wait for the job, show progress, collect and summarize. Short knob C(wait).'),
    _var('trainops_poll_interval', 2, entries={'job': ('main',)}, type='float',
         doc=('Seconds between an answer from a node and the next question while waiting (a running job is watched '
              'on the node for the rest of 10 seconds between questions, docs/failures.md).')),
    _var('trainops_progress_interval', 10, entries={'job': ('main',)}, type='float',
         doc='Seconds between progress lines while waiting.'),
    _var('trainops_wait_timeout', 0,
         doc=('Give up waiting after this many seconds (0 waits as long as the job runs); the job is then stopped '
              'and collected.')),
    _var('trainops_unreachable_grace', 300,
         doc=('Seconds a node may stay unreachable during the wait before the job fails as C(unreachable); its '
              'peers keep running meanwhile and the progress line shows C(unreachable 35s).')),
    _var('trainops_stall_timeout', 900,
         doc=("Seconds a node's job may go without new log output before the job fails as C(stalled) (stopped on "
              'every node and collected); 0 turns it off.')),
    _var('trainops_stop_timeout', 15, entries={'job': ('main', 'status', 'stop', 'collect')}, type='int',
         doc='Seconds between SIGTERM and SIGKILL when stopping.'),
    _var('trainops_log_lines', 20, entries={'job': ('main', 'status', 'stop', 'collect')}, type='int',
         doc='Log lines kept per node for status and failure messages.'),
    _var('trainops_replace', False,
         doc='Stop a different job still running on a node instead of refusing. Short knob C(replace).'),
    _var('trainops_collect_patterns', ['*.jsonl', '*.json', '*.txt'],
         entries={'job': ('main', 'status', 'stop', 'collect')},
         type='list',
         elements='str',
         doc='File patterns collected from each node output directory.'),
    _var('trainops_run_id', '', entries={'job': ('main', 'status', 'logs', 'stop')}, type='str',
         doc=('status, stop and logs: the run to act on, an experiment name (default the last one started on each '
              'node). Short knob C(run_id).')),
    _var('trainops_resume_from', '',
         doc=(('The run id of an earlier launch to resume from its latest checkpoint (C(tasks/resume.yml)); that '
               "run must exist on at least one node, or the launch fails naming it and the nodes looked at. C('') "
               'starts from scratch.'),
              ('On every node where that run left C(checkpoint.pt) in its output directory, the file is copied (a '
               "reflink where the file system has one, never hard-linked) into the new run's output directory; a "
               "symbolic link below the run's directory, or a run of another user than the one who resumes it, is "
               'refused; with C(trainops_pass_config_args) the script gets C(--override training.resume=true) '
               '(C(files/workspace/train.py) then takes the newest checkpoint any rank has).'),
              ("Every node that has the run gets C(TRAINOPS_RESUME_FROM), the earlier run's output directory on "
               "that node, in the ranks' environment - the contract for a script that reads its own checkpoints. "
               "Every node gets C(TRAINOPS_PREVIOUS_WORLD_SIZE), the earlier run's world size, where the "
               "controller has that run's manifest."),
              ("The newest checkpoint across the nodes is the one resumed (the highest global step the run's "
               "C(checkpoint.json) records, else the youngest file on its own node's clock; ties to rank order); a "
               "node without it gets a copy of it (C(trainops_ssh_mesh)). The manifest's C(resumed_from) names the "
               'node and why.'),
              'The new run is a new experiment and a new run directory; the earlier one is left as it is.',)),
    _var('trainops_ssh_mesh', False, entries={'job': ('main',)}, type='bool',
         doc=(('The nodes (spare nodes included) reach each other over SSH as the training user, host keys '
               'checked, by their C(ansible_host) (else inventory name); C(playbooks/ssh_mesh.yml) (role '
               'C(trainops.multinode.ssh_mesh)) sets that up. A resume (C(trainops_resume_from), a retry) then '
               'copies the checkpoint to a node without it straight from the node that has it, its sha256 checked '
               'on arrival; where that copy fails, through the controller, with a warning naming the node.'),
              ("V(false) copies it through the controller (fetched into the new run's experiment directory, then "
               'copied).'),)),
    _var('trainops_retries', 0,
         doc=(('How many times a job that ends C(failed), C(unreachable) or C(stalled) is relaunched from the '
               'workload\'s latest checkpoint (docs/failures.md, "Retries"). Short knob C(retries). V(0) (the '
               'default) never retries.'),
              ('Each attempt is its own experiment directory and run; it resumes the attempt before it as '
               'C(trainops_resume_from) does (C(tasks/resume.yml)). The manifests link the attempts (C(attempt), '
               "C(first), C(previous), C(next)); the last attempt's summary lists every attempt with its outcome, "
               'start step, end step and the steps lost.'),
              ('The retries end early, with the reason in the manifest (C(retry)) and the summary, when a retry '
               'cannot fix the failure - a node left the play (unreachable) or the same node(s) failed the same '
               'way in two attempts in a row, with no spare node left (C(trainops_spare_nodes)) and fewer nodes '
               'left than C(trainops_min_nodes); or every rank failed before its first step and it is a script '
               'error or does not look like infrastructure; or the job finished its work and died on its way out; '
               'or your C(trainops_retry_policy) lists the failure as fatal; or '
               'C(trainops_retries_without_progress) attempts in a row ended without progress.'),
              'Needs C(wait=true).',)),
    _var('trainops_retry_policy', {},
         doc=(('The failures you state as retryable or fatal (docs/failures.md, "Retries") - C(retry_exit_codes), '
               "C(fatal_exit_codes) (lists of exit codes; a rank's negative code is the signal that ended it, as "
               'torchrun reports it), C(retry_patterns), C(fatal_patterns) (lists of Python regular expressions, '
               "searched in each of the last lines of a failed node's log)."),
              ('A fatal match on a failed node ends the retries. A retryable match retries a job whose every rank '
               'failed before its first step, which is otherwise retried only when it looks like infrastructure.'),)),
    _var('trainops_retries_without_progress', 2,
         doc=("The retries end once this many attempts in a row ended at a step no later than the attempt before's "
              'end step (docs/failures.md, "Retries"). V(0) is no limit. An attempt without metrics breaks the '
              'row.')),
    _var('trainops_exclude_after', 0,
         doc=(('A node that failed this many times, of any kind, is left out (docs/failures.md, "Nodes that fail '
               'too often"); V(0) (the default) leaves none out. The failures are counted in C(node_failures.json) '
               'in C(trainops_experiments_dir), per inventory, across launches; read, edit or delete it to forget '
               'them.'),
              ('A retry leaves such a node out of the next attempt, and a later launch of the same inventory '
               'leaves it out of its first attempt - a spare node takes its node rank, or the job goes on with '
               'fewer nodes (C(trainops_min_nodes)); else the launch stops, naming the file.'),)),
    _var('trainops_spare_nodes', '', entries={'job': ('main',)}, type='str',
         doc=(('The inventory group of the spare nodes (docs/failures.md, "Spare nodes"); V(\'\') (the default) has '
               'none. C(playbooks/launch.yml) adds the group to its hosts; the spare nodes are checked by the '
               "preflight with the job's nodes, get no node rank and run nothing until a retry "
               '(C(trainops_retries)) needs one.'),
              ('A node judged bad - unreachable, or failing the same way in two attempts in a row - is left out of '
               'the next attempt and the first unused spare node takes its place with its node rank (node rank 0 '
               'too, where the master and the rendezvous move to the spare). The manifest of each attempt records '
               'C(replaced).'),
              'A spare node must not be a node of the job (C(trainops_nodes_group)), and needs C(launcher=ssh).',)),
    _var('trainops_min_nodes', 0, entries={'job': ('main',)}, type='int',
         doc=('The fewest nodes a retry may go on with when a node is left out and no spare node is left (the '
              'world size then shrinks; C(files/workspace/train.py) shards its data over the new world size on '
              "resume). V(0) (the default) needs every node of the job. At most the job's number of nodes.")),
    _var('trainops_run_id_file', '', entries={'job': ('main',)}, type='path',
         doc=('A file on the controller the launch writes its run id to (0600) as soon as the experiment directory '
              "is created, before anything starts; C('') writes none. The C(trainops.multinode.sbatch) role's "
              "batch script (with C(trainops_sbatch_requeue)) reads it to resume the last attempt's run when Slurm "
              'restarts the job.')),
    _var('trainops_health_check', False, entries={'job': ('main',)}, type='bool',
         doc=("Run the health check (C(playbooks/health.yml), with the launch's command line) on the attempt's "
              'nodes and the spare nodes not used yet before every attempt. A node it names suspect is left out of '
              'the attempt, a spare takes its node rank (or the job goes on with fewer nodes, '
              'C(trainops_min_nodes)); a suspect that is no single node, or no spare and too few nodes left, '
              'starts nothing (docs/health.md).')),
    _var('min_bytes', entries={'job': ('main', 'sweep')}, type='str',
         doc=('bench.yml, and sweep.yml with C(workload=allreduce): the smallest all-reduce message (C(1M), '
              'C(1024)).')),
    _var('max_bytes', entries={'job': ('main', 'sweep')}, type='str',
         doc='bench.yml, sweep.yml: the largest all-reduce message (C(8G)).'),
    _var('step_factor', entries={'job': ('main', 'sweep')}, type='raw',
         doc='bench.yml, sweep.yml: each message size is the previous one times this.'),
    _var('iters', entries={'job': ('main', 'sweep')}, type='raw',
         doc='bench.yml, sweep.yml: timed all-reduces per message size.'),
    _var('warmup', entries={'job': ('main', 'sweep')}, type='raw',
         doc='bench.yml, sweep.yml: untimed all-reduces per message size before the timed ones.'),
    _var('dtype', entries={'job': ('main', 'sweep')}, type='raw',
         doc=('bench.yml, sweep.yml: the element type of the all-reduce: V(float32), V(float16) or V(bfloat16). '
              'The launch checks it and names a bad value (the short forms are declared as raw: their own checks '
              'say what is wrong, once).')),
    _var('run_id', entries={'job': ('status', 'logs', 'stop')}, type='str',
         doc='Short form of C(trainops_run_id) on the command line (C(-e run_id=<experiment name>)).'),
    _var('collect', entries={'job': ('status', 'stop')}, type='raw',
         doc='V(false) leaves the ended job uncollected (C(-e collect=false)).'),
    _var('recollect', entries={'job': ('status',)}, type='raw',
         doc=('status.yml: collect a job again that was collected already (its logs, outputs and manifest fetched '
              'anew; C(-e recollect=true)).')),
    _var('trainops_log_rank', None, entries={'job': ('logs',)}, type='int',
         doc='logs.yml: the global rank whose lines are printed. Short knob C(rank).'),
    _var('trainops_log_follow', False, entries={'job': ('logs',)}, type='bool',
         doc=("logs.yml: follow the rank's lines live on its node until the job ends there (or Ctrl-C), instead of "
              'printing its log in the experiment. Short knob C(follow).')),
    _var('trainops_log_follow_timeout', 0, entries={'job': ('logs',)}, type='int',
         doc="logs.yml: stop following after this many seconds; 0 follows until the job ends on the rank's node."),
    _var('rank', entries={'job': ('logs',)}, type='raw',
         doc='Short form of C(trainops_log_rank) (C(-e rank=5)).'),
    _var('follow', entries={'job': ('logs',)}, type='raw',
         doc='Short form of C(trainops_log_follow) (C(-e follow=true)).'),
    _var('trainops_stop_checkpoint_seconds', 0, entries={'job': ('stop',)}, type='int',
         doc=("Before the stop, send the run's checkpoint signal (C(trainops_checkpoint_signal)) to every node's "
              "supervisor and ranks and wait up to this many seconds for each node's C(checkpoint.json) to be "
              "written anew. V(0) sends nothing. The sbatch role's batch script sets it near the job's time limit "
              '(C(trainops_sbatch_checkpoint_seconds)).')),
    _var('trainops_stop_time_limit', {},
         entries={'job': ('stop',)},
         type='dict',
         options={'job_id': {'description': "The batch job's id (digits).", 'type': 'str'},
                  'stop_seconds': {'description': 'How long before its time limit Slurm warned the batch script.',
                                   'type': 'int'}},
         doc=("Set by the sbatch role's batch script when Slurm warns it of the time limit: C({job_id, "
              'stop_seconds}). The stop reason is then C(timeout) and the outcome C(timed_out), with the last '
              'checkpoint in its line.')),
    _var('trainops_sweep', {}, entries={'job': ('sweep',)}, type='dict',
         doc=('The grid, knob to list of values; knobs are C(channels), C(min_channels), C(threads), C(nproc), '
              'C(config), C(env.NAME) and C(override.KEY). The short knob C(sweep) takes precedence.')),
    _var('trainops_sweep_name', 'sweep', entries={'job': ('sweep',)}, type='str',
         doc="Part of the sweep directory's name C(sweep_<name>_<timestamp>) (short knob C(sweep_name))."),
    _var('trainops_sweep_dir', '', entries={'job': ('sweep',)}, type='str',
         doc='An earlier sweep directory to resume; points that succeeded are skipped (short knob C(sweep_dir)).'),
    _var('trainops_sweep_stop_on_failure', False, entries={'job': ('sweep',)}, type='bool',
         doc='End the sweep at the first failed point (short knob C(stop_on_failure)).'),
    _var('trainops_sweep_workload', 'train', entries={'job': ('sweep',)}, type='str', choices=['train', 'allreduce'],
         doc=("What each point runs, V(train) (the launch's script) or V(allreduce) (the all-reduce benchmark of "
              'C(playbooks/bench.yml)) (short knob C(workload)).')),
    _var('sweep', entries={'job': ('sweep',)}, type='raw',
         doc='Short form of C(trainops_sweep), a mapping given as YAML or JSON in C(-e).'),
    _var('sweep_name', entries={'job': ('sweep',)}, type='str',
         doc='Short form of C(trainops_sweep_name).'),
    _var('sweep_dir', entries={'job': ('sweep',)}, type='str',
         doc='Short form of C(trainops_sweep_dir).'),
    _var('stop_on_failure', entries={'job': ('sweep',)}, type='raw',
         doc='Short form of C(trainops_sweep_stop_on_failure).'),
    _var('workload', entries={'job': ('sweep',)}, type='raw',
         doc='Short form of C(trainops_sweep_workload) (V(train) or V(allreduce)).'),
    _var('trainops_health_bytes', '64M', entries={'job': ('health',)}, type='str',
         doc=("The message size of every measurement's all-reduce, in bytes with an optional K, M, G suffix "
              '(powers of 1024). 64 MiB, so that bus bandwidth, not latency, decides the time (docs/health.md).')),
    _var('trainops_health_iters', 10, entries={'job': ('health',)}, type='int',
         doc='Timed all-reduce calls per measurement.'),
    _var('trainops_health_warmup', 2, entries={'job': ('health',)}, type='int',
         doc='Untimed all-reduce calls before them.'),
    _var('trainops_health_min_busbw', None, entries={'job': ('health',)}, type='float',
         doc=('The bus bandwidth in GB/s below which an all-reduce is slow. Null judges relatively only, which '
              'searches every time there are 3 nodes or more; set, the search runs only when the all-reduce of all '
              'nodes fails or is below it.')),
    _var('trainops_health_slow_ratio', 0.5, entries={'job': ('health',)}, type='float',
         doc=('A pair is slow below this fraction of the upper quartile of the pairs, a half below this fraction '
              'of the other half, a node measured with a good one below this fraction of the best such '
              "measurement. The default names a node at half the others' bandwidth or less; 0.8 names one at 70 %.")),
    _var('trainops_health_all_pairs_max', 8, entries={'job': ('health',)}, type='int',
         doc=('Up to this many nodes every pair is measured when the all-reduce of all nodes failed or was below '
              'C(trainops_health_min_busbw); beyond, or when nothing was wrong with it, a bisection (2 '
              'measurements per level).')),
    _var('trainops_health_ignore', [], entries={'job': ('health',)}, type='list', elements='str',
         doc='RDMA device names and GPU PCI bus ids the node checks leave out (a port that is meant to be down).'),
    _var('trainops_health_nodes', [], entries={'job': ('health',)}, type='list', elements='str',
         doc=("The nodes to check, in rank order (the first is the measurements' master), inventory hosts of any "
              'group; C([]) checks the members of C(trainops_nodes_group). A launch with C(trainops_health_check) '
              "sets it to the attempt's nodes and the spare nodes not used yet.")),
    _var('trainops_health_timeout', 120, entries={'job': ('health',)}, type='int',
         doc=("Seconds a measurement's nodes have to join its rendezvous, and each of its collectives (its "
              'C(trainops_rdzv_timeout) and C(trainops_collective_timeout)); twice that without output stalls it '
              '(C(trainops_stall_timeout)). At least 10. The measurements start over SSH whatever '
              'C(trainops_launcher) says.')),
    _var('trainops_collect_run_id', entries={'job': ('collect',)}, type='str', required=True,
         doc='The run to collect.'),
    _var('trainops_collect_experiment_dir', entries={'job': ('collect',)}, type='str', required=True,
         doc="The run's experiment directory on the controller (it holds C(manifest.json))."),
    _var('trainops_collect_state_dir', entries={'job': ('collect',)}, type='str', required=True,
         doc='The state root on the node (C(<trainops_node_root>/state)) where the torchrun module keeps the run.'),
    _var('trainops_collect_nodes', entries={'job': ('collect',)}, type='list', elements='str', required=True,
         doc=("The job's nodes in rank order (the filter trainops.multinode.node_order); a node missing from the "
              'play is reported as missing.')),
    _var('trainops_collect_fail', True, entries={'job': ('collect',)}, role_default=False, type='bool',
         doc='Fail naming the node(s) whose torchrun failed when the job did not succeed.'),
    _var('trainops_collect_attempt', {}, entries={'job': ('collect',)}, role_default=False, type='dict',
         doc=('For an attempt of a launch with retries (C(trainops_retries)) - C(number), C(first), C(previous), '
              'C(retries), C(rows) (the attempts before) and C(resumed_from). The collect then records the '
              'attempts in the manifest and summary, decides whether the job is retried (C(retry) in the '
              'manifest), and does not fail when it is. Empty (the default) for a run that is not an attempt '
              "(status, stop, a sweep's point).")),
    _var('trainops_collect_batch_end', {}, entries={'job': ('collect',)}, role_default=False, type='dict',
         doc=("stop.yml under the sbatch role's batch script (launcher=ssh): C({batch: {job_id, stop_seconds}}), "
              'the batch job that reached its time limit; the outcome is then C(timed_out). Empty (the default) '
              'otherwise.')),
)
