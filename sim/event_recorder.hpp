#pragma once
// An observer that keeps every simulated event, for views drawn after the run (the terminal timeline).
#include <vector>

#include "sim/pipeline_sim.hpp"

namespace pw {

class EventRecorder : public SimObserver {
 public:
  void on_event(const SimEvent& e) override { events_.push_back(e); }
  const std::vector<SimEvent>& events() const { return events_; }

 private:
  std::vector<SimEvent> events_;
};

}  // namespace pw
