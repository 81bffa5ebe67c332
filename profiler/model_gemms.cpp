#include "profiler/model_gemms.hpp"

#include <set>
#include <tuple>

namespace pw {

std::vector<GemmShape> model_gemm_shapes(const Model& model, const std::vector<int>& micro_batch_sizes, int seq_len) {
  std::vector<GemmShape> out;
  std::set<std::tuple<double, double, double, bool>> seen;
  for (int b : micro_batch_sizes) {
    Workload w;
    w.micro_batch_size = b;
    w.seq_len = seq_len;
    for (const Layer& layer : model.layers) {
      if (layer.explicit_costs) continue;
      const LayerWork work = layer_work(model, layer, w);
      for (const PhaseWork* p : {&work.forward, &work.backward_input, &work.backward_weight})
        for (const GemmShape& g : p->gemms)
          if (seen.emplace(g.m, g.n, g.k, g.fp8).second) out.push_back(g);
    }
  }
  return out;
}

}  // namespace pw
