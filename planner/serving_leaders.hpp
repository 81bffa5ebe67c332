#pragma once
// The serving search's best plans so far, shared by its threads. What a configuration cannot beat
// (serving/serving_replicas.hpp, ServingFloor: a makespan, and each request's time per output token) caps the
// output tokens and the good requests it can serve a second, and says when it cannot meet the SLOs; where those
// caps rank it strictly below the top-th plan already simulated, it cannot be among the plans reported and is not
// simulated. The plans reported are the same whatever is dropped.
#include <mutex>
#include <vector>

#include "planner/serving_plan.hpp"
#include "serving/serving_replicas.hpp"

namespace pw {

// Whether `a` ranks before `b`: with SLOs, those meeting them first, then by good requests a second; then by
// output tokens a second.
bool serving_plan_before(const ServingPlan& a, const ServingPlan& b, bool by_slo);

class ServingLeaders {
 public:
  // top 0: every plan is reported, none dropped. The workload's outputs and requests make the caps.
  ServingLeaders(int top, const ServingSlo& slo, const std::vector<ServingRequest>& requests);

  // Whether `top` plans already added rank before any configuration `floor` holds for (a makespan of 0 knows
  // nothing: never).
  bool excludes(const ServingFloor& floor) const;
  void add(const ServingPlan& plan);
  // Whether what it excludes can only grow from here: `top` plans held, or top 0 (it never excludes).
  bool settled() const;

 private:
  int top_;
  ServingSlo slo_;
  double outputs_ = 0, requests_ = 0;
  long single_outputs_ = 0;  // requests of one output token: no time per output token to miss
  mutable std::mutex mutex_;
  std::vector<ServingPlan> best_;  // best first, at most top_
};

}  // namespace pw
