#include "schedules/svg.hpp"

#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "schedules/generators.hpp"
#include "schedules/timing.hpp"
#include "../golden.hpp"
#include "../text_match.hpp"

using namespace pw;

namespace {
std::string error_of(const std::vector<TimedAction>& boxes, const Placement& placement, double span, int width) {
  try {
    schedule_svg(boxes, placement, span, SvgOptions{"", width});
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST_CASE("svg: one box per compute action, labelled, placed on the time axis") {
  // 1F1B on 2 ranks, 2 micro-batches, F = 1, B = 1, W = 1 s: 8 compute actions over 9 s.
  const Schedule s = make_schedule({"1f1b", 2, 2});
  const ScheduleTiming timing = asap_timing(s, StageTimes::uniform(2, 1, 1, 1));
  const std::string svg = schedule_svg(timed_actions(lower(s), asap_timing(lower(s), StageTimes::uniform(2, 1, 1, 1))),
                                       s.placement, timing.makespan, SvgOptions{"1f1b <p=2>", 1000});
  CHECK(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"1000\"", 0) == 0);
  CHECK(count(svg, "<g><title>") == 8);  // sends and receives are not drawn
  CHECK(svg.find("1f1b &lt;p=2&gt;") != std::string::npos);
  // Rank 1's F of micro-batch 0 runs from 1 s to 2 s: x = 76 + 1/9 of the 912 pixels of plot.
  CHECK(svg.find("<g><title>rank 1: 1F0 (F, stage 1) 1.000 s to 2.000 s</title><rect x=\"177.33\" y=\"67\" "
                 "width=\"101.33\" height=\"24\" fill=\"#4e79a7\"") != std::string::npos);
  CHECK(svg.find("dominant-baseline=\"middle\">0</text></g>") != std::string::npos);
  CHECK(svg.find("fill=\"#b07aa1\"") != std::string::npos);  // BW
  CHECK(svg.substr(svg.size() - 7) == "</svg>\n");
}

TEST_CASE("svg: the second chunk of a rank is lighter, composites show both micro-batches") {
  const Schedule s = make_schedule({"dualpipev", 2, 4});
  const ScheduleTiming timing = asap_timing(s, StageTimes::uniform(4, 1, 1, 1));
  const std::string svg = schedule_svg(timed_actions(s, timing), s.placement, timing.makespan, SvgOptions{});
  CHECK(count(svg, "<g><title>") == 31);
  CHECK(svg.find("fill=\"#4e79a7\"") != std::string::npos);  // chunk-0 F
  CHECK(svg.find("fill=\"#9db5ce\"") != std::string::npos);  // chunk-1 F, 45% towards white
  CHECK(svg.find(">0/1</text>") == std::string::npos);
  CHECK(svg.find(">3/1</text>") != std::string::npos);  // 0F3&3BW1
}

TEST_CASE("svg: the picture of 1f1b on 2 ranks matches the golden file") {
  const Schedule s = make_schedule({"1f1b", 2, 2});
  const ScheduleTiming timing = asap_timing(s, StageTimes::uniform(2, 1, 2, 1));
  const std::string svg = schedule_svg(timed_actions(s, timing), s.placement, timing.makespan, SvgOptions{"1f1b", 600});
  check_golden("schedules/1f1b-p2-m2.svg", svg);
}

TEST_CASE("svg: bad input names what is wrong") {
  const Placement p = Placement::loop(2, 1);
  CHECK(error_of({}, p, 0, 800) == "svg: the time span must be positive, got 0");
  CHECK(error_of({}, p, 1, 100) == "svg: width must be at least 200 pixels, got 100");
  CHECK(error_of({TimedAction{2, Action{Op::F, 0, 0}, 0, 1}}, p, 1, 800) ==
        "svg: an action on rank 2, but the placement has 2 ranks");
  CHECK(error_of({TimedAction{0, Action{Op::F, 5, 0}, 0, 1}}, p, 1, 800) ==
        "svg: action '5F0' names stage 5, but the placement has 2 stages");
}
