#!/usr/bin/env bash
# Outputs (core/staged_output.hpp, docs/robustness.md "Outputs"): written whole through an
# exclusive staging file with an unpredictable name, never through a link, no staging file
# left behind, folders replaced whole, standard output carrying one document and failed
# writes to it reported. Usage: output_safety_test.sh PERFCAST SOURCE_DIR
source "$(dirname "$0")/test_lib.sh"
sys=$src/configs/systems/dgx_h100.json
wl=$src/configs/workloads/dlrm_default.json
predict=("$perfcast" predict --system "$sys" --workload "$wl")

only_files() {  # only_files DIR NAME...: DIR holds exactly these names (no staging file left)
  local dir=$1
  shift
  [ "$(ls -A "$dir" | sort | tr '\n' ' ')" = "$(printf '%s\n' "$@" | sort | tr '\n' ' ')" ]
}

# A link at the target is replaced by the result; the file it points to is never written.
mkdir -p "$tmp/a"
echo keep > "$tmp/victim"
ln -s "$tmp/victim" "$tmp/a/out.json"
"${predict[@]}" --json "$tmp/a/out.json" > /dev/null 2>&1
check "a link at the target: the linked file is untouched" test "$(cat "$tmp/victim")" = keep
check "... and the target is now the result, a plain file" bash -c "test ! -L '$tmp/a/out.json' && grep -q iteration_time_s '$tmp/a/out.json'"
check "... no staging file left" only_files "$tmp/a" out.json

# Links planted at every name the earlier writer used (<out>.tmp<pid>, <out>.tmp<rand>) are
# never followed: staging names are created exclusively and are unpredictable.
mkdir -p "$tmp/b"
for i in $(seq 1 50); do ln -s "$tmp/victim" "$tmp/b/out.json.tmp$((BASHPID + i))"; done
ln -s "$tmp/victim" "$tmp/b/trace.json.tmp1804289383"  # the first unseeded rand()
"${predict[@]}" --json "$tmp/b/out.json" --trace "$tmp/b/trace.json" > /dev/null 2>&1
check "planted links at predictable staging names are never followed" test "$(cat "$tmp/victim")" = keep
check "... the results are written" bash -c "grep -q iteration_time_s '$tmp/b/out.json' && grep -q traceEvents '$tmp/b/trace.json'"

# Two runs writing the same file at the same time never share a staging file: the result
# is one whole document.
mkdir -p "$tmp/c"
"${predict[@]}" --json "$tmp/c/out.json" > /dev/null 2>&1 &
"${predict[@]}" --json "$tmp/c/out.json" > /dev/null 2>&1 &
wait
check "two concurrent runs: one whole JSON document" python3 -c "import json; json.load(open('$tmp/c/out.json'))"
check "... no staging file left" only_files "$tmp/c" out.json

# Bad output paths are bad input (exit 2, the path named), never a raw library message.
"${predict[@]}" --json "$tmp/no/such/folder/out.json" > /dev/null 2> "$tmp/err"
check "an output in a folder that does not exist: exit 2 naming it" bash -c "test $? = 2 && grep -q 'no/such/folder/out.json' '$tmp/err'"
long=$(printf 'x%.0s' $(seq 1 300))
"${predict[@]}" --json "$tmp/$long.json" > /dev/null 2> "$tmp/err"
code=$?
check "a file name too long: exit 2, no raw filesystem error" bash -c "test $code = 2 && ! grep -q 'filesystem error' '$tmp/err'"

# A Kineto trace folder is replaced whole: no rank file of an earlier, larger run stays.
"${predict[@]}" --trace "$tmp/k" --trace-format kineto > /dev/null 2>&1
check "kineto folder: 8 ranks" only_files "$tmp/k" rank0.json rank1.json rank2.json rank3.json rank4.json rank5.json rank6.json rank7.json
"${predict[@]}" --trace "$tmp/k" --trace-format kineto --trace-ranks 0,3 > /dev/null 2>&1
check "... then 2 ranks: the other 6 files are gone" only_files "$tmp/k" rank0.json rank3.json
check "... no staging folder left beside it" bash -c "! ls -A '$tmp' | grep -q perfcast-"
echo mine > "$tmp/k/notes.txt"
"${predict[@]}" --trace "$tmp/k" --trace-format kineto > /dev/null 2> "$tmp/err"
code=$?
check "a folder holding other files is refused (exit 2), naming the file" bash -c "test $code = 2 && grep -q 'notes.txt' '$tmp/err'"
check "... and nothing in it is removed" only_files "$tmp/k" notes.txt rank0.json rank3.json
ln -s "$tmp/a" "$tmp/klink"
"${predict[@]}" --trace "$tmp/klink" --trace-format kineto > /dev/null 2> "$tmp/err"
check "a link as the trace folder is refused (exit 2)" bash -c "test $? = 2 && grep -q 'is a link' '$tmp/err'"

# Standard output carries one document, and a failed write to it is an error.
"${predict[@]}" --trace - > "$tmp/trace_stdout.json" 2> /dev/null
check "--trace -: standard output is the trace alone" python3 -c "import json; assert 'traceEvents' in json.load(open('$tmp/trace_stdout.json'))"
if [ -w /dev/full ]; then
  "${predict[@]}" > /dev/full 2> "$tmp/err"
  check "a report to a full device: exit 1, said" bash -c "test $? = 1 && grep -q 'cannot write standard output' '$tmp/err'"
  "${predict[@]}" --json - > /dev/full 2> "$tmp/err"
  check "--json - to a full device: exit 1, said" bash -c "test $? = 1 && grep -q 'cannot write standard output' '$tmp/err'"
fi

if [ "$fails" -gt 0 ]; then echo "$fails output test(s) failed"; exit 1; fi
echo "all output tests passed"
