#include "fuzz_targets.hpp"

namespace pw::fuzz {

const std::vector<FuzzTarget>& fuzz_targets() {
  static const std::vector<FuzzTarget> targets{
      {"model_json", fuzz_model_json},     {"hf_config", fuzz_hf_config},
      {"cluster", fuzz_cluster},           {"plan", fuzz_plan},
      {"profile", fuzz_profile},           {"calibration", fuzz_calibration},
      {"schedule_json", fuzz_schedule_json}, {"schedule_csv", fuzz_schedule_csv},
      {"run_record", fuzz_run_record},     {"run_trace", fuzz_run_trace},
      {"message_wire", fuzz_message_wire}, {"record_wire", fuzz_record_wire},
  };
  return targets;
}

}  // namespace pw::fuzz
