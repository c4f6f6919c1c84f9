/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * culpert.h: the whole public C API of libculpert, the per-span heap
 * allocation profiler.
 *
 * libculpert samples allocations by bytes and attributes each sample to the
 * innermost *span* open on the allocating thread. A span is a named region of
 * work ("handle_request", "parse_input"); spans nest, and each thread has its
 * own span stack. This header is everything a program needs to open and close
 * spans and to write profiles on demand.
 *
 * Works with or without linking:
 *   - Link with `pkg-config --libs culpert` or the CMake target
 *     culpert::culpert and the calls go to the library. A bare -lculpert
 *     under the linker's --as-needed (Debian's default) is dropped when the
 *     program reaches the library only through these weak references:
 *     write -Wl,--push-state,--no-as-needed -lculpert -Wl,--pop-state.
 *   - Compile against this header only, without -lculpert: every function is
 *     declared weak, and the macros below call it only when it is present, so
 *     the program links and runs normally with every call doing nothing. Run
 *     the same binary with LD_PRELOAD=libculpert.so and the calls come alive.
 *     This needs a position-independent executable (PIE, the compilers'
 *     default on Debian, Ubuntu and Fedora) or code built -fPIC: in an
 *     executable linked -no-pie from code compiled -fno-pie, the linker
 *     settles a weak reference to a missing function as absent for good,
 *     and the calls stay inert even under LD_PRELOAD.
 *   Define CULPERT_NO_WEAK before including this header to get plain strong
 *   declarations (a link error then tells you libculpert is missing).
 *
 * Thread safety: every function may be called from any thread at any time,
 * signal handlers included (a handler's spans nest inside the thread's).
 * The span functions never allocate, never take a lock and cannot fail.
 */
#ifndef CULPERT_H
#define CULPERT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CULPERT_VERSION_MAJOR 0
#define CULPERT_VERSION_MINOR 1
#define CULPERT_VERSION_PATCH 0

/* Deepest span nesting recorded per thread. Deeper spans are still balanced
 * by culpert_span_exit(), but they get no id of their own: their
 * allocations are attributed to the deepest recorded span, whose id
 * culpert_span_current() returns meanwhile, and the overflow is counted in
 * the profile (comment culpert.span_overflow). */
#define CULPERT_SPAN_MAX_DEPTH 64

#if defined(__GNUC__) && !defined(CULPERT_NO_WEAK) && !defined(CULPERT_BUILDING_LIBRARY)
#define CULPERT_API __attribute__((weak))
#else
#define CULPERT_API
#endif

/*
 * culpert_span_enter: open a span named `name` on the calling thread; its
 * parent is the span currently open on this thread (none: a root span).
 *
 * Every call creates a new span id, unique within the process, which
 * culpert_span_current() returns until the matching culpert_span_exit()
 * (beyond CULPERT_SPAN_MAX_DEPTH, see there).
 * `name` must be a NUL-terminated string that stays valid while the span is
 * open (string literals are the common case); libculpert copies the text the
 * first time it sees a name under a given parent, so the pointer is not kept
 * after the span closes. Names longer than 255 bytes are cut; a NULL or
 * empty name is recorded as "(unnamed)".
 * Profiles aggregate spans by *path*: all instances of
 * handle_request -> parse_input share one span_id in the written file.
 */
CULPERT_API void culpert_span_enter(const char *name);

/*
 * culpert_span_exit: close the innermost span opened on the calling thread.
 * A call with no span open is ignored (and counted in the profile as
 * culpert.span_underflow).
 */
CULPERT_API void culpert_span_exit(void);

/*
 * culpert_span_current: the id of the innermost span open on the calling
 * thread, or 0 when none is open (or libculpert is not loaded). Pass it to
 * culpert_span_enter_child_of() on another thread to keep work handed to a
 * thread pool under the span that submitted it.
 */
CULPERT_API uint64_t culpert_span_current(void);

/*
 * culpert_span_enter_child_of: like culpert_span_enter(), but the new span's
 * parent is `parent_id` (from culpert_span_current(), possibly on another
 * thread) instead of the span open on this thread. parent_id 0 makes a root
 * span. An id that libculpert does not know (one this process never
 * issued: from another process, or made up) makes a root span as well.
 * Close it with culpert_span_exit() as usual.
 */
CULPERT_API void culpert_span_enter_child_of(const char *name, uint64_t parent_id);

/*
 * culpert_snapshot_write: write a profile of everything recorded since the
 * process started to `path` (gzipped pprof). Snapshots are cumulative and
 * never reset anything: a later snapshot contains at least what an earlier
 * one did. Another file being written at that moment (the exit profile, a
 * CULPERT_INTERVAL rewrite, another snapshot) is waited for first. Returns
 * 0, or a negative errno (-ENOSYS when libculpert is not loaded, -EAGAIN
 * when sampling was stopped by an internal failure, or once the exit
 * profile has been written: no file is begun after it). Not a
 * cancellation point: a thread cancelled while it writes goes on to the
 * end of the file, and the cancellation acts at the thread's next
 * cancellation point.
 */
CULPERT_API int culpert_snapshot_write(const char *path);

/*
 * culpert_snapshot: like culpert_snapshot_write(), but returns the gzipped
 * profile in a buffer: on success *out points to *len bytes that the caller
 * releases with free(), and the result is 0. On failure returns a negative
 * errno and leaves *out NULL and *len 0. It may wait briefly for a file
 * being written, since encoding shares that file's lock. Not a
 * cancellation point either.
 */
CULPERT_API int culpert_snapshot(unsigned char **out, size_t *len);

/*
 * culpert_is_active: 1 when libculpert is loaded and sampling, 0 otherwise.
 */
CULPERT_API int culpert_is_active(void);

#if defined(__GNUC__) && !defined(CULPERT_NO_WEAK) && !defined(CULPERT_BUILDING_LIBRARY)
/*
 * Call through the weak declarations only when libculpert is present. A
 * function-like macro does not expand inside its own expansion, so these
 * reach the real functions; taking a function's address still works.
 */
#define culpert_span_enter(name) (culpert_span_enter ? culpert_span_enter(name) : (void)0)
#define culpert_span_exit()      (culpert_span_exit ? culpert_span_exit() : (void)0)
#define culpert_span_current()   (culpert_span_current ? culpert_span_current() : UINT64_C(0))
#define culpert_span_enter_child_of(name, parent_id)                                               \
  (culpert_span_enter_child_of ? culpert_span_enter_child_of((name), (parent_id)) : (void)0)
#define culpert_snapshot_write(path)                                                               \
  (culpert_snapshot_write ? culpert_snapshot_write(path) : -38 /* -ENOSYS */)
#define culpert_snapshot(out, len)                                                                 \
  (culpert_snapshot ? culpert_snapshot((out), (len))                                               \
                    : (*(out) = NULL, *(len) = 0, -38 /* -ENOSYS */))
#define culpert_is_active() (culpert_is_active ? culpert_is_active() : 0)
#endif

#if defined(__GNUC__)
/* Helper for CULPERT_SPAN; not part of the API. */
static inline void culpert_span_scope_end_(int *unused)
{
  (void)unused;
  culpert_span_exit();
}
#define CULPERT_CAT2_(a, b) a##b
#define CULPERT_CAT_(a, b)  CULPERT_CAT2_(a, b)
/*
 * CULPERT_SPAN(name): open a span that closes by itself when the enclosing
 * block ends (any return, break or goto included). GCC and Clang only.
 *
 *     void handle_request(struct req *r) {
 *         CULPERT_SPAN("handle_request");
 *         ...
 *     }
 */
#define CULPERT_SPAN(name)                                                                         \
  __attribute__((cleanup(culpert_span_scope_end_), unused)) int CULPERT_CAT_(                      \
      culpert_span_scope_, __LINE__) = (culpert_span_enter(name), 0)
#endif

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CULPERT_H */
