/// \file simulator.cpp
/// simulate(): one pass of the event engine (sim_engine.hpp), then, when transfers share a
/// link, contention passes until their stretched durations repeat.

#include "model/sim/simulator.hpp"

#include <cmath>
#include <limits>

#include "model/sim/link_contention.hpp"
#include "model/sim/sim_engine.hpp"
#include "model/sim/transfer_flows.hpp"

namespace perfcast {

Lane lane_of(Stream s) {
  switch (s) {
    case Stream::kCompute: return Lane::kCompute;
    case Stream::kComm: return Lane::kComm;
    case Stream::kCopy: return Lane::kCopy;
  }
  return Lane::kCompute;
}

std::string_view lane_name(Lane l) {
  switch (l) {
    case Lane::kHost: return "host";
    case Lane::kCompute: return "compute";
    case Lane::kComm: return "communication";
    case Lane::kCopy: return "copy";
  }
  return "?";
}

Timeline simulate(const TimedGraph& graph, const HostSpec& host, const SimulationOptions& options) {
  return simulate(graph, host, options, Timeline{});
}

Timeline simulate(const TimedGraph& graph, const HostSpec& host, const SimulationOptions& options, Timeline&& recycled) {
  if (options.iterations < 2) throw std::invalid_argument("simulate: at least 2 iterations are needed for a steady-state period");
  const sim::OpInputs inputs(*graph.graph);  // shared by the first run and the contention passes
  Timeline t = sim::Engine(graph, host, options.iterations, nullptr, std::move(recycled), &inputs).run();
  if (!options.contention) return t;
  if (!sim::transfers_overlap(graph, t.events)) return t;  // nothing shares a link: solo speeds hold
  std::vector<Seconds> durations;
  for (int pass = 0; pass < options.contention_passes; ++pass) {
    const sim::FlowSet fs = sim::transfer_flows(graph, t.events);
    const std::vector<Seconds> finish = fluid_finish_times(fs.flows);
    std::vector<Seconds> next(t.events.size(), std::numeric_limits<double>::quiet_NaN());
    for (std::size_t f = 0; f < fs.flows.size(); ++f)
      for (int e : fs.events[f]) next[static_cast<std::size_t>(e)] = finish[f] - fs.flows[f].start;
    bool same = durations.size() == next.size();
    for (std::size_t e = 0; same && e < next.size(); ++e) {
      const bool a = std::isnan(next[e]), b = std::isnan(durations[e]);
      same = a == b && (a || std::abs(next[e] - durations[e]) <= 1e-12 + 1e-9 * std::abs(next[e]));
    }
    if (same) break;  // a fixed point: the durations reproduce the starts that made them
    durations = std::move(next);
    const Seconds before = t.iteration_time;
    t = sim::Engine(graph, host, options.iterations, &durations, std::move(t), &inputs).run();  // reuses t's storage
    t.contention_passes = pass + 1;
    if (std::abs(t.iteration_time - before) <= options.contention_tolerance * std::abs(t.iteration_time)) break;
  }
  return t;
}

}  // namespace perfcast
