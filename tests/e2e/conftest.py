"""The local default's fixture shared by the end-to-end tests: a temporary home for the two local nodes
and the controller's experiments (tests/e2e/test_launch_local.py's Lab), cleaned up after each test."""
import pytest

from test_launch_local import Lab


@pytest.fixture
def lab(tmp_path):
    lab = Lab(tmp_path)
    yield lab
    lab.kill_leftovers()
