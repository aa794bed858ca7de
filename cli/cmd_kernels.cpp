#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "core/output_files.hpp"
#include "model/commands/kernels_command.hpp"

namespace perfcast::cli {

Action add_kernels(CLI::App& app) {
  auto* cmd = app.add_subcommand("kernels",
                                 "Predict single kernels on a system, or every row of measurement files with its error "
                                 "(per row, family and source); fit kernel calibrations from them");
  auto r = std::make_shared<KernelsRequest>();
  auto json = std::make_shared<std::string>();
  auto csv = std::make_shared<std::string>();
  cmd->add_option("--system", r->systems,
                  "system file (repeatable): single kernels use the first; a measured row the one whose GPU is the row's")
      ->required();
  cmd->add_option("--gemm", r->gemm, "a GEMM: m=,n=,k=[,batch=|groups=][,dtype=bf16][,scaling=tensor|block][,impl=cublas|deepgemm|triton]");
  cmd->add_option("--attention", r->attention,
                  "an attention: batch=,heads=,seq=|seq_q=,seq_kv=,head_dim=[,kv_heads=][,head_dim_v=][,causal=0][,window=0]"
                  "[,pass=forward|backward|both][,dtype=bf16][,impl=flash2|flash3|cudnn|triton|tilelang]");
  cmd->add_option("--memory-bound", r->memory_bound, "a memory-bound op: bytes=64MiB[,op=copy][,cold_l2=0][,elements=N][,thread_per_element=0]");
  cmd->add_option("--embedding", r->embedding,
                  "an embedding lookup: tables=,rows=,dim=,batch=[,pooling=1][,distribution=uniform|zipf:A][,pass=forward|backward]"
                  "[,optimizer=sgd][,dtype=fp32][,unpooled=0][,storage=hbm|uvm]");
  cmd->add_option("--measurements", r->measurements,
                  "measurement file (repeatable): perfcast measurement JSON lines, or a table of data/public-measurements "
                  "(hopper-kernels/*.csv, embedding_kernel_times_h100.csv)");
  cmd->add_option("--calibration", r->calibration, "kernel calibration for every system (default: each system's configs/calibration/<gpu>.json)");
  cmd->add_flag("--spec-derived", r->spec_derived, "use no kernel calibration");
  cmd->add_flag("--leave-one-source-out", r->leave_one_source_out,
                "predict each measured row by a fit (kernel model 2) on the other sources' rows");
  cmd->add_option("--fit", r->fit_systems,
                  "fit the kernel calibration of this system's GPU on the measurements and write it (repeatable), with each "
                  "family's leave-one-source-out error");
  cmd->add_option("--fit-dir", r->fit_dir, "folder for the fitted calibrations (default: ../calibration/ beside each system file)");
  cmd->add_option("--note", r->note, "free-text provenance to record in the fitted calibrations");
  cmd->add_option("--json", *json, "write results as JSON to FILE, or - for standard output");
  cmd->add_option("--csv", *csv, "write one line per kernel or measured row as CSV to FILE, or - for standard output");
  return [r, json, csv]() {
    const KernelsOutcome o = run_kernels(*r);
    std::vector<std::pair<std::string, std::string>> files = o.calibrations;
    if (!json->empty()) files.emplace_back(*json, o.json);
    if (!csv->empty()) files.emplace_back(*csv, o.csv);
    write_outputs(files);
    if (*json != "-" && *csv != "-") std::cout << o.text;
    return 0;
  };
}

}  // namespace perfcast::cli
