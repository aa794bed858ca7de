"""A PEP 517 build backend for `pip install .` that needs nothing from the network.

The wheel is the package CMake assembles (python/CMakeLists.txt): perfcast/__init__.py,
perfcast/torchrec.py and the pybind11 extension _perfcast, with the build's executables in
perfcast/bin/ (`perfcast`, and `perfcast-gpu` where the build has CUDA), which the GPU
commands (perfcast.profile, run, validate) run. It is built in build-wheel/ of
the source tree (no tests, benches or CUDA parts; a second install rebuilds only what
changed), or taken from an existing build folder named by PERFCAST_BUILD_DIR (e.g.
PERFCAST_BUILD_DIR=build after `make test`). Only the standard library is used, so pip's
isolated build environment needs no packages (pyproject.toml: requires = []).
"""
import base64
import hashlib
import os
import pathlib
import subprocess
import sys
import sysconfig
import zipfile

NAME = "perfcast"
VERSION = "0.1.0"
SOURCE = pathlib.Path(__file__).resolve().parents[2]


def _tag():
    """cp311-cp311-linux_x86_64 for the interpreter running the build."""
    impl = "cp%d%d" % sys.version_info[:2]
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return "%s-%s-%s" % (impl, impl, platform)


def _package_dir():
    """The folder holding the built package (perfcast/ with _perfcast*.so)."""
    given = os.environ.get("PERFCAST_BUILD_DIR")
    if given:
        package = pathlib.Path(given).resolve() / "python" / NAME
        if not list(package.glob("_perfcast*.so")):
            raise RuntimeError("PERFCAST_BUILD_DIR=%s: no %s/_perfcast*.so there (build the perfcast_python target first)"
                               % (given, package))
        return package
    build = SOURCE / "build-wheel"
    configure = ["cmake", "-S", str(SOURCE), "-B", str(build), "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
                 "-DPERFCAST_BUILD_TESTS=OFF", "-DPERFCAST_BUILD_BENCH=OFF", "-DPERFCAST_ENABLE_CUDA=OFF",
                 "-DPython_EXECUTABLE=" + sys.executable]
    if subprocess.run(["ninja", "--version"], capture_output=True).returncode == 0:
        configure += ["-G", "Ninja"]
    if not (build / "CMakeCache.txt").exists():
        subprocess.run(configure, check=True)
    subprocess.run(["cmake", "--build", str(build), "--target", "perfcast_python", "perfcast", "-j", str(os.cpu_count() or 1)],
                   check=True)
    package = build / "python" / NAME
    if not list(package.glob("_perfcast*.so")):
        raise RuntimeError("the build made no %s/_perfcast*.so: is pybind11 installed (scripts/install_deps.sh)?" % package)
    return package


def _executables(package):
    """The build's `perfcast` and `perfcast-gpu` (cli/ of the build folder that holds
    python/perfcast), those that exist."""
    cli = package.parent.parent / "cli"
    return [cli / name for name in ("perfcast", "perfcast-gpu") if (cli / name).is_file()]


def _metadata():
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: Predicts the iteration time of ML training jobs "
            "on multi-GPU systems without running them\nRequires-Python: >=3.8\n" % (NAME, VERSION))


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d\n" % (name, digest, len(data))


def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    info = pathlib.Path(metadata_directory) / ("%s-%s.dist-info" % (NAME, VERSION))
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(_metadata())
    return info.name


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    package = _package_dir()
    wheel_name = "%s-%s-%s.whl" % (NAME, VERSION, _tag())
    info = "%s-%s.dist-info" % (NAME, VERSION)
    files = {}
    for path in sorted(package.iterdir()):
        if path.is_file() and (path.suffix == ".py" or (path.name.startswith("_perfcast") and path.suffix == ".so")):
            files["%s/%s" % (NAME, path.name)] = path.read_bytes()
    executables = set()
    for exe in _executables(package):
        name = "%s/bin/%s" % (NAME, exe.name)
        files[name] = exe.read_bytes()
        executables.add(name)
    files[info + "/METADATA"] = _metadata().encode()
    files[info + "/WHEEL"] = ("Wheel-Version: 1.0\nGenerator: perfcast_build\nRoot-Is-Purelib: false\nTag: %s\n" % _tag()).encode()
    record = "".join(_record_line(name, data) for name, data in files.items()) + info + "/RECORD,,\n"
    target = pathlib.Path(wheel_directory) / wheel_name
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as wheel:
        for name, data in files.items():
            entry = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            entry.compress_type = zipfile.ZIP_DEFLATED
            # A regular file (0o100000) with its mode: pip keeps the executable bit only for those.
            entry.external_attr = (0o100755 if name in executables else 0o100644) << 16
            wheel.writestr(entry, data)
        wheel.writestr(info + "/RECORD", record)
    return wheel_name
