"""The execution environment's definition: ``hack/ee.sh`` builds the collection tarball and runs
``ansible-builder create`` on execution-environment.yml (no registry, no container engine needed), and the
context it writes holds what the image build installs."""
import json
import os
import subprocess
import sys
import tarfile

import pytest
import yaml

pytestmark = [pytest.mark.e2e]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GALAXY = yaml.safe_load(open(os.path.join(REPO, 'galaxy.yml')))
DEFINITION = yaml.safe_load(open(os.path.join(REPO, 'execution-environment.yml')))


def requirement_lines(path):
    return [line.strip() for line in open(path) if line.strip() and not line.lstrip().startswith('#')]


@pytest.fixture(scope='module')
def context(tmp_path_factory):
    path = str(tmp_path_factory.mktemp('ee') / 'context')
    proc = subprocess.run(['bash', os.path.join(REPO, 'hack', 'ee.sh'), path], cwd=REPO, capture_output=True,
                          text=True, timeout=300, check=False, env=dict(os.environ, PYTHON=sys.executable))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert 'No matches' not in proc.stdout + proc.stderr and 'does not exist' not in proc.stdout + proc.stderr
    return path


def test_definition_is_version_3_with_the_collections_requirements():
    assert DEFINITION['version'] == 3
    deps = DEFINITION['dependencies']
    assert (deps['python'], deps['system']) == ('meta/ee-requirements.txt', 'meta/ee-bindep.txt')
    # the same files the collection declares to ansible-builder for any EE that installs it
    meta = yaml.safe_load(open(os.path.join(REPO, 'meta', 'execution-environment.yml')))
    assert meta['dependencies'] == {'python': deps['python'], 'system': deps['system']}
    # ansible-core and ansible-runner in requirements.txt's ranges
    runtime = requirement_lines(os.path.join(REPO, 'requirements.txt'))
    assert deps['ansible_core']['package_pip'] in runtime and deps['ansible_runner']['package_pip'] in runtime


def test_collections_are_galaxy_yml_dependencies_plus_the_tarball():
    wanted = yaml.safe_load(open(os.path.join(REPO, DEFINITION['dependencies']['galaxy'])))['collections']
    tarball, others = wanted[0], wanted[1:]
    assert tarball == {'name': 'collections/trainops-multinode.tar.gz', 'type': 'file'}
    assert {c['name']: c['version'] for c in others} == GALAXY['dependencies']
    (extra,) = DEFINITION['additional_build_files']
    assert extra['dest'] + '/' + os.path.basename(extra['src']) == tarball['name']


def test_create_writes_a_complete_context(context):
    containerfile = open(os.path.join(context, 'Containerfile')).read()
    assert 'ARG EE_BASE_IMAGE="%s"' % DEFINITION['images']['base_image']['name'] in containerfile
    assert 'ansible-galaxy collection install $ANSIBLE_GALAXY_CLI_COLLECTION_OPTS -r requirements.yml' in containerfile
    assert 'introspect' in containerfile
    build = os.path.join(context, '_build')
    assert requirement_lines(os.path.join(build, 'requirements.txt')) == requirement_lines(
        os.path.join(REPO, 'meta', 'ee-requirements.txt'))
    assert requirement_lines(os.path.join(build, 'bindep.txt')) == requirement_lines(
        os.path.join(REPO, 'meta', 'ee-bindep.txt'))
    assert yaml.safe_load(open(os.path.join(build, 'requirements.yml'))) == yaml.safe_load(
        open(os.path.join(REPO, 'ee', 'requirements.yml')))
    # the tarball the galaxy stage installs is this checkout's collection, at galaxy.yml's version
    with tarfile.open(os.path.join(build, 'collections', 'trainops-multinode.tar.gz')) as tar:
        manifest = json.load(tar.extractfile('MANIFEST.json'))
        names = tar.getnames()
    info = manifest['collection_info']
    assert (info['namespace'], info['name'], info['version']) == (GALAXY['namespace'], GALAXY['name'],
                                                                  GALAXY['version'])
    assert 'meta/execution-environment.yml' in names and not [n for n in names if n.startswith('tests/')]
