// Link and collective fits on synthetic samples from known parameters.
#include <catch2/catch.hpp>

#include "../error_text.hpp"
#include "calibrate/link_fit.hpp"
#include "profiler/link_line.hpp"
#include "synthetic.hpp"

TEST_CASE("link fits per measured pair and pooled") {
  // Two pairs: 10 us + size / 10 GB/s and 50 us + size / 2 GB/s, +-1% noise at 1 KiB..64 MiB. Each pair's
  // fit comes back within 3% (latency) and 2% (bandwidth); the pooled one lies between them.
  synth::Noise rng{9};
  std::vector<pw::LinkProfile> links(2);
  const double latency[2] = {10e-6, 50e-6}, bandwidth[2] = {10e9, 2e9};
  for (int i = 0; i < 2; ++i) {
    links[i].src = i;
    links[i].dst = i + 1;
    for (double bytes = 1024; bytes <= 64.0 * 1024 * 1024; bytes *= 4)
      links[i].samples.push_back({bytes, (latency[i] + bytes / bandwidth[i]) * rng.factor(0.01)});
  }
  std::vector<std::string> warnings;
  const pw::LinkFits f = pw::fit_links(links, "p.json", warnings);
  CHECK(warnings.empty());
  REQUIRE(f.pairs.size() == 2);
  for (int i = 0; i < 2; ++i) {
    CHECK(f.pairs[i].src == i);
    CHECK(f.pairs[i].latency_s == Approx(latency[i]).epsilon(0.03));
    CHECK(f.pairs[i].bandwidth_bytes_per_s == Approx(bandwidth[i]).epsilon(0.02));
    CHECK(f.pairs[i].quality.points == 9);
  }
  REQUIRE(f.pooled);
  CHECK(f.pooled->src == -1);
  CHECK(f.pooled->bandwidth_bytes_per_s > 2e9);
  CHECK(f.pooled->bandwidth_bytes_per_s < 10e9);
}

TEST_CASE("a pair's link fit is the one the profiler wrote for the same samples") {
  // A busy machine's samples, where the relative weights give a falling line and the large messages
  // decide (tests/profiler/profiler_test.cpp): the calibration reads them as the profiler did.
  pw::LinkProfile busy;
  const double times[] = {60e-6, 40e-6, 20e-6, 10e-6, 5e-6, 300e-6, 1.2e-3, 5e-3, 20e-3};
  double bytes = 1024;
  for (double t : times) {
    busy.samples.push_back({bytes, t});
    bytes *= 4;
  }
  pw::LinkProfile clean;
  for (double b = 1024; b <= 64.0 * 1024 * 1024; b *= 4) clean.samples.push_back({b, 7e-6 + b / 25e9});
  for (pw::LinkProfile link : {busy, clean}) {
    pw::fit_link(link);
    std::vector<std::string> warnings;
    const std::optional<pw::LinkFit> f = pw::fit_link_samples(link.samples, "p.json: links[0]", warnings);
    CHECK(warnings.empty());
    REQUIRE(f);
    CHECK(f->latency_s == link.latency_s);
    CHECK(f->bandwidth_bytes_per_s == link.bandwidth_bytes_per_s);
  }
  // Where the time does not grow with the size, the profiler keeps a bound; the calibration fits nothing.
  pw::LinkProfile flat;
  flat.samples = {{1024, 996e-6}, {65536, 1.1e-3}, {1 << 20, 708e-6}};
  pw::fit_link(flat);
  CHECK(flat.bandwidth_bounded);
  std::vector<std::string> warnings;
  CHECK(!pw::fit_link_samples(flat.samples, "p.json: links[0]", warnings));
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0] == "p.json: links[0]: the time does not grow with the message size, so there is no bandwidth to "
                       "fit; transfers use the cluster's link");
}

TEST_CASE("a link measured at one size, or none, is left to the cluster with a warning") {
  std::vector<std::string> warnings;
  pw::LinkProfile one;
  one.samples = {{4096, 1e-5}, {4096, 1.1e-5}};
  CHECK(!pw::fit_links({one}, "p.json", warnings).pooled);
  CHECK(!pw::fit_links({}, "p.json", warnings).pooled);
  REQUIRE(warnings.size() == 2);
  CHECK(warnings[0] == "p.json: links: samples at 1 message size; a link fit needs 2 or more, so transfers use the cluster's link");
  CHECK(warnings[1] == "p.json: no link samples; transfers use the cluster's links");
}

TEST_CASE("collective efficiency comes back from synthetic ring collectives") {
  // All-reduce at efficiency 0.8 and all-gather at 0.6 on a 100 GB/s, 5 us link, 2..8 ranks, 1 MB..1 GB,
  // +-1% noise: each efficiency within 1%.
  synth::Noise rng{4};
  const pw::LinkSpec link{100e9, 5e-6};
  std::vector<pw::CollectiveSample> samples;
  for (int n : {2, 4, 8})
    for (double bytes = 1e6; bytes <= 1e9; bytes *= 10) {
      for (auto [kind, eff] : {std::pair{pw::CollectiveKind::AllReduce, 0.8}, std::pair{pw::CollectiveKind::AllGather, 0.6}}) {
        const double t = pw::ring_steps(kind, n) * link.latency_s + pw::ring_traffic(kind, n) * bytes / (eff * link.bandwidth_bytes_per_s);
        samples.push_back({kind, n, bytes, t * rng.factor(0.01), link});
      }
    }
  std::vector<std::string> warnings;
  const std::vector<pw::CollectiveFit> fits = pw::fit_collectives(samples, warnings);
  CHECK(warnings.empty());
  REQUIRE(fits.size() == 2);
  CHECK(fits[0].kind == pw::CollectiveKind::AllReduce);
  CHECK(fits[0].efficiency == Approx(0.8).epsilon(0.01));
  CHECK(fits[1].kind == pw::CollectiveKind::AllGather);
  CHECK(fits[1].efficiency == Approx(0.6).epsilon(0.01));
  CHECK(fits[0].quality.points == 12);
  CHECK(fits[0].quality.max_error_pct < 2.0);

  samples.push_back({pw::CollectiveKind::ReduceScatter, 1, 1e6, 1e-3, link});
  CHECK(bad_input([&] { pw::fit_collectives(samples, warnings); }) ==
        "collective reduce_scatter sample over 1 ranks of 1000000 B in 0.001 s on a 100000000000 B/s link: needs ranks "
        ">= 2, bytes > 0, a positive finite time and a link bandwidth");
}
