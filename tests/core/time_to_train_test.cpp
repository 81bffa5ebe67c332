// Time and cost to train: Daly's checkpoint interval and expected wall time (FGCS 2006) in closed form,
// token counts as people write them, and the figures a run is refused for.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "core/error.hpp"
#include "core/time_to_train.hpp"
#include "../error_text.hpp"

using namespace pw;

TEST_CASE("Daly's optimum checkpoint interval and expected wall time") {
  // d = 60 s, M = 1e5 s: sqrt(2 d M) (1 + sqrt(d / 2M) / 3 + d / 18M) - d.
  const double tau = daly_checkpoint_interval(60, 1e5);
  CHECK(tau == Approx(std::sqrt(2 * 60 * 1e5) * (1 + std::sqrt(60 / 2e5) / 3 + 60 / 18e5) - 60).epsilon(1e-15));
  CHECK(tau == Approx(3424.2170851915926).epsilon(1e-12));
  // Far below the MTBF it is Young's sqrt(2 d M) less the write, to first order.
  CHECK(daly_checkpoint_interval(1, 1e9) == Approx(std::sqrt(2e9) - 1).epsilon(1e-4));
  // A write as long as twice the MTBF: checkpoint once an MTBF.
  CHECK(daly_checkpoint_interval(300, 100) == 100);
  // T_w = M e^(R/M) (e^((tau + d)/M) - 1) T_s / tau: 1e6 s of work, R = 600 s.
  CHECK(daly_wall_time(1e6, tau, 60, 600, 1e5) == Approx(1041687.6894584269).epsilon(1e-12));
}

TEST_CASE("a training run: wall time, interruptions, goodput, GPU-hours and cost") {
  TrainingRunSpec spec;
  spec.tokens = 1e12;
  spec.gpus = 1000;
  spec.mtbf_per_gpu_s = 1e8;  // 1e5 s over the 1000 GPUs
  spec.checkpoint_write_s = 60;
  spec.restart_s = 600;
  spec.price_per_gpu_hour = 2.5;
  const TrainingRunCost c = training_run_cost(spec, 1e6);  // 1e6 tokens/s: 1e6 s of compute
  CHECK(c.compute_s == 1e6);
  CHECK(c.checkpoint_interval_s == Approx(3424.2170851915926).epsilon(1e-12));
  CHECK(c.wall_s == Approx(1041687.6894584269).epsilon(1e-12));
  CHECK(c.interruptions == Approx(10.416876894584268).epsilon(1e-12));
  CHECK(c.goodput == Approx(0.9599806257861219).epsilon(1e-12));
  CHECK(c.gpu_hours == Approx(1041687.6894584269 * 1000 / 3600).epsilon(1e-12));
  CHECK(*c.cost == Approx(c.gpu_hours * 2.5).epsilon(1e-15));
  // Without failures: the compute time alone, no checkpoint for them.
  spec.mtbf_per_gpu_s = 0;
  const TrainingRunCost ideal = training_run_cost(spec, 1e6);
  CHECK(ideal.wall_s == 1e6);
  CHECK(ideal.goodput == 1);
  CHECK(ideal.interruptions == 0);
  CHECK(ideal.checkpoint_interval_s == 0);
  // The default rate is Llama 3 405B's: 419 interruptions in 54 days on 16,384 GPUs.
  CHECK(kLlama3MtbfPerGpuHours == Approx(50677.00238663484).epsilon(1e-14));
}

TEST_CASE("token counts as people write them, malformed ones and bad figures are refused naming the option") {
  CHECK(parse_token_count("15T", "--train-tokens") == 15e12);
  CHECK(parse_token_count("300B", "--train-tokens") == 300e9);
  CHECK(parse_token_count("2.5e12", "--train-tokens") == 2.5e12);
  CHECK(parse_token_count("1,000M", "--train-tokens") == 1e9);
  CHECK(parse_token_count("40k", "--train-tokens") == 40e3);
  for (const char* bad : {"15Q", "T", "", "-5T", "0", "1e400T"})
    CHECK(bad_input([&] { parse_token_count(bad, "--train-tokens"); }) ==
          std::string("--train-tokens: '") + bad +
              "' is not a token count; write a positive number with an optional K, M, B or T, such as 15T");
  TrainingRunSpec spec;
  spec.tokens = 1e9;
  spec.gpus = 8;
  spec.price_per_gpu_hour = -1;
  CHECK(bad_input([&] { training_run_cost(spec, 1e3); }) ==
        "--gpu-hour-price: must be from 0 to 1e+06 a GPU-hour, got -1");
  spec.price_per_gpu_hour.reset();
  spec.mtbf_per_gpu_s = -3600;
  CHECK(bad_input([&] { training_run_cost(spec, 1e3); }) ==
        "--mtbf-per-gpu: must be 0 (no failures) or from 1 to 1e+09 hours, got -1");
  spec.mtbf_per_gpu_s = 3600;
  spec.checkpoint_write_s = 0;
  CHECK(bad_input([&] { training_run_cost(spec, 1e3); }) == "--checkpoint-write: must be from 0.001 to 1e+06 s, got 0");
}

TEST_CASE("every figure of a training run has a range, and failures that leave no time to train are refused") {
  TrainingRunSpec spec;
  spec.tokens = 1e9;
  spec.gpus = 8;
  for (const double tokens : {1e300, 1e-310, 0.5})
    CHECK(bad_input([&] {
            TrainingRunSpec s = spec;
            s.tokens = tokens;
            training_run_cost(s, 1e3);
          }) == fmt::format("--train-tokens: must be a token count from 1 to 1e+18, got {:g}", tokens));
  TrainingRunSpec big = spec;
  big.tokens = 1e18;  // the top of the range: finite figures throughout
  big.price_per_gpu_hour = 1e6;
  const TrainingRunCost top = training_run_cost(big, 1);
  CHECK(std::isfinite(top.wall_s));
  CHECK(std::isfinite(*top.cost));
  spec.mtbf_per_gpu_s = 1e-9 * 3600;
  CHECK(bad_input([&] { training_run_cost(spec, 1e3); }) ==
        "--mtbf-per-gpu: must be 0 (no failures) or from 1 to 1e+09 hours, got 1e-09");
  spec.mtbf_per_gpu_s = 3600;
  spec.checkpoint_write_s = 1e308;
  CHECK(bad_input([&] { training_run_cost(spec, 1e3); }) == "--checkpoint-write: must be from 0.001 to 1e+06 s, got 1e+308");
  spec.checkpoint_write_s = 60;
  spec.restart_s = std::numeric_limits<double>::quiet_NaN();
  CHECK(bad_input([&] { training_run_cost(spec, 1e3); }) == "--restart: must be from 0 to 1e+06 s, got nan");
  // One failure an hour on each of 16,384 GPUs: one every 0.22 s against 600 s restarts; Daly's wall time is
  // infinite (e^(600 / 0.22)), whatever the throughput.
  spec.restart_s = 600;
  spec.gpus = 16384;
  CHECK(bad_input([&] { training_run_cost(spec, 1e3); }) ==
        "--mtbf-per-gpu: a failure every 0.22 s on all 16384 GPUs leaves under 0.1% of the time training (restarts "
        "of 600 s, checkpoints of 60 s); give a longer --mtbf-per-gpu or a shorter --restart and --checkpoint-write");
  // At 1,000 h a GPU a failure comes every 220 s: slow, but the run trains (goodput well above the floor).
  spec.mtbf_per_gpu_s = 1000 * 3600;
  const TrainingRunCost slow = training_run_cost(spec, 1e3);
  CHECK(slow.goodput > kMinGoodput);
  CHECK(slow.goodput < 0.5);
}
