# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The tests the roles compare outcomes and run statuses with (module_utils/_outcomes.py holds the names): YAML names
the test, never the string. A value the vocabulary does not have fails the test, naming the test and the value."""

from __future__ import annotations

from functools import partial

from ansible.errors import AnsibleFilterError

from ansible_collections.trainops.multinode.plugins.module_utils import _outcomes


def _checked(name, check, value):
    try:
        return check(value)
    except _outcomes.OutcomeError as exc:
        raise AnsibleFilterError('%s: %s' % (name, exc))


def _test(name, predicate, wanted):
    run = partial(_checked, name, lambda value: predicate(value, wanted))
    run.__name__ = name
    return run


TESTS = {
    'outcome_succeeded': _test('outcome_succeeded', _outcomes.outcome_is, _outcomes.SUCCEEDED),
    'run_running': _test('run_running', _outcomes.run_status_is, _outcomes.STATUS_RUNNING),
    'run_prepared': _test('run_prepared', _outcomes.run_status_is, _outcomes.STATUS_PREPARED),
    'run_absent': _test('run_absent', _outcomes.run_status_is, _outcomes.STATUS_ABSENT),
}


class TestModule(object):
    def tests(self):
        return dict(TESTS)
