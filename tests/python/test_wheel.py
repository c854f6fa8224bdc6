"""The wheel: `pip wheel .` (here over the existing build, LOCKSTEP_BUILD_DIR) gives lockstep with its
library inside, which installs into a fresh virtual environment and trains the seed-style example there,
with the version of the rest of the project. Run with build/python on PYTHONPATH."""
import glob
import os
import re
import subprocess
import sys
import venv

import pytest

import lockstep

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(lockstep.__file__))))
CLI = os.environ.get("LOCKSTEP_CLI_PATH", os.path.join(BUILD, "lockstep"))
FASHION_MNIST = os.environ.get("LOCKSTEP_FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist")


def run(command, **kwargs):
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300,
                            **kwargs)
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stdout}"
    return result.stdout


@pytest.mark.skipif(subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode,
                    reason="pip is not installed (python3-pip)")
def test_wheel_installs_into_a_fresh_environment_and_trains(tmp_path):
    if not os.path.exists(os.path.join(FASHION_MNIST, "train-images-idx3-ubyte.gz")):
        pytest.skip("dataset-fashion-mnist is not installed")
    env = dict(os.environ, LOCKSTEP_BUILD_DIR=BUILD)
    env.pop("PYTHONPATH", None)
    run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w", str(tmp_path), REPO],
        env=env, cwd=tmp_path)
    (wheel,) = glob.glob(str(tmp_path / "lockstep-*.whl"))
    version = re.match(r"lockstep-([0-9.]+)-", os.path.basename(wheel)).group(1)
    assert run([CLI, "--version"]).startswith(f"lockstep {version} ")

    venv.create(tmp_path / "env", system_site_packages=True, with_pip=True)  # numpy from the system
    python = str(tmp_path / "env" / "bin" / "python")
    run([python, "-m", "pip", "install", "--no-deps", "--no-index", wheel], env=env)
    where = run([python, "-c", "import lockstep, lockstep.workspace as w, lockstep._core as c; "
                               "print(w.__file__); "
                               "print(c.C.version_line()); print(lockstep.__version__)"], env=env, cwd=tmp_path)
    location, version_line, package_version = where.splitlines()
    assert str(tmp_path / "env") in location
    caffe2 = run([python, "-c", "from caffe2.python import workspace, data_parallel_model, models; "
                                "import caffe2.python.models.resnet; print(workspace.__file__)"], env=env, cwd=tmp_path)
    assert str(tmp_path / "env") in caffe2
    assert version_line.startswith(f"lockstep {version} ") and package_version == version
    output = run([python, os.path.join(REPO, "examples", "python", "lenet_data_parallel.py"), "--steps", "3"],
                 env=env, cwd=tmp_path)
    assert re.search(r"epoch 1: 3 steps, [0-9.]+ img/s, loss [0-9.]+, test accuracy", output), output
