"""The multi-host lab of ``hack/lab.py`` (its entry point; docs/contributing/lab.md), one module per concern:

* ``core``: names, paths and addresses, LabError, the command runner, prerequisites, the lock, file helpers;
* ``plan``: the shape and the nodes (names, NICs, addresses, mounts, sshd_config), ``plan()``;
* ``network``: network namespaces, veths, the bridges;
* ``processes``: /proc snapshots, stopping and starting daemons;
* ``sshd``: each node's sshd and host key, ssh to the nodes;
* ``users``: the training user, the homes, authorized keys;
* ``slurm``: ``up --slurm`` (slurm.conf, gres.conf, munged, slurmdbd, slurmctld, slurmds);
* ``engine``: ``up --engine docker`` (a dockerd per node);
* ``inventory``: hosts.yml, known_hosts, lab.json, the Slurm allocation's inventory source;
* ``up``, ``down``, ``status``: the commands; ``cli``: their options (``main``).

Python 3 standard library only; nothing here changes the machine on import.
"""
