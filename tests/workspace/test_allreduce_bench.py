"""Tests for files/workspace/allreduce_bench.py, the all-reduce bandwidth benchmark torchrun launches on every node.

Pure helpers are tested by importing the script (which must not import torch). ``real`` tests run it for
real under ``torch.distributed.run`` on CPU/gloo: 2 ranks on one node, 2 "nodes" x 1 rank on localhost with
static rendezvous, and a run whose check must fail; bare processes prove the argument errors and the
``TRAINOPS_COLLECTIVE_TIMEOUT_S`` timeout. Every subprocess has a timeout.
"""
import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(REPO, "files", "workspace", "allreduce_bench.py")

RUN_TIMEOUT = 180  # seconds for all real jobs together; they take about 10 s on 2 idle cores
#: 4K .. 256K doubling: 7 sizes, few iterations, so a job takes a few seconds.
SMALL = ["--min-bytes", "4K", "--max-bytes", "256K", "--warmup", "1", "--iters", "3"]
SMALL_SIZES = [4096 << k for k in range(7)]

ROW_RE = re.compile(r"^\s+(?P<size>\d+)\s+(?P<count>\d+)\s+(?P<type>\w+)\s+sum\s+(?P<time>\d+(?:\.\d+)?)\s+"
                    r"(?P<algbw>\d+\.\d\d)\s+(?P<busbw>\d+\.\d\d)\s+(?P<wrong>\d+|N/A)$")
PROGRESS_RE = re.compile(r"^\[trainops\] allreduce node=(?P<node>\S+) rank=(?P<rank>\d+)/(?P<ws>\d+) "
                         r"step=(?P<step>\d+)/(?P<steps>\d+) size=(?P<size>\d+) time_us=\S+ busbw=\d+\.\d\d wrong=(?P<wrong>\S+)$")
DONE_RE = re.compile(r"^\[trainops\] done node=(?P<node>\S+) rank=(?P<rank>\d+)/(?P<ws>\d+) avg_busbw=\d+\.\d\d$")
# trainops.multinode.torchrun_wait's default progress pattern (plugins/action/torchrun_wait.py)
WAIT_PATTERN = re.compile(r"\[trainops\].*?\b((?:epoch|step)=.*?)\s*$")


def _load_bench_module():
    spec = importlib.util.spec_from_file_location("trainops_workspace_allreduce_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = _load_bench_module()


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def child_env(**extra):
    env = dict(os.environ)
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "TRAINOPS_OUTPUT_DIR", "TRAINOPS_COLLECTIVE_TIMEOUT_S"):
        env.pop(key, None)
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def torchrun_cmd(args, nproc=2, nnodes=1, node_rank=0, port=None):
    return [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(nnodes), "--node-rank", str(node_rank),
            "--nproc-per-node", str(nproc), "--master-addr", "127.0.0.1", "--master-port", str(port or free_port()),
            BENCH] + list(args)


def run(cmd, env, cwd, timeout=RUN_TIMEOUT):
    proc = subprocess.run(cmd, env=env, cwd=str(cwd), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=timeout, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def read_json(path):
    with open(str(path)) as handle:
        return json.load(handle)


def table_rows(stdout):
    return [m.groupdict() for m in map(ROW_RE.match, stdout.splitlines()) if m]


# ---------------------------------------------------------------------------------------------
# Pure helpers (no processes, no torch)
# ---------------------------------------------------------------------------------------------

def test_import_has_no_side_effects_and_does_not_import_torch():
    code = ("import importlib.util, sys\n"
            "spec = importlib.util.spec_from_file_location('b', %r)\n"
            "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n"
            "print(m.parse_size('64M'))\n" % BENCH)
    proc = subprocess.run([sys.executable, "-c", code], env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "67108864\n"


@pytest.mark.parametrize("text, value", [
    ("4096", 4096), ("4K", 4096), ("4k", 4096), ("1M", 1 << 20), ("64M", 64 << 20), ("2G", 2 << 30), ("1T", 1 << 40),
    ("256KB", 256 << 10), ("1MiB", 1 << 20), ("512B", 512), (" 8K ", 8192),
])
def test_parse_size(text, value):
    assert bench.parse_size(text) == value


@pytest.mark.parametrize("text", ["", "K", "1X", "1.5M", "-1M", "0", "0K", "1 M B", "1Mb2", "ten"])
def test_parse_size_rejects(text):
    with pytest.raises(bench.BenchError, match="invalid size"):
        bench.parse_size(text)


def test_format_size():
    assert [bench.format_size(n) for n in (1 << 20, 3 << 30, 4096, 1000, 1536)] == ["1M", "3G", "4K", "1000", "1536"]


def test_message_sizes_double_and_round_to_elements():
    assert bench.message_sizes(4096, 262144, 2, 4) == SMALL_SIZES
    assert bench.message_sizes(1 << 20, (1 << 20) * 9, 4, 4) == [1 << 20, 4 << 20]  # max need not be reached exactly
    assert bench.message_sizes(6, 50, 2, 4) == [4, 12, 24, 48]
    assert bench.message_sizes(7, 7, 2, 2) == [6]
    with pytest.raises(bench.BenchError, match=r"--min-bytes \(1M = 1048576 bytes\) is larger than --max-bytes \(4K = 4096 bytes\)"):
        bench.message_sizes(1 << 20, 4096, 2, 4)
    with pytest.raises(bench.BenchError, match="step-factor"):
        bench.message_sizes(4096, 8192, 1, 4)
    with pytest.raises(bench.BenchError, match="smaller than one element"):
        bench.message_sizes(2, 8192, 2, 4)


def test_bandwidths_follow_nccl_tests_allreduce_formula():
    bw = bench.bandwidths(1 << 30, 0.5, 8)
    assert bw["algbw_gbps"] == pytest.approx((1 << 30) / 0.5 / 1e9)
    assert bw["busbw_gbps"] == pytest.approx(bw["algbw_gbps"] * 2 * 7 / 8)
    assert bench.bandwidths(1000, 1e-6, 1)["busbw_gbps"] == 0.0  # one rank moves nothing over a bus
    assert bench.bus_factor(2) == 1.0 and bench.bus_factor(4) == 1.5


def test_check_pattern_stays_exact_in_the_dtype():
    assert bench.check_period(2, 2 ** 24) == 7
    assert bench.check_period(64, 2 ** 8) == 4  # bfloat16: sums up to 256 are exact
    assert bench.check_period(512, 2 ** 8) == 0  # no exact check possible -> N/A
    # rank r contributes 1 + (r + j) % p at position j
    assert bench.expected_sums(3, 4) == [1 + 2 + 3, 2 + 3 + 4, 3 + 4 + 1, 4 + 1 + 2]
    for world in (1, 2, 5, 64):
        period = bench.check_period(world, 2 ** 8)
        assert max(bench.expected_sums(world, period)) <= 2 ** 8


def test_collected_env_filters_prefixes():
    env = bench.collected_env({"NCCL_IB_HCA": "mlx5_0", "RCCL_X": "1", "HSA_Y": "2", "TRAINOPS_NODE": "n1",
                               "GLOO_SOCKET_IFNAME": "eth0", "UNRELATED_SECRET": "x", "PATH": "/bin"})
    assert env == {"GLOO_SOCKET_IFNAME": "eth0", "HSA_Y": "2", "NCCL_IB_HCA": "mlx5_0", "RCCL_X": "1", "TRAINOPS_NODE": "n1"}


def _fake_result(wrong=0):
    records = []
    for size, time_us in ((4096, 55.5), (8192, 123.45), (1 << 20, 12345.6)):
        rec = {"size": size, "count": size // 4, "type": "float", "redop": "sum", "time_us": time_us, "time_us_mean": time_us,
               "wrong": wrong}
        rec.update(bench.bandwidths(size, time_us / 1e6, 4))
        records.append(rec)
    return {"format": 1, "benchmark": "all_reduce", "world_size": 4, "nodes": 2, "backend": "nccl", "device": "cuda",
            "device_names": ["NVIDIA H100 80GB HBM3"], "dtype": "float32", "min_bytes": 4096, "max_bytes": 1 << 20,
            "step_factor": 2, "warmup": 5, "iters": 20, "check": True, "results": records,
            "avg_busbw_gbps": sum(r["busbw_gbps"] for r in records) / 3, "wrong_total": 3 * wrong if wrong is not None else None,
            "ranks": [{"rank": r, "group_rank": r // 2, "pid": 100 + r, "hostname": "gpu%d" % (r // 2), "device": "cuda:%d" % (r % 2),
                       "device_name": "NVIDIA H100 80GB HBM3"} for r in range(4)]}


def test_render_table_formats_like_nccl_tests():
    result = _fake_result()
    text = bench.render_table(result)
    lines = text.splitlines()
    assert lines[0].startswith("# trainops allreduce_bench")
    assert "world_size 4 nodes 2 backend nccl device cuda dtype float32" in lines[1]
    assert "#  Rank   3 Node   1 Pid     103 on gpu1 device cuda:1 [NVIDIA H100 80GB HBM3]" in lines
    rows = table_rows(text)
    assert [int(r["size"]) for r in rows] == [4096, 8192, 1 << 20]
    assert [r["time"] for r in rows] == ["55.50", "123.5", "12346"]  # nccl-tests' precision by magnitude
    assert rows[2]["algbw"] == "%.2f" % ((1 << 20) / 12345.6e-6 / 1e9)
    assert rows[2]["busbw"] == "%.2f" % ((1 << 20) / 12345.6e-6 / 1e9 * 1.5)
    assert "# Out of bounds values : 0 OK" in lines
    assert "# Avg bus bandwidth    : %.4f GB/s" % result["avg_busbw_gbps"] in lines
    assert not [line for line in lines if line != line.rstrip()]
    failed = bench.render_table(_fake_result(wrong=2))
    assert "# Out of bounds values : 6 FAILED" in failed and [r["wrong"] for r in table_rows(failed)] == ["2"] * 3
    unchecked = bench.render_table(_fake_result(wrong=None))
    assert "# Out of bounds values : N/A" in unchecked and [r["wrong"] for r in table_rows(unchecked)] == ["N/A"] * 3


def test_render_markdown():
    text = bench.render_markdown(_fake_result())
    assert "world_size 4, nodes 2, backend nccl, device cuda (NVIDIA H100 80GB HBM3), dtype float32" in text
    assert "| 1048576 | 262144 | float | 12346 | %.2f | %.2f | 0 |" % (
        (1 << 20) / 12345.6e-6 / 1e9, (1 << 20) / 12345.6e-6 / 1e9 * 1.5) in text.splitlines()


def test_render_cli_and_bad_results_files(tmp_path, capsys):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(_fake_result()))
    assert bench.main(["--render", str(path)]) == 0
    assert capsys.readouterr().out == bench.render_table(_fake_result())
    assert bench.main(["--render", str(path), "--format", "markdown"]) == 0
    assert capsys.readouterr().out == bench.render_markdown(_fake_result())
    assert bench.main(["--render", str(tmp_path / "missing.json")]) == 2
    assert "cannot read results file" in capsys.readouterr().err
    path.write_text("{not json")
    assert bench.main(["--render", str(path)]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    path.write_text(json.dumps({"benchmark": "train"}))
    assert bench.main(["--render", str(path)]) == 2
    assert "not an allreduce_bench results file" in capsys.readouterr().err
    broken = _fake_result()
    del broken["results"][1]["busbw_gbps"]
    path.write_text(json.dumps(broken))
    assert bench.main(["--render", str(path)]) == 2
    assert "lacks busbw_gbps" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# Bad arguments: exit 2 with a clear message, before torch or any distributed setup
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("args, env, message", [
    (["--min-bytes", "1M", "--max-bytes", "4K"], {}, "--min-bytes (1M = 1048576 bytes) is larger than --max-bytes (4K = 4096 bytes)"),
    (["--min-bytes", "4X"], {}, "argument -b/--min-bytes: invalid size '4X': expected a number of bytes with an optional K, M, G or T suffix"),
    (["--max-bytes", "1.5G"], {}, "argument -e/--max-bytes: invalid size '1.5G'"),
    (["--step-factor", "1"], {}, "--step-factor must be an integer >= 2"),
    (["--iters", "0"], {}, "argument -n/--iters: must be > 0"),
    (["--warmup", "-1"], {}, "argument -w/--warmup: must be >= 0"),
    (["--dtype", "int8"], {}, "argument -d/--dtype: invalid choice: 'int8'"),
    (["--min-bytes", "2", "--dtype", "float32"], {}, "--min-bytes (2) is smaller than one element (4 bytes)"),
    ([], {"TRAINOPS_COLLECTIVE_TIMEOUT_S": "soon"}, "TRAINOPS_COLLECTIVE_TIMEOUT_S='soon' is not a number of seconds"),
    (["--timeout-s", "0"], {}, "the collective timeout must be > 0 seconds"),
    (["--config", "config/default.yaml"], {}, "--config is a train.py option; launch allreduce_bench.py with trainops_pass_config_args=false"),
    (["--override=training.output_dir=/x"], {}, "--override is a train.py option"),
])
def test_bad_arguments_exit_2_before_any_distributed_setup(tmp_path, args, env, message):
    # RANK/WORLD_SIZE point at a rendezvous nobody serves: getting that far would hang, not exit 2 at once
    extra = dict(RANK="0", WORLD_SIZE="2", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    extra.update(env)
    started = time.monotonic()
    rc, out, err = run([sys.executable, BENCH, "--output-dir", str(tmp_path / "out")] + args, child_env(**extra), tmp_path, timeout=60)
    assert rc == 2, (out, err)
    assert message in err, err
    assert out == ""
    assert not (tmp_path / "out").exists()
    assert time.monotonic() - started < 30


# ---------------------------------------------------------------------------------------------
# Real runs under torchrun (CPU, gloo)
# ---------------------------------------------------------------------------------------------

class Job:
    """Processes of one benchmark job, started at once, stdout/stderr to files (no pipe can fill up)."""

    def __init__(self, work, cmds_envs):
        self.work, self.procs, self.files, self.ended = work, [], [], []
        self.started = time.monotonic()
        for index, (cmd, env) in enumerate(cmds_envs):
            out = open(str(work / ("stdout_%d.txt" % index)), "w+")
            err = open(str(work / ("stderr_%d.txt" % index)), "w+")
            self.files.append((out, err))
            self.procs.append(subprocess.Popen(cmd, env=env, cwd=str(work), stdout=out, stderr=err, universal_newlines=True))
            self.ended.append(None)

    def poll(self):
        for index, proc in enumerate(self.procs):
            if self.ended[index] is None and proc.poll() is not None:
                self.ended[index] = time.monotonic()
        return all(e is not None for e in self.ended)

    def finish(self):
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
        self.rc = [p.returncode for p in self.procs]
        self.waited = [(e if e is not None else time.monotonic()) - self.started for e in self.ended]
        self.stdout, self.stderr = [], []
        for out, err in self.files:
            for handle, texts in ((out, self.stdout), (err, self.stderr)):
                handle.seek(0)
                texts.append(handle.read())
                handle.close()

    def log(self):
        return "\n".join("rc=%s\n--- stdout\n%s--- stderr\n%s" % (rc, o, e) for rc, o, e in zip(self.rc, self.stdout, self.stderr))


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    """Every real job of this module, started concurrently (most of their time is starting Python and torch).

    * ``one_node``: one torchrun, 2 ranks, float32 4K..256K, output dir from TRAINOPS_OUTPUT_DIR.
    * ``two_nodes``: two torchrun agents (--nnodes 2 --node-rank 0/1, 1 rank each, static rendezvous), bfloat16,
      an explicit --output.
    * ``corrupt``: one torchrun, 2 ranks, --debug-corrupt-rank 1: the check must fail the job.
    * ``lonely``: a bare rank 0 of 2 whose peer never comes, TRAINOPS_COLLECTIVE_TIMEOUT_S=1.
    """
    works = {name: tmp_path_factory.mktemp(name) for name in ("one_node", "two_nodes", "corrupt", "lonely")}
    specs = {}
    work = works["one_node"]
    env = child_env(TRAINOPS_OUTPUT_DIR=str(work / "out"), TRAINOPS_COLLECTIVE_TIMEOUT_S="37",
                    NCCL_DEBUG="WARN", GLOO_TRAINOPS_MARKER="gloo-marker", RCCL_TRAINOPS_MARKER="rccl-marker",
                    HSA_TRAINOPS_MARKER="hsa-marker", UNRELATED_TRAINOPS_MARKER="nope")
    specs["one_node"] = [(torchrun_cmd(SMALL, nproc=2), env)]
    work, port = works["two_nodes"], free_port()
    args = SMALL + ["--dtype", "bfloat16", "--output-dir", str(work / "out"), "--output", str(work / "results" / "ar.json")]
    specs["two_nodes"] = [(torchrun_cmd(args, nproc=1, nnodes=2, node_rank=node_rank, port=port),
                           child_env(TRAINOPS_NODE="node%d" % node_rank, TRAINOPS_NODE_RANK=str(node_rank)))
                          for node_rank in range(2)]
    args = ["--min-bytes", "4K", "--max-bytes", "8K", "--warmup", "0", "--iters", "1", "--dtype", "float16",
            "--output-dir", str(works["corrupt"] / "out"), "--debug-corrupt-rank", "1"]
    specs["corrupt"] = [(torchrun_cmd(args, nproc=2), child_env())]
    env = child_env(RANK="0", WORLD_SIZE="2", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
                    MASTER_PORT=str(free_port()), TRAINOPS_COLLECTIVE_TIMEOUT_S="1")
    specs["lonely"] = [([sys.executable, BENCH, "--output-dir", str(works["lonely"] / "out")] + SMALL, env)]
    running = {name: Job(works[name], specs[name]) for name in specs}
    deadline = time.monotonic() + RUN_TIMEOUT
    try:
        while not all(job.poll() for job in running.values()) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        for job in running.values():
            job.finish()
    return running


def _check_results(result, world_size, dtype, type_name, element_size):
    assert result["benchmark"] == "all_reduce" and result["redop"] == "sum" and result["in_place"] is True
    assert result["world_size"] == world_size and result["dtype"] == dtype and result["backend"] == "gloo"
    assert result["device"] == "cpu" and result["device_names"] and result["check"] is True
    records = result["results"]
    assert [r["size"] for r in records] == SMALL_SIZES
    assert all(b["size"] == 2 * a["size"] for a, b in zip(records, records[1:]))
    for rec in records:
        assert rec["count"] == rec["size"] // element_size and rec["type"] == type_name and rec["redop"] == "sum"
        assert rec["wrong"] == 0
        assert rec["time_us"] > 0 and rec["time_us"] >= rec["time_us_mean"] * (1 - 1e-9)  # max over ranks >= mean
        assert rec["algbw_gbps"] == pytest.approx(rec["size"] / (rec["time_us"] * 1e-6) / 1e9)
        assert rec["busbw_gbps"] == pytest.approx(rec["algbw_gbps"] * 2 * (world_size - 1) / world_size)
    assert result["avg_busbw_gbps"] == pytest.approx(sum(r["busbw_gbps"] for r in records) / len(records))
    assert result["wrong_total"] == 0 and result["ok"] is True
    assert result["busbw_factor"] == pytest.approx(2 * (world_size - 1) / world_size)
    assert [r["rank"] for r in result["ranks"]] == list(range(world_size))


@pytest.fixture
def one_node(jobs):
    job = jobs["one_node"]
    assert job.rc == [0], job.log()
    return {"out": job.work / "out", "stdout": job.stdout[0]}


@pytest.mark.real
@pytest.mark.slow
def test_one_node_two_ranks_results_json(one_node):
    result = read_json(one_node["out"] / "allreduce.json")
    _check_results(result, 2, "float32", "float", 4)
    assert result["nodes"] == 1 and result["local_world_size"] == 2 and result["hosts"] == [socket.gethostname()]
    assert result["timeout_s"] == 37.0  # from TRAINOPS_COLLECTIVE_TIMEOUT_S
    env = result["env"]
    assert env["NCCL_DEBUG"] == "WARN" and env["GLOO_TRAINOPS_MARKER"] == "gloo-marker"
    assert env["RCCL_TRAINOPS_MARKER"] == "rccl-marker" and env["HSA_TRAINOPS_MARKER"] == "hsa-marker"
    assert env["TRAINOPS_OUTPUT_DIR"] == str(one_node["out"]) and "UNRELATED_TRAINOPS_MARKER" not in env
    assert sorted(os.listdir(str(one_node["out"]))) == ["allreduce.json", "rank_00_env.json", "rank_01_env.json"]


@pytest.mark.real
@pytest.mark.slow
def test_one_node_stdout_table_and_done_lines(one_node):
    lines = one_node["stdout"].splitlines()
    result = read_json(one_node["out"] / "allreduce.json")
    rows = table_rows(one_node["stdout"])
    assert [int(r["size"]) for r in rows] == SMALL_SIZES
    assert [r["busbw"] for r in rows] == ["%.2f" % rec["busbw_gbps"] for rec in result["results"]]
    assert {r["wrong"] for r in rows} == {"0"} and {r["type"] for r in rows} == {"float"}
    assert "# Out of bounds values : 0 OK" in lines
    assert "# Avg bus bandwidth    : %.4f GB/s" % result["avg_busbw_gbps"] in lines
    assert not [line for line in lines if PROGRESS_RE.match(line)]  # one node: rank 0 prints the table only
    done = [DONE_RE.match(line) for line in lines if line.startswith("[trainops] done")]
    assert all(done) and sorted(int(m.group("rank")) for m in done) == [0, 1]
    # every line is whole: a table line, a header line or a done line
    assert all(line.startswith("#") or ROW_RE.match(line) or DONE_RE.match(line) for line in lines), lines


@pytest.mark.real
@pytest.mark.slow
def test_one_node_rank_env_files(one_node):
    for rank in range(2):
        env = read_json(one_node["out"] / ("rank_%02d_env.json" % rank))
        assert env["workload"] == "allreduce_bench"
        assert (env["rank"], env["world_size"], env["local_rank"], env["local_world_size"], env["group_rank"]) == (rank, 2, rank, 2, 0)
        assert env["hostname"] == socket.gethostname() and env["master_addr"] == "127.0.0.1"
        assert env["backend"] == "gloo" and env["device"] == "cpu" and env["accelerator"] == "cpu" and env["dtype"] == "float32"
        assert env["env"]["GLOO_TRAINOPS_MARKER"] == "gloo-marker" and env["env"]["TRAINOPS_COLLECTIVE_TIMEOUT_S"] == "37"


@pytest.mark.real
@pytest.mark.slow
def test_render_a_real_results_file_without_torch(one_node, tmp_path):
    """What a playbook runs on the controller: stdlib only (torch made unimportable)."""
    path = str(one_node["out"] / "allreduce.json")
    code = ("import runpy, sys\nsys.modules['torch'] = None\nsys.argv = ['allreduce_bench.py', '--render', %r]\n"
            "runpy.run_path(%r, run_name='__main__')\n" % (path, BENCH))
    rc, out, err = run([sys.executable, "-c", code], child_env(), tmp_path, timeout=60)
    assert rc == 0, err
    assert out == bench.render_table(read_json(path))
    rows = table_rows(out)
    assert [int(r["size"]) for r in rows] == SMALL_SIZES
    assert rows == table_rows(one_node["stdout"])  # the rendered table is the one rank 0 printed


@pytest.mark.real
@pytest.mark.slow
def test_two_nodes_one_rank_each_static_rendezvous(jobs):
    """Two torchrun agents (--nnodes 2 --node-rank 0/1, 1 rank each) on one host, bfloat16, --output given."""
    job = jobs["two_nodes"]
    assert job.rc == [0, 0], job.log()
    result = read_json(job.work / "results" / "ar.json")
    _check_results(result, 2, "bfloat16", "bfloat16", 2)
    assert result["nodes"] == 2 and result["local_world_size"] == 1
    assert [r["group_rank"] for r in result["ranks"]] == [0, 1]
    assert result["env"]["TRAINOPS_NODE"] == "node0"
    assert sorted(os.listdir(str(job.work / "out"))) == ["rank_00_env.json", "rank_01_env.json"]
    for rank in range(2):
        env = read_json(job.work / "out" / ("rank_%02d_env.json" % rank))
        assert (env["rank"], env["group_rank"], env["local_rank"], env["world_size"]) == (rank, rank, 0, 2)
        assert env["env"]["TRAINOPS_NODE"] == "node%d" % rank
    # node 0 (global rank 0) prints the table; node 1's local rank 0 prints progress lines the wait module shows
    assert [int(r["size"]) for r in table_rows(job.stdout[0])] == SMALL_SIZES
    assert not table_rows(job.stdout[1])
    progress = [m for m in map(PROGRESS_RE.match, job.stdout[1].splitlines()) if m]
    assert [(m.group("rank"), m.group("ws"), m.group("step"), m.group("steps")) for m in progress] == \
        [("1", "2", str(i), "7") for i in range(1, 8)]
    assert [int(m.group("size")) for m in progress] == SMALL_SIZES and {m.group("wrong") for m in progress} == {"0"}
    assert WAIT_PATTERN.search(progress[-1].group(0)).group(1).startswith("step=7/7 size=262144 ")
    for node_rank, out in enumerate(job.stdout):
        assert [m.group("rank") for m in map(DONE_RE.match, out.splitlines()) if m] == [str(node_rank)]


@pytest.mark.real
@pytest.mark.slow
def test_wrong_results_are_counted_and_fail_the_job(jobs):
    """--debug-corrupt-rank 1 alters one element of rank 1's result per size: #wrong 1 per size, exit non-zero."""
    job = jobs["corrupt"]
    assert job.rc[0] != 0, job.log()
    result = read_json(job.work / "out" / "allreduce.json")
    assert [r["wrong"] for r in result["results"]] == [1, 1] and result["wrong_total"] == 2 and result["ok"] is False
    assert [r["wrong"] for r in table_rows(job.stdout[0])] == ["1", "1"]
    assert "# Out of bounds values : 2 FAILED" in job.stdout[0].splitlines()
    assert "allreduce_bench: 2 wrong element(s)" in job.stderr[0]


@pytest.mark.real
@pytest.mark.slow
def test_collective_timeout_from_the_launcher_env(jobs):
    """Rank 0 of 2 alone: with TRAINOPS_COLLECTIVE_TIMEOUT_S=1 it fails in seconds instead of the 120 s default."""
    job = jobs["lonely"]
    assert job.rc[0] not in (0, None), job.log()
    assert "timed out" in job.stderr[0].lower(), job.log()
    assert 1 < job.waited[0] < 60, job.waited
    assert not (job.work / "out" / "allreduce.json").exists()
