# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The redact_url filter: _git_state.redact_url for templates (the rule itself: test__git_state.py)."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.trainops.multinode.plugins.filter.redact_url import FilterModule, redact_url


def test_credentials_go_the_rest_stays():
    assert redact_url('https://oauth2:glpat-x@gitlab.example.com/o/r.git?private_token=t&ref=main') == \
        'https://gitlab.example.com/o/r.git?ref=main'
    assert redact_url('git@github.com:o/r.git') == 'git@github.com:o/r.git'
    assert redact_url(None) == ''


def test_every_url_in_a_text_loses_its_credentials():
    stderr = ("fatal: unable to access 'https://127.0.0.1:9/o/r.git?ref=x&access_token=tok/': Failed; "
              "from https://user:pw@host/a.git, ssh://git@h/b.git and \"https://h/c?sig=s\"")
    assert redact_url(stderr) == ("fatal: unable to access 'https://127.0.0.1:9/o/r.git?ref=x': Failed; "
                                  "from https://host/a.git, ssh://git@h/b.git and \"https://h/c\"")


def test_the_input_must_be_a_string():
    with pytest.raises(AnsibleFilterError, match='must be a URL'):
        redact_url(['https://x'])
    assert FilterModule().filters()['redact_url'] is redact_url
