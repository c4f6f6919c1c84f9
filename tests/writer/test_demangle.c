/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * test_demangle.c: culpert__demangle on real symbols.
 *
 * The Rust symbols were produced by rustc 1.95 (a small test program built
 * with -C symbol-mangling-version=v0 and =legacy) and taken from the
 * toolchain's own libraries, so the table holds what real rustc output
 * contains; rustc itself is not needed to run this test. Expected names
 * follow rustc-demangle's alternate form (no crate hashes, const arguments
 * without their type).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demangle.h"
#include "loader.h"
#include "symbolize.h"

struct demangle_case {
  const char *sym;
  const char *want; /* NULL: not decodable, the caller keeps the raw name */
};

static const struct demangle_case rust_v0_cases[] = {
    {"_RNvCs6GmmlP4bgsG_1r4main", "r::main"},
    {"_RNvNtNtCs6GmmlP4bgsG_1r5inner4deep4func", "r::inner::deep::func"},
    {"_RINvCs6GmmlP4bgsG_1r3genKj4_EB2_", "r::gen::<4>"},
    {"_RNCNvCs6GmmlP4bgsG_1r4main0B3_", "r::main::{closure#0}"},
    {"_RNCNvCs6GmmlP4bgsG_1r4mains_0B3_", "r::main::{closure#1}"},
    {"_RNvMCs6GmmlP4bgsG_1rINtB2_3FoohE3getB2_", "<r::Foo<u8>>::get"},
    {"_RNvXs0_Cs6GmmlP4bgsG_1rRAlj3_NtB5_2Tr2go", "<&[i32; 3] as r::Tr>::go"},
    {"_RNvXs_Cs6GmmlP4bgsG_1rINtB4_3FoohENtB4_2Tr2go", "<r::Foo<u8> as r::Tr>::go"},
    {"_RNvYNCNvCs6GmmlP4bgsG_1r4main0INtNtNtCsgEmfK2I1SDS_4core3ops8function6FnOnceTlEE9call_"
     "onceB6_",
     "<r::main::{closure#0} as core::ops::function::FnOnce<(i32,)>>::call_once"},
    {"_RNSNvYNCNvCs6GmmlP4bgsG_1r4main0INtNtNtCsgEmfK2I1SDS_4core3ops8function6FnOnceTlEE9call_"
     "once6vtableB8_",
     "<r::main::{closure#0} as core::ops::function::FnOnce<(i32,)>>::call_once::{shim:vtable#0}"},
    {"_RINvMs2_NtCsgEmfK2I1SDS_4core3fmtNtB6_9Arguments3newKj4_Kj1_ECs6GmmlP4bgsG_1r",
     "<core::fmt::Arguments>::new::<4, 1>"},
    {"_RINvNtNtCsjrHSEGnQ3l9_3std3sys9backtrace28___rust_begin_short_backtraceFEuuECs6GmmlP4bgsG_"
     "1r",
     "std::sys::backtrace::__rust_begin_short_backtrace::<fn(), ()>"},
    {"_RINvMs0_NtNtNtNtCsjrHSEGnQ3l9_3std3sys12thread_local6native4lazyINtB6_7StorageINtNtCsgEmfK2"
     "I1SDS_4core4cell4CellTyyEEzE11get_or_initNvNvNvMNtNtBe_4hash6randomNtB2d_11RandomState3new4K"
     "EYS27___rust_std_internal_init_fnECs6GmmlP4bgsG_1r",
     "<std::sys::thread_local::native::lazy::Storage<core::cell::Cell<(u64, u64)>, !>>::get_or_"
     "init::<<std::hash::random::RandomState>::new::KEYS::__rust_std_internal_init_fn>"},
    /* From the toolchain's libraries: dyn with a binder and an associated
     * type, unsafe extern "C" fn pointers, arrays, *mut, &mut dyn. */
    {"_RINvNtCsgEmfK2I1SDS_4core3ptr13drop_in_placeINtNtCslNYArtu3iFV_5alloc5boxed3BoxDG_INtNtNtB4"
     "_3ops8function5FnMutTRL0_eEEp6OutputbEL_EECslKGqiwnqz1t_17rustc_codegen_ssa",
     "core::ptr::drop_in_place::<alloc::boxed::Box<dyn for<'a> core::ops::function::FnMut<(&'a "
     "str,), Output = bool>>>"},
    {"_RINvMs0_NtNtCs1HmMIo7Jdcu_10libloading2os4unixNtB6_7Library8get_implFUKCPaEuNCINvB2_18get_"
     "singlethreadedB14_RShE0B1I_ECs59TyybOfEHA_18rustc_codegen_llvm",
     "<libloading::os::unix::Library>::get_impl::<unsafe extern \"C\" fn(*const i8), "
     "<libloading::os::unix::Library>::get_singlethreaded<unsafe extern \"C\" fn(*const i8), "
     "&[u8]>::{closure#0}, &[u8]>"},
    {"_RINvMNtCs3MG2ofusW15_21rustc_data_structures9vec_cacheNtB3_9SlotIndex17initialize_bucketINt"
     "NtNtCsdadwybgsbvk_12rustc_middle5query5erase10ErasedDataAhj3_EEB1v_",
     "<rustc_data_structures::vec_cache::SlotIndex>::initialize_bucket::<rustc_middle::query::"
     "erase::ErasedData<[u8; 3]>>"},
    {"_RINvNtCs8NwYtU1Mohg_4core9panicking13assert_failedONtNtB4_3ffi6c_voidBM_ECs3QvkDaNtmvS_"
     "7stacker",
     "core::panicking::assert_failed::<*mut core::ffi::c_void, *mut core::ffi::c_void>"},
    {"_RNvXs1j_NtCs8NwYtU1Mohg_4core3fmtQDNtNtB8_5panic12PanicPayloadEL_NtB6_7Display3fmtCsi4IsKQV"
     "xMg0_3std",
     "<&mut dyn core::panic::PanicPayload as core::fmt::Display>::fmt"},
    {"_RNSINvNtCsi4IsKQVxMg0_3std9panicking11begin_panicReE5reifyB6_",
     "std::panicking::begin_panic::<&str>::{shim:reify#0}"},
    /* An LLVM/GCC clone suffix is dropped. */
    {"_RNvCs6GmmlP4bgsG_1r4main.llvm.1234567", "r::main"},
    /* Hand-made: const arguments of every decodable kind and binders. */
    {"_RINvC1a1fKc61_E", "a::f::<'a'>"},
    {"_RINvC1a1fKan5_E", "a::f::<-5>"},
    {"_RINvC1a1fKb1_E", "a::f::<true>"},
    {"_RINvC1a1fKpE", "a::f::<_>"},
    {"_RINvC1a1fFG0_RL1_hRL0_tEuE", "a::f::<for<'a, 'b> fn(&'a u8, &'b u16)>"},
    {"_RINvC1a1fDNtC1a1TEL_E", "a::f::<dyn a::T>"},
    /* Malformed: kept raw. */
    {"_R", NULL},
    {"_RB_", NULL},       /* backref to itself */
    {"_RNvC1a", NULL},    /* truncated */
    {"_RNvC1a1fX", NULL}, /* trailing garbage */
    {"_R0NvC1a1f", NULL}, /* unknown encoding version */
    {"_RNvC1a9toolong", NULL},
};

static const struct demangle_case rust_legacy_cases[] = {
    {"_ZN1r4main17h086b0cfd890a8ea9E", "r::main"},
    {"_ZN1r5inner4deep4func17h2bdf3c085abf6e31E", "r::inner::deep::func"},
    {"_ZN1r12Foo$LT$T$GT$3get17hbece0dcc824f947bE", "r::Foo<T>::get"},
    {"_ZN1r4main28_$u7b$$u7b$closure$u7d$$u7d$17h4dfd0b239fe0b425E", "r::main::{{closure}}"},
    {"_ZN4core10intrinsics11rotate_left17h2d2de5c22f61274dE", "core::intrinsics::rotate_left"},
    {"_ZN146_$LT$core..ops..range..Range$LT$usize$GT$$u20$as$u20$core..iter..adapters..step_by.."
     "SpecRangeSetup$LT$core..ops..range..Range$LT$usize$GT$$GT$$GT$5setup17h33a0fd1ea112a3adE",
     "<core::ops::range::Range<usize> as "
     "core::iter::adapters::step_by::SpecRangeSetup<core::ops::range::Range<usize>>>::setup"},
    {"_ZN3std2rt10lang_start17h0123456789abcdefE.llvm.42", "std::rt::lang_start"},
    {"_ZN3foo3bar17h0123456789abcdefE", "foo::bar"},
    {"_ZN3foo8$RF$$BP$17h0123456789abcdefE", "foo::&*"},
};

/* Names that are not mangled at all. */
static const struct demangle_case plain_cases[] = {
    {"main", NULL}, {"malloc", NULL}, {"", NULL}, {"_", NULL}, {"_Z", NULL},
};

static void check_table(const struct demangle_case *cases, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    char *got = culpert__demangle(cases[i].sym);
    if (!cases[i].want) {
      if (got)
        fail_msg("%s: expected no demangling, got %s", cases[i].sym, got);
      continue;
    }
    if (!got)
      fail_msg("%s: not demangled, expected %s", cases[i].sym, cases[i].want);
    if (strcmp(got, cases[i].want) != 0)
      fail_msg("%s:\n  got  %s\n  want %s", cases[i].sym, got, cases[i].want);
    free(got);
  }
}

#define TABLE(t) t, sizeof t / sizeof t[0]

static void test_demangle_rust_v0(void **state)
{
  (void)state;
  check_table(TABLE(rust_v0_cases));
}

static void test_demangle_rust_legacy(void **state)
{
  (void)state;
  check_table(TABLE(rust_legacy_cases));
  /* An unknown escape is not Rust's: the name is left to the C++
   * demangler (when the process has one), which keeps the hash. */
  char *got = culpert__demangle("_ZN3foo6$bad$e17h0123456789abcdefE");
  if (got)
    assert_non_null(strstr(got, "h0123456789abcdef"));
  free(got);
}

static void test_demangle_plain_names_untouched(void **state)
{
  (void)state;
  check_table(TABLE(plain_cases));
  assert_null(culpert__demangle(NULL));
}

/* Every prefix and some byte flips of every table symbol: no crash, no
 * read past the end (run under ASan in CI), either a name or NULL. */
static void test_demangle_truncated_and_corrupt(void **state)
{
  (void)state;
  const struct demangle_case *tables[] = {rust_v0_cases, rust_legacy_cases};
  size_t sizes[] = {sizeof rust_v0_cases / sizeof rust_v0_cases[0],
                    sizeof rust_legacy_cases / sizeof rust_legacy_cases[0]};
  static const char flips[] = "B_0zZE9$.I";
  for (size_t t = 0; t < 2; t++) {
    for (size_t i = 0; i < sizes[t]; i++) {
      const char *sym = tables[t][i].sym;
      size_t len = strlen(sym);
      char *buf = malloc(len + 1);
      assert_non_null(buf);
      for (size_t cut = 0; cut <= len; cut++) {
        memcpy(buf, sym, cut);
        buf[cut] = '\0';
        free(culpert__demangle(buf));
      }
      for (size_t pos = 2; pos < len; pos++) {
        for (const char *f = flips; *f; f++) {
          memcpy(buf, sym, len + 1);
          buf[pos] = *f;
          free(culpert__demangle(buf));
        }
      }
      free(buf);
    }
  }
}

/* Writes the base-62 form of a v0 backref to position `pos`. */
static int put_backref(char *out, size_t cap, size_t pos)
{
  char digits[16];
  size_t n = 0, v = pos - 1;
  if (pos == 0)
    return snprintf(out, cap, "B_");
  do {
    unsigned d = (unsigned)(v % 62);
    digits[n++] = (char)(d < 10 ? '0' + d : d < 36 ? 'a' + d - 10 : 'A' + d - 36);
    v /= 62;
  } while (v);
  int len = snprintf(out, cap, "B");
  while (n > 0)
    len += snprintf(out + len, cap - (size_t)len, "%c", digits[--n]);
  return len + snprintf(out + len, cap - (size_t)len, "_");
}

/* Generic arguments T_k = (T_k-1, T_k-1) written with backrefs: 40 of
 * them would print 2^40 bytes. The decoder must give up (keep the raw
 * name) or stay within its output cap, quickly. */
static void test_demangle_backref_bomb(void **state)
{
  (void)state;
  char sym[4096] = "_RINvC1a1fTuuE";
  size_t len = strlen(sym);
  size_t prev = 8; /* position of the first tuple, counted after "_R" */
  for (int i = 0; i < 40; i++) {
    size_t here = len - 2;
    len += (size_t)snprintf(sym + len, sizeof sym - len, "T");
    len += (size_t)put_backref(sym + len, sizeof sym - len, prev);
    len += (size_t)put_backref(sym + len, sizeof sym - len, prev);
    len += (size_t)snprintf(sym + len, sizeof sym - len, "E");
    prev = here;
  }
  snprintf(sym + len, sizeof sym - len, "E");

  /* The first level alone decodes normally. */
  char *small = culpert__demangle("_RINvC1a1fTuuETB7_B7_EE");
  assert_non_null(small);
  assert_string_equal(small, "a::f::<((), ()), (((), ()), ((), ()))>");
  free(small);

  char *got = culpert__demangle(sym);
  if (got)
    assert_true(strlen(got) <= 64 * 1024);
  free(got);
}

/* Without the loader's locks (a writer forked at a signal) nothing calls
 * dlsym: C++ names use the __cxa_demangle found by
 * culpert__demangle_prepare, and stay mangled when it found none. Runs
 * before libstdc++ is loaded by the test after it. */
static void test_demangle_without_loader_locks(void **state)
{
  (void)state;
  if (dlsym(RTLD_DEFAULT, "__cxa_demangle")) {
    print_message("SKIPPED: libstdc++ is already loaded\n");
    skip();
  }
  culpert__demangle_prepare(); /* finds nothing yet */
  void *h = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_GLOBAL);
  if (!h) {
    print_message("SKIPPED: libstdc++.so.6 not found\n");
    skip();
  }
  culpert__loader_set_usable(0);
  assert_null(culpert__demangle("_ZN3foo3barEv")); /* loaded after prepare: not used */
  culpert__loader_set_usable(1);
  char *got = culpert__demangle("_ZN3foo3barEv"); /* looked up again: found */
  assert_non_null(got);
  assert_string_equal(got, "foo::bar()");
  free(got);
  culpert__demangle_prepare();
  culpert__loader_set_usable(0);
  got = culpert__demangle("_ZN3foo3barEv");
  culpert__loader_set_usable(1);
  assert_non_null(got);
  assert_string_equal(got, "foo::bar()");
  free(got);
  /* libstdc++ stays loaded: the pointer kept must stay valid. */
}

/* C++ goes through the process's __cxa_demangle, which exists only when
 * libstdc++ is loaded. Without it names stay mangled. */
static void test_demangle_cxx_needs_libstdcxx(void **state)
{
  (void)state;
  if (!dlsym(RTLD_DEFAULT, "__cxa_demangle"))
    assert_null(culpert__demangle("_ZN3foo3barEv"));
  void *h = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_GLOBAL);
  if (!h) {
    print_message("SKIPPED: libstdc++.so.6 not found, C++ demangling not checked\n");
    skip();
  }
  static const struct demangle_case cxx[] = {
      {"_ZN3foo3barEv", "foo::bar()"},
      {"_ZNSt6vectorIiSaIiEE9push_backERKi",
       "std::vector<int, std::allocator<int> >::push_back(int const&)"},
      {"_ZN9__gnu_cxx13new_allocatorIcE8allocateEmPKv",
       "__gnu_cxx::new_allocator<char>::allocate(unsigned long, void const*)"},
      {"_Z4workPci.cold", "work(char*, int) [clone .cold]"},
      {"_ZN3foo3barE", "foo::bar"}, /* no hash, no '$': C++, not Rust */
      {"_Zfoo", NULL},
  };
  check_table(TABLE(cxx));
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_demangle_rust_v0),
      cmocka_unit_test(test_demangle_rust_legacy),
      cmocka_unit_test(test_demangle_plain_names_untouched),
      cmocka_unit_test(test_demangle_truncated_and_corrupt),
      cmocka_unit_test(test_demangle_backref_bomb),
      cmocka_unit_test(test_demangle_without_loader_locks),
      cmocka_unit_test(test_demangle_cxx_needs_libstdcxx),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
