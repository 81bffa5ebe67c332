// The micro-batch group of an interleaved schedule: Megatron's (pp, or --group-size) or, for PyTorch,
// torch/distributed/pipelining/schedules.py's Interleaved1F1B at 1f1416a3: number_of_rounds =
// max(1, m // pp), microbatches_per_round = m // number_of_rounds, ValueError unless m % rounds == 0.
#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "sim/scenario.hpp"

using namespace pw;

namespace {

Scenario interleaved(int pp, int m, int group) {
  Scenario s;
  s.schedule = "interleaved";
  s.parallel.pp = pp;
  s.parallel.microbatches = m;
  s.group_size = group;
  return s;
}

}  // namespace

TEST_CASE("interleaved group size: Megatron's pp, a given size, or PyTorch's rounds") {
  CHECK(interleaved_group_size(interleaved(4, 8, 0)) == 4);
  CHECK(interleaved_group_size(interleaved(4, 8, 8)) == 8);
  // PyTorch: m a multiple of pp gives pp; otherwise m over max(1, m // pp) rounds.
  CHECK(interleaved_group_size(interleaved(4, 8, kPyTorchGroupSize)) == 4);
  CHECK(interleaved_group_size(interleaved(4, 12, kPyTorchGroupSize)) == 4);
  CHECK(interleaved_group_size(interleaved(4, 6, kPyTorchGroupSize)) == 6);   // 1 round of 6
  CHECK(interleaved_group_size(interleaved(4, 10, kPyTorchGroupSize)) == 5);  // 2 rounds of 5
  CHECK(interleaved_group_size(interleaved(4, 15, kPyTorchGroupSize)) == 5);  // 3 rounds of 5
  CHECK(schedule_spec(interleaved(4, 10, kPyTorchGroupSize)).group_size == 5);
  try {
    interleaved_group_size(interleaved(4, 9, kPyTorchGroupSize));  // 2 rounds: 9 is odd
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::BadInput);
    CHECK(std::string(e.what()) == "--microbatches: PyTorch's Interleaved1F1B runs 9 micro-batches in 2 rounds of pp 4, "
                                   "which needs a multiple of 2; use 8 or 10");
  }
}
