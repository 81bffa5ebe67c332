// json_file_text: the files pipewright writes to read again never hold a number JSON cannot.
#include <catch2/catch.hpp>

#include <limits>
#include <string>

#include "core/error.hpp"
#include "core/json_text.hpp"

namespace {

std::string runtime_error(const nlohmann::ordered_json& doc) {
  try {
    pw::json_file_text(doc, "plan");
  } catch (const pw::Error& e) {
    CHECK(e.kind() == pw::ErrorKind::Runtime);
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("a written file keeps its key order, two-space indented, with a final newline") {
  nlohmann::ordered_json doc;
  doc["z"] = 1.5;
  doc["a"] = {1, 2};
  CHECK(pw::json_file_text(doc, "plan") == "{\n  \"z\": 1.5,\n  \"a\": [\n    1,\n    2\n  ]\n}\n");
  CHECK(pw::json_file_text(nlohmann::json{{"z", 1}, {"a", 2}}, "plan") == "{\n  \"a\": 2,\n  \"z\": 1\n}\n");
}

TEST_CASE("a number that is not finite is refused, naming its field, before anything is written") {
  const double inf = std::numeric_limits<double>::infinity();
  nlohmann::ordered_json doc;
  doc["links"] = nlohmann::ordered_json::array();
  doc["links"].push_back({{"latency_s", 1e-6}, {"bandwidth_bytes_per_s", 1e9}});
  doc["links"].push_back({{"latency_s", 1e-6}, {"bandwidth_bytes_per_s", inf}});
  CHECK(runtime_error(doc) ==
        "plan: links[1].bandwidth_bytes_per_s is not a finite number, which JSON cannot hold (it would be written as "
        "null and read back as the default); nothing was written");
  nlohmann::ordered_json nested;
  nested["a"]["b"] = {{1.0, 2.0}, {3.0, -inf}};
  CHECK(runtime_error(nested).rfind("plan: a.b[1][1] is not a finite number", 0) == 0);
  CHECK(runtime_error(nlohmann::ordered_json(std::numeric_limits<double>::quiet_NaN())) ==
        "plan: the top level is not a finite number, which JSON cannot hold (it would be written as null and read "
        "back as the default); nothing was written");
}
