// Each layer's work with runs of one shape sharing one LayerWork: every layer reads what layer_work() gives it,
// and a model holds one LayerWork per run, not per layer.
#include <catch2/catch.hpp>

#include <vector>

#include "core/layer_works.hpp"
#include "core/model.hpp"

using namespace pw;

namespace {

LayerWork with_parameters(double p) {
  LayerWork w;
  w.parameters = p;
  return w;
}

std::vector<double> parameters_of(const LayerWorks& works) {
  std::vector<double> out;
  for (const LayerWork& w : works) out.push_back(w.parameters);
  return out;
}

}  // namespace

TEST_CASE("LayerWorks: a layer repeating the one before shares its work") {
  LayerWorks works;
  CHECK(works.empty());
  works.push_back(with_parameters(1));
  works.repeat_last();
  works.repeat_last();
  works.push_back(with_parameters(2));
  works.push_back(with_parameters(3));
  works.repeat_last();
  CHECK(works.size() == 6);
  CHECK(works.distinct() == 3);
  CHECK(parameters_of(works) == std::vector<double>{1, 1, 1, 2, 3, 3});
  CHECK(&works[0] == &works[2]);
  CHECK(&works[2] != &works[3]);
  CHECK(works.front().parameters == 1);
  CHECK(works.back().parameters == 3);

  // Layers 2..4 of it: the runs stay shared (1 | 2 | 3, 3), and a run cut at the start is one work.
  LayerWorks part;
  part.append(works, 2, 6);
  CHECK(parameters_of(part) == std::vector<double>{1, 2, 3, 3});
  CHECK(part.distinct() == 3);

  // From a vector: each layer its own.
  const LayerWorks each(std::vector<LayerWork>{with_parameters(4), with_parameters(4)});
  CHECK(each.distinct() == 2);
  CHECK(parameters_of(each) == std::vector<double>{4, 4});
}

TEST_CASE("append_layer_works: every layer's work as layer_work gives it, one per run of a shape") {
  const Model m = model_preset("deepseek-v3");  // the embedding, 3 dense blocks, 58 MoE blocks, MTP, the head
  Workload w;
  w.micro_batch_size = 1;
  LayerWorks works;
  append_layer_works(m, 0, m.num_layers() - 1, w, works);
  REQUIRE(works.size() == m.layers.size());
  CHECK(works.distinct() == 5);
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const LayerWork alone = layer_work(m, m.layers[i], w);
    INFO("layer " << i);
    CHECK(works[i].parameters == alone.parameters);
    CHECK(works[i].activation_bytes == alone.activation_bytes);
    CHECK(works[i].forward.flops() == alone.forward.flops());
    CHECK(works[i].backward_input.memory_bytes == alone.backward_input.memory_bytes);
  }
  // A range starting inside a run works its first layer anew.
  LayerWorks tail;
  append_layer_works(m, 10, 20, w, tail);
  CHECK(tail.size() == 11);
  CHECK(tail.distinct() == 1);
  CHECK(tail[0].parameters == works[10].parameters);
}
