#!/usr/bin/env bash
# Installs the Debian packages the fuzz targets (tests/fuzz, make fuzz) and the clang
# sanitizer build of CI build with: clang 14 and its runtime libraries (libFuzzer, ASan,
# UBSan), if missing, through scripts/install_deps.sh.
set -euo pipefail
exec "$(dirname "$0")/install_deps.sh" clang-14 libclang-rt-14-dev
