# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The GPU's dense bf16 matrix-product rate: the baseline train.py's TFLOP/s is compared with (docs/gpu.md).

    python3 bench/gpu/matmul.py [--size 8192] [--warmup 3] [--iters 20] [--seconds 10] [--json OUT]

Times ``--iters`` products of two random ``size x size`` bf16 matrices after ``--warmup`` untimed ones, with CUDA
events, and prints the mean rate (2 * size^3 FLOPs a product) in TFLOP/s: the burst rate, with the GPU cool and at its
highest clock. Then it keeps the GPU multiplying for ``--seconds`` and times the last second: the sustained rate, at the
clock and power a training run holds (a run is compared with this one). Prints the device it ran on.
"""

from __future__ import annotations

import argparse
import json
import sys

import torch


def matmul_tflops(size, warmup, iters, dtype=torch.bfloat16):
    """Mean TFLOP/s of ``iters`` ``size``-cubed products on the current CUDA device."""
    a = torch.randn(size, size, device='cuda', dtype=dtype)
    b = torch.randn(size, size, device='cuda', dtype=dtype)
    for _warm in range(warmup):
        torch.matmul(a, b)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _iter in range(iters):
        torch.matmul(a, b)
    end.record()
    torch.cuda.synchronize()
    seconds = start.elapsed_time(end) / 1000.0 / iters
    return 2.0 * size ** 3 / seconds / 1e12


def sustained_tflops(size, seconds, dtype=torch.bfloat16):
    """TFLOP/s of the last second of ``seconds`` of back-to-back products (clocks settled under load)."""
    per_second = max(1, int(round(matmul_tflops(size, 1, 10, dtype) * 1e12 / (2.0 * size ** 3))))
    for _second in range(max(0, int(seconds) - 1)):
        matmul_tflops(size, 0, per_second, dtype)
    return matmul_tflops(size, 0, per_second, dtype)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--size', type=int, default=8192)
    parser.add_argument('--warmup', type=int, default=3)
    parser.add_argument('--iters', type=int, default=20)
    parser.add_argument('--seconds', type=float, default=10, help='how long the sustained measurement runs (0: none)')
    parser.add_argument('--json', default=None, help='also write the result here')
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        parser.error('no CUDA device (torch %s)' % torch.__version__)
    rate = matmul_tflops(args.size, args.warmup, args.iters)
    sustained = sustained_tflops(args.size, args.seconds) if args.seconds > 0 else None
    result = dict(device=torch.cuda.get_device_name(0), size=args.size, dtype='bfloat16', iters=args.iters,
                  tflops=round(rate, 1), sustained_tflops=round(sustained, 1) if sustained else None,
                  sustained_seconds=args.seconds, torch=torch.__version__, cuda=torch.version.cuda)
    print('matmul %dx%dx%d bf16 on %s: %.1f TFLOP/s burst (%d products)%s' % (
        args.size, args.size, args.size, result['device'], rate, args.iters,
        ', %.1f TFLOP/s sustained (the last second of %g s)' % (sustained, args.seconds) if sustained else ''))
    if args.json:
        with open(args.json, 'w') as handle:
            json.dump(result, handle, indent=1)
    return 0


if __name__ == '__main__':
    sys.exit(main())
