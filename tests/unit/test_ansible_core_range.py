"""The supported ansible-core range is one range everywhere: meta/runtime.yml's requires_ansible (2.19 or later: its
data tagging never renders a template again inside a value built from what a node wrote; tests/e2e/
test_hostile_job_local.py runs a hostile job on the lowest release), requirements.txt, the execution environment and
every role's min_ansible_version."""
import glob
import os
import re

import yaml

from ansible.release import __version__ as core_version

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def read_yaml(*parts):
    with open(os.path.join(REPO, *parts)) as handle:
        return yaml.safe_load(handle)


def lowest_core():
    """The lowest ansible-core release the collection supports, from meta/runtime.yml (``>=2.19.0``)."""
    match = re.fullmatch(r'>=(\d+)\.(\d+)\.(\d+)', read_yaml('meta', 'runtime.yml')['requires_ansible'])
    assert match, 'requires_ansible must be a lower bound >=X.Y.Z'
    return tuple(int(part) for part in match.groups())


def test_the_lowest_supported_core_is_2_19_everywhere():
    lowest = lowest_core()
    assert lowest >= (2, 19, 0)
    text = '%d.%d.%d' % lowest
    with open(os.path.join(REPO, 'requirements.txt')) as handle:
        requirements = [line.strip() for line in handle if line.strip() and not line.startswith('#')]
    core = [line for line in requirements if line.startswith('ansible-core')]
    assert core == ['ansible-core>=%s,<2.20.0' % text]
    # the community package that brings that core (ansible 12 brings 2.19)
    assert [line for line in requirements if re.match(r'ansible[<>=]', line)] == ['ansible>=12.0.0,<13.0.0']
    ee = read_yaml('execution-environment.yml')['dependencies']['ansible_core']['package_pip']
    assert ee == core[0]
    roles = glob.glob(os.path.join(REPO, 'roles', '*', 'meta', 'main.yml'))
    assert roles
    for path in roles:
        with open(path) as handle:
            assert yaml.safe_load(handle)['galaxy_info']['min_ansible_version'] == '%d.%d' % lowest[:2], path


def test_the_core_installed_here_is_in_the_range():
    installed = tuple(int(part) for part in re.match(r'(\d+)\.(\d+)\.(\d+)', core_version).groups())
    assert lowest_core() <= installed < (2, 20, 0)
