# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Running a module's main() in a unit test: exit_json/fail_json raise instead of exiting.

    from module_harness import ExitJson, FailJson       # tests/unit/plugins/modules/conftest.py patches them in
"""

from __future__ import annotations

from unittest.mock import patch


class ExitJson(Exception):
    pass


class FailJson(Exception):
    pass


def exit_json(self, **kwargs):
    kwargs.setdefault('changed', False)
    raise ExitJson(kwargs)


def fail_json(self, msg, **kwargs):
    kwargs['msg'] = msg
    kwargs['failed'] = True
    raise FailJson(kwargs)


def patched_exits():
    """Context manager: AnsibleModule.exit_json/fail_json raise ExitJson/FailJson with the result."""
    return patch.multiple('ansible.module_utils.basic.AnsibleModule', exit_json=exit_json, fail_json=fail_json)


def run_module(module, args):
    """The result ``module.main()`` exits or fails with for these module arguments (exits patched: patched_exits)."""
    from ansible.module_utils.testing import patch_module_args  # pylint: disable=import-outside-toplevel

    with patch_module_args(args):
        try:
            module.main()
        except (ExitJson, FailJson) as exc:
            return exc.args[0]
    raise AssertionError('%s.main() neither exited nor failed' % module.__name__)


def module_arguments(module):
    """The keyword arguments ``module.main()`` gives AnsibleModule (argument_spec, supports_check_mode, ...)."""
    captured = {}

    class Stop(Exception):
        pass

    def fake_ansible_module(**kwargs):
        captured.update(kwargs)
        raise Stop()

    with patch.object(module, 'AnsibleModule', fake_ansible_module):
        try:
            module.main()
        except Stop:
            pass
    return captured


def assert_documentation_matches_argument_spec(module, *fragments):
    """DOCUMENTATION options (with the doc fragments' classes) and argument_spec agree on names, types,
    defaults, choices, elements and required; EXAMPLES and RETURN parse. Returns the captured kwargs."""
    import yaml
    captured = module_arguments(module)
    spec = captured['argument_spec']
    options = {}
    for fragment in fragments:
        options.update(yaml.safe_load(fragment.DOCUMENTATION).get('options') or {})
    options.update(yaml.safe_load(module.DOCUMENTATION).get('options') or {})
    assert sorted(options) == sorted(spec)
    for name, opt in options.items():
        arg = spec[name]
        assert opt.get('type', 'str') == arg.get('type', 'str'), name
        assert opt.get('default') == arg.get('default'), name
        assert opt.get('choices') == arg.get('choices'), name
        assert opt.get('elements') == arg.get('elements'), name
        assert bool(opt.get('required', False)) == bool(arg.get('required', False)), name
    yaml.safe_load(module.EXAMPLES)
    yaml.safe_load(module.RETURN)
    return captured
