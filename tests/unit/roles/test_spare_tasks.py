"""A task meant for the spare nodes (trainops_spare_nodes: its own ``when`` keeps it to ``inventory_hostname in
...spares``) never sits under a block, include or import whose ``when`` keeps it to the attempt's nodes
(``inventory_hostname in __trainops_nodes``): a block's ``when`` applies to every task in it, its ``always`` and
``rescue`` too, and a spare is no node of the attempt, so such a task would be skipped on every host. The check of the
unused spares before a retry (roles/job/tasks/attempt.yml) was such a task: a spare dead since the preflight was
then picked by the retry, whose master check failed."""
import os
import re

import yaml

from test_controller_become import REPO, yaml_files

TASK_LISTS = ('block', 'rescue', 'always')
NODES_ONLY = re.compile(r'^inventory_hostname in __trainops_nodes\s*$')
SPARES_ONLY = re.compile(r'^inventory_hostname in \S*spares\b')


def conditions(entry):
    when = entry.get('when')
    if when is None:
        return []
    return [str(c).strip() for c in (when if isinstance(when, list) else [when])]


def spare_tasks_never_run(entries, where, inherited=()):
    """``file: task name`` of every task in ``entries`` for the spare nodes under a nodes-only condition."""
    found = []
    for entry in entries or []:
        if not isinstance(entry, dict):
            continue
        own = conditions(entry)
        lists = [key for key in TASK_LISTS if isinstance(entry.get(key), list)]
        if lists:
            for key in lists:
                found += spare_tasks_never_run(entry[key], where, tuple(inherited) + tuple(own))
            continue
        if any(SPARES_ONLY.match(c) for c in own) and any(NODES_ONLY.match(c) for c in inherited):
            found.append('%s: %s' % (where, entry.get('name')))
    return found


def test_no_task_for_the_spare_nodes_is_kept_to_the_nodes_by_its_block():
    found = []
    for path in yaml_files():
        with open(path) as handle:
            found += spare_tasks_never_run(yaml.safe_load(handle), os.path.relpath(path, REPO))
    assert found == []


def test_the_check_finds_a_spare_task_in_an_always_of_a_nodes_only_block():
    entries = [{'name': 'wait', 'when': 'inventory_hostname in __trainops_nodes',
                'block': [{'name': 'wait on the node', 'ansible.builtin.debug': None}],
                'always': [{'name': 'ping the spares', 'ansible.builtin.ping': None,
                            'when': ['trainops_retries | int > 0', 'inventory_hostname in __trainops_attempt.spares']}]}]
    assert spare_tasks_never_run(entries, 'attempt.yml') == ['attempt.yml: ping the spares']
    entries[0]['block'][0]['when'] = entries[0].pop('when')
    assert spare_tasks_never_run(entries, 'attempt.yml') == []
