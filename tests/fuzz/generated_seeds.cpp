#include "generated_seeds.hpp"

#include "executor/host_tensor.hpp"
#include "executor/message_wire.hpp"
#include "executor/record_wire.hpp"
#include "schedules/generators.hpp"
#include "schedules/pytorch_csv.hpp"
#include "wire_run.hpp"

namespace pw::fuzz {
namespace {

std::vector<std::byte> bytes_of(const std::string& text) {
  const auto* p = reinterpret_cast<const std::byte*>(text.data());
  return {p, p + text.size()};
}

// Messages without a tensor, with a small tensor and with an empty one.
std::vector<NamedSeed> message_wire_seeds() {
  const Clock::time_point sent = wire_since() + std::chrono::microseconds(250);
  Mat values(2, 3);
  values << 1, 2, 3, 4, 5, 6;
  const auto wire = [&](MessageKey key, TensorPtr tensor, long flow_id) {
    return message_to_wire(key, Message{std::move(tensor), sent, flow_id}, wire_since());
  };
  return {{"no-tensor", wire({0, Op::SendF, 1, 2}, nullptr, 7)},
          {"tensor-2x3", wire({1, Op::SendB, 2, 0}, std::make_shared<HostTensor>(values), 8)},
          {"tensor-empty", wire({0, Op::SendF, 0, 0}, std::make_shared<HostTensor>(Mat(0, 4)), 9)}};
}

// Rank 0's records of wire_run() as they are (empty), rank 3's with events and memory samples.
std::vector<NamedSeed> record_wire_seeds() {
  std::vector<IterationRecord> run = wire_run();
  for (IterationRecord& it : run) {
    RankIteration& r = it.ranks[3];
    r.busy_s = 0.5;
    r.busy_cpu_s = 0.4;
    r.end_s = 1.0;
    r.activation_peak_bytes = 4096;
    r.events.push_back({3, Lane::Compute, Action{Op::F, 3, 0}, 0.0, 0.25, 0, -1});
    r.events.push_back({3, Lane::Send, Action{Op::SendF, 3, 0}, 0.25, 0.3, 2048, 5});
    r.memory.push_back({0.0, 0});
    r.memory.push_back({0.25, 4096});
  }
  return {{"rank-0-empty", rank_records_to_wire(0, run, 0)}, {"rank-3", rank_records_to_wire(3, run, 4096)}};
}

// Every family on two ranks and four micro-batches (two chunks where the family takes them), compute-only
// and lowered.
std::vector<Schedule> seed_schedules() {
  std::vector<Schedule> out;
  for (const std::string& name : schedule_names()) {
    ScheduleSpec spec{name, 2, 4};
    spec.chunks = chunks_per_rank(name, 2);
    const Schedule s = make_schedule(spec);
    out.push_back(s);
    out.push_back(lower(s));
  }
  return out;
}

// PyTorch's CSV holds one copy of the model (check_pytorch_csv_copies): dualpipe's seeds are JSON only.
std::vector<NamedSeed> schedule_seeds(std::string (*write)(const Schedule&), const char* extension, int most_copies) {
  std::vector<NamedSeed> seeds;
  for (const Schedule& s : seed_schedules())
    if (s.copies <= most_copies) seeds.push_back({s.name + (s.lowered ? "-lowered" : "") + extension, bytes_of(write(s))});
  return seeds;
}

}  // namespace

std::vector<NamedSeed> generated_seeds(const std::string& target) {
  if (target == "message_wire") return message_wire_seeds();
  if (target == "record_wire") return record_wire_seeds();
  if (target == "schedule_json") return schedule_seeds(schedule_to_json_text, ".json", 2);
  if (target == "schedule_csv") return schedule_seeds(schedule_to_pytorch_csv, ".csv", 1);
  return {};
}

}  // namespace pw::fuzz
