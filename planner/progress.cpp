#include "planner/progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <string>

namespace pw {

bool stderr_is_terminal() { return isatty(STDERR_FILENO) == 1; }

ProgressBar::ProgressBar(std::ostream& out, bool enabled, double delay_s, int width)
    : out_(out), enabled_(enabled), delay_s_(delay_s), width_(std::max(width, 10)) {
  start_ = last_ = std::chrono::steady_clock::now();
}

ProgressBar::~ProgressBar() { finish(); }

std::string ProgressBar::render(long done, long total, int width) {
  const double f = total > 0 ? std::clamp(static_cast<double>(done) / static_cast<double>(total), 0.0, 1.0) : 1.0;
  const int filled = static_cast<int>(f * width);
  return fmt::format("[{}{}] {:3.0f}% {}/{} configurations", std::string(static_cast<size_t>(filled), '#'),
                     std::string(static_cast<size_t>(width - filled), '.'), f * 100, done, total);
}

void ProgressBar::update(long done, long total) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  if (std::chrono::duration<double>(now - start_).count() < delay_s_) return;
  if (drawn_ && std::chrono::duration<double>(now - last_).count() < 0.1 && done < total) return;
  last_ = now;
  const std::string text = render(done, total, width_);
  out_ << '\r' << text << std::flush;
  last_length_ = text.size();
  drawn_ = true;
}

void ProgressBar::finish() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!drawn_) return;
  out_ << '\r' << std::string(last_length_, ' ') << '\r' << std::flush;
  drawn_ = false;
}

}  // namespace pw
