// `pipewright compare`, `pipewright show` and simulate's schedule options (--schedule-csv,
// --export-csv, --no-sync-optimizer, --max-pending) on the tiny explicit-cost model: 8 layers of
// F = B = W = 1 ms on the ideal cluster (free links, no memory limit), so step times are exact closed
// forms plus the small optimizer step the cost model adds.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_test_util.hpp"
#include "../temp_folder.hpp"
#include "schedules/generators.hpp"
#include "schedules/pytorch_csv.hpp"
#include "../text_match.hpp"

namespace {

std::vector<std::string> tiny(std::vector<std::string> args, int pp = 4, int m = 8) {
  std::vector<std::string> base = {"--model",        source_path("examples/tiny-uniform.json"),
                                   "--cluster",      "ideal",
                                   "--pp",           std::to_string(pp),
                                   "--microbatches", std::to_string(m)};
  base.insert(base.begin(), args.begin(), args.end());
  return base;
}



nlohmann::json run_json(std::vector<std::string> args) {
  args.push_back("--json");
  const CliResult r = run_cli(args);
  INFO(r.err);
  REQUIRE(r.code == 0);
  return nlohmann::json::parse(r.out);
}

}  // namespace

TEST_CASE("compare: one row per schedule, the ones that cannot run say why") {
  // 4 ranks of 2 layers: F = B = W = 2 ms per stage, m = 6. 1F1B takes (m + p - 1) 6 ms = 54 ms,
  // breadth-first with 2 chunks m 2 (3 ms) + (p - 1) 3 ms = 45 ms; dualpipev needs m >= 2p.
  const CliResult r = run_cli(tiny({"compare", "--schedules", "1f1b,dualpipev,bfs"}, 4, 6));
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out ==
        "tiny-uniform on ideal: tp 1, pp 4, dp 1, 6 micro-batches of 1, no memory limit\n"
        "\n"
        "schedule    step time   bubble    peak mem  peak mem per rank                   p2p/iter  fits\n"
        "1f1b         54.03 ms    33.4%     68.0 MB  68.0/60.0/52.0/44.0 MB               36.0 MB  yes\n"
        "dualpipev  cannot run: --microbatches: dualpipev needs at least 2 x --pp (8) micro-batches, got 6; use 8 or "
        "more\n"
        "bfs          45.03 ms    20.0%     84.0 MB  84.0/80.0/72.0/64.0 MB               84.0 MB  yes\n");
}

TEST_CASE("simulate --schedule dualpipe: two copies of the model, half the micro-batches each, DualPipe's bubble") {
  // 4 ranks, the 8 layers in 4 parts of 2 (F = B = W = 2 ms a stage), each rank holding part r of the first copy
  // and part 3 - r of the second. With m = 8: m (F + B + W) = 48 ms of work a rank, plus DualPipe's bubble
  // (p/2 - 1)(F&B + B_full - 3W) = (6 + 4 - 6) ms = 52 ms, and the small optimizer step.
  const nlohmann::json j = run_json(tiny({"simulate", "--schedule", "dualpipe"}, 4, 8));
  const double optimizer = j["step_time_s"].get<double>() - 0.052;
  CHECK(optimizer >= 0);
  CHECK(optimizer < 1e-4);
  REQUIRE(j["stages"].size() == 8);
  for (int k = 0; k < 4; ++k) {
    const nlohmann::json& first = j["stages"][k];
    const nlohmann::json& second = j["stages"][4 + k];
    CHECK(first["rank"] == k);
    CHECK(second["rank"] == 3 - k);
    CHECK(first["layers"] == std::vector<int>{2 * k, 2 * k + 1});
    CHECK(second["layers"] == first["layers"]);
    // DualPipe's README: PP + 1 activation sets a device.
    CHECK(first["peak_inflight_microbatches"] == 5);
    CHECK(first["busy_s"].get<double>() == Approx(0.048).epsilon(1e-12));
  }
  // What the IR cannot be run or written as yet: each refusal names the option and the one-copy form.
  const CliResult csv = run_cli(tiny({"simulate", "--schedule", "dualpipe", "--export-csv", "never-written.csv"}, 4, 8));
  CHECK(csv.code == 2);
  CHECK(csv.err ==
        "error: --export-csv: schedule dualpipe runs 2 copies of the model, half the micro-batches each, and PyTorch's "
        "pipelining sends every micro-batch through every stage; export dualpipev, its one-copy V form\n");
  CHECK(csv.out.empty());
  const CliResult odd = run_cli(tiny({"simulate", "--schedule", "dualpipe"}, 3, 8));
  CHECK(odd.code == 2);
  CHECK(odd.err == "error: --pp: dualpipe runs the two copies' halves on an even number of ranks, got 3; use --pp 4 or "
                   "--schedule dualpipev\n");
}

TEST_CASE("compare --json: the same numbers for programs") {
  const nlohmann::json j = run_json(tiny({"compare", "--schedules", "1f1b,zb-h1,zb-v"}));
  REQUIRE(j["schedules"].size() == 3);
  const double optimizer = j["schedules"][0]["step_time_s"].get<double>() - 0.066;  // (8 + 3) x 6 ms
  CHECK(optimizer >= 0);
  CHECK(optimizer < 1e-4);
  // ZB-H1: m (F + B + W) + (p - 1)(F + B - W) = 48 + 6 ms; ZB-V: 6 m f + (p - 1) f with f = 1 ms = 51 ms.
  CHECK(j["schedules"][1]["step_time_s"].get<double>() == Approx(0.054 + optimizer).epsilon(1e-9));
  CHECK(j["schedules"][2]["step_time_s"].get<double>() == Approx(0.051 + optimizer).epsilon(1e-9));
  CHECK(j["schedules"][2]["p2p_bytes_per_iteration"].get<double>() ==
        2 * j["schedules"][0]["p2p_bytes_per_iteration"].get<double>());
  CHECK(j["schedules"][0]["fits"] == true);
  CHECK(j["schedules"][0]["ranks"].size() == 4);
}

TEST_CASE("compare: bad input names the option") {
  CliResult r = run_cli(tiny({"compare", "--schedules", "1f1b,zb-h3"}));
  CHECK(r.code == 2);
  CHECK(r.err ==
        "error: --schedules: unknown schedule 'zb-h3'; known: 1f1b, bfs, dualpipe, dualpipev, gpipe, interleaved, "
        "interleaved-overlap, v-half, v-min, zb-auto, zb-h1, zb-h2, zb-v\n");
  r = run_cli(tiny({"compare", "--schedules", "1f1b,,zb-h1"}));
  CHECK(r.err ==
        "error: --schedules: an empty name in '1f1b,,zb-h1'; give names separated by commas, such as "
        "1f1b,zb-h1,zb-v\n");
  r = run_cli(tiny({"compare", "--schedules", "1f1b", "--schedule", "zb-h1"}));
  CHECK(r.err == "error: --schedule: compare runs the list in --schedules; drop --schedule\n");
}

TEST_CASE("show --svg: one box per compute action, the terminal view by default") {
  const std::string svg = tmp("show-zbv.svg");
  CliResult r = run_cli(tiny({"show", "--schedule", "zb-v", "--svg", svg, "--title", "ZB-V"}));
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out == "zb-v: step time 51.03 ms, bubble 5.9%\nwrote " + svg + "\n");
  const std::string picture = file_contents(svg);
  CHECK(picture.rfind("<svg xmlns=", 0) == 0);
  CHECK(count(picture, "<g><title>") == 4 * 2 * 8 * 3);  // 4 ranks x 2 chunks x 8 micro-batches x F, B, W
  CHECK(picture.find(">ZB-V</text>") != std::string::npos);

  r = run_cli(tiny({"show", "--schedule", "1f1b", "--timeline-width", "40"}, 2, 2));
  REQUIRE(r.code == 0);
  CHECK(r.out.rfind("1f1b: step time", 0) == 0);
  CHECK(r.out.find("\nrank 0 |") != std::string::npos);
  CHECK(r.out.find("\nrank 1 |") != std::string::npos);
}

TEST_CASE("show --trace: the compute slices of a simulated trace") {
  const std::string trace = tmp("show-trace.json"), svg = tmp("show-trace.svg");
  REQUIRE(run_cli(tiny({"simulate", "--schedule", "zb-h1", "--trace", trace})).code == 0);
  const CliResult r = run_cli({"show", "--trace", trace, "--svg", svg});
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.rfind(trace + ": 96 compute slices over 54.00 ms\n", 0) == 0);
  CHECK(count(file_contents(svg), "<g><title>") == 96);
  CHECK(run_cli({"show", "--trace", trace, "--model", "gpt3-1.3b"}).err ==
        "error: --trace: the trace gives the schedule; drop --model\n");
  const std::string empty = tmp("show-empty.json");
  std::ofstream(empty) << R"({"traceEvents": []})";
  CHECK(run_cli({"show", "--trace", empty}).err ==
        "error: --trace: " + empty +
            " has no compute slices; give a trace written by pipewright simulate or run --trace\n");
}

TEST_CASE("simulate --export-csv writes PyTorch's CSV, --schedule-csv runs it back") {
  const std::string csv = tmp("exported-interleaved.csv");
  const nlohmann::json generated =
      run_json(tiny({"simulate", "--schedule", "interleaved", "--vpp", "2", "--export-csv", csv}));
  pw::ScheduleSpec spec;
  spec.name = "interleaved";
  spec.ranks = 4;
  spec.microbatches = 8;
  spec.chunks = 2;
  CHECK(file_contents(csv) == pw::schedule_to_pytorch_csv(pw::make_schedule(spec)));
  // The micro-batch count comes from the file when --microbatches is left out.
  const nlohmann::json imported = run_json({"simulate", "--model", source_path("examples/tiny-uniform.json"),
                                            "--cluster", "ideal", "--pp", "4", "--schedule-csv", csv});
  CHECK(imported["schedule"] == "exported-interleaved.csv");
  CHECK(imported["microbatches"] == 8);
  CHECK(imported["step_time_s"].get<double>() == generated["step_time_s"].get<double>());
}

TEST_CASE("simulate --schedule-csv: the file must fit the configuration") {
  const std::string csv = tmp("two-ranks.csv");
  std::ofstream(csv) << "0F0,0F1,0B0,0B1\r\n1F0,1B0,1F1,1B1\r\n";
  CHECK(run_cli(tiny({"simulate", "--schedule-csv", csv}, 4, 2)).err ==
        "error: --pp: 4 but schedule two-ranks.csv has 2 ranks (rows); use --pp 2\n");
  CHECK(run_cli(tiny({"simulate", "--schedule-csv", csv}, 2, 3)).err ==
        "error: --microbatches: 3 but schedule two-ranks.csv has 2 micro-batches; use --microbatches 2\n");
  CHECK(run_cli(tiny({"simulate", "--schedule-csv", csv, "--schedule", "1f1b"}, 2, 2)).err ==
        "error: --schedule-csv: the file gives the schedule; drop --schedule 1f1b\n");
  CHECK(run_cli(tiny({"simulate", "--schedule-csv", tmp("missing.csv")}, 2, 2)).err ==
        "error: --schedule-csv: schedule file '" + tmp("missing.csv") + "' not found\n");
  const std::string broken = tmp("broken.csv");
  std::ofstream(broken) << "0F0,0B1,0F1,0B0\r\n1F0,1F1,1B0,1B1\r\n";
  const CliResult r = run_cli(tiny({"simulate", "--schedule-csv", broken}, 2, 2));
  CHECK(r.code == 2);
  CHECK(r.err.rfind("error: schedule " + broken +
                        ": out of order at rank 0, step 1: '0BW1' comes before its "
                        "dependency '0F1' (step 2)\nstep   | 0",
                    0) == 0);
}

TEST_CASE("simulate --no-sync-optimizer reports ZB-H2's steady state, --max-pending moves zb-h1 to zb-h2") {
  // F = B = W = 2 ms per stage, p = 4, m = 8. Synchronised ZB-H2: 3 m 2 + (p - 1) 2 = 54 ms. With
  // post-validation rank 0 runs without a gap and the iterations follow every 48 ms; the optimizer
  // step (tens of microseconds) is all that is left of the bubble.
  const nlohmann::json sync = run_json(tiny({"simulate", "--schedule", "zb-h2"}));
  const nlohmann::json async = run_json(tiny({"simulate", "--schedule", "zb-h2", "--no-sync-optimizer"}));
  const double optimizer = sync["step_time_s"].get<double>() - 0.054;
  CHECK(optimizer >= 0);
  CHECK(async["step_time_s"].get<double>() == Approx(0.048 + optimizer).epsilon(1e-9));
  CHECK(async["synchronous_optimizer"] == false);
  CHECK(async["iterations_simulated"] == 4);
  CHECK(sync["iterations_simulated"] == 1);
  const CliResult table = run_cli(tiny({"simulate", "--schedule", "zb-h2", "--no-sync-optimizer"}));
  CHECK(table.out.find("  optimizer step          post-validated, steady state of 4 iterations\n") !=
        std::string::npos);
  // ZB-H1 with F = B = W: m (F + B + W) + (p - 1)(F + B - W) = 54 ms too; its memory is p, ZB-H2's 2p - 1.
  const nlohmann::json h1 = run_json(tiny({"simulate", "--schedule", "zb-h1"}));
  const nlohmann::json h1_at_2p = run_json(tiny({"simulate", "--schedule", "zb-h1", "--max-pending", "8"}));
  CHECK(h1["stages"][0]["peak_inflight_microbatches"] == 4);
  CHECK(h1_at_2p["stages"][0]["peak_inflight_microbatches"] == 7);
  CHECK(
      run_cli(tiny({"simulate", "--schedule", "zb-h1", "--max-pending", "9"})).err ==
      "error: --max-pending: zb-h1 keeps from --pp (4) to 2 x --pp (8) backward passes pending, got 9; use a value in "
      "4..8\n");
}
