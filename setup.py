"""The lockstep Python package as a wheel: CMake builds the library and the _lockstep extension, installs
the package (component `python`) and the wheel bundles liblockstep and its oneDNN (component `runtime`) next
to the extension.

    python3 -m pip wheel --no-build-isolation --no-deps -w dist .

builds in build-wheel/ (CUDA off unless LOCKSTEP_CUDA=ON); LOCKSTEP_BUILD_DIR=build packs an existing build
instead. The version is the project's (CMakeLists.txt), as everywhere else.
"""
import glob
import os
import re
import shutil
import subprocess
import sys

from setuptools import Distribution, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
# The CMake build to pack (given), or the one this builds; setuptools' own files go there too, not into the
# source tree.
GIVEN_BUILD = os.environ.get("LOCKSTEP_BUILD_DIR")
BUILD = os.path.abspath(GIVEN_BUILD) if GIVEN_BUILD else os.path.join(ROOT, "build-wheel")
SETUPTOOLS_DIR = os.path.join(BUILD, "setuptools")


def project_version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        return re.search(r"project\(lockstep VERSION ([0-9.]+)", f.read()).group(1)


def run(command):
    print("$ " + " ".join(command), flush=True)
    subprocess.run(command, check=True)


def needed_library(extension):
    """The file name under which the extension loads liblockstep (its SONAME)."""
    dynamic = subprocess.run(["readelf", "-d", extension], check=True, capture_output=True, text=True).stdout
    return re.search(r"Shared library: \[(liblockstep[^\]]*)\]", dynamic).group(1)


class CMakeBuild(build_ext):
    """Builds with CMake and puts the installed package where setuptools collects the wheel's files."""

    def run(self):
        if not GIVEN_BUILD:
            run(["cmake", "-S", ROOT, "-B", BUILD, "-DCMAKE_BUILD_TYPE=Release", "-DLOCKSTEP_TESTS=OFF",
                 "-DLOCKSTEP_BENCH=OFF", "-DLOCKSTEP_PYTHON=ON", f"-DPython_EXECUTABLE={sys.executable}",
                 f"-DLOCKSTEP_CUDA={os.environ.get('LOCKSTEP_CUDA', 'OFF')}"])
            # The programs too: they are part of the `runtime` component, which holds the library.
            run(["cmake", "--build", BUILD, "-j", "2", "--target", "_lockstep", "lockstep_python", "caffe2_python",
                 "lockstep_cli", "resnet50_trainer"])
        staging = os.path.join(BUILD, "wheel-staging")
        shutil.rmtree(staging, ignore_errors=True)
        for component in ("python", "runtime"):
            run(["cmake", "--install", BUILD, "--component", component, "--prefix", os.path.join(staging, component)])
        (package,) = glob.glob(os.path.join(staging, "python", "**", "lockstep"), recursive=True)
        # lockstep and, beside it, caffe2 (Caffe2's module layout over lockstep).
        for name in ("lockstep", "caffe2"):
            target = os.path.join(self.build_lib, name)
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(os.path.join(os.path.dirname(package), name), target)
        target = os.path.join(self.build_lib, "lockstep")
        (extension,) = glob.glob(os.path.join(target, "_lockstep*.so"))
        # The installed library, which finds oneDNN beside itself ($ORIGIN in its RUNPATH).
        name = needed_library(extension)
        (library,) = glob.glob(os.path.join(staging, "runtime", "**", name), recursive=True)
        shutil.copyfile(library, os.path.join(target, name))
        (dnnl,) = glob.glob(os.path.join(os.path.dirname(library), "lockstep", "libdnnl.so.*"))
        shutil.copyfile(dnnl, os.path.join(target, os.path.basename(dnnl)))


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True  # a platform wheel: it holds compiled code


os.makedirs(SETUPTOOLS_DIR, exist_ok=True)
setup(
    name="lockstep",
    version=project_version(),
    description="Synchronous data-parallel training in native C++, driven from Python graph builders",
    python_requires=">=3.9",
    install_requires=["numpy"],
    packages=[],
    cmdclass={"build_ext": CMakeBuild},
    distclass=BinaryDistribution,
    options={"build": {"build_base": SETUPTOOLS_DIR}, "egg_info": {"egg_base": SETUPTOOLS_DIR}},
)
