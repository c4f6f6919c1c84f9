// SPDX-License-Identifier: MIT OR Apache-2.0
// fixture_cxx.cpp: C++ read (never loaded) by the symbolizer test, built
// with -O2. GCC gives no DWARF linkage name to functions around a lambda
// of an unmangled (extern "C") function: the lambda's operator() and the
// templates instantiated with it, inlined here, must still be named with
// their namespaces, classes and enclosing function.
#include <cstddef>
#include <vector>

namespace shop
{
template <typename F> struct Basket {
  std::vector<long> items;
  F make;
  __attribute__((always_inline)) void fill(int n)
  {
    for (int i = 0; i < n; i++)
      items.push_back(make(i));
  }
};
} // namespace shop

extern "C" long fixture_cxx_work(int n)
{
  auto make = [n](int i) __attribute__((always_inline))
  {
    std::vector<int> scratch(static_cast<std::size_t>(i % 4 + 1));
    return static_cast<long>(scratch.size()) * n;
  };
  shop::Basket<decltype(make)> basket{{}, make};
  basket.fill(n);
  return static_cast<long>(basket.items.size());
}
