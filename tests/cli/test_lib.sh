# Sourced by the CLI test scripts of this folder, whose arguments are PERFCAST_BINARY
# SOURCE_DIR: sets perfcast, src, a scratch folder tmp removed on exit, the failure count
# fails, and check NAME COMMAND... (passes when the command succeeds). A script may define
# its own check or expect after sourcing this.
set -u
perfcast=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

check() {  # check NAME COMMAND...: passes when the command succeeds
  local name=$1
  shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}
