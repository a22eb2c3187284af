"""hack/gen_docs.py: the roles' defaults and argument specs, the nccl_env module's knob options,
docs/reference/knobs.md and outcomes.md are what it generates from the knob registry, the declarations and the
outcome vocabulary."""
import os
import re
import shutil
import sys

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
HACK = os.path.join(REPO, 'hack')
if HACK not in sys.path:
    sys.path.insert(0, HACK)

import gen_docs  # noqa: E402
from ansible_collections.trainops.multinode.plugins.module_utils import _knobs, _outcomes  # noqa: E402


def test_every_declared_variable_and_short_knob_has_a_row():
    page = gen_docs.render_knobs()
    rows = set(re.findall(r'^\| `([a-z0-9_]+)` \|', page, re.M))
    for role, entries in gen_docs.load_specs().items():
        for options in entries.values():
            assert set(options) <= rows, (role, sorted(set(options) - rows))
    assert set(knob.short for knob in _knobs.SHORT) <= rows


def test_every_outcome_state_and_reason_has_a_row_and_an_exit_code():
    page = gen_docs.render_outcomes()
    rows = set(re.findall(r'^\| `([a-z0-9_]+)` \|', page, re.M))
    assert set(_outcomes.OUTCOMES) | set(_outcomes.VERDICTS) | set(_outcomes.STOP_REASONS) \
        | set(_outcomes.RUN_STATUSES) <= rows
    assert [gen_docs.exit_code(name) for name in ('succeeded', 'failed', 'stopped', 'running', 'interrupted')] \
        == [0, 2, 2, 0, 99]
    with pytest.raises(_outcomes.OutcomeError):
        gen_docs.exit_code('done')


def test_ansible_markup_becomes_markdown_in_one_cell():
    assert gen_docs.markdown(['Short knob C(nproc); V(0.15) is I(15 %).', 'See L(the docs,https://x.invalid) | B(b).']) \
        == 'Short knob `nproc`; `0.15` is *15 %*. See [the docs](https://x.invalid) \\| **b**.'
    assert gen_docs.markdown('C(--module) of C(python -m) (torchrun C(--nproc-per-node))') \
        == '`--module` of `python -m` (torchrun `--nproc-per-node`)'


def _copy_generated(tmp_path):
    for page, _render in gen_docs.generated():
        os.makedirs(os.path.dirname(str(tmp_path / page)), exist_ok=True)
        shutil.copy(os.path.join(REPO, page), str(tmp_path / page))


def test_every_generated_file_is_what_the_generator_writes():
    assert gen_docs.stale() == [], 'regenerate with: %s' % gen_docs.REGENERATE


def test_check_names_a_stale_file_and_how_to_regenerate(tmp_path, capsys, monkeypatch):
    _copy_generated(tmp_path)
    assert gen_docs.stale(str(tmp_path)) == []
    spec = os.path.join('roles', 'nccl_env', 'meta', 'argument_specs.yml')
    with open(str(tmp_path / spec), 'a') as handle:
        handle.write('# edited by hand\n')
    (tmp_path / gen_docs.KNOBS_PAGE).write_text('edited by hand\n')
    os.remove(str(tmp_path / 'roles' / 'sbatch' / 'defaults' / 'main.yml'))
    assert gen_docs.stale(str(tmp_path)) == [spec, os.path.join('roles', 'sbatch', 'defaults', 'main.yml'),
                                             gen_docs.KNOBS_PAGE]
    monkeypatch.setattr(gen_docs, 'REPO', str(tmp_path))
    assert gen_docs.main(['--check']) == 1
    out = capsys.readouterr().out
    assert 'roles/nccl_env/meta/argument_specs.yml differs' in out and 'docs/reference/knobs.md differs' in out
    assert gen_docs.main([]) == 0 and gen_docs.stale(str(tmp_path)) == []


def test_the_module_options_are_generated_between_the_markers_only(tmp_path, capsys, monkeypatch):
    _copy_generated(tmp_path)
    module = tmp_path / gen_docs.NCCL_ENV_MODULE
    text = module.read_text()
    edited = text.replace('C(NCCL_IB_SL), the InfiniBand service level', 'the service level')
    assert edited != text
    module.write_text(edited.replace('author:', 'author:  # kept'))
    assert gen_docs.stale(str(tmp_path)) == [gen_docs.NCCL_ENV_MODULE]
    monkeypatch.setattr(gen_docs, 'REPO', str(tmp_path))
    assert gen_docs.main([]) == 0
    assert module.read_text() == text.replace('author:', 'author:  # kept')
    module.write_text(text.replace(gen_docs.MODULE_END, ''))
    assert gen_docs.stale(str(tmp_path)) == [gen_docs.NCCL_ENV_MODULE]
    assert gen_docs.main([]) == 1
    assert 'plugins/modules/nccl_env.py: a line BEGIN ... or END ... of its generated part is missing' \
        in capsys.readouterr().out


def test_entry_points_that_repeat_an_option_share_one_anchor():
    with open(os.path.join(REPO, 'roles', 'nccl_env', 'meta', 'argument_specs.yml')) as handle:
        text = handle.read()
    assert text.count('trainops_ib_tc: &trainops_ib_tc\n') == 1 and '      trainops_ib_tc: *trainops_ib_tc\n' in text
    specs = yaml.safe_load(text)['argument_specs']
    assert specs['main']['options']['trainops_ib_tc'] == specs['compute']['options']['trainops_ib_tc']
    assert specs['compute']['options']['trainops_ib_tc']['type'] == 'raw'


def test_a_declaration_that_contradicts_the_registry_stops_the_generator(monkeypatch):
    monkeypatch.setattr(gen_docs._declarations, 'problems', lambda: ['trainops_ib_tc is declared twice'])
    with pytest.raises(SystemExit, match='disagree with the knob registry:\ntrainops_ib_tc is declared twice'):
        gen_docs.render_argument_specs('nccl_env')


def test_the_sweep_page_lists_every_knob_a_sweep_varies_and_only_those():
    with open(os.path.join(REPO, gen_docs.SWEEPS_PAGE)) as handle:
        page = handle.read()
    table = page[page.index(gen_docs.SWEEPS_BEGIN):page.index(gen_docs.SWEEPS_END)]
    assert re.findall(r'^\| `([a-z_.A-Z]+)` \|', table, re.M) == [knob.short for knob in _knobs.SWEEP] + [
        'env.NAME', 'override.KEY']
    assert '| `channels` | the maximum NCCL/RCCL channels (`NCCL_MAX_NCHANNELS`) |' in table
