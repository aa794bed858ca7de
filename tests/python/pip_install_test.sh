#!/usr/bin/env bash
# `pip install .` offline: a fresh virtual environment installs the package through the
# in-tree build backend (pyproject.toml, python/build_backend/perfcast_build.py) with no
# package index, taking the extension from this build folder (PERFCAST_BUILD_DIR), and the
# installed package predicts as the build folder's does. Skipped where python3 -m venv is
# missing (apt-get install python3-venv).
# Usage: pip_install_test.sh PYTHON SOURCE_DIR BUILD_DIR
set -u
python=$1 src=$2 build=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! "$python" -m venv "$tmp/venv" > "$tmp/venv.log" 2>&1; then
  echo "skip: $python -m venv failed (apt-get install python3-venv)"; cat "$tmp/venv.log"; exit 0
fi
before=$(cd "$src" && git status --porcelain --ignored 2> /dev/null | wc -l)
if ! (cd "$src" && env -u PIP_FIND_LINKS PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PERFCAST_BUILD_DIR="$build" \
      "$tmp/venv/bin/pip" install --no-cache-dir . > "$tmp/pip.log" 2>&1); then
  echo "FAIL pip install . (offline)"; cat "$tmp/pip.log"; exit 1
fi
echo "ok   pip install . offline: $(grep -o 'Successfully installed.*' "$tmp/pip.log")"
cd "$tmp" || exit 1
got=$("$tmp/venv/bin/python" -c "
import perfcast, sys
assert perfcast.__file__.startswith(sys.prefix), perfcast.__file__
print(perfcast.predict('$src/configs/systems/dgx_h100.json', '$src/configs/workloads/dlrm_default.json')['iteration_time_s'])")
want=$(PYTHONPATH=$build/python "$python" -c "
import perfcast
print(perfcast.predict('$src/configs/systems/dgx_h100.json', '$src/configs/workloads/dlrm_default.json')['iteration_time_s'])")
[ -n "$got" ] && [ "$got" = "$want" ] || { echo "FAIL the installed package predicts $got s, the build folder's $want s"; exit 1; }
echo "ok   the installed package predicts as the build folder's ($got s)"
if [ -x "$build/cli/perfcast" ]; then
  cases=$(env -u PERFCAST_EXECUTABLE PATH=/usr/bin:/bin "$tmp/venv/bin/python" -c "
import os, perfcast
exe = perfcast._executable()
assert exe.startswith(os.path.dirname(perfcast.__file__)), exe
print(perfcast.profile('$src/configs/sweeps/memcpy.json', dry_run=True)['cases'])")
  want=$("$build/cli/perfcast" profile --sweep "$src/configs/sweeps/memcpy.json" --dry-run --json - | "$python" -c "import json, sys; print(json.load(sys.stdin)['cases'])")
  [ -n "$cases" ] && [ "$cases" = "$want" ] || { echo "FAIL the installed perfcast/bin/perfcast: profile dry run gave '$cases', the build's $want"; exit 1; }
  echo "ok   the GPU commands run the installed perfcast/bin/perfcast ($cases memcpy cases in a dry run)"
fi
after=$(cd "$src" && git status --porcelain --ignored 2> /dev/null | wc -l)
[ "$before" = "$after" ] || { echo "FAIL pip install . left files in the source tree"; (cd "$src" && git status --porcelain --ignored); exit 1; }
echo "ok   nothing left in the source tree"
