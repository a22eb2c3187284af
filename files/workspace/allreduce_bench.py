#!/usr/bin/env python
"""All-reduce bandwidth benchmark for ``trainops.multinode``, in the style of nccl-tests' ``all_reduce_perf``.

Launched by ``torchrun`` on every node, like ``train.py``. Device and backend are picked the same way
(CUDA or ROCm -> ``nccl``, which is RCCL on ROCm; CPU -> ``gloo``). For every message size from
``--min-bytes`` to ``--max-bytes`` (multiplied by ``--step-factor`` each time) every rank runs ``--warmup``
untimed and ``--iters`` timed in-place ``all_reduce(SUM)`` calls on one buffer, then checks the result of one
more all-reduce of known values.

Numbers, as defined by nccl-tests (https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md):

* ``time``: mean time of one all-reduce in microseconds. Every rank times its ``--iters`` calls (CUDA events
  on GPUs, ``time.perf_counter`` after a barrier on CPUs); the reported time is the **maximum over the ranks**
  (the slowest rank bounds the collective). nccl-tests itself averages over the ranks; that mean is kept in
  the JSON as ``time_us_mean``.
* ``algbw = S / t`` in GB/s (1e9 bytes per second), ``S`` the message size in bytes.
* ``busbw = algbw * 2 * (n - 1) / n`` for AllReduce with ``n`` ranks ("Bus bandwidth", section AllReduce of
  PERFORMANCE.md): the figure to compare with the hardware's link bandwidth, independent of ``n``.
* ``#wrong``: elements, summed over all ranks, that differ from the exact expected sum after an all-reduce of
  small integers (exact in the chosen dtype; ``N/A`` when the sum of ``n`` ranks cannot be exact, e.g.
  bfloat16 with more than 256 ranks, or with ``--no-check``).

Outputs:

* stdout of global rank 0: a table like nccl-tests, one row as soon as each size is done, then the average
  bus bandwidth. Every other node's local rank 0 prints one progress line per size, and every rank prints a
  ``done`` line at the end (each line in a single write, so ranks sharing torchrun's stdout do not interleave)::

      [trainops] allreduce node=<host> rank=<rank>/<world> step=<i>/<n> size=<bytes> time_us=<t> busbw=<GB/s> wrong=<k>
      [trainops] done node=<host> rank=<rank>/<world> avg_busbw=<GB/s:.2f>

* ``--output`` (default ``<output dir>/allreduce.json``), written by global rank 0: world size, nodes,
  backend, device names, dtype, one record per size, the communication environment variables it saw.
* ``<output dir>/rank_XX_env.json``, one per rank, like ``train.py``'s: host, ranks, backend, device,
  versions and the ``NCCL_*``/``RCCL_*``/``GLOO_*``/``HSA_*``/``TRAINOPS_*``/... variables.

The output dir is ``--output-dir``, else ``$TRAINOPS_OUTPUT_DIR`` (set by the launcher for every rank), else
``outputs`` (``train.py``'s default ``training.output_dir``). The process-group timeout is ``--timeout-s``,
else ``$TRAINOPS_COLLECTIVE_TIMEOUT_S``, else 120 s. Any failure, including a wrong result, exits non-zero;
bad arguments exit 2 before any distributed setup.

Usage::

    torchrun --nnodes N --nproc-per-node P ... allreduce_bench.py [--min-bytes 1M] [--max-bytes 1G] [--dtype bfloat16]
    python allreduce_bench.py --render outputs/allreduce.json [--format table|markdown]   # no torch needed

``--render`` prints the table of a results file with the standard library only, so a playbook can show
it on the controller. Importing this file has no side effects and does not import torch.
"""

import argparse
import datetime
import json
import os
import platform
import re
import socket
import sys
import time
from typing import Any, Dict, List, Optional, Sequence

RESULTS_FORMAT = 1
RESULTS_NAME = "allreduce.json"
PROGRESS_PREFIX = "[trainops]"
DEFAULT_OUTPUT_DIR = "outputs"  # train.py's training.output_dir default
DEFAULT_TIMEOUT_S = 120.0  # train.py's distributed.timeout_s default
DEFAULT_MAX_BYTES_GPU = "1G"
DEFAULT_MAX_BYTES_CPU = "16M"

#: Environment variable prefixes recorded in the results and in ``rank_XX_env.json`` (as in ``train.py``).
ENV_PREFIXES = ("NCCL_", "RCCL_", "GLOO_", "HSA_", "TORCH_NCCL_", "TORCH_DISTRIBUTED_", "TORCHELASTIC_",
                "UCX_", "FI_", "HIP_", "ROCR_", "CUDA_", "OMP_", "TRAINOPS_")

#: ``--dtype`` -> (torch attribute, nccl-tests type name, bytes per element, largest n such that every integer
#: in [0, n] is exact: 2 ** (mantissa bits + 1)).
DTYPES = {
    "float32": ("float32", "float", 4, 2 ** 24),
    "float16": ("float16", "half", 2, 2 ** 11),
    "bfloat16": ("bfloat16", "bfloat16", 2, 2 ** 8),
    "float64": ("float64", "double", 8, 2 ** 53),
}

#: Period of the check pattern: rank r puts ``1 + (r + i) % PATTERN_PERIOD`` into element i (odd, so a block
#: moved by a power-of-two offset shows up), fewer when the dtype cannot hold the sum exactly.
PATTERN_PERIOD = 7

_SIZE_RE = re.compile(r"^\s*(\d+)\s*(?:([kmgt])(?:i?b)?|b)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


class BenchError(ValueError):
    """Invalid benchmark argument or results file."""


# --------------------------------------------------------------------------------------------------
# Pure helpers (no torch)
# --------------------------------------------------------------------------------------------------

def parse_size(text: str) -> int:
    """``"64M"`` -> 67108864. Suffixes K, M, G, T are powers of 1024 (like nccl-tests' ``-b``/``-e``);
    ``KB``/``KiB`` and a bare ``B`` are accepted too. Raises :class:`BenchError`."""
    match = _SIZE_RE.match(str(text))
    if not match:
        raise BenchError("invalid size %r: expected a number of bytes with an optional K, M, G or T suffix "
                         "(powers of 1024), e.g. 4096, 256K, 64M, 2G" % (text,))
    value = int(match.group(1)) * _SIZE_UNITS[(match.group(2) or "").lower()]
    if value <= 0:
        raise BenchError("invalid size %r: must be > 0" % (text,))
    return value


def format_size(num: int) -> str:
    """67108864 -> ``"64M"`` (exact multiples of 1024 only), 1000 -> ``"1000"``."""
    for suffix in ("T", "G", "M", "K"):
        unit = _SIZE_UNITS[suffix.lower()]
        if num >= unit and num % unit == 0:
            return "%d%s" % (num // unit, suffix)
    return str(num)


def message_sizes(min_bytes: int, max_bytes: int, factor: int, element_size: int) -> List[int]:
    """The message sizes in bytes: ``min_bytes * factor ** k`` up to ``max_bytes``, each rounded down to a
    whole number of elements (as nccl-tests does), without duplicates."""
    if factor < 2:
        raise BenchError("--step-factor must be an integer >= 2, got %r" % (factor,))
    if min_bytes > max_bytes:
        raise BenchError("--min-bytes (%s = %d bytes) is larger than --max-bytes (%s = %d bytes)"
                         % (format_size(min_bytes), min_bytes, format_size(max_bytes), max_bytes))
    if min_bytes < element_size:
        raise BenchError("--min-bytes (%d) is smaller than one element (%d bytes)" % (min_bytes, element_size))
    sizes = []  # type: List[int]
    size = min_bytes
    while size <= max_bytes:
        rounded = size - size % element_size
        if not sizes or sizes[-1] != rounded:
            sizes.append(rounded)
        size *= factor
    return sizes


def bus_factor(world_size: int) -> float:
    """nccl-tests' AllReduce bus bandwidth factor ``2 * (n - 1) / n``."""
    return 2.0 * (world_size - 1) / world_size


def bandwidths(size: int, seconds: float, world_size: int) -> Dict[str, float]:
    """``algbw = size / t`` and ``busbw = algbw * 2 (n - 1) / n``, both in GB/s (1e9 bytes/s)."""
    algbw = size / seconds / 1e9 if seconds > 0 else 0.0
    return {"algbw_gbps": algbw, "busbw_gbps": algbw * bus_factor(world_size)}


def check_period(world_size: int, exact_limit: int) -> int:
    """Period of the check pattern whose sum over ``world_size`` ranks stays exact; 0 if none can."""
    return min(PATTERN_PERIOD, exact_limit // world_size)


def expected_sums(world_size: int, period: int) -> List[int]:
    """Expected element ``j`` (mod ``period``) of the all-reduced check pattern: sum of ``1 + (r + j) % period``."""
    return [sum(1 + (rank + j) % period for rank in range(world_size)) for j in range(period)]


def collected_env(environ: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """Communication-related environment variables (NCCL_*, RCCL_*, GLOO_*, HSA_*, TRAINOPS_*, ...)."""
    environ = os.environ if environ is None else environ
    return {k: v for k, v in sorted(environ.items()) if k.startswith(ENV_PREFIXES)}


def _format_time_us(time_us: float) -> str:
    """nccl-tests' time column: fewer decimals for longer times."""
    if time_us >= 10000.0:
        return "%.0f" % time_us
    if time_us >= 100.0:
        return "%.1f" % time_us
    return "%.2f" % time_us


def _format_wrong(wrong: Optional[int]) -> str:
    return "N/A" if wrong is None else str(wrong)


TABLE_COLUMNS = ("size", "count", "type", "redop", "time", "algbw", "busbw", "#wrong")
TABLE_UNITS = ("(B)", "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)", "")
_ROW_FORMAT = "%12s  %12s  %8s  %6s  %9s  %8s  %8s  %7s"


def table_header(result: Dict[str, Any]) -> List[str]:
    """The ``#`` lines above the table: run summary, one line per rank, column names and units."""
    lines = [
        "# trainops allreduce_bench: all_reduce sum, in place",
        "# world_size %d nodes %d backend %s device %s dtype %s minBytes %d maxBytes %d step: %d(factor) "
        "warmup iters: %d iters: %d validation: %d" % (
            result["world_size"], result["nodes"], result["backend"], result["device"], result["dtype"],
            result["min_bytes"], result["max_bytes"], result["step_factor"], result["warmup"], result["iters"],
            1 if result["check"] else 0),
        "#",
        "# Using devices",
    ]
    for info in result.get("ranks", []):
        lines.append("#  Rank %3d Node %3d Pid %7d on %s device %s [%s]" % (
            info["rank"], info["group_rank"], info["pid"], info["hostname"], info["device"], info["device_name"]))
    lines += ["#", "#" + (_ROW_FORMAT % TABLE_COLUMNS)[1:], ("#" + (_ROW_FORMAT % TABLE_UNITS)[1:]).rstrip()]
    return lines


def table_row(record: Dict[str, Any]) -> str:
    """One table row, like nccl-tests' in-place columns."""
    return _ROW_FORMAT % (record["size"], record["count"], record["type"], record["redop"],
                          _format_time_us(record["time_us"]), "%.2f" % record["algbw_gbps"],
                          "%.2f" % record["busbw_gbps"], _format_wrong(record["wrong"]))


def table_footer(result: Dict[str, Any]) -> List[str]:
    """Validation summary and average bus bandwidth, as nccl-tests ends its output."""
    wrong = result["wrong_total"]
    status = "N/A" if wrong is None else ("%d %s" % (wrong, "OK" if wrong == 0 else "FAILED"))
    return ["# Out of bounds values : %s" % status,
            "# Avg bus bandwidth    : %.4f GB/s" % result["avg_busbw_gbps"],
            "#"]


def render_table(result: Dict[str, Any]) -> str:
    """The whole nccl-tests style table of a results dict (as written to ``--output``)."""
    lines = table_header(result) + [table_row(r) for r in result["results"]] + table_footer(result)
    return "\n".join(lines) + "\n"


def render_markdown(result: Dict[str, Any]) -> str:
    """A Markdown table of a results dict, with a one-line summary above it."""
    lines = [
        "all_reduce sum (in place): world_size %d, nodes %d, backend %s, device %s (%s), dtype %s; "
        "avg busbw %.2f GB/s, #wrong %s" % (
            result["world_size"], result["nodes"], result["backend"], result["device"],
            ", ".join(result.get("device_names") or []) or "?", result["dtype"], result["avg_busbw_gbps"],
            _format_wrong(result["wrong_total"])),
        "",
        "| size (B) | count | type | time (us) | algbw (GB/s) | busbw (GB/s) | #wrong |",
        "|---:|---:|---|---:|---:|---:|---:|",
    ]
    for rec in result["results"]:
        lines.append("| %d | %d | %s | %s | %.2f | %.2f | %s |" % (
            rec["size"], rec["count"], rec["type"], _format_time_us(rec["time_us"]), rec["algbw_gbps"],
            rec["busbw_gbps"], _format_wrong(rec["wrong"])))
    return "\n".join(lines) + "\n"


_REQUIRED_KEYS = ("world_size", "nodes", "backend", "device", "dtype", "min_bytes", "max_bytes", "step_factor",
                  "warmup", "iters", "check", "results", "avg_busbw_gbps", "wrong_total")
_RECORD_KEYS = ("size", "count", "type", "redop", "time_us", "algbw_gbps", "busbw_gbps", "wrong")


def load_results(path: str) -> Dict[str, Any]:
    """Read and sanity-check a results file; raises :class:`BenchError` with a clear message."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except OSError as exc:
        raise BenchError("cannot read results file %s: %s" % (path, exc))
    except ValueError as exc:
        raise BenchError("results file %s is not valid JSON: %s" % (path, exc))
    if not isinstance(data, dict) or data.get("benchmark") != "all_reduce":
        raise BenchError("%s is not an allreduce_bench results file" % path)
    missing = [k for k in _REQUIRED_KEYS if k not in data]
    if not missing and isinstance(data["results"], list):
        missing = sorted({k for rec in data["results"] for k in _RECORD_KEYS if not isinstance(rec, dict) or k not in rec})
    if missing:
        raise BenchError("results file %s lacks %s" % (path, ", ".join(missing)))
    return data


def write_json_atomic(path: str, data: Any) -> None:
    """Write ``data`` as pretty JSON via a temp file and ``os.replace``."""
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2, sort_keys=True, default=str)
        handle.write("\n")
    os.replace(tmp, path)


def emit(line: str) -> None:
    """Write one whole line to stdout in a single write(2), so ranks sharing torchrun's stdout do not interleave."""
    sys.stdout.flush()
    os.write(sys.stdout.fileno(), (line + "\n").encode("utf-8", "replace"))


def progress_line(node: str, rank: int, world_size: int, step: int, steps: int, record: Dict[str, Any]) -> str:
    """Per-size progress of non-zero nodes; ``trainops.multinode.torchrun_wait``'s default pattern matches it."""
    return "%s allreduce node=%s rank=%d/%d step=%d/%d size=%d time_us=%s busbw=%.2f wrong=%s" % (
        PROGRESS_PREFIX, node, rank, world_size, step, steps, record["size"], _format_time_us(record["time_us"]),
        record["busbw_gbps"], _format_wrong(record["wrong"]))


def done_line(node: str, rank: int, world_size: int, avg_busbw: float) -> str:
    """The last line of every rank."""
    return "%s done node=%s rank=%d/%d avg_busbw=%.2f" % (PROGRESS_PREFIX, node, rank, world_size, avg_busbw)


# --------------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------------

def _size_arg(text: str) -> int:
    try:
        return parse_size(text)
    except BenchError as exc:
        raise argparse.ArgumentTypeError(str(exc))


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("expected an integer, got %r" % text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be > 0, got %d" % value)
    return value


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("expected an integer, got %r" % text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be >= 0, got %d" % value)
    return value


def build_arg_parser() -> argparse.ArgumentParser:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(
        description="All-reduce bus bandwidth benchmark (nccl-tests style); launch with torchrun on every node.",
        epilog="Example: torchrun --nproc-per-node 8 allreduce_bench.py --min-bytes 1M --max-bytes 1G --dtype bfloat16; "
               "python allreduce_bench.py --render outputs/allreduce.json",
    )
    parser.add_argument("-b", "--min-bytes", type=_size_arg, default=parse_size("1M"), metavar="SIZE",
                        help="smallest message size, e.g. 4096, 256K, 1M (default: 1M)")
    parser.add_argument("-e", "--max-bytes", type=_size_arg, default=None, metavar="SIZE",
                        help="largest message size (default: %s on GPUs, %s on CPUs, at least --min-bytes)"
                        % (DEFAULT_MAX_BYTES_GPU, DEFAULT_MAX_BYTES_CPU))
    parser.add_argument("-f", "--step-factor", type=_positive_int, default=2, metavar="N",
                        help="multiply the size by N from one step to the next, N >= 2 (default: %(default)s)")
    parser.add_argument("-d", "--dtype", choices=sorted(DTYPES), default="float32",
                        help="element type (default: %(default)s)")
    parser.add_argument("-w", "--warmup", type=_non_negative_int, default=5, metavar="N",
                        help="untimed all-reduces per size (default: %(default)s)")
    parser.add_argument("-n", "--iters", type=_positive_int, default=20, metavar="N",
                        help="timed all-reduces per size (default: %(default)s)")
    parser.add_argument("--no-check", dest="check", action="store_false",
                        help="skip the correctness check (#wrong shows N/A)")
    parser.add_argument("--debug-corrupt-rank", type=_non_negative_int, default=None, metavar="RANK",
                        help="debug: this rank alters one element of every checked result, so the check must fail")
    parser.add_argument("--backend", choices=("auto", "nccl", "gloo", "mpi", "ucc"), default="auto",
                        help="auto: nccl (RCCL on ROCm) on GPUs, gloo on CPUs (default: %(default)s)")
    parser.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto",
                        help="auto: cuda:<LOCAL_RANK> when a GPU is visible, else cpu (default: %(default)s)")
    parser.add_argument("--timeout-s", type=float, default=None, metavar="SECONDS",
                        help="process-group timeout (default: $TRAINOPS_COLLECTIVE_TIMEOUT_S, else %g)" % DEFAULT_TIMEOUT_S)
    parser.add_argument("--output-dir", default=None, metavar="DIR",
                        help="directory for rank_XX_env.json and the results (default: $TRAINOPS_OUTPUT_DIR, else %s)"
                        % DEFAULT_OUTPUT_DIR)
    parser.add_argument("--output", default=None, metavar="PATH",
                        help="results JSON written by rank 0 (default: <output dir>/%s)" % RESULTS_NAME)
    parser.add_argument("--render", default=None, metavar="PATH",
                        help="print the table of a results JSON file and exit (no torch needed)")
    parser.add_argument("--format", choices=("table", "markdown"), default="table",
                        help="--render output: nccl-tests style table or Markdown (default: %(default)s)")
    return parser


def resolve_args(parser: argparse.ArgumentParser, argv: Optional[Sequence[str]]) -> argparse.Namespace:
    """Parse and validate everything that can be checked without torch; ``parser.error`` (exit 2) on a problem."""
    argv = list(sys.argv[1:] if argv is None else argv)
    for arg in argv:
        if arg.split("=", 1)[0] in ("--config", "--override", "--print-config"):
            parser.error("%s is a train.py option; launch allreduce_bench.py with trainops_pass_config_args=false "
                         "and give its own options in trainops_script_args (its output dir comes from "
                         "$TRAINOPS_OUTPUT_DIR)" % arg.split("=", 1)[0])
    args = parser.parse_args(argv)
    if args.render is not None:
        return args
    try:
        # the default --max-bytes depends on the device (run_benchmark); it is never below --min-bytes
        message_sizes(args.min_bytes, args.max_bytes or args.min_bytes, args.step_factor, DTYPES[args.dtype][2])
    except BenchError as exc:
        parser.error(str(exc))
    if args.timeout_s is None:
        env_timeout = os.environ.get("TRAINOPS_COLLECTIVE_TIMEOUT_S")
        if env_timeout:
            try:
                args.timeout_s = float(env_timeout)
            except ValueError:
                parser.error("TRAINOPS_COLLECTIVE_TIMEOUT_S=%r is not a number of seconds" % env_timeout)
        else:
            args.timeout_s = DEFAULT_TIMEOUT_S
    if not args.timeout_s > 0:
        parser.error("the collective timeout must be > 0 seconds, got %r" % args.timeout_s)
    if args.output_dir is None:
        args.output_dir = os.environ.get("TRAINOPS_OUTPUT_DIR") or DEFAULT_OUTPUT_DIR
    if args.output is None:
        args.output = os.path.join(args.output_dir, RESULTS_NAME)
    return args


# --------------------------------------------------------------------------------------------------
# Distributed benchmark (torch imported here only)
# --------------------------------------------------------------------------------------------------

def dist_env() -> Dict[str, Any]:
    """Rank information from torchrun's environment (single-process defaults when it is absent)."""
    env = os.environ
    return {
        "launched": "RANK" in env,
        "rank": int(env.get("RANK", "0")),
        "world_size": int(env.get("WORLD_SIZE", "1")),
        "local_rank": int(env.get("LOCAL_RANK", "0")),
        "local_world_size": int(env.get("LOCAL_WORLD_SIZE", "1")),
        "group_rank": int(env.get("GROUP_RANK", "0")),
        "master_addr": env.get("MASTER_ADDR"),
        "master_port": env.get("MASTER_PORT"),
    }


def select_device(torch: Any, device_cfg: str, local_rank: int) -> Any:
    """``cuda:<local_rank>`` when requested or available (CUDA or ROCm), otherwise ``cpu`` (as ``train.py``)."""
    if device_cfg == "cpu" or (device_cfg == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise RuntimeError("--device cuda but torch.cuda.is_available() is False (torch %s)" % torch.__version__)
    count = torch.cuda.device_count()
    if local_rank >= count:
        raise RuntimeError("LOCAL_RANK=%d but only %d GPU(s) are visible on %s; lower --nproc-per-node"
                           % (local_rank, count, socket.gethostname()))
    torch.cuda.set_device(local_rank)
    return torch.device("cuda", local_rank)


def accelerator_name(torch: Any, device: Any) -> str:
    """``rocm``, ``cuda`` or ``cpu``."""
    if device.type != "cuda":
        return "cpu"
    return "rocm" if getattr(torch.version, "hip", None) else "cuda"


def device_name(torch: Any, device: Any) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return platform.processor() or platform.machine()


def nccl_version(torch: Any) -> Optional[str]:
    try:
        version = torch.cuda.nccl.version()
    except Exception:  # noqa: BLE001 - purely informational
        return None
    return ".".join(str(v) for v in version) if isinstance(version, tuple) else str(version)


def init_distributed(dist: Any, backend: str, device: Any, timeout_s: float, info: Dict[str, Any]) -> None:
    """``init_process_group`` with the timeout, from torchrun's env or as a 1-process group (as ``train.py``)."""
    kwargs = {"backend": backend, "timeout": datetime.timedelta(seconds=timeout_s)}  # type: Dict[str, Any]
    if backend == "nccl" and device.type == "cuda":
        kwargs["device_id"] = device
    if info["launched"]:
        kwargs.update(init_method="env://", rank=info["rank"], world_size=info["world_size"])
    else:
        kwargs.update(store=dist.HashStore(), rank=0, world_size=1)
    try:
        dist.init_process_group(**kwargs)
    except TypeError:
        if "device_id" not in kwargs:
            raise
        del kwargs["device_id"]
        dist.init_process_group(**kwargs)


class Bench:
    """One rank's view of the benchmark in an initialised process group."""

    def __init__(self, torch: Any, dist: Any, device: Any, backend: str, dtype_name: str,
                 corrupt_rank: Optional[int] = None) -> None:
        self.torch, self.dist, self.device, self.backend = torch, dist, device, backend
        attr, self.type_name, self.element_size, self.exact_limit = DTYPES[dtype_name]
        self.dtype = getattr(torch, attr)
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        self.is_cuda = device.type == "cuda"
        self.corrupt = corrupt_rank == self.rank

    def barrier(self) -> None:
        if self.backend == "nccl" and self.is_cuda:
            self.dist.barrier(device_ids=[self.device.index])
        else:
            self.dist.barrier()
        if self.is_cuda:
            self.torch.cuda.synchronize(self.device)

    def time_all_reduce(self, buf: Any, warmup: int, iters: int) -> float:
        """This rank's mean seconds per in-place all-reduce of ``buf`` over ``iters`` calls."""
        dist = self.dist
        for _i in range(warmup):
            dist.all_reduce(buf)
        self.barrier()
        if self.is_cuda:
            start = self.torch.cuda.Event(enable_timing=True)
            end = self.torch.cuda.Event(enable_timing=True)
            start.record()
            for _i in range(iters):
                dist.all_reduce(buf)
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3 / iters
        started = time.perf_counter()
        for _i in range(iters):
            dist.all_reduce(buf)
        return (time.perf_counter() - started) / iters

    def count_wrong(self, buf: Any) -> Optional[int]:
        """All-reduce a known pattern in ``buf``; this rank's number of elements != the exact sum (None: no exact check)."""
        torch = self.torch
        period = check_period(self.world_size, self.exact_limit)
        if period < 1:
            return None
        count = buf.numel()
        whole = count - count % period
        pattern = (1 + (self.rank + torch.arange(period, device=self.device)) % period).to(self.dtype)
        if whole:
            buf[:whole].view(-1, period).copy_(pattern.expand(whole // period, period))
        buf[whole:].copy_(pattern[:count - whole])
        self.dist.all_reduce(buf)
        if self.corrupt:  # --debug-corrupt-rank
            buf[count // 2] += 1
        expected = torch.tensor(expected_sums(self.world_size, period), dtype=self.dtype, device=self.device)
        wrong = torch.zeros((), dtype=torch.int64, device=self.device)
        if whole:
            wrong += buf[:whole].view(-1, period).ne(expected).sum()
        wrong += buf[whole:].ne(expected[:count - whole]).sum()
        return int(wrong.item())

    def reduce_stats(self, seconds: float, wrong: Optional[int]) -> Dict[str, Any]:
        """Max and mean over ranks of the time, sum of the wrong elements."""
        torch, dist = self.torch, self.dist
        high = torch.tensor([seconds], dtype=torch.float64, device=self.device)
        dist.all_reduce(high, op=dist.ReduceOp.MAX)
        total = torch.tensor([seconds, float(wrong or 0)], dtype=torch.float64, device=self.device)
        dist.all_reduce(total)
        total_s, total_wrong = total.tolist()
        return {"max_s": float(high.item()), "mean_s": total_s / self.world_size,
                "wrong": None if wrong is None else int(round(total_wrong))}

    def run_size(self, buf: Any, size: int, warmup: int, iters: int, check: bool) -> Dict[str, Any]:
        """Time and check one message size; every rank returns the same record."""
        view = buf[:size // self.element_size]
        view.zero_()  # timed on zeros: the values stay finite however many times they are summed
        seconds = self.time_all_reduce(view, warmup, iters)
        wrong = self.count_wrong(view) if check else None
        stats = self.reduce_stats(seconds, wrong)
        record = {"size": size, "count": view.numel(), "type": self.type_name, "redop": "sum",
                  "time_us": stats["max_s"] * 1e6, "time_us_mean": stats["mean_s"] * 1e6, "wrong": stats["wrong"]}
        record.update(bandwidths(size, stats["max_s"], self.world_size))
        return record


def _rank_info(torch: Any, device: Any, info: Dict[str, Any]) -> Dict[str, Any]:
    return {"rank": info["rank"], "local_rank": info["local_rank"], "group_rank": info["group_rank"],
            "hostname": socket.gethostname(), "pid": os.getpid(), "device": str(device),
            "device_name": device_name(torch, device)}


def run_benchmark(args: argparse.Namespace) -> int:
    """Join the process group, run every size, report; return 0, or 1 when any element was wrong."""
    import torch
    import torch.distributed as dist

    info = dist_env()
    device = select_device(torch, args.device, info["local_rank"])
    if args.max_bytes is None:
        default_max = parse_size(DEFAULT_MAX_BYTES_GPU if device.type == "cuda" else DEFAULT_MAX_BYTES_CPU)
        args.max_bytes = max(default_max, args.min_bytes)
    sizes = message_sizes(args.min_bytes, args.max_bytes, args.step_factor, DTYPES[args.dtype][2])  # checked in resolve_args
    backend = args.backend if args.backend != "auto" else ("nccl" if device.type == "cuda" else "gloo")
    out_dir = os.path.abspath(args.output_dir)
    os.makedirs(out_dir, exist_ok=True)
    output = os.path.abspath(args.output)

    init_distributed(dist, backend, device, args.timeout_s, info)
    ok = False
    failed_elements = False
    try:
        bench = Bench(torch, dist, device, backend, args.dtype, args.debug_corrupt_rank)
        rank, world_size = bench.rank, bench.world_size
        node = socket.gethostname()
        me = _rank_info(torch, device, info)
        ranks = [None] * world_size  # type: List[Any]
        dist.all_gather_object(ranks, me)
        env = collected_env()
        write_json_atomic(os.path.join(out_dir, "rank_%02d_env.json" % rank), {
            "workload": "allreduce_bench",
            "hostname": node, "rank": rank, "world_size": world_size, "local_rank": info["local_rank"],
            "local_world_size": info["local_world_size"], "group_rank": info["group_rank"],
            "master_addr": info["master_addr"], "master_port": info["master_port"],
            "backend": backend, "device": str(device), "accelerator": accelerator_name(torch, device),
            "device_name": me["device_name"], "dtype": args.dtype,
            "torch_version": torch.__version__, "torch_cuda_version": torch.version.cuda,
            "torch_hip_version": getattr(torch.version, "hip", None),
            "nccl_version": nccl_version(torch) if device.type == "cuda" and backend == "nccl" else None,
            "python_version": platform.python_version(), "pid": os.getpid(), "num_threads": torch.get_num_threads(),
            "env": env, "time": time.time(),
        })
        result = {
            "format": RESULTS_FORMAT, "benchmark": "all_reduce", "redop": "sum", "in_place": True,
            "world_size": world_size, "nodes": len({r["group_rank"] for r in ranks}),
            "hosts": sorted({r["hostname"] for r in ranks}), "local_world_size": info["local_world_size"],
            "backend": backend, "device": device.type, "accelerator": accelerator_name(torch, device),
            "device_names": sorted({r["device_name"] for r in ranks}), "ranks": ranks,
            "dtype": args.dtype, "type": bench.type_name, "element_size": bench.element_size,
            "min_bytes": args.min_bytes, "max_bytes": args.max_bytes, "step_factor": args.step_factor,
            "warmup": args.warmup, "iters": args.iters, "check": bool(args.check),
            "busbw_factor": bus_factor(world_size), "timeout_s": args.timeout_s,
            "time_reduction": "max over ranks of each rank's mean time per all-reduce (time_us_mean: mean over ranks)",
            "torch_version": torch.__version__,
            "nccl_version": nccl_version(torch) if device.type == "cuda" and backend == "nccl" else None,
            "env": env, "argv": sys.argv[1:], "started": time.time(),
            "results": [],
        }  # type: Dict[str, Any]
        if rank == 0:
            for line in table_header(result):
                emit(line)
        buf = torch.empty(sizes[-1] // bench.element_size, dtype=bench.dtype, device=device)
        progress_node = info["local_rank"] == 0 and rank != 0
        for step, size in enumerate(sizes, start=1):
            record = bench.run_size(buf, size, args.warmup, args.iters, args.check)
            result["results"].append(record)
            if rank == 0:
                emit(table_row(record))
            elif progress_node:
                emit(progress_line(node, rank, world_size, step, len(sizes), record))
        del buf
        records = result["results"]
        result["avg_busbw_gbps"] = sum(r["busbw_gbps"] for r in records) / len(records)
        checked = [r["wrong"] for r in records if r["wrong"] is not None]
        result["wrong_total"] = sum(checked) if checked else None
        failed_elements = bool(result["wrong_total"])
        result["ok"] = not failed_elements
        result["finished"] = time.time()
        result["duration_s"] = result["finished"] - result["started"]
        if rank == 0:
            for line in table_footer(result):
                emit(line)
            os.makedirs(os.path.dirname(output) or ".", exist_ok=True)
            write_json_atomic(output, result)
        # leave together: rank 0 may still be writing while a peer would tear the group down
        bench.barrier()
        emit(done_line(node, rank, world_size, result["avg_busbw_gbps"]))
        if failed_elements:
            sys.stderr.write("allreduce_bench: %d wrong element(s) on rank %d's view of the job (see %s)\n"
                             % (result["wrong_total"], rank, output))
        ok = True
    finally:
        # as train.py: an NCCL peer may still be inside a collective after a failure, so only gloo (and
        # successful runs) tear the group down; the process exits right after either way
        if dist.is_initialized() and (ok or backend != "nccl"):
            dist.destroy_process_group()
    return 1 if failed_elements else 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``--render``: print a results file (stdlib only). Otherwise run the benchmark under torchrun."""
    parser = build_arg_parser()
    args = resolve_args(parser, argv)
    if args.render is not None:
        try:
            result = load_results(args.render)
        except BenchError as exc:
            sys.stderr.write("allreduce_bench: %s\n" % exc)
            return 2
        sys.stdout.write(render_markdown(result) if args.format == "markdown" else render_table(result))
        return 0
    from torch.distributed.elastic.multiprocessing.errors import record  # torchrun's root-cause report
    return record(run_benchmark)(args)


if __name__ == "__main__":
    CODE = main()
    # as in train.py: after a successful run, skip torch's C++ teardown at interpreter exit, which can abort
    # a rank now and then (SIGABRT) and turn a finished benchmark into a failed one
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(CODE)
