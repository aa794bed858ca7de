# Compile flags by kind of code, chosen for build time (docs/benchmarks.md, "Build time").
#
# perfcast_glue_code(TARGET LEVEL): code whose run time is spent in the libraries it calls
# (the Catch2 tests, the command-line layer, the bench drivers, the Python binding) is
# compiled at LEVEL (-O1; -O0 for Catch2's main) instead of the build type's -O2. Measured
# with GCC 12 on one test file (tests/model/transformer_moe_test.cpp): 21.1 s at -O2 -g,
# 11.9 s at -O1 -g1, 9.7 s at -O0 -g1; a command file (cli/cmd_validate.cpp): 36.3 s at -O2 -g,
# 22.6 s at -O1. Not -O0 for the tests: the header code they instantiate (rule tests loop
# over the collective model) ran 3x slower, 18 s -> 56 s for the topology tests, 625 s under
# AddressSanitizer. Predictions run the libraries' -O2 code either way. Debug builds keep
# their own flags.
function(perfcast_glue_code target level)
  target_compile_options(${target} PRIVATE $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<NOT:$<CONFIG:Debug>>>:${level}>)
endfunction()
