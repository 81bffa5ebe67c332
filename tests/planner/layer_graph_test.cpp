#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "core/analytic_cost_model.hpp"
#include "core/stage_costs.hpp"
#include "partition_test_util.hpp"
#include "planner/layer_graph.hpp"

using namespace pw;
using namespace pw::test;

namespace {

// Layer i's output is (i + 1) KiB, so every sum below names the tensors it adds.
Model numbered_chain(int n) {
  Model m;
  m.name = "numbered";
  for (int i = 0; i < n; ++i) m.layers.push_back(explicit_layer(fmt::format("l{}", i), 1, 0, 0, (i + 1) * 1024.0, 0, 0));
  return m;
}

std::vector<LayerWork> works(const Model& m) {
  std::vector<LayerWork> w;
  for (const Layer& l : m.layers) w.push_back(layer_work(m, l, Workload{}));
  return w;
}

}  // namespace

TEST_CASE("a chain's boundaries carry each layer's own output") {
  const Model m = numbered_chain(5);
  CHECK(boundary_bytes(m, works(m)) == std::vector<double>{1024, 2048, 3072, 4096});
  // The graph of the same chain agrees with the fast path.
  CHECK(cut_bytes(build_layer_graph(m, {1024, 2048, 3072, 4096, 5120})) == std::vector<double>{1024, 2048, 3072, 4096});
}

TEST_CASE("a skip edge adds its tensor to every boundary it spans") {
  // 0 -> 3 without bytes: layer 0's output (1 KiB) also crosses boundaries 1 and 2 (boundary 0 carries
  // it already, once). 1 -> 4 with 100 bytes: a tensor of its own over boundaries 1, 2, 3.
  Model m = numbered_chain(5);
  m.edges = {LayerEdge{0, 3, std::nullopt}, LayerEdge{1, 4, 100.0}};
  CHECK(boundary_bytes(m, works(m)) == std::vector<double>{1024, 2048 + 1024 + 100, 3072 + 1024 + 100, 4096 + 100});
}

TEST_CASE("an encoder output read by every decoder layer is relayed once") {
  // Layers: encoder 0, 1 (output 2 KiB), decoders 2, 3, 4, head 5. Edges 1 -> 3, 1 -> 4, 1 -> 5 carry
  // layer 1's output: boundaries 2, 3 and 4 each carry it once beside the chain tensor, however many
  // decoders past them still read it.
  Model m = numbered_chain(6);
  m.edges = {LayerEdge{1, 3, std::nullopt}, LayerEdge{1, 4, std::nullopt}, LayerEdge{1, 5, std::nullopt}};
  const std::vector<double> cut = boundary_bytes(m, works(m));
  CHECK(cut == std::vector<double>{1024, 2048, 3072 + 2048, 4096 + 2048, 5120 + 2048});

  // stage_costs() relays the same bytes: the simulator sends what the partitioner counted.
  const AnalyticCostModel cost = exact_cost();
  for (int last = 0; last + 1 < m.num_layers(); ++last) {
    INFO("boundary after layer " << last);
    const std::vector<LayerRange> ranges = {LayerRange{0, last}, LayerRange{last + 1, m.num_layers() - 1}};
    ParallelConfig pc;
    pc.pp = 2;
    const std::vector<StageCost> sc = stage_costs(m, ranges, Workload{}, pc, exact_cluster(1e18), cost, {0, 1});
    CHECK(sc[0].output_bytes == cut[static_cast<size_t>(last)]);
  }
}

TEST_CASE("model JSON edges round-trip and bad edges name the fix") {
  const std::string text = R"({"name": "skip", "layers": [
      {"forward_s": 1, "output_bytes": 8}, {"forward_s": 1, "output_bytes": 8}, {"forward_s": 1}, {"forward_s": 1}],
    "edges": [[0, 2], [1, 3, 4096]]})";
  const Model m = model_from_json_text(text, "skip.json");
  REQUIRE(m.edges.size() == 2);
  CHECK(m.edges[0] == LayerEdge{0, 2, std::nullopt});
  CHECK(m.edges[1] == LayerEdge{1, 3, 4096.0});
  const std::string out = model_to_json_text(m);
  CHECK(out.find(R"("edges": [)") != std::string::npos);
  const Model back = model_from_json_text(out, "skip.json");
  CHECK(back.edges == m.edges);
  CHECK(model_to_json_text(back) == out);

  // A transformer may carry edges too (layer indices count the embedding and the head).
  const Model t = model_from_json_text(R"({"name": "t", "transformer": {"hidden": 64, "layers": 2, "heads": 4,
      "ffn": 256, "vocab": 100, "seq_len": 16}, "edges": [[0, 3]]})",
                                       "t.json");
  CHECK(t.edges == std::vector<LayerEdge>{LayerEdge{0, 3, std::nullopt}});
  CHECK(model_from_json_text(model_to_json_text(t), "t.json").edges == t.edges);

  const auto with_edges = [](const std::string& edges) {
    return R"({"name": "e", "layers": [{"forward_s": 1}, {"forward_s": 1}, {"forward_s": 1}], "edges": )" + edges + "}";
  };
  CHECK(bad_input([&] { model_from_json_text(with_edges("[[2, 1]]"), "e.json"); }) ==
        "e.json: edges[0] is [2, 1]; give layer indices with 0 <= from < to < 3 (data flows forward)");
  CHECK(bad_input([&] { model_from_json_text(with_edges("[[0, 3]]"), "e.json"); }) ==
        "e.json: edges[0] is [0, 3]; give layer indices with 0 <= from < to < 3 (data flows forward)");
  CHECK(bad_input([&] { model_from_json_text(with_edges("[[0, 1], [0]]"), "e.json"); }) ==
        "e.json: edges[1] is [0]; give [from, to] or [from, to, bytes] with layer indices");
  CHECK(bad_input([&] { model_from_json_text(with_edges("[[0, 2, -5]]"), "e.json"); }) ==
        "e.json: edges[0] has bytes -5; give a figure from 0 to 1e+18 B");
  CHECK(bad_input([&] { model_from_json_text(with_edges("{}"), "e.json"); }) ==
        "e.json: edges must be an array of [from, to] or [from, to, bytes] layer pairs");

  // A model built in code with a backward edge is refused by the graph as well.
  Model back_edge = numbered_chain(3);
  back_edge.edges = {LayerEdge{2, 0, std::nullopt}};
  CHECK(bad_input([&] { boundary_bytes(back_edge, works(back_edge)); }) ==
        "model 'numbered': edge 0 is [2, 0]; give layer indices with 0 <= from < to < 3 (data flows forward)");
}
