# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Where a rank's GPU time goes, from the Chrome trace torch.profiler wrote (``-e profile=torch``, or train.py with
``TRAINOPS_PROFILE_TRACE=<file>``):

    python3 bench/gpu/trace_summary.py TRACE.json

Prints, over the profiled steps (torch.profiler's ``ProfilerStep#N`` spans): the wall time a step, the share of it
the GPU was busy (the union of its kernels, copies and sets), and the GPU time a step by kind of kernel (matrix
products, attention, optimizer, normalization, elementwise, reductions, communication, copies), largest first.
Standard library only.
"""

from __future__ import annotations

import json
import re
import sys

#: kinds of GPU work, by kernel name (first match wins)
KINDS = (
    ('communication', re.compile(r'nccl|rccl', re.I)),
    ('attention', re.compile(r'flash|fmha|attention|sdpa|cudnn.*(mha|attn)', re.I)),
    ('optimizer', re.compile(r'adam|multi_tensor_apply|fused_adam', re.I)),
    ('matrix products', re.compile(r'gemm|cutlass|sm90_xmma|sm80_xmma|xmma|ampere_|hopper_|wgmma|nvjet|cublas', re.I)),
    ('normalization', re.compile(r'layer_norm|layernorm|rms_?norm', re.I)),
    ('reductions', re.compile(r'reduce|norm_kernel|sum_kernel', re.I)),
    ('elementwise', re.compile(r'elementwise|vectorized|unrolled|gelu|copy_kernel|fill|cat|index', re.I)),
)


def kind_of(event):
    if event.get('cat') in ('gpu_memcpy', 'gpu_memset'):
        return 'copies and sets'
    name = event.get('name', '')
    for kind, pattern in KINDS:
        if pattern.search(name):
            return kind
    return 'other kernels'


def union_length(intervals):
    total, end = 0.0, None
    for start, stop in sorted(intervals):
        if end is None or start > end:
            total += stop - start
            end = stop
        elif stop > end:
            total += stop - end
            end = stop
    return total


def summarize(trace):
    events = trace['traceEvents'] if isinstance(trace, dict) else trace
    # the host's step spans (the GPU timeline repeats them as gpu_user_annotation events)
    steps = [e for e in events if e.get('ph') == 'X' and e.get('cat') == 'user_annotation'
             and str(e.get('name', '')).startswith('ProfilerStep#')]
    gpu = [e for e in events if e.get('ph') == 'X' and e.get('cat') in ('kernel', 'gpu_memcpy', 'gpu_memset')]
    if not steps or not gpu:
        raise ValueError('no profiler steps or no GPU events in the trace')
    gpu_start = min(e['ts'] for e in gpu)
    gpu_end = max(e['ts'] + e['dur'] for e in gpu)
    window = gpu_end - gpu_start
    count = len(steps)
    by_kind = {}
    for event in gpu:
        by_kind[kind_of(event)] = by_kind.get(kind_of(event), 0.0) + event['dur']
    busy = union_length([(e['ts'], e['ts'] + e['dur']) for e in gpu])
    return dict(steps=count, step_ms=window / count / 1000.0, busy_share=busy / window,
                kinds=sorted(((k, v / count / 1000.0) for k, v in by_kind.items()), key=lambda kv: -kv[1]))


def main(argv):
    if len(argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    with open(argv[1]) as handle:
        result = summarize(json.load(handle))
    print('%d profiled steps: %.1f ms a step of GPU timeline, GPU busy %.1f %% of it' % (
        result['steps'], result['step_ms'], 100.0 * result['busy_share']))
    for kind, ms in result['kinds']:
        print('  %-16s %8.2f ms a step  %5.1f %%' % (kind, ms, 100.0 * ms / result['step_ms']))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
