# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What a node or a job wrote is read within bounds (module_utils/_node_files.py): one test per hostile input."""

from __future__ import annotations

import json
import os
import time

import pytest

from ansible_collections.trainops.multinode.plugins.module_utils import _node_files as nf

DEEP = '[' * 200000 + ']' * 200000
BIG = '1' * 400


@pytest.mark.parametrize('text, why', [
    (DEEP, 'nesting deeper than 32 levels'),
    ('{"a": %s}' % DEEP, 'nesting deeper than 32 levels'),
    ('{"world_size": %s}' % BIG, 'a number beyond +-2**53 (400 digits)'),
    ('{"world_size": -%s}' % BIG, 'a number beyond +-2**53 (400 digits)'),
    ('{"x": 9007199254740993}', 'a number beyond +-2**53 (16 digits)'),
    ('{"loss": NaN}', 'a number that is not finite (NaN)'),
    ('{"loss": -Infinity}', 'a number that is not finite (-Infinity)'),
    ('{"loss": 1e400}', 'a number that is not finite (1e400)'),
    ('{"loss": 1e300}', 'a number beyond +-2**53 (1e300)'),
    ('{"a": 1', 'not JSON (Expecting \',\' delimiter)'),
    ('', 'not JSON (Expecting value)'),
])
def test_loads_refuses_what_breaks_a_bound_saying_why(text, why):
    with pytest.raises(nf.Refused) as caught:
        nf.loads(text)
    assert str(caught.value) == why
    assert BIG not in str(caught.value)


def test_loads_reads_what_fits():
    # brackets inside strings are no nesting; 2**53 and a large float are still numbers
    assert nf.loads('{"s": "[[[[{{{{", "n": 9007199254740992, "f": -1.5e15, "w": 1e12}') == {
        's': '[[[[{{{{', 'n': 2 ** 53, 'f': -1.5e15, 'w': 1e12}
    nested = '[' * nf.MAX_DEPTH + ']' * nf.MAX_DEPTH
    assert nf.loads(nested) is not None
    with pytest.raises(nf.Refused):
        nf.loads('[' + nested + ']')


def test_a_deep_value_is_refused_fast(tmp_path):
    path = tmp_path / 'allreduce.json'
    path.write_text('{"results": ' + '[' * 2000000 + ']' * 2000000 + '}')
    started = time.monotonic()
    value, refused = nf.read_json(str(path), 'node0', 'allreduce.json', max_bytes=8 * 1024 * 1024)
    assert value is None and refused == ['node0: allreduce.json refused: nesting deeper than 32 levels']
    assert time.monotonic() - started < 5


def test_read_json_names_node_and_file(tmp_path):
    path = tmp_path / 'checkpoint.json'
    assert nf.read_json(str(path), 'node1', 'checkpoint.json') == (None, [])  # missing: nothing to say
    path.write_text('{"global_step": %s}' % BIG)
    assert nf.read_json(str(path), 'node1', 'checkpoint.json') == (
        None, ['node1: checkpoint.json refused: a number beyond +-2**53 (400 digits)'])
    path.write_text('[1, 2]')
    assert nf.read_json_object(str(path), 'node1', 'checkpoint.json') == (
        None, ['node1: checkpoint.json refused: not a JSON object'])
    path.write_text('{"global_step": 3}')
    assert nf.read_json_object(str(path), 'node1', 'checkpoint.json') == ({'global_step': 3}, [])
    # on the node, without a node name, the path names it
    path.write_text('x' * 2048)
    assert nf.read_json(str(path), max_bytes=1024) == (None, ['%s refused: 2048 bytes, more than the 1024 read' % path])


def test_read_json_follows_no_link_and_reads_only_a_regular_file(tmp_path):
    target = tmp_path / 'secret.json'
    target.write_text('{"a": 1}')
    link = tmp_path / 'allreduce.json'
    os.symlink(str(target), str(link))
    assert nf.read_json(str(link), 'node0', 'allreduce.json') == (None, ['node0: allreduce.json refused: a symbolic link'])
    fifo = tmp_path / 'fifo.json'
    os.mkfifo(str(fifo))
    assert nf.read_json(str(fifo), 'node0', 'fifo.json') == (None, ['node0: fifo.json refused: not a regular file'])
    assert nf.read_json(str(tmp_path), 'node0', 'dir') == (None, ['node0: dir refused: not a regular file'])


def write_lines(path, lines, tail=''):
    path.write_text(''.join(line + '\n' for line in lines) + tail)
    return str(path)


def test_read_jsonl_refuses_each_bad_record_by_line_and_keeps_the_rest(tmp_path):
    good = json.dumps({'rank': 0, 'global_step': 1})
    path = write_lines(tmp_path / 'm.jsonl', [
        good, '{"world_size": %s}' % BIG, '{"a": %s}' % ('[' * 1000 + ']' * 1000), '{"loss": NaN}', 'garbage', '[1]', '', good,
        '{"x": "%s"}' % ('y' * 100)], tail='{"rank": 0, "glo')
    found = nf.read_jsonl(path, 'node0', 'rank_00_metrics.jsonl', max_line=64)
    assert found['records'] == [{'rank': 0, 'global_step': 1}] * 2
    assert found['truncated'] is True and found['bad_lines'] == 6
    assert found['refused'] == [
        'node0: rank_00_metrics.jsonl line 2 refused: a record longer than 64 bytes',
        'node0: rank_00_metrics.jsonl line 3 refused: a record longer than 64 bytes',
        'node0: rank_00_metrics.jsonl line 4 refused: a number that is not finite (NaN)',
        'node0: rank_00_metrics.jsonl line 5 refused: not JSON (Expecting value)',
        'node0: rank_00_metrics.jsonl line 6 refused: not a JSON object',
        'node0: rank_00_metrics.jsonl refused: 1 more record(s), the last on line 9',
    ]
    found = nf.read_jsonl(path, 'node0', 'rank_00_metrics.jsonl')
    assert found['refused'][:2] == ['node0: rank_00_metrics.jsonl line 2 refused: a number beyond +-2**53 (400 digits)',
                                    'node0: rank_00_metrics.jsonl line 3 refused: nesting deeper than 32 levels']
    assert len(found['records']) == 3 and found['bad_lines'] == 5


def test_read_jsonl_reads_a_file_up_to_its_bounds(tmp_path):
    line = json.dumps({'rank': 0, 'global_step': 1})
    path = write_lines(tmp_path / 'm.jsonl', [line] * 10)
    # bytes: the last, cut record is not read, and the rest is named
    found = nf.read_jsonl(path, 'node0', 'm.jsonl', max_bytes=len(line) * 3 + 10)
    assert len(found['records']) == 3 and found['truncated'] is False
    assert found['refused'] == ['node0: m.jsonl refused: %d bytes: only the first %d were read'
                                % ((len(line) + 1) * 10, len(line) * 3 + 10)]
    # records
    found = nf.read_jsonl(path, 'node0', 'm.jsonl', max_records=4)
    assert len(found['records']) == 4
    assert found['refused'] == ['node0: m.jsonl refused: more than 4 records: the rest from line 5 on was not read']
    # missing; a link
    assert nf.read_jsonl(str(tmp_path / 'none.jsonl'), 'node0', 'none.jsonl')['records'] == []
    os.symlink(path, str(tmp_path / 'link.jsonl'))
    assert nf.read_jsonl(str(tmp_path / 'link.jsonl'), 'node0', 'link.jsonl')['refused'] == [
        'node0: link.jsonl refused: a symbolic link']
