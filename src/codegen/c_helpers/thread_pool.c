/* The parallel loops of a library: tt_parallel_for(n, body, ctx) runs
 * body(ctx, begin, end) over [0, n) on tt_num_threads threads, the caller
 * and a pool of workers the library starts on first use (and again after
 * they end, idle) and joins when it is unloaded.
 *
 * Why not OpenMP's parallel for: its loop ends at a barrier that waits for
 * every thread of the team, started or not. Where a worker's core is busy,
 * or a virtual machine's host has descheduled the idle virtual CPU it
 * sleeps on, each loop waits until that worker runs again: on a 2-vCPU
 * cloud machine whole model runs took 4, 8, 12 ms longer, one host tick at
 * a time. Here the caller never waits for a worker that has not started:
 * each thread takes chunks of its own share first, then of the others', so
 * a missing worker costs at most its share of the work, done by the caller.
 *
 * The loop on offer is a seqlock: `seq` is odd while the caller writes the
 * loop, even once it is published. A part's counter holds the loop's number
 * beside the next iteration, so a worker that read an older loop claims
 * nothing of a newer one. Only the thread holding `caller` writes; a second
 * thread calling in meanwhile runs its loop alone. The caller still waits
 * for chunks a worker has claimed.
 *
 * Workers spin about a millisecond after a loop, then sleep, and end after
 * a second without one (the next loop starts them again): a process that
 * keeps many libraries loaded, as the run worker does, keeps threads only
 * for those in use. */
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define TT_POOL_MAX_THREADS 64

typedef void (*tt_loop_body)(void*, int64_t, int64_t);

struct tt_pool_part {
  uint64_t next __attribute__((aligned(64))); /* loop number << 32 | next iteration */
};

static struct {
  pthread_mutex_t caller;
  pthread_mutex_t sleep_lock;
  pthread_cond_t wake;
  uint64_t seq;
  tt_loop_body body;
  void* ctx;
  int64_t n, chunk;
  int32_t parts;
  struct tt_pool_part part[TT_POOL_MAX_THREADS];
  int64_t done __attribute__((aligned(64)));
  int32_t sleepers, stop, wanted;
  int64_t failed_at;                   /* when a thread could not be started (ns); 0: never */
  int32_t state[TT_POOL_MAX_THREADS]; /* per worker: 0 none, 1 running, 2 ended (to join) */
  pthread_t thread[TT_POOL_MAX_THREADS];
} tt_pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};

static inline void tt_pool_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* Runs chunks of the loop numbered `loop` until none is left: part `self`
 * first, then the others in turn. */
static void tt_pool_work(int32_t self, uint32_t loop, tt_loop_body body, void* ctx, int64_t n,
                         int64_t chunk, int32_t parts) {
  for (int32_t k = 0; k < parts; ++k) {
    const int32_t q = (self + k) % parts;
    const int64_t end = n * (q + 1) / parts;
    uint64_t* next = &tt_pool.part[q].next;
    uint64_t v = __atomic_load_n(next, __ATOMIC_ACQUIRE);
    for (;;) {
      const int64_t i = (int64_t)(v & 0xffffffffu);
      if ((uint32_t)(v >> 32) != loop || i >= end) break;
      const int64_t stop = end - i > chunk ? i + chunk : end;
      if (!__atomic_compare_exchange_n(next, &v, ((uint64_t)loop << 32) | (uint64_t)stop, 1,
                                       __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        continue;
      }
      body(ctx, i, stop);
      __atomic_add_fetch(&tt_pool.done, stop - i, __ATOMIC_RELEASE);
      v = __atomic_load_n(next, __ATOMIC_ACQUIRE);
    }
  }
}

#define TT_POOL_END UINT64_MAX

/* The next published loop after `seen`, spinning about a millisecond before
 * sleeping; TT_POOL_END when the library is being unloaded or no loop came
 * for a second. */
static uint64_t tt_pool_wait(uint64_t seen) {
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (uint32_t spins = 1;; ++spins) {
    if (__atomic_load_n(&tt_pool.stop, __ATOMIC_ACQUIRE)) return TT_POOL_END;
    const uint64_t s = __atomic_load_n(&tt_pool.seq, __ATOMIC_ACQUIRE);
    if (s != seen && !(s & 1)) return s;
    tt_pool_relax();
    if (spins % 256) continue;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if ((now.tv_sec - start.tv_sec) * 1000000000 + (now.tv_nsec - start.tv_nsec) > 1000000) break;
  }
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline); /* the condition variable's clock */
  deadline.tv_sec += 1;
  pthread_mutex_lock(&tt_pool.sleep_lock);
  __atomic_add_fetch(&tt_pool.sleepers, 1, __ATOMIC_SEQ_CST);
  uint64_t s = seen;
  int idle = 0;
  while (!idle && !__atomic_load_n(&tt_pool.stop, __ATOMIC_SEQ_CST) &&
         ((s = __atomic_load_n(&tt_pool.seq, __ATOMIC_SEQ_CST)) == seen || (s & 1))) {
    idle = pthread_cond_timedwait(&tt_pool.wake, &tt_pool.sleep_lock, &deadline) != 0;
  }
  __atomic_sub_fetch(&tt_pool.sleepers, 1, __ATOMIC_SEQ_CST);
  pthread_mutex_unlock(&tt_pool.sleep_lock);
  return idle || __atomic_load_n(&tt_pool.stop, __ATOMIC_ACQUIRE) ? TT_POOL_END : s;
}

/* With TT_PIN_THREADS=1 in the environment, worker w is bound to the w-th
 * CPU after the caller's among those the caller may run on (in turn, where
 * there are more workers than such CPUs; none, where there is no other), so
 * that timings do not move with the scheduler's placement. The caller is
 * left free, so that another library's workers are planned from the same
 * CPUs; the scheduler moves it off a busy worker's. The plan is made once.
 * The raw system calls need no _GNU_SOURCE. */
static int32_t tt_pool_cpu[TT_POOL_MAX_THREADS];
static int32_t tt_pool_cpus; /* 0: workers are not bound */

static void tt_pool_bind(int32_t self) {
  if (!tt_pool_cpus) return;
  uint64_t mask[16] = {0};
  const int32_t cpu = tt_pool_cpu[(self - 1) % tt_pool_cpus];
  mask[cpu / 64] |= (uint64_t)1 << (cpu % 64);
  syscall(SYS_sched_setaffinity, 0, sizeof mask, mask);
}

static void tt_pool_plan_binding(void) {
  const char* pin = getenv("TT_PIN_THREADS");
  uint64_t allowed[16] = {0};
  unsigned here = 0;
  if (!pin || strcmp(pin, "1") != 0 ||
      syscall(SYS_sched_getaffinity, 0, sizeof allowed, allowed) <= 0 ||
      syscall(SYS_getcpu, &here, NULL, NULL) != 0) {
    return;
  }
  for (int32_t k = 1; k < 1024 && tt_pool_cpus < TT_POOL_MAX_THREADS; ++k) {
    const int32_t cpu = (int32_t)((here + (unsigned)k) % 1024);
    if ((allowed[cpu / 64] >> (cpu % 64)) & 1) tt_pool_cpu[tt_pool_cpus++] = cpu;
  }
}

static void* tt_pool_worker(void* arg) {
  const int32_t self = (int32_t)(intptr_t)arg;
  tt_pool_bind(self);
  uint64_t seen = 0;
  for (;;) {
    const uint64_t s = tt_pool_wait(seen);
    /* Ended: idle, unloading, or no longer among the threads wanted. */
    if (s == TT_POOL_END || self > __atomic_load_n(&tt_pool.wanted, __ATOMIC_RELAXED)) {
      __atomic_store_n(&tt_pool.state[self - 1], 2, __ATOMIC_RELEASE);
      return NULL;
    }
    const tt_loop_body body = __atomic_load_n(&tt_pool.body, __ATOMIC_RELAXED);
    void* const ctx = __atomic_load_n(&tt_pool.ctx, __ATOMIC_RELAXED);
    const int64_t n = __atomic_load_n(&tt_pool.n, __ATOMIC_RELAXED);
    const int64_t chunk = __atomic_load_n(&tt_pool.chunk, __ATOMIC_RELAXED);
    const int32_t parts = __atomic_load_n(&tt_pool.parts, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    seen = s;
    /* A loop replaced while it was read: the counters refuse its claims. */
    if (__atomic_load_n(&tt_pool.seq, __ATOMIC_RELAXED) != s || self >= parts) continue;
    tt_pool_work(self, (uint32_t)(s / 2), body, ctx, n, chunk, parts);
  }
}

/* A child of fork has none of the parent's workers. */
static void tt_pool_forget(void) {
  pthread_mutex_init(&tt_pool.caller, NULL);
  pthread_mutex_init(&tt_pool.sleep_lock, NULL);
  pthread_cond_init(&tt_pool.wake, NULL);
  tt_pool.sleepers = 0;
  tt_pool.failed_at = 0;
  tt_pool.seq = (tt_pool.seq + 1) & ~(uint64_t)1; /* a loop being written at the fork */
  memset(tt_pool.state, 0, sizeof tt_pool.state);
}

/* Workers 1 to `want` running, those that ended joined and started again;
 * returns how many run. */
static int32_t tt_pool_start(int32_t want) {
  static int32_t planned;
  if (!planned) {
    planned = 1;
    tt_pool_plan_binding();
    pthread_atfork(NULL, NULL, tt_pool_forget);
  }
  __atomic_store_n(&tt_pool.wanted, want, __ATOMIC_RELAXED);
  /* The usual case, on every loop: all are running, nothing to start. */
  int32_t running = 0;
  for (int32_t w = 0; w < want; ++w) {
    running += __atomic_load_n(&tt_pool.state[w], __ATOMIC_ACQUIRE) == 1;
  }
  if (running == want) return want;
  /* 2 MiB of stack, not the usual 8: a kernel keeps at most 256 KiB of
   * arrays on it, and an ended worker's stack stays mapped until it is
   * joined, so libraries kept loaded but idle hold 2 MiB a worker. */
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 2 << 20);
  /* After a failed start (too many threads in the process), none is tried
   * for a second. */
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  const int64_t now_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
  int failed = tt_pool.failed_at && now_ns - tt_pool.failed_at < 1000000000;
  running = 0;
  for (int32_t w = 0; w < want; ++w) {
    int32_t state = __atomic_load_n(&tt_pool.state[w], __ATOMIC_ACQUIRE);
    if (state == 2) {
      pthread_join(tt_pool.thread[w], NULL);
      __atomic_store_n(&tt_pool.state[w], state = 0, __ATOMIC_RELAXED);
    }
    if (state == 0 && !failed) {
      __atomic_store_n(&tt_pool.state[w], state = 1, __ATOMIC_RELAXED);
      if (pthread_create(&tt_pool.thread[w], &attr, tt_pool_worker, (void*)(intptr_t)(w + 1))) {
        __atomic_store_n(&tt_pool.state[w], state = 0, __ATOMIC_RELAXED);
        tt_pool.failed_at = now_ns;
        failed = 1;
      }
    }
    running += state != 0;
  }
  pthread_attr_destroy(&attr);
  return running;
}

__attribute__((destructor)) static void tt_pool_join(void) {
  __atomic_store_n(&tt_pool.stop, 1, __ATOMIC_SEQ_CST);
  pthread_mutex_lock(&tt_pool.sleep_lock);
  pthread_cond_broadcast(&tt_pool.wake);
  pthread_mutex_unlock(&tt_pool.sleep_lock);
  for (int32_t w = 0; w < TT_POOL_MAX_THREADS; ++w) {
    if (tt_pool.state[w]) pthread_join(tt_pool.thread[w], NULL);
    tt_pool.state[w] = 0;
  }
}

__attribute__((visibility("hidden"))) void tt_parallel_for(int64_t n, tt_loop_body body,
                                                           void* ctx) {
  if (n <= 0) return;
  int32_t threads = tt_num_threads < TT_POOL_MAX_THREADS ? tt_num_threads : TT_POOL_MAX_THREADS;
  if (threads < 2 || n < 2 || n > INT32_MAX || pthread_mutex_trylock(&tt_pool.caller) != 0) {
    body(ctx, 0, n);
    return;
  }
  int32_t parts = tt_pool_start(threads - 1) + 1;
  if (parts > n) parts = (int32_t)n;
  /* Eight chunks a part: late workers still find some, and claims stay rare. */
  int64_t chunk = n / ((int64_t)parts * 8);
  if (chunk < 1) chunk = 1;
  const uint64_t s = tt_pool.seq + 2;
  const uint32_t loop = (uint32_t)(s / 2);
  __atomic_store_n(&tt_pool.seq, s - 1, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_RELEASE);
  __atomic_store_n(&tt_pool.body, body, __ATOMIC_RELAXED);
  __atomic_store_n(&tt_pool.ctx, ctx, __ATOMIC_RELAXED);
  __atomic_store_n(&tt_pool.n, n, __ATOMIC_RELAXED);
  __atomic_store_n(&tt_pool.chunk, chunk, __ATOMIC_RELAXED);
  __atomic_store_n(&tt_pool.parts, parts, __ATOMIC_RELAXED);
  for (int32_t q = 0; q < parts; ++q) {
    __atomic_store_n(&tt_pool.part[q].next, ((uint64_t)loop << 32) | (uint64_t)(n * q / parts),
                     __ATOMIC_RELAXED);
  }
  __atomic_store_n(&tt_pool.done, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&tt_pool.seq, s, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&tt_pool.sleepers, __ATOMIC_SEQ_CST) > 0) {
    pthread_mutex_lock(&tt_pool.sleep_lock);
    pthread_cond_broadcast(&tt_pool.wake);
    pthread_mutex_unlock(&tt_pool.sleep_lock);
  }
  tt_pool_work(0, loop, body, ctx, n, chunk, parts);
  /* Only chunks a running thread has claimed are left. */
  while (__atomic_load_n(&tt_pool.done, __ATOMIC_ACQUIRE) < n) tt_pool_relax();
  pthread_mutex_unlock(&tt_pool.caller);
}
