#pragma once
// A progress line on stderr for runs that last more than a few seconds: silent for short runs,
// rewritten in place on a terminal, an occasional plain line when stderr is a file or a pipe.
#include <chrono>
#include <string>

namespace fuselm::bench {

class Progress {
 public:
  // `enabled` false prints nothing; output starts only after `delay_s` seconds.
  explicit Progress(bool enabled, double delay_s = 3.0);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void set_total(int units) { total_ = units; }
  // Called before each unit of work; `what` says which one.
  void update(const std::string& what);
  // Ends a line left open on a terminal.
  void finish();

 private:
  using Clock = std::chrono::steady_clock;
  bool enabled_;
  bool tty_;
  double delay_s_;
  int total_ = 0;
  int done_ = 0;
  bool line_open_ = false;
  bool printed_ = false;
  Clock::time_point start_;
  Clock::time_point last_print_;
};

}  // namespace fuselm::bench
