/// \file transformer_rank_context.cpp
/// What the Transformer rank passes share: the rank's place in the tp x dp x pp grid and
/// its sizes, the graph-wide groups and collectives, and the op chain of one rank.

#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "core/deadline.hpp"
#include "model/graph/transformer_rank_passes.hpp"

namespace perfcast::transformer {

ElementwiseDesc ew(std::string op, double elements, double flops, double bytes) {
  return ElementwiseDesc{std::move(op), static_cast<std::int64_t>(elements), flops, bytes};
}

std::vector<KernelDesc> activation_kernels(Activation a, double elements, bool bias, double e) {
  std::vector<KernelDesc> k;
  const bool fused_bias = a == Activation::kGelu || a == Activation::kSwiglu;
  if (bias && !fused_bias) k.push_back(ew("bias_add", elements * fc1_multiplier(a), 1, 2 * e));
  switch (a) {
    case Activation::kGelu: k.push_back(ew(bias ? "bias_gelu" : "gelu", elements, kGeluFlops, 2 * e)); break;
    case Activation::kSwiglu: k.push_back(ew("swiglu", elements, 6, 3 * e)); break;
    case Activation::kGeglu: k.push_back(ew("geglu", elements, kGeluFlops + 1, 3 * e)); break;
    case Activation::kRelu: k.push_back(ew("relu", elements, 1, 2 * e)); break;
    case Activation::kSquaredRelu:
      k.push_back(ew("relu", elements, 1, 2 * e));
      k.push_back(ew("pow", elements, 1, 2 * e));
      break;
  }
  return k;
}

std::vector<KernelDesc> activation_backward_kernels(Activation a, double elements, bool bias, double e) {
  switch (a) {
    case Activation::kGelu: return {ew(bias ? "bias_gelu_backward" : "gelu_backward", elements, kGeluBwdFlops, 3 * e)};
    case Activation::kSwiglu: return {ew("swiglu_backward", elements, 8, 5 * e)};
    case Activation::kGeglu: return {ew("geglu_backward", elements, kGeluBwdFlops + 2, 5 * e)};
    case Activation::kRelu: return {ew("relu_backward", elements, 1, 3 * e)};
    case Activation::kSquaredRelu: return {ew("pow_backward", elements, 2, 3 * e), ew("relu_backward", elements, 1, 3 * e)};
  }
  return {};
}

int SharedCollectives::group(const std::vector<int>& ranks) {
  auto [it, fresh] = groups.try_emplace(ranks, static_cast<int>(g.groups.size()));
  if (fresh) g.groups.push_back(RankGroup{ranks});
  return it->second;
}

int SharedCollectives::directed_group(int from, int to) {
  auto [it, fresh] = directed.try_emplace({from, to}, static_cast<int>(g.groups.size()));
  if (fresh) g.groups.push_back(RankGroup{{from, to}});
  return it->second;
}

int SharedCollectives::collective(int grp, const CollectiveDesc& d) {
  auto [it, fresh] = collectives.try_emplace({grp, static_cast<int>(d.kind), d.bytes, d.pair_bytes}, static_cast<int>(g.collectives.size()));
  if (fresh) g.collectives.push_back(GraphCollective{d, grp});
  return it->second;
}

TransformerRankContext::TransformerRankContext(const TransformerSpec& w_, int rank, SharedCollectives& shared) : w(w_) {
  // Megatron's rank order: tp fastest, then cp, then dp, then pp.
  const int t = w.tp, cp = w.cp, dp = w.dp;
  tp_i = rank % t;
  cp_i = (rank / t) % cp;
  dp_i = (rank / (t * cp)) % dp;
  stage = rank / (t * cp * dp);
  auto at = [&](int ti, int ci, int di, int si) { return ti + t * (ci + cp * (di + dp * si)); };
  std::vector<int> tpg, dpg;
  for (int i = 0; i < t; ++i) tpg.push_back(at(i, cp_i, dp_i, stage));
  for (int di = 0; di < dp; ++di)
    for (int ci = 0; ci < cp; ++ci) dpg.push_back(at(tp_i, ci, di, stage));
  tp_group = shared.group(tpg);
  dp_group = shared.group(dpg);
  if (stage > 0) prev_group = shared.group({at(tp_i, cp_i, dp_i, stage - 1), rank});
  if (stage + 1 < w.pp) next_group = shared.group({rank, at(tp_i, cp_i, dp_i, stage + 1)});
  if (w.pp > 1) emb_group = shared.group({at(tp_i, cp_i, dp_i, 0), at(tp_i, cp_i, dp_i, w.pp - 1)});
  if (cp > 1) {
    cp_to_next = shared.directed_group(rank, at(tp_i, (cp_i + 1) % cp, dp_i, stage));
    cp_from_prev = shared.directed_group(at(tp_i, (cp_i + cp - 1) % cp, dp_i, stage), rank);
  }

  if (w.moe.enabled()) add_expert_groups(rank, shared);

  e = dtype_bytes(w.activation_dtype());
  tokens = w.micro_batch * w.seq_len / cp;
  tokens_sp = w.sequence_parallel ? tokens / t : tokens;
  heads = w.heads / t;
  kv_heads = w.kv_heads / t;
  qkv = (w.heads + 2 * w.kv_heads) * w.head_dim() / t;
  attn_out = w.heads * w.v_dim() / t;
  if (w.mla.enabled()) {
    qkv = 0;  // MLA's projections instead (mla_* widths)
    mla_q_up = w.heads * w.qk_dim() / t;
    mla_kv_down = w.mla.kv_lora_rank + w.mla.qk_rope_head_dim;
    mla_kv_up = w.heads * (w.mla.qk_head_dim + w.mla.v_head_dim) / t;
  }
  ffn1 = static_cast<std::int64_t>(fc1_multiplier(w.activation)) * w.ffn_hidden / t;
  ffn2 = w.ffn_hidden / t;
  vocab = w.padded_vocab() / t;
  // Megatron-Core sends the stage output as the rank holds it: (seq / cp / tp under sequence
  // parallelism) x micro-batch x hidden (schedules.get_tensor_shapes divides the sequence by
  // tp when config.sequence_parallel); each TP rank sends its own shard to its peer.
  p2p_bytes = double(tokens_sp) * w.hidden * e;
  mask = w.dropout > 0 ? 1.0 : 0.0;
  if (w.moe.enabled()) {
    const int etp = w.expert_tp();
    local_experts = w.moe.experts / w.ep;
    const double routed = double(tokens_sp) * w.moe.top_k * etp * w.ep;  // rows the rank's local experts share
    expert_rows = static_cast<std::int64_t>(std::ceil(routed / w.moe.experts * w.moe.load_factor()));
    expert_ffn1 = static_cast<std::int64_t>(fc1_multiplier(w.activation)) * w.expert_ffn() / etp;
    expert_ffn2 = w.expert_ffn() / etp;
    shared_ffn1 = static_cast<std::int64_t>(fc1_multiplier(w.activation)) * w.moe.shared_ffn / t;
    shared_ffn2 = w.moe.shared_ffn / t;
  }
}

void TransformerRankContext::add_expert_groups(int rank, SharedCollectives& shared) {
  const int n = w.stage_ranks(), etp = w.expert_tp(), ep = w.ep, edp = w.expert_dp();
  const int base = rank / n * n, local = rank % n;
  const int etp_i = local % etp, ep_i = local / etp % ep, edp_i = local / (etp * ep);
  auto at = [&](int ti, int ei, int di) { return base + ti + etp * (ei + ep * di); };
  std::vector<int> epg, etpg, edpg, tpepg;
  for (int i = 0; i < ep; ++i) epg.push_back(at(etp_i, i, edp_i));
  for (int i = 0; i < etp; ++i) etpg.push_back(at(i, ep_i, edp_i));
  for (int i = 0; i < edp; ++i) edpg.push_back(at(etp_i, ep_i, i));
  for (int i = 0; i < etp * ep; ++i) tpepg.push_back(at(i % etp, i / etp, edp_i));
  if (ep > 1) ep_group = shared.group(epg);
  if (etp > 1) etp_group = shared.group(etpg);
  if (edp > 1) edp_group = shared.group(edpg);
  if (etp * ep > 1) tpep_group = shared.group(tpepg);
}

std::vector<KernelDesc> TransformerRankContext::linear(double input_elements, std::vector<KernelDesc> gemms) const {
  if (!w.fp8_linear_layers()) return gemms;
  std::vector<KernelDesc> k{ew(kFp8InputCast, input_elements, 0, 4)};
  for (auto& g : gemms) k.push_back(std::move(g));
  return k;
}

bool TransformerRankContext::fused_softmax() const {
  const std::int64_t s = w.seq_len, batches = w.micro_batch * heads;
  return e <= 2 && s > 16 && s <= 2048 && s % 4 == 0 && batches % 4 == 0;
}

void TransformerDraft::set_micro_batch(int mb, int chunk) {
  mb_ = chunk < 0 ? fmt::format("mb{}.", mb) : fmt::format("mb{}.c{}.", mb, chunk);
  last_mb_ = mb + 1 == c_.w.micro_batches();
  first_mb_ = mb == 0;
}

int TransformerDraft::side_collective(const std::string& name, Phase ph, int grp, CollectiveDesc d, int dep) {
  Op op{mb_ + name, ph, Stream::kComm, {}, shared_.collective(grp, d), {}, false};
  if (dep >= 0) op.deps.push_back(dep);
  program.ops.push_back(std::move(op));
  return static_cast<int>(program.ops.size()) - 1;
}

int TransformerDraft::param_gather_ahead(const std::string& name, Phase ph, int grp, double bytes) {
  const int op = side_collective(name, ph, grp, {CollectiveKind::kAllGather, bytes, {}}, -1);
  param_gathers.push_back(op);
  return op;
}

void TransformerDraft::async_collective(const std::string& name, Phase ph, int grp, CollectiveDesc d) {
  pending_.push_back(side_collective(name, ph, grp, std::move(d), last_));
}

void TransformerDraft::add(Op op) {
  check_deadline();  // --timeout: a large graph stops between two ops
  if (last_ >= 0) op.deps.push_back(last_);
  for (int j : join_) op.deps.push_back(j);
  join_ = std::move(join_after_next_);  // what the op after this one waits for
  join_after_next_.clear();
  // add_layer_forward(.., "recompute."): recomputed forwards run in the backward phase, so
  // only backward ops' names are searched.
  op.recompute = op.phase == Phase::kBackward && op.name.find("recompute.") != std::string::npos;
  // A module call (forward or recomputed) whose kernels begin with linear()'s input cast.
  if (op.phase == Phase::kForward || op.recompute) {
    const auto* cast = op.kernels.empty() ? nullptr : std::get_if<ElementwiseDesc>(&op.kernels.front());
    op.fp8_module = cast != nullptr && cast->op == kFp8InputCast;
  }
  if (share_next_op_ >= 0 && !op.kernels.empty()) {
    op.sm_sharing_op = share_next_op_;
    op.sm_sharing_sms = share_next_sms_;
  }
  share_next_op_ = -1;
  program.ops.push_back(std::move(op));
  before_last_ = last_;
  last_ = static_cast<int>(program.ops.size()) - 1;
}

void TransformerDraft::kernels(const std::string& name, Phase ph, std::vector<KernelDesc> k) {
  add(Op{mb_ + name, ph, Stream::kCompute, std::move(k), {}, {}, false});
}

void TransformerDraft::collective(const std::string& name, Phase ph, int grp, CollectiveDesc d, bool host_waits) {
  add(Op{mb_ + name, ph, Stream::kComm, {}, shared_.collective(grp, d), {}, host_waits});
}

void TransformerDraft::p2p(const std::string& name, Phase ph, int grp, std::vector<double> pair) {
  CollectiveDesc d{CollectiveKind::kAllToAllV, 0, std::move(pair)};
  collective(name, ph, grp, std::move(d), c_.w.pipeline_host_blocking);
}

std::vector<int> TransformerDraft::p2p_batch(const std::string& name, Phase ph, const std::vector<Transfer>& parts,
                                             bool joined_by_next) {
  if (parts.empty()) return {};
  std::vector<int> ends;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    // A 2-rank all-to-allv on the directed group {from, to}: bytes from member 0 to member 1.
    const CollectiveDesc desc{CollectiveKind::kAllToAllV, 0, {0, parts[i].bytes, 0, 0}};
    Op op{mb_ + name + "." + parts[i].label, ph, Stream::kComm, {}, shared_.collective(parts[i].group, desc), {}, false};
    if (last_ >= 0) op.deps.push_back(last_);
    op.concurrent = true;
    op.same_call = i > 0;
    program.ops.push_back(std::move(op));
    ends.push_back(static_cast<int>(program.ops.size()) - 1);
  }
  if (!joined_by_next) return ends;
  if (!c_.w.pipeline_host_blocking) {
    join_next(ends);
    return ends;
  }
  // p2p_communication waits on the requests, then synchronizes: an op without GPU work
  // that waits for every part, and the host with it.
  Op wait{mb_ + name + ".wait", ph, Stream::kComm, {}, {}, ends, true};
  wait.same_call = true;
  add(std::move(wait));
  return ends;
}

namespace {
/// SMs Transformer Engine's userbuffers kernels hold while a TP collective runs beside its
/// GEMM, TE's defaults (TransformerEngine v1.8, transformer_engine/pytorch/module/base.py,
/// initialize_ub: "pipeline" for proj and fc2 forward reduce-scatters and "bulk" for the
/// backward's qkv / fc1 overlaps with num_sm 16; "ring_exchange" for the other all-gathers
/// with num_sm 1, its data moved by peer copies).
constexpr int kUbPipelineSms = 16;
constexpr int kUbBulkSms = 16;
constexpr int kUbRingExchangeSms = 1;
}  // namespace

void TransformerDraft::tp_reduce(const std::string& name, Phase ph, bool beside_gemm) {
  if (c_.w.tp == 1) return;
  const double bytes = double(c_.tokens) * c_.w.hidden * c_.e;
  const CollectiveDesc d{c_.w.sequence_parallel ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce, bytes, {}};
  if (c_.w.tp_comm_overlap && beside_gemm) {
    // Beside the row-parallel GEMM just added (it starts when the GEMM's input is ready);
    // the next op waits for both.
    const int side = side_collective(name, ph, c_.tp_group, d, before_last_);
    join_.push_back(side);
    if (last_ >= 0) {
      program.ops[static_cast<std::size_t>(last_)].sm_sharing_op = side;
      program.ops[static_cast<std::size_t>(last_)].sm_sharing_sms = ph == Phase::kForward ? kUbPipelineSms : kUbBulkSms;
    }
    return;
  }
  collective(name, ph, c_.tp_group, d);
}

void TransformerDraft::sp_gather(const std::string& name, Phase ph, bool beside_gemm, bool wgrad_input) {
  if (c_.w.tp == 1 || !c_.w.sequence_parallel) return;
  const CollectiveDesc d{CollectiveKind::kAllGather, double(c_.tokens) * c_.w.hidden * c_.e, {}};
  if (c_.w.tp_comm_overlap && beside_gemm) {
    // Beside the column-parallel GEMM added next, which does not wait for it; the op after
    // that GEMM waits for both.
    const int side = side_collective(name, ph, c_.tp_group, d, last_);
    join_after_next_.push_back(side);
    share_next_op_ = side;
    share_next_sms_ = wgrad_input ? kUbBulkSms : kUbRingExchangeSms;
    return;
  }
  collective(name, ph, c_.tp_group, d);
}

}  // namespace perfcast::transformer
