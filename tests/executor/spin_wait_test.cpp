// The short spin a rank thread makes before it sleeps at a receive or a barrier.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "executor/spin_wait.hpp"

TEST_CASE("rank threads spin only when each can have a core") {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  REQUIRE(cores >= 1);
  CHECK(pw::spin_allowed(1));
  CHECK(pw::spin_allowed(cores));
  CHECK_FALSE(pw::spin_allowed(cores + 1));
  CHECK_FALSE(pw::spin_allowed(0));
}

TEST_CASE("a spin ends when the counter moves, or gives up after its window") {
  std::atomic<unsigned long> counter{5};
  // Already moved past what the waiter saw: no wait at all.
  CHECK(pw::spin_until_changed(counter, 4));
  // Nothing moves: false, and not before the window has passed.
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_FALSE(pw::spin_until_changed(counter, 5));
  CHECK(std::chrono::steady_clock::now() - t0 >= pw::kSpinBeforeSleep);
}
