# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The GPUs' own health from the vendor tools (module_utils/_gpu_health.py), on the outputs of
tests/unit/fixtures/gpu_health (hand-written from the tools' documented formats: its README)."""

from __future__ import annotations

import json
import os

from ansible_collections.trainops.multinode.plugins.module_utils import _gpu_health as gh
from ansible_collections.trainops.multinode.plugins.module_utils import _health as health

FIXTURES = os.path.join(os.path.dirname(__file__), '..', '..', 'fixtures', 'gpu_health')


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


class Runner:
    """Installed ``tools`` answer ``outputs[(tool, args...)]`` as (rc, stdout, stderr); a command not listed fails."""

    def __init__(self, tools, outputs):
        self.tools, self.outputs, self.calls = tools, outputs, []

    def which(self, name):
        return '/usr/bin/' + name if name in self.tools else None

    def run(self, argv):
        key = tuple([os.path.basename(argv[0])] + list(argv[1:]))
        self.calls.append(' '.join(key))
        return self.outputs.get(key, (1, '', 'not answered'))


def test_nvidia_smi_q_fields_by_section_path():
    gpus = gh.parse_nvidia_smi_q(fixture('nvidia_smi_q_h100_healthy.txt'))
    assert sorted(gpus) == ['0000:1b:00.0', '0000:43:00.0']
    fields = gpus['0000:43:00.0']
    assert fields['ECC Errors/Aggregate/DRAM Correctable'] == '12'
    assert fields['Remapped Rows/Correctable Error'] == '1'
    assert fields['Remapped Rows/Bank Remap Availability Histogram/Max'] == '2559 bank(s)'
    assert fields['Retired Pages/Pending Page Blacklist'] == 'N/A'


def test_a_healthy_h100_has_no_problem_and_an_old_remapped_row_is_a_warning():
    assert gh.nvidia_judgment(gh.parse_nvidia_smi_q(fixture('nvidia_smi_q_h100_healthy.txt')))\
        == ([], ['GPU 0000:43:00.0 1 row(s) remapped'])


def test_an_uncorrectable_error_and_a_pending_remap_are_problems():
    problems, warnings = gh.nvidia_judgment(gh.parse_nvidia_smi_q(fixture('nvidia_smi_q_h100_remap_pending.txt')))
    assert problems == ['GPU 0000:1b:00.0 2 uncorrectable ECC error(s) since the driver loaded',
                        'GPU 0000:1b:00.0 row remapping pending (reset the GPU)']
    assert warnings == ['GPU 0000:1b:00.0 1 row(s) remapped', 'GPU 0000:43:00.0 1 row(s) remapped']
    # an ignored GPU (trainops_health_ignore) is left out
    assert gh.nvidia_judgment(gh.parse_nvidia_smi_q(fixture('nvidia_smi_q_h100_remap_pending.txt')),
                              {'0000:1b:00.0'})[0] == []


def test_the_older_single_and_double_bit_layout_and_pending_retirement():
    gpus = gh.parse_nvidia_smi_q(fixture('nvidia_smi_q_v100_dbe.txt'))
    assert gpus['0000:3b:00.0']['PCI/Bus Id'] == '00000000:3B:00.0'
    problems, warnings = gh.nvidia_judgment(gpus)
    # single-bit (correctable) errors count for nothing; the Double Bit Total is the uncorrectable count
    assert problems == ['GPU 0000:3b:00.0 1 uncorrectable ECC error(s) since the driver loaded',
                        'GPU 0000:3b:00.0 page retirement pending (reset the GPU)']
    assert warnings == ['GPU 0000:3b:00.0 1 page(s) retired']


def test_lifetime_uncorrectable_errors_alone_are_a_warning():
    text = fixture('nvidia_smi_q_h100_healthy.txt').replace(
        'DRAM Correctable              : 12\n            DRAM Uncorrectable            : 0',
        'DRAM Correctable              : 12\n            DRAM Uncorrectable            : 5')
    assert gh.nvidia_judgment(gh.parse_nvidia_smi_q(text))[0] == []
    assert 'GPU 0000:43:00.0 5 uncorrectable ECC error(s) in its lifetime' in gh.nvidia_judgment(gh.parse_nvidia_smi_q(text))[1]


def test_xid_lines_bad_codes_are_problems_others_warnings():
    xids = gh.parse_xids(fixture('dmesg_xid.txt'))
    assert [(x['pci'], x['xid']) for x in xids] == [('0000:1b:00', 13), ('0000:1b:00', 13), ('0000:b3:00', 79)]
    problems, warnings = gh.xid_judgment(xids)
    assert problems == ['GPU 0000:b3:00 Xid 79 in the kernel log (1 time(s) this boot; the last: pid=\'<unknown>\', '
                        'name=<unknown>, GPU has fallen off the bus.)']
    assert len(warnings) == 1 and warnings[0].startswith('GPU 0000:1b:00 Xid 13 in the kernel log (2 time(s) this boot')
    assert gh.xid_judgment(xids, ['0000:b3:00.0'])[0] == []


def test_xid_lines_are_bounded():
    text = '\n'.join('[%d.0] NVRM: Xid (PCI:0000:1b:00): 13, pid=%d, name=python, x' % (i, i) for i in range(100))
    xids = gh.parse_xids(text)
    assert len(xids) == gh.XID_LINES and xids[-1]['text'].startswith('pid=99,')


def test_amd_smi_uncorrectable_is_a_problem_deferred_a_warning():
    data = json.loads(fixture('amd_smi_metric_ecc.json'))
    expected = (['GPU 1 3 uncorrectable ECC error(s) since the driver loaded (amd-smi)'],
                ['GPU 1 1 deferred ECC error(s) since the driver loaded (amd-smi)'])
    assert gh.amd_judgment(data) == expected
    assert gh.amd_judgment({'gpu_data': data}) == expected  # newer amd-smi wraps the list
    assert gh.amd_judgment([{'gpu': 0, 'ecc': {'total_uncorrectable_count': 'N/A'}}, 'junk']) == ([], [])


def test_tool_checks_on_nvidia_read_nvidia_smi_and_the_first_readable_kernel_log():
    runner = Runner(['nvidia-smi', 'dmesg', 'journalctl'], {
        tuple(gh.NVIDIA_SMI_Q): (0, fixture('nvidia_smi_q_h100_remap_pending.txt'), ''),
        ('dmesg', ): (1, '', 'dmesg: read kernel buffer failed: Operation not permitted'),
        ('journalctl', '-k', '-b', '--no-pager', '-q'): (0, fixture('dmesg_xid.txt'), '')})
    told = gh.gpu_tool_checks(runner, 'nvidia')
    assert told['sources'] == ['nvidia-smi -q', 'kernel log']
    assert len(told['problems']) == 3 and told['problems'][-1].startswith('GPU 0000:b3:00 Xid 79')
    assert runner.calls == [' '.join(gh.NVIDIA_SMI_Q), 'dmesg', 'journalctl -k -b --no-pager -q']


def test_tool_checks_fall_back_to_the_full_query_and_say_nothing_without_tools():
    runner = Runner(['nvidia-smi'], {('nvidia-smi', '-q'): (0, fixture('nvidia_smi_q_v100_dbe.txt'), '')})
    told = gh.gpu_tool_checks(runner, 'nvidia')
    assert told['sources'] == ['nvidia-smi -q'] and len(told['problems']) == 2 and told['warnings'] == [
        'GPU 0000:3b:00.0 1 page(s) retired']
    failing = gh.gpu_tool_checks(Runner(['nvidia-smi'], {}), 'nvidia')
    assert failing['sources'] == [] and failing['problems'] == []
    assert failing['warnings'] == ['nvidia-smi -q failed (rc=1): not answered; its facts are left out']
    assert gh.gpu_tool_checks(Runner([], {}), 'nvidia') == dict(problems=[], warnings=[], sources=[])
    amd = gh.gpu_tool_checks(Runner(['amd-smi'], {tuple(gh.AMD_SMI_ECC): (0, fixture('amd_smi_metric_ecc.json'), '')}), 'amd')
    assert amd['sources'] == ['amd-smi'] and len(amd['problems']) == 1


def test_node_checks_adds_what_the_tools_tell(tmp_path):
    root = tmp_path / 'root'
    gpu_dir = root / 'proc' / 'driver' / 'nvidia' / 'gpus' / '0000:1b:00.0'
    gpu_dir.mkdir(parents=True)
    (gpu_dir / 'information').write_text('Model: \t\t NVIDIA H100 80GB HBM3\nBus Location: \t 0000:1b:00.0\n')
    runner = Runner(['nvidia-smi'], {tuple(gh.NVIDIA_SMI_Q): (0, fixture('nvidia_smi_q_h100_remap_pending.txt'), '')})
    facts = health.node_checks(str(root), runner=runner)
    assert facts['gpus']['tools'] == ['nvidia-smi -q']
    assert 'GPU 0000:1b:00.0 row remapping pending (reset the GPU)' in facts['problems']
    assert health.node_checks(str(root))['gpus']['tools'] == []  # files only


def test_the_report_names_the_tools_that_answered():
    facts = dict(a=dict(gpus=dict(vendor='nvidia', count=8, links=[], tools=['nvidia-smi -q', 'kernel log']), rdma='none',
                        problems=[], warnings=[]))
    lines = health.report(['a'], facts, [dict(nodes=['a'], ok=True, busbw_gbps=1.0)], dict(done=True, suspects=[]))['lines']
    assert lines[2].split(None, 1)[1].startswith('8 nvidia (nvidia-smi -q, kernel log)')
