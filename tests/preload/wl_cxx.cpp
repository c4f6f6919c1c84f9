// SPDX-License-Identifier: MIT OR Apache-2.0
// wl_cxx: C++ new/delete, containers, exceptions and glibc's backtrace().
// Its output must be the same with and without libculpert preloaded:
// loading the collector must not change how the host unwinds.
#include <execinfo.h>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "culpert.h"

struct Node {
  std::vector<int> data;
  explicit Node(size_t n) : data(n, 7)
  {
  }
};

__attribute__((noinline)) static void thrower(int depth)
{
  std::vector<std::string> junk(4, std::string(100, 'x'));
  if (depth == 0)
    throw std::runtime_error("boom " + std::to_string(junk.size()));
  thrower(depth - 1);
}

// Print the function names of the current stack (addresses differ between
// runs, names do not).
__attribute__((noinline)) static void print_backtrace(const char *tag)
{
  void *frames[32];
  int n = backtrace(frames, 32);
  char **syms = backtrace_symbols(frames, n);
  std::printf("%s: %d frames\n", tag, n);
  for (int i = 0; syms != nullptr && i < n; i++) {
    const char *open = std::strchr(syms[i], '(');
    const char *plus = open ? std::strchr(open, '+') : nullptr;
    if (open && plus)
      std::printf("  %.*s\n", (int)(plus - open - 1), open + 1);
  }
  std::free(syms);
}

int main()
{
  CULPERT_SPAN("cxx");
  std::map<std::string, std::unique_ptr<Node>> m;
  for (int i = 0; i < 1000; i++)
    m["key" + std::to_string(i)] = std::make_unique<Node>(static_cast<size_t>(i % 50 + 1));
  long sum = 0;
  for (auto &kv : m)
    sum += static_cast<long>(kv.second->data.size());
  int caught = 0;
  for (int i = 0; i < 200; i++) {
    try {
      thrower(i % 10);
    } catch (const std::runtime_error &e) {
      caught += std::strncmp(e.what(), "boom", 4) == 0;
    }
  }
  try {
    throw 42;
  } catch (int v) {
    caught += v == 42;
  }
  print_backtrace("main");
  std::printf("sum=%ld caught=%d\n", sum, caught);
  return 0;
}
