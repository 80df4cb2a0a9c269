#include "bench/progress.h"

#include <unistd.h>

#include <cstdio>

namespace fuselm::bench {

Progress::Progress(bool enabled, double delay_s)
    : enabled_(enabled), tty_(isatty(STDERR_FILENO) == 1), delay_s_(delay_s), start_(Clock::now()),
      last_print_(start_) {}

Progress::~Progress() { finish(); }

void Progress::update(const std::string& what) {
  ++done_;
  if (!enabled_) return;
  const auto now = Clock::now();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double since_print = std::chrono::duration<double>(now - last_print_).count();
  // A terminal line is cheap to rewrite; a log file gets a line every few seconds at most.
  const double min_gap_s = tty_ ? 0.25 : 5.0;
  if (elapsed < delay_s_ || (printed_ && since_print < min_gap_s)) return;
  printed_ = true;
  last_print_ = now;
  const int pct = total_ > 0 ? 100 * (done_ - 1) / total_ : 0;
  if (tty_) {
    std::fprintf(stderr, "\r\x1b[K[bench %3d%% %5.0fs] %s", pct, elapsed, what.c_str());
    line_open_ = true;
  } else {
    std::fprintf(stderr, "[bench %3d%% %5.0fs] %s\n", pct, elapsed, what.c_str());
  }
  std::fflush(stderr);
}

void Progress::finish() {
  if (line_open_) {
    std::fprintf(stderr, "\r\x1b[K");
    std::fflush(stderr);
    line_open_ = false;
  }
}

}  // namespace fuselm::bench
