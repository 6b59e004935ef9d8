#include <unistd.h>

#include <atomic>
#include <csignal>
#include <exception>
#include <iostream>
#include <new>
#include <string>

#include "cli.hpp"

namespace {

// Ctrl-C while tokens are generated stops the generation, which then prints what it has (and during a
// download stops it, keeping the partial file for the next run); while a run trains or writes its
// checkpoint it stops the run after the step, and the checkpoint is written whole before the exit (130); at
// any other time it ends the program as usual. Both flags are lock-free atomics, which a signal handler may
// touch.
std::atomic<bool> stop{false}, generating{false};
static_assert(std::atomic<bool>::is_always_lock_free);

extern "C" void on_interrupt(int) {
  if (generating.load()) {
    stop.store(true);
    return;
  }
  std::signal(SIGINT, SIG_DFL);
  std::raise(SIGINT);
}

}  // namespace

int main(int argc, char** argv) {
  std::ios::sync_with_stdio(false);
  std::signal(SIGINT, on_interrupt);
  attnviz::GenerateControl control;
  control.stop = &stop;
  control.generating = &generating;
  control.progress = isatty(STDERR_FILENO) == 1;
  // A last resort: every bad input is refused before it costs anything (run_cli), but nothing may end the
  // program with an abort and a stack of lines instead of one line and exit status 1.
  try {
    return attnviz::run_cli(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr, control);
  } catch (const std::bad_alloc&) {
    std::cerr << "attnviz-cli: out of memory\n";
  } catch (const std::exception& e) {
    std::cerr << "attnviz-cli: internal error: " << attnviz::quote(e.what(), 4 * attnviz::kQuoteCap, '\0')
              << "\n";
  }
  return 1;
}
