#pragma once
// A progress bar for long searches: drawn on a terminal only, only once the work has run for a while
// (short searches print nothing), at most ten times a second, and erased when the work ends.
#include <chrono>
#include <mutex>
#include <ostream>

namespace pw {

// Whether standard error is a terminal (isatty).
bool stderr_is_terminal();

class ProgressBar {
 public:
  // `enabled` false: never draws. `delay_s`: seconds before the first draw.
  ProgressBar(std::ostream& out, bool enabled, double delay_s = 1.0, int width = 40);
  ~ProgressBar();

  // Thread-safe.
  void update(long done, long total);
  // Erases the bar if it was drawn.
  void finish();
  bool drawn() const { return drawn_; }

  // The bar's text for a fraction in [0, 1]: "[#####.....]  50% 500/1000 configurations".
  static std::string render(long done, long total, int width);

 private:
  std::ostream& out_;
  bool enabled_;
  double delay_s_;
  int width_;
  std::chrono::steady_clock::time_point start_, last_;
  bool drawn_ = false;
  size_t last_length_ = 0;
  std::mutex mutex_;
};

}  // namespace pw
