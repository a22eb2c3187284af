# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: redact_url
short_description: A repository URL, or a text with URLs in it, without their credentials, to show or record
version_added: 0.2.0
author:
  - trainops maintainers (@trainops)
description:
  - 'Removes the user part of C(scheme://user:secret@host/...) (for http(s) and ftp(s) a user name alone too, often a
    token: C(https://<token>@github.com/...)) and the query parameters that carry a credential (C(access_token),
    C(private_token), any name with C(token), C(secret), C(password), C(credential) or C(signature) in it, C(api_key),
    C(key), C(sig), C(pwd), C(auth); case-insensitive).'
  - C(ssh://git@host/...), scp-like C(git@host:org/repo.git) and local paths are returned unchanged.
  - The input may be a text, such as a message of git (which quotes a URL's query string); every C(scheme://...) URL
    in it is redacted.
  - The same rule as the module M(trainops.multinode.git_state) applies to the remote URLs it reports.
options:
  _input:
    description: The URL (or path) of a repository, or a text with URLs in it.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Say where the code comes from, without the token
  ansible.builtin.debug:
    msg: "Checking out from {{ repo_url | trainops.multinode.redact_url }}"
"""

RETURN = r"""
_value:
  description: The URL without credentials.
  type: str
  sample: https://gitlab.example.com/org/repo.git?ref=main
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.trainops.multinode.plugins.module_utils._git_state import redact_urls_in


def redact_url(url):
    if url is None:
        return ''
    if not isinstance(url, str):
        raise AnsibleFilterError('redact_url: the input must be a URL or a text (a string), not %s' % type(url).__name__)
    return redact_urls_in(url)


class FilterModule(object):
    def filters(self):
        return {'redact_url': redact_url}
