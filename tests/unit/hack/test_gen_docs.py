"""hack/gen_docs.py: docs/reference/knobs.md and outcomes.md are what it generates from the knob registry, the roles'
argument specs and the outcome vocabulary."""
import os
import re
import shutil
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
HACK = os.path.join(REPO, 'hack')
if HACK not in sys.path:
    sys.path.insert(0, HACK)

import gen_docs  # noqa: E402
from ansible_collections.trainops.multinode.plugins.module_utils import _knobs, _outcomes  # noqa: E402


@pytest.mark.parametrize('page, render', [(gen_docs.KNOBS_PAGE, gen_docs.render_knobs),
                                          (gen_docs.OUTCOMES_PAGE, gen_docs.render_outcomes)])
def test_the_reference_page_is_what_the_generator_prints(page, render):
    with open(os.path.join(REPO, page)) as handle:
        written = handle.read()
    assert written == render(), (
        '%s differs from what hack/gen_docs.py generates (a knob, an argument spec or an outcome changed); '
        'regenerate it with: %s' % (page, gen_docs.REGENERATE))


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


def test_check_names_a_stale_page_and_how_to_regenerate(tmp_path, capsys, monkeypatch):
    for role in os.listdir(os.path.join(REPO, 'roles')):
        spec = os.path.join(REPO, 'roles', role, 'meta', 'argument_specs.yml')
        if os.path.exists(spec):
            os.makedirs(str(tmp_path / 'roles' / role / 'meta'))
            shutil.copy(spec, str(tmp_path / 'roles' / role / 'meta'))
    os.makedirs(str(tmp_path / 'docs' / 'reference'))
    (tmp_path / gen_docs.KNOBS_PAGE).write_text(gen_docs.render_knobs(str(tmp_path)) + 'edited by hand\n')
    (tmp_path / gen_docs.OUTCOMES_PAGE).write_text(gen_docs.render_outcomes())
    assert gen_docs.stale(str(tmp_path)) == [gen_docs.KNOBS_PAGE]
    monkeypatch.setattr(gen_docs, 'REPO', str(tmp_path))
    assert gen_docs.main(['--check']) == 1
    assert 'docs/reference/knobs.md differs' in capsys.readouterr().out
    assert gen_docs.main([]) == 0 and gen_docs.stale(str(tmp_path)) == []
