// Spare nodes: the Poisson nodes-down model and the expected throughput per number of spares, in closed form.
#include <catch2/catch.hpp>

#include <cmath>

#include "core/error.hpp"
#include "core/spare_nodes.hpp"
#include "core/time_to_train.hpp"

using namespace pw;

TEST_CASE("nodes down: Little's law mean and the Poisson probabilities") {
  SparePool pool;
  pool.run_nodes = 128;
  pool.gpus_per_node = 8;
  pool.mtbf_per_gpu_s = kLlama3MtbfPerGpuHours * 3600;
  pool.repair_s = 24 * 3600;
  // 128 x 8 / (54 x 24 x 16384 / 419 h) x 24 h
  CHECK(mean_nodes_down(pool) == Approx(128.0 * 8 * 24 * 419 / (54.0 * 24 * 16384)).epsilon(1e-12));
  CHECK(poisson_pmf(0.5, 0) == Approx(std::exp(-0.5)).epsilon(1e-14));
  CHECK(poisson_pmf(0.5, 2) == Approx(0.125 * std::exp(-0.5)).epsilon(1e-14));
  CHECK(poisson_pmf(0, 0) == 1);
  CHECK(poisson_pmf(0, 1) == 0);
  pool.mtbf_per_gpu_s = 0;  // no failures
  CHECK(mean_nodes_down(pool) == 0);
}

TEST_CASE("the expected throughput with S spares beside the run: the plan while no more than S are down, the template for the nodes short otherwise") {
  SparePool pool;
  pool.run_nodes = 10;
  pool.gpus_per_node = 1;
  pool.mtbf_per_gpu_s = 20;
  pool.repair_s = 1;  // mu = 10 / 20 x 1 = 0.5
  const double mu = 0.5;
  const double p0 = std::exp(-mu), p1 = mu * p0, p2 = mu * mu / 2 * p0, p3 = mu * mu * mu / 6 * p0;
  const std::vector<double> t{10, 8, 6};
  const SpareOutcome none = with_spares(pool, 0, t);
  CHECK(none.expected_tokens_per_s == Approx(p0 * 10 + p1 * 8 + (1 - p0 - p1) * 6).epsilon(1e-12));
  CHECK(none.short_probability == Approx(1 - p0).epsilon(1e-12));
  const SpareOutcome one = with_spares(pool, 1, t);
  CHECK(one.expected_tokens_per_s == Approx((p0 + p1) * 10 + p2 * 8 + (1 - p0 - p1 - p2) * 6).epsilon(1e-12));
  CHECK(one.short_probability == Approx(1 - p0 - p1).epsilon(1e-12));
  const SpareOutcome two = with_spares(pool, 2, t);
  CHECK(two.expected_tokens_per_s == Approx((p0 + p1 + p2) * 10 + p3 * 8 + (1 - p0 - p1 - p2 - p3) * 6).epsilon(1e-12));
  CHECK(two.short_probability == Approx(1 - p0 - p1 - p2).epsilon(1e-12));
  // Spares enough: the plan's own throughput, the limit the time to train without spares assumes.
  CHECK(with_spares(pool, 10, t).expected_tokens_per_s == Approx(10).epsilon(1e-9));
  CHECK_THROWS_AS(with_spares(pool, -1, t), Error);
  // Enough templates that the tail past the last is below 1e-4: P(D > 4) = 1.7e-4, P(D > 5) = 1.4e-5.
  CHECK(templates_needed(pool) == 6);
}
