"""The GPU check's tools (docs/gpu.md): the node-tree recorder, its fixture writer and the trace summary."""
import importlib.util
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def load(rel, name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(REPO, rel))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fixture_writer = load('hack/gpu_fixture_from_record.py', 'gpu_fixture_from_record')
trace_summary = load('bench/gpu/trace_summary.py', 'gpu_trace_summary')
fixture_tree = load('tests/unit/fixtures/node_facts/fixture_tree.py', 'node_facts_fixture_tree')

RECORD = {'tree': {
    '/proc': {'kind': 'dir', 'entries': ['driver', 'net']},
    '/proc/net': {'kind': 'link', 'target': 'self/net'},  # points out of what was read: becomes a directory
    '/proc/net/route': {'kind': 'file', 'text': 'Iface\tDestination\neth0\t00000000\n'},
    '/proc/driver/nvidia/gpus/0000:00:06.0/information': {'kind': 'file', 'text': 'Model: \t NVIDIA H200\n'},
    '/sys/bus/pci/devices/0000:00:06.0': {'kind': 'link', 'target': '../../../devices/pci0000:00/0000:00:06.0'},
    '/sys/bus/pci/devices/0000:00:06.0/numa_node': {'kind': 'file', 'text': '-1\n'},
    '/sys/devices/pci0000:00/0000:00:06.0': {'kind': 'dir', 'entries': ['numa_node']},
    '/sys/class/infiniband': {'kind': 'dir', 'entries': []},
    '/sys/module/nvidia_peermem': None,
}}


def test_a_record_becomes_a_fixture_that_materializes_as_the_node_had_it(tmp_path, monkeypatch):
    root = fixture_writer.write_fixture(RECORD, str(tmp_path / 'fixtures' / 'recorded'))
    assert os.path.isfile(os.path.join(root, 'sys/bus/pci/devices/0000%3A00%3A06.0.symlink'))
    monkeypatch.setattr(fixture_tree, 'FIXTURES', str(tmp_path / 'fixtures'))
    out = fixture_tree.materialize('recorded', tmp_path / 'node')
    # the file read through the PCI link lives at the link's target; the link resolves to it
    with open(os.path.join(out, 'sys/bus/pci/devices/0000:00:06.0/numa_node')) as handle:
        assert handle.read() == '-1\n'
    assert os.path.islink(os.path.join(out, 'sys/bus/pci/devices/0000:00:06.0'))
    assert not os.path.islink(os.path.join(out, 'proc/net')) and os.path.isfile(os.path.join(out, 'proc/net/route'))
    assert os.path.isdir(os.path.join(out, 'sys/class/infiniband'))
    assert not os.path.exists(os.path.join(out, 'sys/module/nvidia_peermem'))


def test_the_recorder_blanks_identifiers_before_anything_is_written():
    pattern = load('hack/gpu_record_tree.py', 'gpu_record_tree').IDENTIFYING
    text = 'Model: \t NVIDIA H200\nGPU UUID: \t GPU-1234abcd\nSerial Number : 1650123456789\n'
    assert pattern.sub(r'\1(blanked)', text) == 'Model: \t NVIDIA H200\nGPU UUID: \t (blanked)\nSerial Number : (blanked)\n'


def kernel(name, ts, dur):
    return {'ph': 'X', 'cat': 'kernel', 'name': name, 'ts': ts, 'dur': dur}


TRACE = {'traceEvents': [
    {'ph': 'X', 'cat': 'user_annotation', 'name': 'ProfilerStep#2', 'ts': 0, 'dur': 100},
    {'ph': 'X', 'cat': 'user_annotation', 'name': 'ProfilerStep#3', 'ts': 100, 'dur': 100},
    {'ph': 'X', 'cat': 'gpu_user_annotation', 'name': 'ProfilerStep#2', 'ts': 0, 'dur': 100},
    kernel('sm90_xmma_gemm_bf16bf16_bf16f32', 0, 60), kernel('nvjet_hsh_256x128', 50, 40),  # overlapping: union 90
    kernel('vectorized_elementwise_kernel<gelu>', 100, 30), kernel('fused_adam_kernel', 130, 20),
    {'ph': 'X', 'cat': 'gpu_memcpy', 'name': 'Memcpy HtoD', 'ts': 150, 'dur': 10},
    kernel('flash_fwd_kernel', 170, 30),
]}


def test_trace_summary_counts_host_steps_and_the_gpus_busy_union():
    result = trace_summary.summarize(TRACE)
    assert result['steps'] == 2  # the GPU's copy of the step annotation is not a step
    assert result['step_ms'] == 0.1  # 200 us of GPU timeline over 2 steps
    assert abs(result['busy_share'] - 180 / 200.0) < 1e-9  # 0-90, 100-160, 170-200
    kinds = dict(result['kinds'])
    assert kinds['matrix products'] == 0.05 and kinds['elementwise'] == 0.015 and kinds['optimizer'] == 0.01
    assert kinds['attention'] == 0.015 and kinds['copies and sets'] == 0.005


def test_trace_summary_prints_its_table(tmp_path):
    path = tmp_path / 'trace.json'
    path.write_text(json.dumps(TRACE))
    out = subprocess.run([sys.executable, os.path.join(REPO, 'bench/gpu/trace_summary.py'), str(path)],
                         capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[0] == '2 profiled steps: 0.1 ms a step of GPU timeline, GPU busy 90.0 % of it'
    assert 'matrix products      0.05 ms a step   50.0 %' in out
