#include "executor/cpu_moe_mlp.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.hpp"
#include "executor/host_tensor.hpp"

namespace pw::cpu {

MoeMlp::MoeMlp(const std::string& name, const TransformerConfig& c, const ExpertShard& shard, std::uint64_t seed)
    : moe_(*c.moe),
      mlp_(c.mlp),
      hidden_(c.hidden),
      shard_(shard),
      router_(name + ".router", c.hidden, c.moe->experts, c.moe->expert_bias, seed) {
  if (shard_.ep < 1 || moe_.experts % shard_.ep != 0)
    throw_bad_input("--ep: {} does not divide the {} experts of '{}'; use a divisor of {}", shard_.ep, moe_.experts, name,
                    moe_.experts);
  local_ = moe_.experts / shard_.ep;
  const int first = shard_.index * local_;
  const int up = mlp_ == MlpKind::SwiGlu ? 2 * moe_.expert_ffn : moe_.expert_ffn;
  for (int e = first; e < first + local_; ++e) {
    const std::string expert = fmt::format("{}.expert{}", name, e);
    experts_.push_back({Linear(expert + ".up", c.hidden, up, moe_.expert_bias, seed),
                        Linear(expert + ".down", moe_.expert_ffn, c.hidden, moe_.expert_bias, seed)});
  }
  if (moe_.shared_expert_ffn > 0)
    shared_ = std::make_unique<DenseMlp>(name + ".shared", c.hidden, moe_.shared_expert_ffn, mlp_, false, seed);
  if (moe_.shared_expert_gate) gate_ = std::make_unique<Linear>(name + ".shared_gate", c.hidden, 1, false, seed);
}

void MoeMlp::collect(std::vector<Param*>& out) {
  router_.collect(out);
  for (Expert& e : experts_) {
    const size_t from = out.size();
    e.up.collect(out);
    e.down.collect(out);
    for (size_t i = from; i < out.size(); ++i) out[i]->expert = true;
  }
  if (shared_) shared_->collect(out);
  if (gate_) gate_->collect(out);
}

std::vector<Mat> MoeMlp::exchange(std::vector<Mat> parts) {
  if (shard_.ep == 1) return parts;
  if (!collectives_)
    throw_runtime("MoE block: experts over {} replicas but no exchange with them; run it with replicas", shard_.ep);
  std::vector<TensorPtr> out;
  for (Mat& m : parts) out.push_back(std::make_shared<HostTensor>(std::move(m)));
  std::vector<TensorPtr> got = collectives_->all_to_all(shard_.group, std::move(out));
  std::vector<Mat> result;
  for (TensorPtr& t : got) result.push_back(std::move(static_cast<HostTensor&>(*t).value));
  return result;
}

MoeMlp::Routes MoeMlp::route(const Mat& choice) const {
  Routes r;
  r.count.assign(static_cast<size_t>(shard_.ep), 0);
  for (Eigen::Index c = 0; c < choice.size(); ++c) {
    const size_t p = static_cast<size_t>(static_cast<int>(choice(c / choice.cols(), c % choice.cols())) / local_);
    r.member.push_back(p);
    r.row.push_back(r.count[p]++);
  }
  return r;
}

std::vector<Mat> MoeMlp::Routes::parts(Eigen::Index cols) const {
  std::vector<Mat> out;
  for (Eigen::Index n : count) out.emplace_back(n, cols);
  return out;
}

std::vector<std::vector<Eigen::Index>> MoeMlp::rows_by_expert(const Mat& recv_expert) const {
  std::vector<std::vector<Eigen::Index>> order(static_cast<size_t>(local_));
  for (Eigen::Index r = 0; r < recv_expert.rows(); ++r) {
    const int e = static_cast<int>(recv_expert(r, 0));
    if (e < 0 || e >= local_) throw_runtime("MoE block: a row for local expert {} of {} arrived", e, local_);
    order[static_cast<size_t>(e)].push_back(r);
  }
  return order;
}

namespace {

// Concatenates rows of `parts` (by part, then row).
Mat stack_rows(const std::vector<Mat>& parts, Eigen::Index cols, Eigen::Index first_col) {
  Eigen::Index rows = 0;
  for (const Mat& p : parts) rows += p.rows();
  Mat out(rows, cols);
  Eigen::Index at = 0;
  for (const Mat& p : parts) {
    if (p.rows() > 0) out.middleRows(at, p.rows()) = p.middleCols(first_col, cols);
    at += p.rows();
  }
  return out;
}

// Splits `all` (rows by part, then row) back into parts of `counts` rows each.
std::vector<Mat> split_rows(const Mat& all, const Mat& counts) {
  std::vector<Mat> parts;
  Eigen::Index at = 0;
  for (Eigen::Index p = 0; p < counts.rows(); ++p) {
    const auto n = static_cast<Eigen::Index>(counts(p, 0));
    parts.push_back(all.middleRows(at, n));
    at += n;
  }
  return parts;
}

// The rows `idx` of `all`, in that order; and the reverse, each row of `part` written back to its row of `all`.
Mat gather_rows(const Mat& all, const std::vector<Eigen::Index>& idx) {
  Mat out(static_cast<Eigen::Index>(idx.size()), all.cols());
  for (size_t i = 0; i < idx.size(); ++i) out.row(static_cast<Eigen::Index>(i)) = all.row(idx[i]);
  return out;
}

void scatter_rows(const Mat& part, const std::vector<Eigen::Index>& idx, Mat& all) {
  for (size_t i = 0; i < idx.size(); ++i) all.row(idx[i]) = part.row(static_cast<Eigen::Index>(i));
}

}  // namespace

Mat MoeMlp::forward(const Mat& n, Mat* s) {
  const Eigen::Index T = n.rows(), k = moe_.top_k, h = hidden_;
  const Mat logits = router_.forward(n);
  // Top k by logit (ties to the lower expert), weights by a softmax over the k chosen.
  s[kChoice].resize(T, k);
  s[kWeight].resize(T, k);
  std::vector<int> ids(static_cast<size_t>(moe_.experts));
  for (Eigen::Index t = 0; t < T; ++t) {
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                      [&](int a, int b) { return logits(t, a) != logits(t, b) ? logits(t, a) > logits(t, b) : a < b; });
    const float top = logits(t, ids[0]);
    float sum = 0;
    for (Eigen::Index j = 0; j < k; ++j) {
      s[kChoice](t, j) = static_cast<float>(ids[static_cast<size_t>(j)]);
      s[kWeight](t, j) = std::exp(logits(t, ids[static_cast<size_t>(j)]) - top);
      sum += s[kWeight](t, j);
    }
    s[kWeight].row(t) /= sum;
  }

  // Dispatch: each member gets its experts' (token, choice) rows, a column naming the local expert first.
  const Routes routes = route(s[kChoice]);
  std::vector<Mat> parts = routes.parts(1 + h);
  for (Eigen::Index c = 0; c < T * k; ++c) {
    const int e = static_cast<int>(s[kChoice](c / k, c % k));
    Mat& part = parts[routes.member[static_cast<size_t>(c)]];
    const Eigen::Index r = routes.row[static_cast<size_t>(c)];
    part(r, 0) = static_cast<float>(e % local_);
    part.row(r).tail(h) = n.row(c / k);
  }
  const std::vector<Mat> received = exchange(std::move(parts));

  // The local experts on every row received, grouped by expert.
  s[kRecvCount].resize(static_cast<Eigen::Index>(received.size()), 1);
  for (size_t p = 0; p < received.size(); ++p) s[kRecvCount](static_cast<Eigen::Index>(p), 0) = static_cast<float>(received[p].rows());
  s[kRecvExpert] = stack_rows(received, 1, 0);
  const Mat rows = stack_rows(received, h, 1);
  const auto order = rows_by_expert(s[kRecvExpert]);
  const Eigen::Index R = rows.rows(), up = experts_.empty() ? 0 : experts_.front().up.w.value.cols();
  s[kX].resize(R, h);
  s[kU].resize(R, up);
  s[kG].resize(R, moe_.expert_ffn);
  Mat y_rows(R, h);
  Eigen::Index at = 0;
  for (size_t e = 0; e < order.size(); ++e) {
    const auto& idx = order[e];
    const auto m = static_cast<Eigen::Index>(idx.size());
    if (m == 0) continue;
    const Mat x = gather_rows(rows, idx);
    const Mat u = experts_[e].up.forward(x);
    const Mat g = activation(mlp_, u);
    scatter_rows(experts_[e].down.forward(g), idx, y_rows);
    s[kX].middleRows(at, m) = x;
    s[kU].middleRows(at, m) = u;
    s[kG].middleRows(at, m) = g;
    at += m;
  }

  // Combine: the outputs go back, each member's in the order it sent them.
  const std::vector<Mat> back = exchange(split_rows(y_rows, s[kRecvCount]));
  s[kOut].resize(T * k, h);
  Mat out = Mat::Zero(T, h);
  for (Eigen::Index c = 0; c < T * k; ++c) {
    s[kOut].row(c) = back[routes.member[static_cast<size_t>(c)]].row(routes.row[static_cast<size_t>(c)]);
    out.row(c / k) += s[kWeight](c / k, c % k) * s[kOut].row(c);
  }

  if (shared_) {
    Mat shared_slots[2];
    Mat shared_out = shared_->forward(n, shared_slots);
    s[kSharedU] = std::move(shared_slots[0]);
    s[kSharedG] = std::move(shared_slots[1]);
    if (gate_) {
      // The gate's gradient needs the shared output it scaled.
      s[kGate] = (1.0f + (-gate_->forward(n).array()).exp()).inverse().matrix();
      out += (shared_out.array().colwise() * s[kGate].col(0).array()).matrix();
      s[kSharedOut] = std::move(shared_out);
    } else {
      out += shared_out;
    }
  }
  return out;
}

Mat MoeMlp::backward(const Mat& dy, Mat& n, Mat* s, const GradSink& sink) {
  const Eigen::Index T = n.rows(), k = moe_.top_k, h = hidden_;
  Mat dn = Mat::Zero(T, h);

  if (shared_) {
    Mat dshared = dy;
    if (gate_) {
      const Mat g = s[kGate];
      dshared = (dy.array().colwise() * g.col(0).array()).matrix();
      // d(gate logit) = <dy, shared out> g (1 - g).
      Mat dlogit = (dy.cwiseProduct(s[kSharedOut]).rowwise().sum().array() * g.col(0).array() * (1.0f - g.col(0).array()))
                       .matrix();
      dn += gate_->backward_input(dlogit);
      sink(gate_->term(Mat(n), std::move(dlogit)));
    }
    Mat shared_slots[2] = {std::move(s[kSharedU]), std::move(s[kSharedG])};
    Mat n_copy = n;
    dn += shared_->backward(dshared, n_copy, shared_slots, sink);
  }

  // Each choice's output gradient is its weight times dy; the weight's gradient is <dy, its output>.
  const Routes routes = route(s[kChoice]);
  std::vector<Mat> parts = routes.parts(h);
  Mat dweight(T, k);
  for (Eigen::Index c = 0; c < T * k; ++c) {
    parts[routes.member[static_cast<size_t>(c)]].row(routes.row[static_cast<size_t>(c)]) =
        s[kWeight](c / k, c % k) * dy.row(c / k);
    dweight(c / k, c % k) = dy.row(c / k).dot(s[kOut].row(c));
  }
  const Mat dy_rows = stack_rows(exchange(std::move(parts)), h, 0);

  // The experts' backward on the rows they computed, in the order F grouped them.
  const auto order = rows_by_expert(s[kRecvExpert]);
  Mat dx_rows(dy_rows.rows(), h);
  Eigen::Index at = 0;
  for (size_t e = 0; e < order.size(); ++e) {
    const auto& idx = order[e];
    const auto m = static_cast<Eigen::Index>(idx.size());
    if (m == 0) continue;
    Mat dye = gather_rows(dy_rows, idx);
    const Mat dg = experts_[e].down.backward_input(dye);
    sink(experts_[e].down.term(s[kG].middleRows(at, m), std::move(dye)));
    Mat du = activation_backward(mlp_, s[kU].middleRows(at, m), dg);
    scatter_rows(experts_[e].up.backward_input(du), idx, dx_rows);
    sink(experts_[e].up.term(s[kX].middleRows(at, m), std::move(du)));
    at += m;
  }
  const std::vector<Mat> back = exchange(split_rows(dx_rows, s[kRecvCount]));
  for (Eigen::Index c = 0; c < T * k; ++c)
    dn.row(c / k) += back[routes.member[static_cast<size_t>(c)]].row(routes.row[static_cast<size_t>(c)]);

  // The router: the softmax over the chosen logits; the others get no gradient.
  Mat dlogits = Mat::Zero(T, moe_.experts);
  for (Eigen::Index t = 0; t < T; ++t) {
    const float mean = dweight.row(t).dot(s[kWeight].row(t));
    for (Eigen::Index j = 0; j < k; ++j)
      dlogits(t, static_cast<Eigen::Index>(s[kChoice](t, j))) = s[kWeight](t, j) * (dweight(t, j) - mean);
  }
  dn += router_.backward_input(dlogits);
  sink(router_.term(std::move(n), std::move(dlogits)));
  for (int i = 0; i < kSlots; ++i) s[i] = Mat();
  return dn;
}

}  // namespace pw::cpu
