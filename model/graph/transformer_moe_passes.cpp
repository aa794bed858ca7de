/// \file transformer_moe_passes.cpp
/// A mixture-of-experts MLP on one rank, forward and backward, as Megatron-Core's MoELayer
/// runs it with the all-to-all token dispatcher (MoEAlltoAllTokenDispatcher) and the
/// grouped-GEMM experts (TEGroupedMLP), or one GEMM per local expert (SequentialMLP):
///
///   router (logits GEMM, softmax and top-k, load-balancing loss)
///   -> permute (gather each token's top_k copies, grouped by expert)
///   -> all-to-all over the ep ranks (dispatch)
///   -> all-gather over expert TP (expert_tp > 1)
///   -> sort the received chunks by local expert (ep > 1 and several local experts)
///   -> fc1, activation, fc2 of each local expert
///   -> reduce-scatter over expert TP, unsort, all-to-all back (combine)
///   -> unpermute (the top_k outputs weighted by their router probabilities, summed)
///   -> shared experts, if any (a TP MLP over every token), added to that output
///
/// With the all-gather dispatcher (MoEAllGatherTokenDispatcher) the permute / all-to-all /
/// expert-TP gather become one all-gather of the hidden states over the expert TP x ep
/// ranks; each rank permutes the rows of its local experts out of it, and the combine is a
/// reduce-scatter over the same ranks.
///
/// Routing is balanced in bytes: each rank sends tokens x top_k rows, 1/ep of them to each
/// ep rank. Every expert runs the rows of the busiest one (TransformerRankContext::
/// expert_rows: the mean times moe.load_imbalance, capped or padded by the capacity factor).
/// The layer's input is sequence-parallel (tokens / tp per rank), so no TP collective runs
/// around the MoE MLP. Elementwise costs are counted from the kernels' operands (read +
/// written once each), assumed, not measured.

#include <fmt/format.h>

#include "model/graph/transformer_builder.hpp"
#include "model/graph/transformer_rank_passes.hpp"

namespace perfcast::transformer {
namespace {

/// Rows this rank routes (its sequence-parallel tokens) x top_k.
double routed_rows(const TransformerRankContext& c) { return double(c.tokens_sp) * c.w.moe.top_k; }

/// The token all-to-all over the ep ranks: each rank's send buffer is its routed rows.
void expert_all_to_all(const TransformerRankContext& c, TransformerDraft& d, const std::string& name, Phase ph) {
  if (c.ep_group < 0) return;
  d.collective(name, ph, c.ep_group, {CollectiveKind::kAllToAll, routed_rows(c) * c.w.hidden * c.e, {}});
}

/// Expert TP: the routed rows of the expert-TP ranks gathered (or their outputs reduced
/// and scattered back); bytes of the gathered buffer.
void expert_tp_collective(const TransformerRankContext& c, TransformerDraft& d, const std::string& name, Phase ph,
                          CollectiveKind kind) {
  if (c.etp_group < 0) return;
  d.collective(name, ph, c.etp_group, {kind, routed_rows(c) * c.w.expert_tp() * c.w.hidden * c.e, {}});
}

/// The copy that orders received rows by local expert (sort_chunks_by_idxs), forward and back.
void sort_chunks(const TransformerRankContext& c, TransformerDraft& d, const std::string& name, Phase ph) {
  if (c.ep_group < 0 || c.local_experts < 2) return;
  const double rows = routed_rows(c) * c.w.expert_tp();
  d.kernels(name, ph, {ew("moe_sort_chunks", rows * c.w.hidden, 0, 2 * c.e)});
}

/// One GEMM per local expert, or one grouped GEMM (batch = local experts) over them.
std::vector<KernelDesc> expert_gemms(const TransformerRankContext& c, std::int64_t m, std::int64_t n, std::int64_t k) {
  const std::int64_t experts = c.local_experts;
  if (c.w.moe.grouped_gemm) return {GemmDesc{m, n, k, experts, c.w.precision, false}};
  return std::vector<KernelDesc>(static_cast<std::size_t>(experts), GemmDesc{m, n, k, 1, c.w.precision, false});
}

/// The all-gather dispatcher's collective: the hidden states of the expert TP x ep ranks
/// gathered (forward dispatch, backward combine) or reduced and scattered back; bytes of
/// the gathered buffer.
void group_collective(const TransformerRankContext& c, TransformerDraft& d, const std::string& name, Phase ph,
                      CollectiveKind kind) {
  if (c.tpep_group < 0) return;
  const double gathered = double(c.tokens_sp) * c.w.expert_tp() * c.w.ep * c.w.hidden * c.e;
  d.collective(name, ph, c.tpep_group, {kind, gathered, {}});
}

/// Rows entering the rank's local experts.
double expert_input_rows(const TransformerRankContext& c) { return double(c.expert_rows) * c.local_experts; }

/// The tokens-per-expert counts the host needs for the split sizes of the all-to-all and
/// of the experts' GEMMs: counted on the GPU from the routing map (int64 per expert), with
/// the all-to-all dispatcher all-gathered over the expert TP x ep ranks, then copied to the
/// host, which waits for them: MoEAlltoAllTokenDispatcher's preprocess (.to("cpu") and a
/// stream synchronize at its cuda sync point) and MoEAllGatherTokenDispatcher's .cpu().
/// The host loses its lead over the GPU once per MoE layer forward.
void tokens_per_expert_to_host(const TransformerRankContext& c, TransformerDraft& d, const std::string& p, Phase ph) {
  const double E = c.w.moe.experts, T = double(c.tokens_sp);
  if (c.w.moe.all_to_all && c.tpep_group >= 0) {
    const double ranks = double(c.w.expert_tp()) * c.w.ep;
    d.collective(p + "mlp.tokens_per_expert.all_gather", ph, c.tpep_group, {CollectiveKind::kAllGather, E * 8 * ranks, {}});
  }
  Op count{d.named(p + "mlp.tokens_per_expert"), ph, Stream::kCompute, {ew("tokens_per_expert", T * E, 1, 1)}, {}, {}, true};
  d.add(std::move(count));
}

/// One leg of the token path: the per-row op ("mlp.permute" / "mlp.unpermute") with its
/// kernel (FLOPs and bytes per element in units of the activation size), the exchange
/// ("mlp.dispatch" / "mlp.combine") and the local sort ("mlp.sort_chunks" / "mlp.unsort_chunks").
struct TokenLeg {
  std::string rows_op, kernel;
  double flops, bytes;
  std::string exchange, sort;
};

/// Tokens to the experts (dispatch forward, combine backward): the per-row op, the
/// all-to-all, the expert-TP all-gather and the sort; or, with the all-gather dispatcher,
/// the group all-gather, then the per-row op on the local experts' rows.
void tokens_to_experts(const TransformerRankContext& c, TransformerDraft& d, const std::string& p, Phase ph, const TokenLeg& leg) {
  const double e = c.e, H = c.w.hidden;
  if (!c.w.moe.all_to_all) {
    group_collective(c, d, p + leg.exchange, ph, CollectiveKind::kAllGather);
    d.kernels(p + leg.rows_op, ph, {ew(leg.kernel, expert_input_rows(c) * H, leg.flops, leg.bytes * e)});
    return;
  }
  d.kernels(p + leg.rows_op, ph, {ew(leg.kernel, routed_rows(c) * H, leg.flops, leg.bytes * e)});
  expert_all_to_all(c, d, p + leg.exchange, ph);
  expert_tp_collective(c, d, p + "mlp.experts.all_gather", ph, CollectiveKind::kAllGather);
  sort_chunks(c, d, p + leg.sort, ph);
}

/// The experts' rows back to the tokens (combine forward, dispatch backward): the reverse
/// of tokens_to_experts, reduce-scatters in place of all-gathers.
void experts_to_tokens(const TransformerRankContext& c, TransformerDraft& d, const std::string& p, Phase ph, const TokenLeg& leg) {
  const double e = c.e, H = c.w.hidden;
  if (!c.w.moe.all_to_all) {
    d.kernels(p + leg.rows_op, ph, {ew(leg.kernel, expert_input_rows(c) * H, leg.flops, leg.bytes * e)});
    group_collective(c, d, p + leg.exchange, ph, CollectiveKind::kReduceScatter);
    return;
  }
  expert_tp_collective(c, d, p + "mlp.experts.reduce_scatter", ph, CollectiveKind::kReduceScatter);
  sort_chunks(c, d, p + leg.sort, ph);
  expert_all_to_all(c, d, p + leg.exchange, ph);
  d.kernels(p + leg.rows_op, ph, {ew(leg.kernel, routed_rows(c) * H, leg.flops, leg.bytes * e)});
}

// Permute: a gather (read and write each row); unpermute: the top_k rows weighted by their
// probabilities and summed (2 FLOPs); their backward kernels also read the saved input.
const TokenLeg kDispatch{"mlp.permute", "moe_permute", 0, 2, "mlp.dispatch", "mlp.sort_chunks"};
const TokenLeg kCombine{"mlp.unpermute", "moe_unpermute", 2, 2, "mlp.combine", "mlp.unsort_chunks"};
const TokenLeg kCombineBackward{"mlp.unpermute", "moe_unpermute_backward", 2, 3, "mlp.combine", "mlp.unsort_chunks"};
const TokenLeg kDispatchBackward{"mlp.permute", "moe_permute_backward", 1, 3, "mlp.dispatch", "mlp.sort_chunks"};

/// Appends the kernels of `more` to `k`.
void append(std::vector<KernelDesc>& k, std::vector<KernelDesc> more) {
  for (auto& x : more) k.push_back(std::move(x));
}

}  // namespace

void add_moe_forward(const TransformerRankContext& c, TransformerDraft& d, const std::string& p, Phase ph) {
  const auto& w = c.w;
  const double e = c.e, T = double(c.tokens_sp), E = w.moe.experts;
  const std::int64_t H = w.hidden, R = c.expert_rows;
  // TopKRouter: logits, softmax in fp32 and top-k, and the auxiliary load-balancing loss.
  Op router{d.named(p + "mlp.router"), ph, Stream::kCompute,
            {c.gemm(c.tokens_sp, w.moe.experts, H), ew("router_softmax_topk", T * E, 10, e + 4), ew("router_aux_loss", T * E, 2, 4)},
            {}, {}, false};
  router.moe_layer_start = true;
  d.add(std::move(router));
  tokens_per_expert_to_host(c, d, p, ph);
  tokens_to_experts(c, d, p, ph, kDispatch);
  const double expert_in = expert_input_rows(c);
  std::vector<KernelDesc> fc1 = c.linear(expert_in * H, expert_gemms(c, R, c.expert_ffn1, H));
  append(fc1, activation_kernels(w.activation, expert_in * c.expert_ffn2, false, e));
  d.kernels(p + "mlp.experts.fc1", ph, std::move(fc1));
  d.kernels(p + "mlp.experts.fc2", ph, c.linear(expert_in * c.expert_ffn2, expert_gemms(c, R, H, c.expert_ffn2)));
  experts_to_tokens(c, d, p, ph, kCombine);
  if (c.shared_ffn2 > 0) {  // shared experts, then their output added to the routed experts'
    add_mlp_forward(c, d, p, ph, c.shared_experts());
    d.kernels(p + "mlp.shared_experts.add", ph, {ew("add", T * double(H), 1, 3 * e)});
  }
}

void add_moe_backward(const TransformerRankContext& c, TransformerDraft& d, const std::string& p) {
  const auto& w = c.w;
  const Phase ph = Phase::kBackward;
  const double e = c.e, T = double(c.tokens_sp), E = w.moe.experts;
  const std::int64_t H = w.hidden, R = c.expert_rows;
  // Autograd reaches the shared experts first (created last in the forward).
  if (c.shared_ffn2 > 0) add_mlp_backward(c, d, p, c.shared_experts());
  tokens_to_experts(c, d, p, ph, kCombineBackward);
  const double expert_in = expert_input_rows(c);
  // --recompute-modules moe_act: the activation's output (fc2's input), discarded after
  // the forward, is recomputed before fc2's backward reads it.
  if (w.recomputes_moe_act())
    d.kernels(p + "mlp.experts.recompute.activation", ph, activation_kernels(w.activation, expert_in * c.expert_ffn2, false, e));
  // Each expert GEMM's backward: input gradient (dgrad) and weight gradient (wgrad).
  std::vector<KernelDesc> fc2 = expert_gemms(c, R, c.expert_ffn2, H);
  append(fc2, expert_gemms(c, c.expert_ffn2, H, R));
  d.kernels(p + "mlp.experts.fc2", ph, c.linear(expert_in * H, std::move(fc2)));
  std::vector<KernelDesc> fc1 = activation_backward_kernels(w.activation, expert_in * c.expert_ffn2, false, e);
  std::vector<KernelDesc> fc1_gemms = expert_gemms(c, R, H, c.expert_ffn1);
  append(fc1_gemms, expert_gemms(c, c.expert_ffn1, H, R));
  append(fc1, c.linear(expert_in * c.expert_ffn1, std::move(fc1_gemms)));
  d.kernels(p + "mlp.experts.fc1", ph, std::move(fc1));
  experts_to_tokens(c, d, p, ph, kDispatchBackward);
  d.kernels(p + "mlp.router", ph,
            {ew("router_softmax_topk_backward", T * E, 6, 4 + 4 + e), c.gemm(c.tokens_sp, H, w.moe.experts),
             c.gemm(w.moe.experts, H, c.tokens_sp)});
}

}  // namespace perfcast::transformer

namespace perfcast {

double transformer_layer_expert_parameters(const TransformerSpec& w, std::int64_t layer) {
  if (!w.moe.in_layer(layer)) return 0;
  const double h = double(w.hidden), f = double(w.expert_ffn()) / w.expert_tp();
  const double gate = fc1_multiplier(w.activation);
  return double(w.moe.experts / w.ep) * (h * gate * f + f * h);
}

}  // namespace perfcast
