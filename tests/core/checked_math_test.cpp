#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>

#include "core/checked_math.hpp"
#include "core/error.hpp"

using namespace pw;

TEST_CASE("checked_product: exact below int64, nothing past it or for negative factors") {
  CHECK(checked_product({}) == 1);
  CHECK(checked_product({1000000000, 8}) == 8000000000LL);
  CHECK(checked_product({std::int64_t{1} << 31, std::int64_t{1} << 31}) == (std::int64_t{1} << 62));
  CHECK_FALSE(checked_product({std::int64_t{1} << 32, std::int64_t{1} << 31}).has_value());
  CHECK_FALSE(checked_product({4, -1}).has_value());
  CHECK(checked_product({0, std::numeric_limits<std::int64_t>::max()}) == 0);
}

TEST_CASE("checked_sum: exact or nothing") {
  CHECK(checked_sum({1, 2, 3}) == 6);
  CHECK_FALSE(checked_sum({std::numeric_limits<std::int64_t>::max(), 1}).has_value());
}

TEST_CASE("bounded_product: the product, or one line naming the quantity, its factors, the limit and the fix") {
  CHECK(bounded_product({8, 4}, 32, "actions", "fix") == 32);
  try {
    bounded_product({1000000000, 8}, 1000000, "global batch (--dp x --microbatches x --micro-batch-size)",
                    "lower --microbatches");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::BadInput);
    CHECK(std::string(e.what()) ==
          "global batch (--dp x --microbatches x --micro-batch-size) = 1000000000 x 8 is beyond 1000000; "
          "lower --microbatches");
  }
  CHECK_THROWS_AS(bounded_product({std::int64_t{1} << 40, std::int64_t{1} << 40}, std::numeric_limits<std::int64_t>::max(),
                                  "x", "y"),
                  Error);
}

TEST_CASE("is_normal_or_zero: denormals, infinities and NaN are not") {
  CHECK(is_normal_or_zero(0.0));
  CHECK(is_normal_or_zero(312e12));
  CHECK(is_normal_or_zero(-1.0));
  CHECK_FALSE(is_normal_or_zero(1e-310));
  CHECK_FALSE(is_normal_or_zero(std::numeric_limits<double>::infinity()));
  CHECK_FALSE(is_normal_or_zero(std::numeric_limits<double>::quiet_NaN()));
}
