#include "model/graph/execution_graph.hpp"

namespace perfcast {

std::string_view stream_name(Stream s) {
  switch (s) {
    case Stream::kCompute: return "compute";
    case Stream::kComm: return "communication";
    case Stream::kCopy: return "copy";
  }
  return "?";
}

std::string_view phase_name(Phase p) {
  switch (p) {
    case Phase::kInput: return "input";
    case Phase::kForward: return "forward";
    case Phase::kBackward: return "backward";
    case Phase::kOptimizer: return "optimizer";
  }
  return "?";
}

}  // namespace perfcast
