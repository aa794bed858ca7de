#!/usr/bin/env bash
# Installs the Debian packages perfcast builds with, if any are missing (or, given package
# names as arguments, those: scripts/install_fuzz_deps.sh uses it so). Runs apt as
# root (or through passwordless sudo); otherwise says what to install and fails.
# The CUDA toolkit is not installed here: the build uses it when /usr/local/cuda exists.
set -euo pipefail

default_packages=(cmake ninja-build g++ make libeigen3-dev nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev catch2
          libarchive-dev zlib1g-dev pybind11-dev python3-pybind11 python3-dev python3-pytest python3-jsonschema
          python3-venv)
if [ $# -gt 0 ]; then packages=("$@"); else packages=("${default_packages[@]}"); fi
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "perfcast: installing missing Debian packages: ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
  apt=(apt-get)
elif command -v sudo > /dev/null && sudo -n true 2> /dev/null; then
  apt=(sudo apt-get)
else
  echo "perfcast: missing packages: ${missing[*]}" >&2
  echo "perfcast: install them as root: apt-get install -y ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
if ! "${apt[@]}" install -y -q --no-install-recommends "${missing[@]}"; then
  "${apt[@]}" update -q
  "${apt[@]}" install -y -q --no-install-recommends "${missing[@]}"
fi
