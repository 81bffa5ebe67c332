#include <string>

#include "calibrate/calibration.hpp"
#include "calibrate/run_record.hpp"
#include "core/cluster.hpp"
#include "core/json_text.hpp"
#include "core/model.hpp"
#include "planner/plan_file.hpp"
#include "profiler/profile.hpp"
#include "schedules/ir.hpp"
#include "schedules/pytorch_csv.hpp"
#include "schedules/validate.hpp"
#include "fuzz_targets.hpp"
#include "read_or_refuse.hpp"

namespace pw::fuzz {
namespace {

std::string text_of(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// The model target and the Hugging Face target each drive one of the two readers model_from_json_text picks
// between, whatever keys the input has, so that each keeps a corpus of its own form.
template <typename Reader>
void read_model_object(const std::uint8_t* data, std::size_t size, Reader reader) {
  read_or_refuse([&] {
    const nlohmann::json j = parse_json_text(text_of(data, size), "fuzz.json");
    if (j.is_object()) reader(j, "fuzz.json");
  });
}

}  // namespace

void fuzz_model_json(const std::uint8_t* data, std::size_t size) {
  read_model_object(data, size, detail::model_from_pipewright_json);
}

void fuzz_hf_config(const std::uint8_t* data, std::size_t size) {
  read_model_object(data, size, detail::model_from_hf_config);
}

void fuzz_cluster(const std::uint8_t* data, std::size_t size) {
  read_or_refuse([&] { cluster_from_json_text(text_of(data, size), "fuzz.json"); });
}

void fuzz_plan(const std::uint8_t* data, std::size_t size) {
  read_or_refuse([&] { plan_from_json_text(text_of(data, size), "fuzz.json"); });
}

void fuzz_profile(const std::uint8_t* data, std::size_t size) {
  read_or_refuse([&] { profile_from_json_text(text_of(data, size), "fuzz.json"); });
}

void fuzz_calibration(const std::uint8_t* data, std::size_t size) {
  read_or_refuse([&] { calibration_from_json_text(text_of(data, size), "fuzz.json"); });
}

// Reading a schedule JSON checks its structure only; every reader of one validates it next (as the CSV
// reader does itself), so the target does both.
void fuzz_schedule_json(const std::uint8_t* data, std::size_t size) {
  read_or_refuse([&] { validate(schedule_from_json_text(text_of(data, size), "fuzz.json")); });
}

void fuzz_schedule_csv(const std::uint8_t* data, std::size_t size) {
  read_or_refuse([&] { schedule_from_pytorch_csv(text_of(data, size), "fuzz.csv"); });
}

void fuzz_run_record(const std::uint8_t* data, std::size_t size) {
  read_or_refuse([&] { run_from_json_text(text_of(data, size), "fuzz.json"); });
}

void fuzz_run_trace(const std::uint8_t* data, std::size_t size) {
  read_or_refuse([&] { trace_from_json_text(text_of(data, size), "fuzz.json"); });
}

}  // namespace pw::fuzz
