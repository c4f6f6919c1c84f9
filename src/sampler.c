/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * sampler.c: when to sample. Each thread counts down the bytes it allocates;
 * when the count runs out the allocation is sampled and a new interval is
 * drawn from an exponential distribution of mean CULPERT_SAMPLE_RATE.
 *
 * Runs inside malloc: no malloc, no locks, no stdio. The per-thread state
 * (culpert__tls) lives here because the countdown is the hot path's only
 * memory access on allocation.
 */
#include <errno.h>
#include <math.h>
#include <unistd.h>

#include "internal.h"

__thread struct culpert__thread culpert__tls CULPERT__TLS_MODEL;

uint64_t culpert__rate = CULPERT__DEFAULT_RATE;
atomic_int culpert__running;

static uint64_t seed_base;
static atomic_uint_fast64_t thread_order;
static atomic_int stop_reported;
static atomic_int failed;

/* splitmix64: a full-period 64-bit generator whose output mixes well even
 * from nearby seeds, which is what deriving one stream per thread needs. */
static uint64_t splitmix64(uint64_t *state)
{
  uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  return z ^ (z >> 31);
}

void culpert__sampler_setup(uint64_t rate, uint64_t seed)
{
  culpert__rate = rate;
  seed_base = seed;
}

uint64_t culpert__sampler_stream(uint64_t seed, uint64_t order)
{
  uint64_t s = seed ^ (order * UINT64_C(0xD1B54A32D192ED03));
  return splitmix64(&s);
}

void culpert__sampler_thread_init(struct culpert__thread *t)
{
  uint64_t order = atomic_fetch_add_explicit(&thread_order, 1, memory_order_relaxed);
  t->rng = culpert__sampler_stream(seed_base, order);
  t->ready = 1;
}

int64_t culpert__sampler_next(struct culpert__thread *t)
{
  uint64_t rate = culpert__rate;
  if (rate == 0)
    return 0;
  /* u uniform in (0, 1]: never 0, so log(u) is finite. */
  double u = (double)((splitmix64(&t->rng) >> 11) + 1) * 0x1.0p-53;
  double e = -log(u) * (double)rate;
  if (e >= 0x1.0p62)
    return INT64_C(1) << 62;
  return (int64_t)e;
}

double culpert__sampler_weight(uint64_t size, uint64_t rate)
{
  if (rate == 0)
    return 1.0;
  if (size == 0)
    return 0.0;
  /* -expm1(-s/R) keeps p(s) precise when s is tiny compared with R. */
  return 1.0 / -expm1(-(double)size / (double)rate);
}

void culpert__sampler_stop(const char *why)
{
  atomic_store(&culpert__running, 0);
  if (why == NULL)
    return;
  atomic_store(&failed, 1);
  if (atomic_exchange(&stop_reported, 1) == 0)
    culpert__say("internal failure (%s); profiling stopped, the program continues", why);
}

int culpert__sampler_failed(void)
{
  return atomic_load(&failed);
}
